"""The ROBPCA simulation's data and scores (Hubert et al. 2005, Section 4)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from bayeskit.experiments import robpca_simulation
from bayeskit.robust import pca_baselines


def test_outliers_tilt_classical_pca():
    """10% of the points at 20 along the 4th axis: CPCA's subspace turns to it."""
    sd = np.sqrt([8.0, 4.0, 2.0, 1.0])
    X = np.asarray(robpca_simulation.draw(jax.random.key(0), 100, sd, 3, 0.1, 20.0, 1.0, 1))
    components = np.asarray(pca_baselines.classical_pca(X[0], 3)[1])
    assert robpca_simulation.scores(components[None], np.ones((1, 3)), sd, 3)["maxsub"] > 0.9
    assert abs(components[3, 0]) > 0.99



def test_simulation_scores_on_hand_cases():
    sd = np.sqrt([8.0, 4.0, 2.0, 1.0])
    truth = np.eye(4)[:, :3][None]
    s = robpca_simulation.scores(truth, np.array([[8.0, 4.0, 2.0]]), sd, 3)
    assert s["maxsub"] == pytest.approx(0, abs=1e-7) and s["variability"] == pytest.approx(1)
    assert s["eigenvalue_mse"] == pytest.approx([0, 0, 0])
    swapped = np.eye(4)[:, [0, 1, 3]][None]  # the 4th axis instead of the 3rd: a right angle
    s = robpca_simulation.scores(swapped, np.array([[9.0, 4.0, 1.0]]), sd, 3)
    assert s["maxsub"] == pytest.approx(1.0) and s["variability"] == pytest.approx(13 / 14)
    assert s["eigenvalue_mse"] == pytest.approx([1.0, 0.0, 1.0])


"""The RCA network experiments' precision-recall bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from bayeskit.experiments import rca_networks as nets


def test_network_scores_count_undirected_pairs():
    """Precision-recall bookkeeping of the experiments on a hand-made 4-node case."""
    truth = np.zeros((4, 4), bool)
    truth[0, 1] = truth[1, 0] = truth[2, 3] = truth[3, 2] = True
    P = np.eye(4)
    P[0, 1] = P[1, 0] = 0.3  # a true edge
    P[0, 2] = P[2, 0] = -0.1  # a false one
    assert nets.edge_counts(P, truth) == (1, 2)
    c = nets.curve([np.eye(4), P, np.ones((4, 4))], truth)
    assert c["recall"] == [0.0, 0.5, 1.0] and c["edges"] == [0, 2, 6]
    assert c["precision"] == [1.0, 0.5, pytest.approx(2 / 6)]
    assert nets.interpolated_precision(c, (0.4, 0.9)) == [0.5, pytest.approx(2 / 6)]


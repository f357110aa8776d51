"""The ROBPCA paper's comparison methods: Qn and the spatial median against direct
computations, each method's subspace on clean data (the simulation experiment's scores
are tested with the experiment, in tests/experiments)."""

import jax
import numpy as np
import pytest
from scipy.optimize import minimize

from bayeskit.robust import pca_baselines


def test_qn_is_the_order_statistic_of_pairwise_distances():
    rng = np.random.default_rng(0)
    for m, ties in ((7, False), (10, False), (31, False), (25, True)):
        y = rng.integers(0, 4, m).astype(float) if ties else rng.normal(size=m)
        d = np.sort([abs(y[i] - y[j]) for i in range(m) for j in range(i + 1, m)])
        h = m // 2 + 1
        assert float(pca_baselines.qn_scale(y)) == pytest.approx(2.2219 * d[h * (h - 1) // 2 - 1], rel=1e-12)
    big = rng.normal(size=4000) * 3.0
    assert float(pca_baselines.qn_scale(big)) == pytest.approx(3.0, rel=0.05)  # consistent at the normal


def test_spatial_median_minimises_the_sum_of_distances():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(60, 3))
    X[:10] += 20
    mu = np.asarray(pca_baselines.spatial_median(X))
    direct = minimize(lambda m: np.linalg.norm(X - m, axis=1).sum(), np.median(X, 0), method="Nelder-Mead",
                      options=dict(xatol=1e-10, fatol=1e-12, maxiter=20000)).x
    np.testing.assert_allclose(mu, direct, atol=1e-5)


@pytest.mark.parametrize("method", list(pca_baselines.METHODS))
def test_each_method_finds_the_subspace_of_clean_data(method):
    """Correlated variables (a rotated diagonal covariance), so that ELL's scaling by each
    variable's Qn does not make them isotropic."""
    rng = np.random.default_rng(2)
    Q = np.linalg.qr(rng.normal(size=(5, 5)))[0]
    X = rng.normal(size=(400, 5)) * [5.0, 3.0, 0.5, 0.4, 0.3] @ Q.T + 2.0
    center, components, values = map(np.asarray, pca_baselines.METHODS[method](X, 2))
    np.testing.assert_allclose(components.T @ components, np.eye(2), atol=1e-8)
    assert np.linalg.svd(Q[:, :2].T @ components, compute_uv=False).min() > 0.98
    np.testing.assert_allclose(center, 2.0, atol=0.3)
    np.testing.assert_allclose(values, [25.0, 9.0], rtol=0.25)


def test_classical_pca_is_numpys():
    X = np.random.default_rng(3).normal(size=(50, 4)) @ np.random.default_rng(4).normal(size=(4, 4))
    _, components, values = map(np.asarray, pca_baselines.classical_pca(X, 4))
    ev, vec = np.linalg.eigh(np.cov(X.T))
    np.testing.assert_allclose(values, ev[::-1], rtol=1e-10)
    np.testing.assert_allclose(np.abs(components.T @ vec[:, ::-1]), np.eye(4), atol=1e-8)


def test_rapca_components_maximise_qn_over_the_candidate_directions():
    """Each RAPCA component is, among the directions from the spatial median through the
    (deflated) points, the one of largest Qn, and its eigenvalue is that Qn squared."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3)) * [3.0, 2.0, 1.0]
    X[:4] += [0.0, 0.0, 15.0]
    _, components, values = map(np.asarray, pca_baselines.rapca(X, 2))
    R = X - np.asarray(pca_baselines.spatial_median(X - X.mean(0))) - X.mean(0)
    for j in range(2):
        norms = np.linalg.norm(R, axis=1, keepdims=True)
        candidates = R / np.where(norms > 0, norms, 1)
        qn = np.asarray(jax.jit(jax.vmap(pca_baselines.qn_scale))(candidates @ R.T))  # row i: the points along v_i
        best = candidates[np.argmax(qn)]
        assert abs(best @ components[:, j]) == pytest.approx(1.0, abs=1e-10)
        assert values[j] == pytest.approx(qn.max() ** 2, rel=1e-10)
        R = R - np.outer(R @ best, best)

"""Tests of bayeskit.multilabel.ssdrmc: recovery on simulated data and its pieces against references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from sklearn.manifold._locally_linear import barycenter_weights

from bayeskit.multilabel import projections, ssdrmc


@pytest.fixture
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def simulate(seed, n=200, d=20, nuisance_sd=3.0, missing=0.6):
    """Labels set by 4 clusters in a 2-D subspace U; two label-free directions of larger
    variance (so PCA misses U) and isotropic noise in the rest; entries hidden at random."""
    rng = np.random.default_rng(seed)
    centres = 3.0 * np.array([[1, 0], [-1, 0], [0, 1], [0, -1]])
    label_sets = np.array([[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 1, 1]])
    c = rng.integers(0, 4, n)
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    U = Q[:, :2]
    sd = np.r_[nuisance_sd, nuisance_sd, np.ones(d - 4)]
    X = (centres[c] + 0.5 * rng.normal(size=(n, 2))) @ U.T + (rng.normal(size=(n, d - 2)) * sd) @ Q[:, 2:].T
    Y = label_sets[c]
    hidden = rng.random(Y.shape) < missing
    return X, Y, np.where(hidden, -1, Y), hidden, U


def max_angle(A, B):
    return np.degrees(sl.subspace_angles(np.asarray(A, np.float64), np.asarray(B, np.float64)).max())


def test_recovers_label_subspace_and_missing_labels(x64):
    X, Y, Y_obs, hidden, U = simulate(0)
    res = ssdrmc.fit(X, Y_obs, 2)
    assert max_angle(projections.pca(X, 2).components, U) > 60  # PCA misses the subspace
    assert max_angle(res.state.projection.components, U) < 25
    accuracy = (np.asarray(res.state.labels)[hidden] == Y[hidden]).mean()
    chance = max(Y[hidden].mean(), 1 - Y[hidden].mean())
    assert accuracy > chance + 0.3
    # the record is consistent
    n_iter = int(res.n_iter)
    assert 1 <= n_iter <= 30
    assert np.all(np.isfinite(res.trace[:n_iter])) and np.all(np.isnan(res.trace[n_iter:]))
    obs = Y_obs >= 0
    assert np.array_equal(np.asarray(res.state.labels)[obs], Y_obs[obs])
    assert np.allclose(np.asarray(res.state.scores)[obs], Y_obs[obs])
    assert np.allclose(np.asarray(res.state.weights).sum(1), 1)
    S = np.cov(X.T, bias=True)
    P = np.asarray(res.state.projection.components)
    assert np.allclose(P.T @ S @ P, np.eye(2), atol=1e-8)  # whitened projection


def test_float32(x64):
    X, Y, Y_obs, hidden, U = simulate(1, n=120)
    res = ssdrmc.fit(X.astype(np.float32), Y_obs, 2)
    assert res.state.projection.components.dtype == jnp.float32
    assert res.state.scores.dtype == jnp.float32 and res.state.weights.dtype == jnp.float32
    assert res.state.projection.transform(X).dtype == jnp.float32
    accuracy = (np.asarray(res.state.labels)[hidden] == Y[hidden]).mean()
    assert accuracy > max(Y[hidden].mean(), 1 - Y[hidden].mean()) + 0.2


def test_float64(x64):
    X, Y, Y_obs, hidden, U = simulate(1, n=60)
    res = ssdrmc.fit(X, Y_obs, 2, max_iter=3)
    assert res.state.projection.components.dtype == jnp.float64 and res.state.scores.dtype == jnp.float64


def test_lle_weights_match_sklearn(x64):
    rng = np.random.default_rng(2)
    z = rng.normal(size=(50, 4))
    nbrs, W = ssdrmc._neighbours_and_weights(jnp.asarray(z), 6, 1e-3)
    nbrs = np.asarray(nbrs)
    d2 = ((z[:, None] - z[None]) ** 2).sum(-1)
    np.fill_diagonal(d2, np.inf)
    assert np.array_equal(np.sort(nbrs, 1), np.sort(np.argsort(d2, 1)[:, :6], 1))
    assert np.allclose(W, barycenter_weights(z, z, nbrs, reg=1e-3), atol=1e-10)


def test_propagation_is_the_harmonic_solution(x64):
    rng = np.random.default_rng(3)
    n, k, n_labels = 40, 5, 3
    nbrs = np.stack([rng.choice(np.delete(np.arange(n), i), k, replace=False) for i in range(n)])
    W = rng.random((n, k))
    W /= W.sum(1, keepdims=True)
    Y = (rng.random((n, n_labels)) < 0.4).astype(float)
    observed = (rng.random((n, n_labels)) < 0.5).astype(float)
    F, ok = ssdrmc._propagate(jnp.asarray(W), jnp.asarray(nbrs), jnp.asarray(Y), jnp.asarray(observed))
    assert bool(ok)
    IW = np.eye(n)
    for i in range(n):
        IW[i, nbrs[i]] -= W[i]
    M = IW.T @ IW
    for c in range(n_labels):
        o = observed[:, c] > 0
        u = ~o
        f_u = np.linalg.solve(M[np.ix_(u, u)], -M[np.ix_(u, o)] @ Y[o, c])
        assert np.allclose(np.asarray(F)[u, c], f_u, atol=1e-8)
        assert np.allclose(np.asarray(F)[o, c], Y[o, c])


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(n_components=21), "min\\(n_samples, n_features\\)"),
        (dict(n_components=2, n_neighbors=30), "n_neighbors"),
        (dict(n_components=2, n_neighbors=0), "n_neighbors"),
        (dict(n_components=2, label_weight=-1.0), "label_weight"),
        (dict(n_components=2, reg=0.0), "reg"),
        (dict(n_components=2, max_iter=0), "max_iter"),
    ],
)
def test_value_errors(kwargs, match):
    X, Y, Y_obs, _, _ = simulate(4, n=30)
    with pytest.raises(ValueError, match=match):
        ssdrmc.fit(X, Y_obs, **kwargs)


def test_value_errors_labels():
    X, Y, Y_obs, _, _ = simulate(4, n=30)
    with pytest.raises(ValueError, match="entries in"):
        ssdrmc.fit(X, np.where(Y_obs == 1, 2, Y_obs), 2)
    Y_obs = Y_obs.copy()
    Y_obs[:, 1] = -1
    with pytest.raises(ValueError, match="no observed entry"):
        ssdrmc.fit(X, Y_obs, 2)

"""Checked Cholesky and Gaussian-from-precision of ``bayeskit.core.linalg`` against NumPy/SciPy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg

from bayeskit.core.linalg import (
    cholesky,
    descending_eigh,
    fix_signs,
    generalized_eigh,
    shared_plus_diagonal,
    spd_inverse,
    symmetrize,
)

N = 6

_chol = jax.jit(cholesky)


def _gauss_one(P, b):
    """``shared_plus_diagonal`` on ``P`` split as ``K + diag(phi)``, with blocks of 4 so
    that the blocked factorisation (blocks of 4 and 2) is exercised."""
    phi = 0.5 * jnp.diagonal(P)
    g = shared_plus_diagonal(P - jnp.diag(phi), phi[None], b[None], block_size=4)
    return jax.tree.map(lambda a: a[0], g)


@jax.jit
def _gauss(P, b):
    return jax.vmap(_gauss_one)(P, b) if P.ndim == 3 else _gauss_one(P, b)


@jax.jit
def _chol_all(A, B):
    c = cholesky(A)
    return c, c.logdet(), c.solve(B), c.inverse_factor()


def _spd(rng, n=N, *, scales=None):
    """A random SPD matrix; with ``scales``, D C D for a random correlation matrix C and
    D = diag(scales), so that the diagonal is exactly ``scales**2``."""
    G = rng.standard_normal((n, n))
    M = G @ G.T + n * np.eye(n)
    if scales is not None:
        s = 1 / np.sqrt(np.diag(M))
        M = (M * s[:, None] * s[None, :]) * scales[:, None] * scales[None, :]
    return M


def _bad_scales(rng, n=N):
    # sqrt of diagonal entries spanning 1e-6 ... 1e8 (both ends present)
    logs = rng.uniform(np.log(1e-6), np.log(1e8), n)
    logs[0], logs[1] = np.log(1e-6), np.log(1e8)
    return np.exp(0.5 * logs)


def test_well_conditioned_spd_needs_no_jitter(rng):
    A = _spd(rng)
    B = rng.standard_normal((N, 3))
    c, logdet, X, Linv = _chol_all(jnp.asarray(A), jnp.asarray(B))
    assert bool(c.ok) and float(c.jitter) == 0.0
    L = np.asarray(c.factor)
    np.testing.assert_allclose(L, np.linalg.cholesky(A), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.triu(L, 1), 0.0)
    np.testing.assert_allclose(float(logdet), np.linalg.slogdet(A)[1], rtol=1e-12)
    np.testing.assert_allclose(np.asarray(X), scipy.linalg.cho_solve(scipy.linalg.cho_factor(A), B), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(X), np.linalg.solve(A, B), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(Linv), np.linalg.inv(np.linalg.cholesky(A)), rtol=1e-10, atol=1e-14)


def test_only_symmetric_part_is_used(rng):
    A = _spd(rng)
    K = rng.standard_normal((N, N))
    skew = 0.3 * (K - K.T)
    c1, c2 = _chol(jnp.asarray(A)), _chol(jnp.asarray(A + skew))
    np.testing.assert_allclose(np.asarray(c2.factor), np.asarray(c1.factor), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize(
    "A",
    [
        np.array([[4.0, 2.0], [2.0, 1.0]]),  # the docstring's example
        np.ones((3, 3)),  # rank 1
        "rank_deficient",
    ],
    ids=["rank1_2x2", "ones_3x3", "rank3_6x6"],
)
def test_singular_psd_needs_jitter_and_is_ok(rng, A):
    if isinstance(A, str):
        G = rng.standard_normal((N, 3))
        A = G @ G.T
    assert np.linalg.matrix_rank(A) < A.shape[0]
    c = _chol(jnp.asarray(A))
    assert bool(c.ok)
    jitter = float(c.jitter)
    assert 0.0 < jitter < 1e-6 * np.mean(np.diag(A))  # small relative to the scale
    L = np.asarray(c.factor)
    assert np.all(np.isfinite(L)) and np.all(np.diag(L) > 0)
    np.testing.assert_allclose(L @ L.T, A + jitter * np.eye(A.shape[0]), atol=1e-12 * np.abs(A).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_singular_psd_float32_and_float64(dtype):
    A = np.array([[4.0, 2.0], [2.0, 1.0]], dtype)
    c = _chol(jnp.asarray(A))
    assert c.factor.dtype == dtype and c.jitter.dtype == dtype
    assert bool(c.ok) and float(c.jitter) > 0


def test_negative_definite_is_not_ok(rng):
    A = -_spd(rng)
    c = _chol(jnp.asarray(A))
    assert not bool(c.ok)
    assert np.isnan(float(c.jitter))


def test_indefinite_is_not_ok():
    A = np.diag([1.0, 1.0, -1.0])
    c = _chol(jnp.asarray(A))
    assert not bool(c.ok)


def test_batched_mixed_cases(rng):
    good = _spd(rng, 3)
    singular = np.ones((3, 3))
    negative = -np.eye(3)
    good2 = _spd(rng, 3)
    A = np.stack([good, singular, negative, good2])
    B = rng.standard_normal((4, 3, 2))
    c, logdet, X, _ = _chol_all(jnp.asarray(A), jnp.asarray(B))
    assert c.factor.shape == (4, 3, 3) and c.jitter.shape == (4,) and c.ok.shape == (4,)
    np.testing.assert_array_equal(np.asarray(c.ok), [True, True, False, True])
    jit = np.asarray(c.jitter)
    assert jit[0] == 0.0 and jit[3] == 0.0 and jit[1] > 0 and np.isnan(jit[2])
    # Per-matrix results equal the separate factorisations (the good ones untouched by
    # the others' jitter search).
    for k in (0, 1, 3):
        single = _chol(jnp.asarray(A[k]))
        np.testing.assert_allclose(np.asarray(c.factor[k]), np.asarray(single.factor), rtol=1e-12, atol=1e-15)
        assert float(c.jitter[k]) == float(single.jitter)
    for k in (0, 3):
        np.testing.assert_allclose(float(logdet[k]), np.linalg.slogdet(A[k])[1], rtol=1e-12)
        np.testing.assert_allclose(np.asarray(X[k]), np.linalg.solve(A[k], B[k]), rtol=1e-10)


def test_batched_under_vmap_equals_batched_input(rng):
    A = np.stack([_spd(rng, 3), np.ones((3, 3)), -np.eye(3)])
    batched = _chol(jnp.asarray(A))
    mapped = jax.jit(jax.vmap(cholesky))(jnp.asarray(A))
    np.testing.assert_array_equal(np.asarray(mapped.ok), np.asarray(batched.ok))
    np.testing.assert_allclose(np.asarray(mapped.jitter), np.asarray(batched.jitter), rtol=1e-12)
    ok = np.asarray(batched.ok)
    np.testing.assert_allclose(np.asarray(mapped.factor)[ok], np.asarray(batched.factor)[ok], rtol=1e-12)


# ----------------------------------------------------------------------------------------
# shared_plus_diagonal
# ----------------------------------------------------------------------------------------


def _check_gaussian(g, P, b, rtol):
    Sigma = np.linalg.inv(P)
    assert bool(g.ok)
    np.testing.assert_allclose(np.asarray(g.mean), Sigma @ b, rtol=rtol)
    np.testing.assert_allclose(np.asarray(g.var), np.diag(Sigma), rtol=rtol)
    sign, logdet = np.linalg.slogdet(Sigma)
    assert sign > 0
    np.testing.assert_allclose(float(g.logdet), logdet, rtol=rtol, atol=rtol * N)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_plus_diagonal_well_scaled(seed):
    rng = np.random.default_rng(seed)
    P = _spd(rng)
    b = rng.standard_normal(N)
    g = _gauss(jnp.asarray(P), jnp.asarray(b))
    assert float(g.jitter) == 0.0
    _check_gaussian(g, P, b, rtol=1e-10)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shared_plus_diagonal_badly_scaled(seed):
    rng = np.random.default_rng(seed)
    scales = _bad_scales(rng)
    P = _spd(rng, scales=scales)
    d = np.diag(P)
    np.testing.assert_allclose([d.min(), d.max()], [1e-6, 1e8], rtol=1e-12)  # the diagonal spans 1e-6 ... 1e8
    assert np.linalg.cond(P) > 1e12
    b = rng.standard_normal(N) * np.sqrt(d)
    g = _gauss(jnp.asarray(P), jnp.asarray(b))
    # The conditioning is all in the scaling, which the function removes exactly, so
    # the result keeps near full relative accuracy (a plain inverse is the reference;
    # its own error here is about cond(P~) eps, not cond(P) eps, see the next check).
    Sigma_ref = scales[:, None] ** -1 * np.linalg.inv(P / scales[:, None] / scales[None, :]) * scales[None, :] ** -1
    np.testing.assert_allclose(np.linalg.inv(P), Sigma_ref, rtol=1e-6)
    _check_gaussian(g, P, b, rtol=1e-8)
    np.testing.assert_allclose(np.asarray(g.var), np.diag(Sigma_ref), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(g.mean), Sigma_ref @ b, rtol=1e-10)


def test_shared_plus_diagonal_batched(rng):
    Ps = [_spd(rng), _spd(rng, scales=_bad_scales(rng)), _spd(rng)]
    bs = [rng.standard_normal(N) for _ in Ps]
    g = _gauss(jnp.asarray(np.stack(Ps)), jnp.asarray(np.stack(bs)))
    assert g.mean.shape == (3, N) and g.var.shape == (3, N) and g.logdet.shape == (3,)
    assert g.jitter.shape == (3,) and g.ok.shape == (3,)
    for k, (P, b) in enumerate(zip(Ps, bs)):
        sub = jax.tree.map(lambda v: v[k], g)
        _check_gaussian(sub, P, b, rtol=1e-8)


def test_shared_plus_diagonal_singular_is_jittered(rng):
    G = rng.standard_normal((N, N - 2))
    P = G @ G.T + np.diag(np.r_[np.zeros(N - 1), 1.0])  # rank N-1, positive diagonal
    assert np.linalg.matrix_rank(P) < N and np.all(np.diag(P) > 0)
    g = _gauss(jnp.asarray(P), jnp.asarray(rng.standard_normal(N)))
    assert bool(g.ok) and float(g.jitter) > 0
    assert np.all(np.isfinite(np.asarray(g.mean))) and np.all(np.asarray(g.var) > 0)


@pytest.mark.parametrize("seed", [0, 1])
def test_low_rank_plus_diagonal_matches_the_d_by_d_inverse(seed):
    """The Woodbury form (n x n factorisations) against the inverse of each d x d
    precision A'A + diag(phi_s), with phi over four orders of magnitude."""
    from bayeskit.core.linalg import low_rank_plus_diagonal

    rng = np.random.default_rng(seed)
    n, d, r = 7, 15, 3
    A = rng.standard_normal((n, d)) * rng.uniform(0.1, 3.0, d)
    phi = 10.0 ** rng.uniform(-2, 2, (r, d))
    b = rng.standard_normal((r, d))
    g = low_rank_plus_diagonal(jnp.asarray(A), jnp.asarray(phi), jnp.asarray(b))
    assert g.mean.shape == (r, d) and g.logdet.shape == (r,) and bool(jnp.all(g.ok))
    for s in range(r):
        _check_gaussian(jax.tree.map(lambda v: v[s], g), A.T @ A + np.diag(phi[s]), b[s], rtol=1e-9)


@pytest.mark.parametrize("seed", [0, 1])
def test_sparse_low_rank_plus_diagonal_matches_the_d_by_d_inverse(seed):
    """The sparse Woodbury form (n x n matrices from the column pairs of A) against the
    inverse of each d x d precision, for a sparse A with an empty column and signed values."""
    from bayeskit.core.column_pairs import column_pairs
    from bayeskit.core.linalg import sparse_low_rank_plus_diagonal

    rng = np.random.default_rng(seed)
    n, d, r = 8, 21, 3
    A = rng.standard_normal((n, d)) * (rng.random((n, d)) < 0.25)
    A[:, 4] = 0.0
    phi = 10.0 ** rng.uniform(-2, 2, (r, d))
    b = rng.standard_normal((r, d))
    g = sparse_low_rank_plus_diagonal(jnp.asarray(A), column_pairs(A), jnp.asarray(phi), jnp.asarray(b))
    assert g.mean.shape == (r, d) and g.logdet.shape == (r,) and bool(jnp.all(g.ok))
    for s in range(r):
        _check_gaussian(jax.tree.map(lambda v: v[s], g), A.T @ A + np.diag(phi[s]), b[s], rtol=1e-9)


def test_sparse_low_rank_plus_diagonal_on_repeated_rows():
    """Binary rows repeated six times and weak precisions make K_s ill-conditioned; in
    float64 the sparse form still gives the dense (triangular-solve) form's summaries."""
    from bayeskit.core.column_pairs import column_pairs
    from bayeskit.core.linalg import low_rank_plus_diagonal, sparse_low_rank_plus_diagonal

    rng = np.random.default_rng(0)
    A = (rng.random((60, 300)) < 0.05) / 0.1
    A[1:6] = A[0]
    phi = 10.0 ** rng.uniform(-4, -3, (2, 300))
    b = rng.standard_normal((2, 300))
    sparse = sparse_low_rank_plus_diagonal(jnp.asarray(A), column_pairs(A), jnp.asarray(phi), jnp.asarray(b))
    dense = low_rank_plus_diagonal(jnp.asarray(A), jnp.asarray(phi), jnp.asarray(b))
    assert bool(jnp.all(sparse.ok))
    for name in ("mean", "var", "logdet"):
        np.testing.assert_allclose(getattr(sparse, name), getattr(dense, name), rtol=1e-6)



    from bayeskit.core.linalg import spd_inverse_loop

    rng = np.random.default_rng(0)
    B = rng.standard_normal((12, 12))
    A = B @ B.T + 0.1 * np.eye(12)
    inv, logdet = spd_inverse_loop(jnp.asarray(A))
    np.testing.assert_allclose(inv, np.linalg.inv(A), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(logdet, np.linalg.slogdet(A)[1], rtol=1e-12)
    assert np.isnan(np.asarray(spd_inverse_loop(jnp.asarray(A - 20 * np.eye(12)))[0])).any()


def test_spd_inverse_loop_stops_at_the_leading_block():
    """With ``size`` the loops cover only the leading block; the identity past it is kept,
    under vmap with a different size per element too."""
    import jax

    from bayeskit.core.linalg import spd_inverse_loop

    rng = np.random.default_rng(1)
    mats, sizes = [], [3, 7]
    for size in sizes:
        B = rng.standard_normal((size, size))
        A = np.eye(10)
        A[:size, :size] = B @ B.T + 0.5 * np.eye(size)
        mats.append(A)
    inv, logdet = jax.vmap(spd_inverse_loop)(jnp.asarray(np.stack(mats)), jnp.asarray(sizes))
    for A, i, l in zip(mats, np.asarray(inv), np.asarray(logdet)):
        np.testing.assert_allclose(i, np.linalg.inv(A), rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(l, np.linalg.slogdet(A)[1], rtol=1e-10)


def test_eigen_helpers_match_scipy_and_numpy():
    rng = np.random.default_rng(4)
    M = rng.normal(size=(6, 6))
    A, B = M + M.T, M @ M.T + 6 * np.eye(6)
    w, V = map(np.asarray, generalized_eigh(jnp.asarray(A), jnp.asarray(B)))
    np.testing.assert_allclose(w, scipy.linalg.eigh(A, B, eigvals_only=True), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(V.T @ B @ V, np.eye(6), atol=1e-10)
    np.testing.assert_allclose(A @ V, B @ V * w, atol=1e-9)
    d, U = map(np.asarray, descending_eigh(jnp.asarray(A)))
    np.testing.assert_allclose(d, np.sort(np.linalg.eigvalsh(A))[::-1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(A @ U, U * d, atol=1e-10)
    F = np.asarray(fix_signs(jnp.asarray(-U)))
    assert np.all(F[np.argmax(np.abs(F), 0), np.arange(6)] > 0) and np.allclose(np.abs(F), np.abs(U))
    np.testing.assert_allclose(spd_inverse(jnp.asarray(B)), np.linalg.inv(B), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(symmetrize(jnp.asarray(M)), 0.5 * (M + M.T))

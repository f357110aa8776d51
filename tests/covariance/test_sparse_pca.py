"""Sparse PCA by block coordinate ascent: the barrier objective never decreases, the
solution matches the DSPCA optimum certified by an independent dual bound, safe elimination
never drops a feature the solution uses, a planted sparse spike is recovered, the row
update's pieces against direct computations, and the variances of sparse matrices."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.sparse

from bayeskit.covariance import sparse_pca


def _spiked(n=12, support=(0, 3, 7), theta=3.0, m=200, seed=0):
    """An empirical covariance of m draws from N(0, I + theta v v'), v sparse."""
    rng = np.random.default_rng(seed)
    v = np.zeros(n)
    v[list(support)] = 1 / np.sqrt(len(support))
    A = rng.normal(size=(m, n)) + np.sqrt(theta) * rng.normal(size=(m, 1)) * v
    return np.cov(A.T, bias=True), v


def _dual_bound(Sigma, lam, n_iter=4000):
    """min over |U_ij| <= lambda of lambda_max(Sigma + U) by projected subgradient steps (an
    upper bound on (1) for every U: the best one found)."""
    U = np.zeros_like(Sigma)
    best = np.inf
    for k in range(n_iter):
        w, V = np.linalg.eigh(Sigma + U)
        best = min(best, w[-1])
        v = V[:, -1]
        U = np.clip(U - 0.5 * lam / np.sqrt(k + 1) * np.outer(v, v), -lam, lam)
    return best


def test_box_qp_and_cubic_root_against_direct_computations():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6))
    Y, s, lam = A @ A.T, rng.normal(size=6), 0.3
    u = np.asarray(sparse_pca.box_qp(jnp.asarray(Y), jnp.asarray(s), lam, jnp.asarray(s), n_sweeps=2000))
    assert np.all(np.abs(u - s) <= lam + 1e-12)
    from scipy.optimize import minimize
    ref = minimize(lambda x: x @ Y @ x, s, jac=lambda x: 2 * Y @ x, bounds=list(zip(s - lam, s + lam)),
                   method="L-BFGS-B", options=dict(ftol=1e-15, gtol=1e-12)).fun
    assert u @ Y @ u == pytest.approx(ref, rel=1e-6, abs=1e-10)
    for c, beta, R2 in ((0.5, 1e-4, 2.0), (-3.0, 1e-4, 0.01), (2.0, 1e-3, 0.0)):
        r = float(sparse_pca.cubic_root(c, beta, R2))
        assert r > 0 and abs(r**3 + c * r**2 - beta * r - R2) < 1e-10 * max(1, r**3)


def test_objective_never_decreases():
    Sigma, _ = _spiked()
    result = sparse_pca.fit(Sigma, sparse_pca.Hyperparams(0.2), max_iter=15, tol=0.0)
    trace = np.asarray(result.trace)
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:])), trace


@pytest.mark.parametrize("lam", [0.05, 0.2, 0.5])
def test_matches_the_dspca_optimum(lam):
    """Z = X / Tr X is feasible for (1); its value is within 1e-3 of the dual bound, and
    Tr X equals the optimum phi (X = phi Z at the optimum of (2))."""
    Sigma, _ = _spiked(n=8, support=(0, 3), seed=2)
    X = np.asarray(sparse_pca.fit(Sigma, sparse_pca.Hyperparams(lam, 1e-6), max_iter=200, tol=1e-13).state.X)
    Z = X / np.trace(X)
    primal = np.sum(Sigma * Z) - lam * np.abs(Z).sum()
    dual = _dual_bound(Sigma, lam)
    assert primal <= dual + 1e-9 and dual - primal < 1e-3
    assert np.trace(X) == pytest.approx(primal, abs=2e-3)


def test_safe_elimination_never_drops_a_used_feature():
    Sigma, _ = _spiked(n=15, support=(1, 4, 9, 12), seed=3)
    lam = float(np.quantile(np.diagonal(Sigma), 0.4))
    kept = sparse_pca.safe_features(np.diagonal(Sigma), lam)
    assert 0 < len(kept) < 15
    X = np.asarray(sparse_pca.fit(Sigma, sparse_pca.Hyperparams(lam, 1e-6), max_iter=100, tol=1e-12).state.X)
    dropped = np.setdiff1d(np.arange(15), kept)
    assert np.abs(X[dropped]).max() < 1e-3 * np.abs(X).max()
    reduced = np.asarray(sparse_pca.fit(Sigma[np.ix_(kept, kept)], sparse_pca.Hyperparams(lam, 1e-6), max_iter=100, tol=1e-12).state.X)
    np.testing.assert_allclose(reduced, X[np.ix_(kept, kept)], atol=2e-3 * np.abs(X).max())
    ties = np.diagonal(Sigma).copy()
    assert set(sparse_pca.safe_features(ties, ties[5])) >= {5}  # a feature tied at lambda stays


def test_recovers_a_planted_sparse_spike():
    Sigma, v = _spiked(n=30, support=(2, 11, 17, 25), theta=4.0, m=400, seed=4)
    X = sparse_pca.fit(Sigma, sparse_pca.Hyperparams(0.4), max_iter=30).state.X
    component = np.asarray(sparse_pca.leading_component(X))
    assert set(np.nonzero(component)[0]) == {2, 11, 17, 25}
    assert abs(component @ v) > 0.98


def test_feature_variances_of_sparse_and_dense_matrices():
    rng = np.random.default_rng(5)
    D = rng.poisson(0.3, size=(50, 40)).astype(float)
    np.testing.assert_allclose(sparse_pca.feature_variances(scipy.sparse.csr_matrix(D)), D.var(0), rtol=1e-12)
    np.testing.assert_allclose(sparse_pca.feature_variances(D), D.var(0), rtol=1e-12)


def test_jit():
    Sigma, _ = _spiked(n=6, support=(0, 3), seed=6)
    f = jax.jit(lambda S: sparse_pca.fit(S, sparse_pca.Hyperparams(0.1), max_iter=5).state.X)
    np.testing.assert_allclose(f(jnp.asarray(Sigma)), sparse_pca.fit(Sigma, sparse_pca.Hyperparams(0.1), max_iter=5).state.X, rtol=1e-10)


def _two_spikes(m=400, p=60, seed=7):
    """Data with two sparse spikes on disjoint supports, as a CSR matrix and densely."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(m, p)) * 0.5
    A[:, [3, 10, 22, 41]] += 2.0 * rng.normal(size=(m, 1))
    A[:, [5, 30, 33, 57]] += 1.4 * rng.normal(size=(m, 1))
    A[rng.random(A.shape) < 0.3] = 0.0
    return scipy.sparse.csr_matrix(A), A


def test_moments_and_projection_deflation_against_dense_formulas():
    S, A = _two_spikes(m=80)
    Sigma = np.cov(A.T, bias=True)
    moments = sparse_pca.Moments(S)
    idx = np.array([1, 3, 10])
    np.testing.assert_allclose(moments.block(idx), Sigma[np.ix_(idx, idx)], atol=1e-12)
    V = np.linalg.qr(np.random.default_rng(8).normal(size=(60, 2)))[0] * [1.0, 0.7]  # not orthonormal
    np.testing.assert_allclose(moments.times(V), Sigma @ V, atol=1e-12)
    deflated = sparse_pca.Deflated(moments, V)
    P1, P2 = (np.eye(60) - np.outer(v, v) for v in V.T)
    Sigma2 = P2 @ P1 @ Sigma @ P1 @ P2
    np.testing.assert_allclose(deflated.variances(), np.diagonal(Sigma2), atol=1e-10)
    np.testing.assert_allclose(deflated.block(idx), Sigma2[np.ix_(idx, idx)], atol=1e-10)


def test_estimator_finds_both_spikes_at_the_target_cardinality():
    from bayeskit.estimators import SparsePCA

    S, A = _two_spikes()
    est = SparsePCA(n_components=2, cardinality=4).fit(S)
    supports = [set(np.nonzero(c)[0]) for c in est.components_]
    assert supports == [{3, 10, 22, 41}, {5, 30, 33, 57}]
    assert np.all(est.n_features_kept_ < 60) and np.all(est.explained_variance_ > 0)
    assert est.explained_variance_[0] > est.explained_variance_[1]
    dense = SparsePCA(n_components=2, cardinality=4).fit(A)
    np.testing.assert_allclose(dense.components_, est.components_, atol=1e-8)
    np.testing.assert_allclose(est.transform(S), (A - A.mean(0)) @ est.components_.T, atol=1e-10)
    fixed = SparsePCA(alpha=float(est.alphas_[0])).fit(S)
    assert fixed.n_features_kept_[0] == np.sum(sparse_pca.feature_variances(A) >= est.alphas_[0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(cardinality=3, alpha=0.1), "exactly one"),
    (dict(cardinality=0), "cardinality"),
    (dict(cardinality=100), "cardinality"),
    (dict(alpha=-0.1), "alpha"),
])
def test_bad_input(kwargs, match):
    from bayeskit.estimators import SparsePCA

    with pytest.raises(ValueError, match=match):
        SparsePCA(**kwargs).fit(np.random.default_rng(0).normal(size=(20, 8)))
    with pytest.raises(ValueError, match="non-finite"):
        SparsePCA(cardinality=2).fit(np.array([[1.0, np.nan], [0.0, 1.0], [2.0, 1.0]]))


def test_zipf_corpus_and_the_uci_reader(tmp_path):
    from bayeskit.datasets import read_uci_bag_of_words, zipf_corpus

    X, topics = zipf_corpus(300, 2000, n_topics=3, topic_size=4, n_stop_words=10, seed=1)
    assert X.shape == (300, 2000) and topics.shape == (3, 4)
    counts = np.asarray(X.sum(0)).ravel()
    assert np.all(counts[:10] == 0) and np.all(counts[topics.ravel()] > 0)
    path = tmp_path / "docword.txt"
    path.write_text("2\n3\n3\n1 1 2\n1 3 1\n2 2 5\n")
    np.testing.assert_array_equal(read_uci_bag_of_words(path).toarray(), [[2, 0, 1], [0, 5, 0]])


@pytest.mark.parametrize("a, b", [(1e-7, 0.0), (1e7, 3.0), (1e-100, 0.0), (1e100, 2.0)])
def test_estimator_components_do_not_depend_on_the_units_of_x(a, b):
    """The barrier weight and tolerances are absolute, so the fit runs on X / s (s the root
    mean feature variance): the components of a X + b are those of X, dense or sparse, and
    the variances and penalties come back times a^2 (they differed wholly at a = 1e7)."""
    from scipy import sparse

    from bayeskit.estimators import SparsePCA

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)) @ (np.eye(5) + 0.5 * rng.normal(size=(5, 5)))
    ref = SparsePCA(n_components=2, cardinality=2).fit(X)
    for data in (X * a + b * a, sparse.csr_matrix(X * a)):
        got = SparsePCA(n_components=2, cardinality=2).fit(data)
        np.testing.assert_allclose(np.abs(got.components_), np.abs(ref.components_), atol=1e-8)
        np.testing.assert_allclose(got.explained_variance_ / a**2, ref.explained_variance_, rtol=1e-8)
        np.testing.assert_allclose(got.alphas_ / a**2, ref.alphas_, rtol=1e-8)
    fixed = SparsePCA(alpha=float(ref.alphas_[0])).fit(X)
    np.testing.assert_allclose(SparsePCA(alpha=float(ref.alphas_[0]) * 1e14).fit(X * 1e7).components_, fixed.components_, atol=1e-8)
    with pytest.raises(ValueError, match="explained variance of data at scale .* beyond the range of float64"):
        SparsePCA(cardinality=2).fit(X * 1e300)


def test_an_integer_covariance_fits_as_its_float_copy():
    """A covariance of counts fits as its float copy: its penalties are not truncated to the
    data's integer dtype (beta = 0.5 had become 0)."""
    X = np.random.default_rng(0).integers(0, 5, size=(40, 6))
    S = X.T @ X
    hp = sparse_pca.Hyperparams(40.0, 0.5)
    got, want = sparse_pca.fit(S, hp, max_iter=20), sparse_pca.fit(S.astype(float), hp, max_iter=20)
    np.testing.assert_allclose(np.asarray(got.state.X), np.asarray(want.state.X), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("a", [0.01, 1.0, 3.0, 10.0, 100.0])
def test_functional_components_do_not_depend_on_the_units_of_the_data(a):
    """Under the float32 defaults too: at a = 3 or 10 the component came out empty (the
    barrier weight and tolerances are absolute), at 100 with five features."""
    rng = np.random.default_rng(0)
    Z = rng.standard_normal((50, 8))
    Z[:, 2] += 2 * Z[:, 0]
    Z[:, 5] += 2 * Z[:, 0]
    with jax.enable_x64(False):
        r = sparse_pca.fit_components(a * Z, 1, cardinality=3)
    assert set(np.nonzero(r.state.components[0])[0]) == {0, 2, 5}
    np.testing.assert_allclose(r.state.explained_variance / a**2, sparse_pca.fit_components(Z, 1, cardinality=3).state.explained_variance,
                               rtol=1e-4)


def test_functional_bad_input_is_refused():
    X = np.random.default_rng(0).standard_normal((20, 4))
    for kwargs, match in (({"cardinality": 5}, "cardinality must be between 1 and 4"), ({"cardinality": 0}, "cardinality"),
                          ({"alpha": -1.0}, "alpha must be finite"), ({"alpha": float("nan")}, "alpha must be finite")):
        with pytest.raises(ValueError, match=match):
            sparse_pca.fit_components(X, 1, **kwargs)
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="1 non-finite"):
        sparse_pca.fit_components(bad, 1, cardinality=2)
    with pytest.raises(ValueError, match="must be a matrix"):
        sparse_pca.fit_components(X[:, 0], 1, cardinality=2)


def test_the_bca_fit_refuses_what_is_not_a_covariance():
    """A 0 x 0, a non-square or an asymmetric Sigma and a negative penalty raised raw
    NumPy or JAX errors, or ran."""
    hp = sparse_pca.Hyperparams(0.1)
    for Sigma, match in ((np.zeros((0, 0)), "non-empty square"), (np.ones((2, 3)), "non-empty square"),
                         (np.array([[1.0, 0.5], [0.0, 1.0]]), "symmetric"), (np.array([[1.0, np.nan], [np.nan, 1.0]]), "non-finite")):
        with pytest.raises(ValueError, match=match):
            sparse_pca.fit(Sigma, hp)
    with pytest.raises(ValueError, match="lam must be finite"):
        sparse_pca.fit(np.eye(3), sparse_pca.Hyperparams(-1.0))


def test_functional_components_of_a_data_frame_equal_those_of_its_array():
    pd = pytest.importorskip("pandas")
    X = np.random.default_rng(1).standard_normal((30, 5))
    X[:, 3] += 2 * X[:, 0]
    got = sparse_pca.fit_components(pd.DataFrame(X), 1, alpha=np.float64(0.5)).state
    want = sparse_pca.fit_components(X, 1, alpha=0.5).state
    np.testing.assert_array_equal(got.components, want.components)


def test_safe_elimination_is_exact_for_l0_not_for_the_relaxation():
    """The module docstring's example: Sigma_22 = 1 < lambda = 1.5, yet the optimum of the
    relaxation (1) on both features has Z_22 > 0 and phi above the 8.5 of the first feature
    alone (phi(Z) = Tr(Sigma Z) - lambda |Z|_1 computed here); the pipeline, which eliminates
    as the paper does, keeps the first feature only."""
    Sigma = np.array([[10.0, 2.5], [2.5, 1.0]])
    X = np.asarray(sparse_pca.fit(jnp.asarray(Sigma), sparse_pca.Hyperparams(1.5, 1e-6), max_iter=200).state.X)
    Z = X / np.trace(X)
    phi = np.sum(Sigma * Z) - 1.5 * np.abs(Z).sum()
    assert Z[1, 1] > 0.01 and phi > 8.6
    assert list(sparse_pca.safe_features(np.diagonal(Sigma), 1.5)) == [0]


def test_row_update_and_update_take_numpy_arrays():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(20, 4))
    Sigma = A.T @ A / 20
    X = np.eye(4) / 4
    np.testing.assert_allclose(sparse_pca.row_update(X, 1, Sigma, 0.1, 1e-4),
                               sparse_pca.row_update(jnp.asarray(X), 1, jnp.asarray(Sigma), 0.1, 1e-4), rtol=1e-12)
    hp = sparse_pca.Hyperparams(0.1, 1e-4)
    np.testing.assert_allclose(sparse_pca.update(sparse_pca.State(jnp.asarray(X)), Sigma, hp).X,
                               sparse_pca.update(sparse_pca.State(jnp.asarray(X)), jnp.asarray(Sigma), hp).X, rtol=1e-12)


def test_a_cardinality_above_max_features_is_refused():
    """cardinality 5 with max_features 2 returned components of 2 nonzeros without a word."""
    data = np.random.default_rng(0).normal(size=(30, 8))
    with pytest.raises(ValueError, match="cardinality=5 exceeds max_features=2"):
        sparse_pca.fit_components(data, 1, cardinality=5, max_features=2)

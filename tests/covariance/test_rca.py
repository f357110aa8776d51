"""Residual component analysis: the generalised eigenproblem, equality with probabilistic
PCA, maximality of the likelihood, the posterior against Gaussian conditioning, the dual
form, EM/RCA's monotone bound and the optimality of each of its steps, bad input."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg
from compilations import count_compilations

from bayeskit.core.scaling import unit_scale
from bayeskit.covariance import rca
from bayeskit.estimators import EMRCA, RCA


def _confounded(n=200, p=8, q=2, seed=0):
    """Draws from N(0, W W' + Sigma) with a known random Sigma: (Y, W, Sigma)."""
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(p, p))
    Sigma = A @ A.T / p + 0.5 * np.eye(p)
    W = 2 * rng.normal(size=(p, q))
    Y = rng.multivariate_normal(np.zeros(p), W @ W.T + Sigma, size=n)
    return Y, W, Sigma


def _second_moment(Y):
    Yc = Y - Y.mean(0)
    return Yc.T @ Yc / len(Y)


def test_generalized_eigenvectors_are_sigma_normalised_and_match_scipy():
    Y, _, Sigma = _confounded()
    C = _second_moment(Y)
    solution = rca.fit(C, Sigma).state
    d, S = np.asarray(solution.eigenvalues), np.asarray(solution.eigenvectors)
    np.testing.assert_allclose(S.T @ Sigma @ S, np.eye(len(C)), atol=1e-10)
    np.testing.assert_allclose(C @ S, Sigma @ S * d, atol=1e-10)
    np.testing.assert_allclose(d, scipy.linalg.eigh(C, Sigma, eigvals_only=True)[::-1], rtol=1e-10)


@pytest.mark.parametrize("q", [1, 3])
def test_isotropic_sigma_gives_probabilistic_pca(q):
    """Sigma = s2 I: W = U_q (lambda_q - s2)^{1/2} (Tipping & Bishop), up to column signs;
    with s2 the mean discarded eigenvalue the likelihood is PPCA's closed form."""
    Y, _, _ = _confounded(p=7)
    C = _second_moment(Y)
    lam, U = np.linalg.eigh(C)
    lam, U = lam[::-1], U[:, ::-1]
    s2 = lam[q:].mean()
    result = rca.fit(C, s2 * np.eye(7), q)
    sol = result.state
    W = np.asarray(sol.components)
    W_ppca = U[:, :q] * np.sqrt(lam[:q] - s2)
    np.testing.assert_allclose(np.abs(W), np.abs(W_ppca), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(np.asarray(sol.eigenvalues), lam / s2, rtol=1e-10)
    p = len(C)
    ppca = -0.5 * (p * np.log(2 * np.pi) + np.sum(np.log(lam[:q])) + (p - q) * np.log(s2) + p)
    assert float(rca.log_likelihood(C, sol.components, s2 * np.eye(7))) == pytest.approx(ppca, rel=1e-10)
    assert float(result.objective) == pytest.approx(ppca, rel=1e-10)
    assert bool(result.converged) and int(result.n_iter) == 0


def test_likelihood_is_maximal_at_the_solution():
    """Above random W of the same rank and small perturbations of the solution, with a
    zero gradient there, and the closed form of the module docstring."""
    Y, _, Sigma = _confounded()
    C = _second_moment(Y)
    sol = rca.fit(C, Sigma).state
    q = int(sol.n_components)
    W = sol.components[:, :q]
    best = float(rca.log_likelihood(C, W, Sigma))
    d = np.asarray(sol.eigenvalues)
    closed = -0.5 * (len(C) * np.log(2 * np.pi) + np.linalg.slogdet(Sigma)[1] + np.sum(np.log(d[:q])) + q
                     + np.sum(d[q:]))
    assert best == pytest.approx(closed, rel=1e-10)
    grad = jax.grad(rca.log_likelihood, argnums=1)(C, W, Sigma)
    assert float(jnp.max(jnp.abs(grad))) < 1e-8
    rng = np.random.default_rng(1)
    for scale in (1e-3, 1e-1, 1.0, 3.0):
        for _ in range(20):
            other = np.asarray(W) + scale * rng.normal(size=W.shape) * np.abs(W).max()
            assert float(rca.log_likelihood(C, other, Sigma)) < best


def test_eigenvalues_above_one_choose_q_and_may_choose_none():
    Y, W_true, Sigma = _confounded(n=4000, q=2)
    est = RCA().fit(Y, Sigma)
    d = scipy.linalg.eigh(_second_moment(Y), Sigma, eigvals_only=True)[::-1]
    assert est.n_components_ == np.sum(d > 1) and est.components_.shape == (8, est.n_components_)
    # two eigenvalues carry the confounder, the rest scatter around 1 by sampling noise
    assert d[1] > 5 and np.all(np.abs(d[2:] - 1) < 0.15)
    # the subspace of the true W is recovered by the two leading components
    P = est.components_[:, :2] @ np.linalg.pinv(est.components_[:, :2])
    assert np.linalg.norm(W_true - P @ W_true) / np.linalg.norm(W_true) < 0.1
    # data explained by Sigma alone: no eigenvalue exceeds 1 when Sigma is generous
    Z = np.random.default_rng(2).multivariate_normal(np.zeros(8), Sigma, size=500)
    empty = RCA().fit(Z, 2 * Sigma)
    assert empty.n_components_ == 0 and empty.components_.shape == (8, 0)
    assert empty.transform(Z).shape == (500, 0)
    assert empty.score(Z) == pytest.approx(scipy.stats.multivariate_normal(Z.mean(0), 2 * Sigma).logpdf(Z).mean())


def test_posterior_equals_gaussian_conditioning():
    """E[x | y] = W' K^-1 y and Cov = I - W' K^-1 W from the joint Gaussian of (x, y)."""
    Y, _, Sigma = _confounded()
    est = RCA(n_components=2).fit(Y, Sigma)
    W = est.components_
    K = W @ W.T + Sigma
    Yc = Y[:5] - est.location_
    np.testing.assert_allclose(est.transform(Y[:5]), Yc @ np.linalg.solve(K, W), rtol=1e-8)
    _, M = rca.posterior(jnp.asarray(Yc), jnp.asarray(W), jnp.asarray(Sigma))
    np.testing.assert_allclose(np.asarray(M), np.eye(2) - W.T @ np.linalg.solve(K, W), atol=1e-10)


def test_score_is_the_gaussian_log_likelihood():
    Y, _, Sigma = _confounded()
    est = RCA(n_components=2).fit(Y, Sigma)
    K = est.components_ @ est.components_.T + Sigma
    expected = scipy.stats.multivariate_normal(est.location_, K).logpdf(Y).mean()
    assert est.score(Y) == pytest.approx(expected, rel=1e-10)
    assert est.log_likelihood_ == pytest.approx(expected, rel=1e-10)


def test_dual_form_is_the_primal_form_of_the_transpose():
    """A temporal kernel over 12 time points, 40 genes as draws."""
    rng = np.random.default_rng(3)
    t = np.arange(12.0)
    Sigma = np.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / 3.0**2) + 0.1 * np.eye(12)
    Y = rng.multivariate_normal(np.zeros(12), Sigma, size=40).T
    Y[:, :5] += np.outer(np.sin(t), rng.normal(size=5)) * 2  # five genes with a residual profile
    dual = RCA(dual=True).fit(Y, Sigma)
    primal = RCA().fit(Y.T, Sigma)
    np.testing.assert_allclose(np.abs(dual.components_), np.abs(primal.components_), rtol=1e-10)
    np.testing.assert_allclose(np.abs(dual.transform(Y)), np.abs(primal.transform(Y.T)), rtol=1e-8)
    assert dual.transform(Y[:, :3]).shape == (3, dual.n_components_)


def test_float32():
    Y, _, Sigma = _confounded()
    est = RCA(n_components=2).fit(Y.astype(np.float32), Sigma.astype(np.float32))
    ref = RCA(n_components=2).fit(Y, Sigma)
    assert est.components_.dtype == np.float32
    np.testing.assert_allclose(np.abs(est.components_), np.abs(ref.components_), rtol=1e-3, atol=1e-3)


def test_bad_input():
    Y, _, Sigma = _confounded()
    asym = Sigma.copy()
    asym[0, 1] += 1.0
    with pytest.raises(ValueError, match="symmetric"):
        RCA().fit(Y, asym)
    with pytest.raises(ValueError, match="positive definite"):
        RCA().fit(Y, Sigma - 10 * np.eye(8))
    with pytest.raises(ValueError, match="match"):
        RCA().fit(Y, np.eye(5))
    with pytest.raises(ValueError, match="n_components"):
        RCA(n_components=9).fit(Y, Sigma)
    with pytest.raises(ValueError, match="n_components"):
        RCA(n_components=5).fit(Y[:4], Sigma)
    bad = Y.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError):
        RCA().fit(bad, Sigma)
    with pytest.raises(ValueError, match="alpha"):
        EMRCA(alpha=-1.0).fit(Y)
    with pytest.raises(ValueError, match="noise_variance"):
        EMRCA(noise_variance=0.0).fit(Y)
    C = np.cov(Y, rowvar=False)
    with pytest.raises(ValueError, match="non-empty square"):
        rca.fit(np.zeros((0, 0)), np.zeros((0, 0)))
    for k in (-1, 0, 9, 2.0):  # Python slicing took -1 as p - 1 columns and 9 as all of them
        with pytest.raises(ValueError, match=r"n_components must be an int in \[1, 8\]"):
            rca.fit(C, Sigma, k)


# ------------------------------------------------------------------------------ EM/RCA


def _low_rank_plus_sparse(n=150, p=10, q=2, seed=0):
    """y = W x + z + e with a chain-structured sparse precision: (Y, Lambda)."""
    rng = np.random.default_rng(seed)
    Lam = 2 * np.eye(p)
    for i in range(p - 1):
        Lam[i, i + 1] = Lam[i + 1, i] = 0.8
    W = rng.normal(size=(p, q))
    K = W @ W.T + np.linalg.inv(Lam) + 0.1 * np.eye(p)
    return rng.multivariate_normal(np.zeros(p), K, size=n), Lam


@pytest.fixture(scope="module")
def em_fit():
    Y, _ = _low_rank_plus_sparse()
    C = _second_moment(Y)
    hp = rca.EMHyperparams(alpha=0.05, noise_variance=0.1)
    return C, hp, rca.em_fit(C, hp, max_iter=300, tol=1e-10)


def test_em_starts_at_lambda_over_the_mean_variance_or_where_asked(em_fit):
    """Lambda = I / m (m = tr(C) / p) by default; the authors' I, or any given precision,
    when asked; W from PPCA either way, and the start's bound is (4) at that point."""
    C, hp, _ = em_fit
    p = len(C)
    default, given = rca.em_init(C, hp), rca.em_init(C, hp, precision=np.eye(p))
    np.testing.assert_allclose(np.asarray(default.sparse.precision), np.eye(p) * p / np.trace(C), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(given.sparse.precision), np.eye(p), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(given.sparse.covariance), np.eye(p), atol=1e-12)
    np.testing.assert_allclose(np.asarray(given.W), np.asarray(default.W), rtol=1e-12)
    expected = rca.bound(given.W, np.eye(p), np.eye(p), C, hp)
    np.testing.assert_allclose(float(given.bound), float(expected), rtol=1e-12)
    assert abs(float(given.bound) - float(default.bound)) > 1e-3  # the starts differ (mean variance != 1 here)


def test_em_bound_never_decreases(em_fit):
    _, _, r = em_fit
    trace = np.asarray(r.trace)[: int(r.n_iter)]
    assert len(trace) > 5
    assert np.all(np.diff(trace) >= -1e-10 * np.abs(trace[1:]))
    assert float(r.state.max_decrease) <= 1e-10 * abs(trace[-1])


def test_em_bound_equals_the_penalised_likelihood(em_fit):
    """(4) by numpy: the Gaussian log-likelihood of K = WW' + Lambda^-1 + s2 I at C, minus
    alpha/2 times the L1 norm of Lambda (diagonal included)."""
    C, hp, r = em_fit
    W = np.asarray(r.state.W)
    Lam = np.asarray(r.state.sparse.precision)
    K = W @ W.T + np.linalg.inv(Lam) + hp.noise_variance * np.eye(len(C))
    p = len(C)
    ll = -0.5 * (p * np.log(2 * np.pi) + np.linalg.slogdet(K)[1] + np.trace(np.linalg.solve(K, C)))
    assert float(r.state.bound) == pytest.approx(ll - 0.5 * hp.alpha * np.abs(Lam).sum(), rel=1e-9)


def test_em_fixed_point_satisfies_each_step(em_fit):
    """At convergence: Lambda meets the graphical lasso's KKT conditions for the E-step's
    <zz'> (checked with numpy's inverse), and W is the ML RCA solution for its Sigma."""
    C, hp, r = em_fit
    W = np.asarray(r.state.W)
    Lam = np.asarray(r.state.sparse.precision)
    s2 = hp.noise_variance
    R = W @ W.T + s2 * np.eye(len(C))
    V = np.linalg.inv(np.linalg.inv(R) + Lam)
    VRi = V @ np.linalg.inv(R)
    Ezz = V + VRi @ C @ VRi.T
    G = Ezz - np.linalg.inv(Lam)
    on = Lam != 0
    assert np.max(np.abs(G[on] + hp.alpha * np.sign(Lam[on]))) < 1e-4
    assert np.all(np.abs(G[~on]) <= hp.alpha + 1e-4)
    W_rca = np.asarray(rca.fit(C, np.linalg.inv(Lam) + s2 * np.eye(len(C))).state.components)
    np.testing.assert_allclose(np.abs(W), np.abs(W_rca), atol=1e-4)


def test_em_path_warm_starts_match_separate_fits():
    Y, _ = _low_rank_plus_sparse()
    C = _second_moment(Y)
    alphas = np.array([0.3, 0.1])
    path = rca.em_path(C, alphas, noise_variance=0.1, max_iter=300, tol=1e-10)
    for k, a in enumerate(alphas):
        single = rca.em_fit(C, rca.EMHyperparams(a, 0.1), max_iter=300, tol=1e-10)
        assert float(path.state.bound[k]) == pytest.approx(float(single.state.bound), abs=1e-5)


def test_a_second_em_path_on_new_data_compiles_nothing():
    """rca.em_path is one compiled program per shape and setting: a new C, penalties and noise
    variance compile nothing (a lax.scan staged at the top level had compiled at every call)."""
    Y, _ = _low_rank_plus_sparse()
    rca.em_path(_second_moment(Y), np.array([0.3, 0.1]), noise_variance=0.1, max_iter=20)
    with count_compilations() as seen:
        jax.block_until_ready(rca.em_path(_second_moment(Y[::-1] * 1.5), np.array([0.2, 0.05]), noise_variance=0.2, max_iter=20))
    assert seen["compiles"] == 0, seen


def test_emrca_precision_init_is_the_functional_fit_from_that_start():
    """``precision_init`` in the data's units: the estimator (which fits on a unit scale)
    equals ``em_fit`` from ``em_init(..., precision=...)`` on the raw second moment, and the
    default start I / m is a different fit; bad starts are refused by name."""
    Y, _ = _low_rank_plus_sparse()
    Y = 3.0 * Y  # not a power of two: the unit scale differs from the data's
    assert unit_scale(Y)[1] != 1  # the start is multiplied by s^2 != 1 on the unit scale
    C = _second_moment(Y)
    p = len(C)
    hp = rca.EMHyperparams(0.05, 0.5 * np.trace(C) / p)
    start = rca.em_init(C, hp, precision=np.eye(p))
    # tight: the relative stopping rule, on a bound shifted by p log s, stops some iterations apart
    functional = rca.em_fit(C, hp, init_state=start, max_iter=2000, tol=1e-12)
    est = EMRCA(alpha=0.05, precision_init=np.eye(p), tol=1e-12, max_iter=2000).fit(Y)
    np.testing.assert_allclose(est.precision_, np.asarray(functional.state.sparse.precision), atol=1e-4)
    assert est.bound_[0] == pytest.approx(float(functional.trace[0]), abs=1e-8)  # the same first iteration
    assert est.bound_[-1] == pytest.approx(float(functional.state.bound), abs=1e-8)
    default = EMRCA(alpha=0.05).fit(Y)
    assert abs(default.bound_[0] - est.bound_[0]) > 1e-3  # the starts differ
    nearly = np.linalg.inv(np.linalg.inv(np.eye(p) + 0.3 * np.diag(np.ones(p - 1), 1) + 0.3 * np.diag(np.ones(p - 1), -1)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # max_iter
        EMRCA(alpha=0.05, precision_init=nearly, max_iter=5).fit(Y)  # symmetric up to rounding: accepted
    for bad, match in ((np.eye(p - 1), r"\(10, 10\)"), (np.eye(p) - 2 * np.eye(p)[0:1].T @ np.eye(p)[0:1], "positive definite"),
                       (np.eye(p) + np.triu(np.ones((p, p)), 1), "symmetric"), (np.full((p, p), np.nan), "precision_init")):
        with pytest.raises(ValueError, match=match):
            EMRCA(alpha=0.05, precision_init=bad).fit(Y)


def test_emrca_estimator_attributes():
    Y, _ = _low_rank_plus_sparse()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est = EMRCA(alpha=0.05).fit(Y)
    p = Y.shape[1]
    assert est.precision_.shape == (p, p) and est.covariance_.shape == (p, p)
    assert est.noise_variance_ == pytest.approx(0.5 * np.trace(_second_moment(Y)) / p)
    assert est.components_.shape[0] == p and np.all(np.linalg.norm(est.components_, axis=0) > 0)
    assert est.score(Y) == pytest.approx(scipy.stats.multivariate_normal(est.location_, est.covariance_).logpdf(Y).mean())


def test_residual_scores_rank_differentially_expressed_genes():
    """Paired time series (7 treatment + 7 control points, as in the authors' gene
    experiment): every gene follows one smooth function in both series, and 20 of 200
    genes add a treatment-only response. Dual RCA with the temporal kernel ranks those
    20 first (AUC against the planted labels), and under the null the scores are
    chi-square with q degrees of freedom."""
    rng = np.random.default_rng(5)
    t = np.array([0, 20, 40, 60, 120, 180, 240] * 2, float)
    Sigma = np.asarray(rca.paired_time_kernel(t, lengthscale=60.0, jitter=0.05))
    genes = rng.multivariate_normal(np.zeros(14), Sigma, size=200).T  # (14 time points, 200 genes)
    response = np.r_[np.sin(np.pi * t[:7] / 240), np.zeros(7)]
    genes[:, :20] += np.outer(response, rng.uniform(1.5, 3.0, 20))
    est = RCA(dual=True, assume_centered=True).fit(genes, Sigma)
    scores = est.residual_scores(genes)
    labels = np.arange(200) < 20
    auc = np.mean(scores[labels][:, None] > scores[~labels][None, :])
    assert est.n_components_ >= 1 and auc > 0.95
    null = rng.multivariate_normal(np.zeros(14), Sigma, size=4000).T
    q = est.n_components_
    assert np.mean(est.residual_scores(null)) == pytest.approx(q, rel=0.1)


@pytest.mark.parametrize("seed", range(4))
def test_rank_deficient_second_moments_in_float32_are_accepted(seed):
    """Fewer draws than variables, in float32: C = Z'Z/n is PSD by construction but has
    eigenvalues of about -1e-7 times its scale from rounding; the check's tolerance follows
    the dtype, and a truly indefinite C is still refused."""
    rng = np.random.default_rng(seed)
    Y = (rng.normal(size=(6, 12)) @ rng.normal(size=(12, 12))).astype(np.float32)
    C = (Y - Y.mean(0)).T @ (Y - Y.mean(0)) / 6
    rca.check_covariance(C, "C", definite=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few iterations
        est = EMRCA(alpha=0.5, n_components=1, max_iter=3).fit(Y)
    assert np.all(np.isfinite(est.covariance_))
    indefinite = C - 1e-3 * np.abs(C).max() * np.eye(12, dtype=np.float32)
    with pytest.raises(ValueError, match="positive semidefinite"):
        rca.check_covariance(indefinite, "C", definite=False)


@pytest.mark.parametrize("a", [2.0**-66, 1e-20, 1e20])
def test_rca_is_equivariant_far_from_unit_scale_in_float32(a):
    """(a Y, a^2 Sigma) has the eigenvalues of (Y, Sigma), W times a, S / a and the latent
    coordinates unchanged, in float32 where a^2 Sigma (1e40) itself would overflow."""
    Y, _, Sigma = _confounded(n=120)
    Y32 = Y.astype(np.float32)
    ref = RCA(2).fit(Y32, Sigma.astype(np.float32))
    got = RCA(2).fit((Y * a).astype(np.float32), Sigma * a * a)
    np.testing.assert_allclose(got.eigenvalues_, ref.eigenvalues_, rtol=1e-4)
    np.testing.assert_allclose(np.abs(got.components_ / a), np.abs(ref.components_), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.abs(got.transform((Y * a).astype(np.float32))), np.abs(ref.transform(Y32)), rtol=1e-3, atol=1e-4)
    assert got.log_likelihood_ == pytest.approx(ref.log_likelihood_ - Y.shape[1] * np.log(a), abs=1e-4)
    assert got.score(Y * a) == pytest.approx(ref.score(Y) - Y.shape[1] * np.log(a), abs=1e-3)


@pytest.mark.parametrize("a", [2.0**-66, 2.0**66])
def test_emrca_is_equivariant_far_from_unit_scale_in_float32(a):
    """(a X, a^2 alpha, a^2 s2) has Lambda / a^2, W a and the bound less p log a: exactly so for
    a power of two, which the fit divides out exactly."""
    Y, _, _ = _confounded(n=150, p=6)
    X = Y.astype(np.float32)
    ref = EMRCA(0.1, noise_variance=0.3, max_iter=50).fit(X)
    got = EMRCA(0.1 * a * a, noise_variance=0.3 * a * a, max_iter=50).fit(X * np.float32(a))
    assert got.n_iter_ == ref.n_iter_
    np.testing.assert_allclose(got.precision_ * a * a, ref.precision_, rtol=1e-6)
    np.testing.assert_allclose(got.components_ / a, ref.components_, rtol=1e-6)
    np.testing.assert_allclose(got.bound_, ref.bound_ - X.shape[1] * np.log(a), rtol=1e-6)
    assert got.noise_variance_ == pytest.approx(0.3 * a * a)
    assert np.all(np.isfinite(got.covariance_))


def test_inputs_beyond_float32_on_the_data_scale_are_refused_with_the_scale():
    Y, _, Sigma = _confounded(n=60, p=5)
    X = (Y * 1e20).astype(np.float32)
    with pytest.raises(ValueError, match="alpha on data at scale .* beyond the range of float32"):
        EMRCA(0.1).fit(X)
    with pytest.raises(ValueError, match="Sigma on data at scale .* beyond the range of float32"):
        RCA(2).fit(X, Sigma)
    with pytest.raises(ValueError, match="every column of X is constant"):
        EMRCA(0.1).fit(np.ones((10, 3)))
    with pytest.raises(ValueError, match=r"noise_variance must be positive and finite; got -1"):
        EMRCA(0.1, noise_variance=-1).fit(Y)


def test_an_integer_second_moment_fits_as_its_float_copy():
    """EM/RCA and ML RCA on integer matrices equal the fits on their float copies (an integer C
    had made the EM's penalty and noise variance integers)."""
    C = np.array([[6, 2, 1, 0], [2, 5, 1, 1], [1, 1, 4, 1], [0, 1, 1, 3]])
    hp = rca.EMHyperparams(0.3, 0.5, True, 1)
    em = lambda A: np.asarray(rca.em_fit(A, hp, max_iter=50).state.sparse.precision)  # noqa: E731
    np.testing.assert_allclose(em(C), em(C.astype(float)), rtol=1e-6, atol=1e-9)
    ml = lambda A, B: np.asarray(rca.fit(A, B, 2).state.eigenvalues)  # noqa: E731
    np.testing.assert_allclose(ml(C, 2 * np.eye(4, dtype=int)), ml(C.astype(float), 2.0 * np.eye(4)), rtol=1e-6)

"""The fast marginal-likelihood engine against the full-matrix evidence it maximises."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskit.core.scaling import unit_scale
from bayeskit.sparse import sparse_bayes as sb


def _sinc(n=40, sd=0.1, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 10, n)
    y = np.sinc(x / np.pi) + sd * rng.standard_normal(n)
    return x[:, None].astype(dtype), y.astype(dtype)


def _full_log_evidence(Phi, y, gamma, beta, rho=0.0):
    """L from C = sigma^2 I + Phi diag(gamma) Phi' directly (normalised columns)."""
    C = jnp.eye(len(y)) / beta + (Phi * gamma) @ Phi.T
    _, logdet = jnp.linalg.slogdet(C)
    return -0.5 * (len(y) * jnp.log(2 * jnp.pi) + logdet + y @ jnp.linalg.solve(C, y)) - 0.5 * rho * jnp.sum(gamma)


@pytest.mark.parametrize("prior", ["rvm", "flap", "flap_sigma", "bls"])
def test_log_evidence_never_decreases(prior):
    """Every move, and every noise update, raises L (lambda held fixed: its re-estimation
    follows Babacan's schedule, which is not an ascent on L)."""
    X, y = _sinc(60, 0.2)
    hp = sb.Hyperparams(prior=prior, lam=0.5, estimate_lambda=False)
    r = sb.fit(sb.design(X, gamma=0.1), y, hp)
    trace = np.asarray(r.trace)[: int(r.n_iter)]
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:])), np.diff(trace).min()
    assert int(sb.relevance(r.state).sum()) >= 2


@pytest.mark.parametrize("prior", ["rvm", "flap", "bls"])
def test_engine_optimum_is_a_stationary_point_of_the_full_evidence(prior):
    """At convergence (lambda fixed), the full-matrix evidence has zero gradient in every
    active log-variance and cannot rise by letting an inactive basis in (d L / d gamma_m
    <= 0 at gamma_m = 0; bases nearly parallel to an active one are barred by design), by
    autodiff of L computed without S, Q or the rank-one updates;
    the posterior mean equals the direct solve."""
    X, y = _sinc(30, 0.1, seed=3)
    Phi = sb.design(X, gamma=0.1, bias=True)
    hp = sb.Hyperparams(prior=prior, lam=0.3, estimate_lambda=False, min_delta_log_gamma=1e-8, gain_tol=1e-12)
    r = sb.fit(Phi, y, hp, max_iter=400)
    st, data = r.state, sb.as_data(Phi, y)
    beta = float(st.beta)
    rho = 0.0 if prior == "rvm" else 0.3 * (beta if prior == "bls" else 1.0)
    gamma = np.asarray(st.gamma)
    grad = np.asarray(jax.grad(_full_log_evidence, argnums=2)(sb.unit_basis(data), data.y, jnp.asarray(gamma), beta, rho))
    active = gamma > 0
    assert active.sum() >= 2
    np.testing.assert_allclose(grad[active] * gamma[active], 0.0, atol=1e-5)  # d L / d log gamma
    P = np.asarray(sb.unit_basis(data))
    barred = np.abs(P.T @ P[:, active]).max(1) > 1 - hp.align_tol
    assert grad[~active & ~barred].max() <= 1e-8
    if prior == "rvm":  # the noise has settled at its own stationary point too
        d_beta = jax.grad(_full_log_evidence, argnums=3)(sb.unit_basis(data), data.y, jnp.asarray(gamma), beta, rho)
        assert abs(float(d_beta) * beta) < 1e-3
    Phi_A = np.asarray(sb.unit_basis(data))[:, active]
    mu = np.linalg.solve(beta * Phi_A.T @ Phi_A + np.diag(1 / gamma[active]), beta * Phi_A.T @ np.asarray(data.y))
    w = np.asarray(sb.weights(st, data.scale))
    np.testing.assert_allclose(w[active] * np.asarray(data.scale)[active], mu, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("lam", [0.0, 2.0])
def test_engine_matches_a_direct_maximisation_on_a_small_problem(lam):
    """Variable selection on Tibshirani's design (8 correlated predictors, 3 non-zero),
    noise fixed, lambda = 0 (the RVM's evidence) and 2: a direct maximisation of the
    full-matrix evidence over all log-variances (L-BFGS from every predictor in) ends on
    the engine's selected set and variances."""
    from scipy.optimize import minimize

    rng = np.random.default_rng(5)
    corr = 0.5 ** np.abs(np.subtract.outer(np.arange(8), np.arange(8)))
    X = rng.standard_normal((40, 8)) @ np.linalg.cholesky(corr).T
    y = X @ np.array([3, 1.5, 0, 0, 2, 0, 0, 0]) + rng.standard_normal(40)
    Phi = sb.design(X, kernel="linear")
    hp = sb.Hyperparams(prior="flap", lam=lam, estimate_lambda=False, noise_init=1 / np.var(y), min_delta_log_gamma=1e-9,
                        gain_tol=1e-13)
    r = sb.fit(Phi, y, hp, max_iter=600)
    data = sb.as_data(Phi, y)
    beta = float(r.state.beta)
    f = jax.jit(jax.value_and_grad(lambda lg: -_full_log_evidence(sb.unit_basis(data), data.y, jnp.exp(lg), beta, lam)))
    res = minimize(lambda v: tuple(np.asarray(a, float) for a in f(jnp.asarray(v))), np.zeros(8), jac=True,
                   method="L-BFGS-B", bounds=[(-40, 15)] * 8, options={"maxiter": 20000, "ftol": 1e-15, "gtol": 1e-10})
    direct, engine = np.exp(res.x), np.asarray(r.state.gamma)
    on = direct > 1e-8
    np.testing.assert_array_equal(on, engine > 0)
    assert 3 <= on.sum() < 8
    np.testing.assert_allclose(direct[on], engine[on], rtol=1e-4)
    np.testing.assert_allclose(-res.fun, float(r.objective), rtol=1e-9)


def test_stable_root_equals_the_naive_root_and_tends_to_the_rvm():
    rng = np.random.default_rng(0)
    s = rng.uniform(0.1, 5, 200)
    q = rng.uniform(-6, 6, 200)
    for rho in (0.05, 1.0, 3.0):
        naive = (-(2 * rho + s) + np.sqrt(s**2 + 4 * rho * q**2)) / (2 * rho * s)
        want = np.where(q**2 - s > rho, naive, 0.0)
        np.testing.assert_allclose(sb.optimal_gamma(s, q, rho), want, rtol=1e-10, atol=1e-12)
    rvm = np.where(q**2 > s, (q**2 - s) / s**2, 0.0)
    np.testing.assert_allclose(sb.optimal_gamma(s, q, 1e-12), rvm, rtol=1e-8)
    np.testing.assert_array_equal(sb.optimal_gamma(s, q, 0.0), rvm)
    # the root is the maximiser of l(gamma): a grid does no better
    grid = np.geomspace(1e-6, 1e4, 20001)
    for i in range(0, 200, 23):
        best = sb.basis_objective(grid, s[i], q[i], 0.7).max()
        assert float(sb.basis_objective(sb.optimal_gamma(s[i], q[i], 0.7), s[i], q[i], 0.7)) >= max(float(best), 0.0) - 1e-9


def test_rank_one_updates_do_not_drift():
    """Without refreshes, the rank-one Sigma, mu, S and Q, and the evidence carried by the
    moves' gains, equal a recomputation."""
    X, y = _sinc(50, 0.1, seed=2)
    data = sb.as_data(sb.design(X, gamma=0.2, bias=True), y)
    hp = sb.Hyperparams(prior="flap", lam=0.2, estimate_lambda=False)
    step = jax.jit(lambda s: sb.move(s, data, hp)[0])
    state = sb.init(data, hp)
    for _ in range(60):
        state = step(state)
    fresh = sb.refresh(state, data, hp)
    for name in ("Sigma", "mu", "S", "Q", "log_evidence"):
        np.testing.assert_allclose(getattr(state, name), getattr(fresh, name), rtol=1e-7, atol=1e-9, err_msg=name)


def test_predictive_mean_and_variance_match_the_closed_form():
    """Mean k*' C^-1 y and variance sigma^2 + k** - k*' C^-1 k* of the Gaussian process
    with covariance Phi_A Gamma Phi_A' (the engine uses the weight-space posterior)."""
    X, y = _sinc(40, 0.1, seed=4)
    Xt = np.linspace(-12, 12, 33)[:, None]
    Phi, Phi_t = sb.design(X, gamma=0.1, bias=True), sb.design(Xt, X, gamma=0.1, bias=True)
    r = sb.fit(Phi, y, sb.Hyperparams(prior="bls"))
    data = sb.as_data(Phi, y)
    mean, var = sb.predict(r.state, Phi_t, data.scale)
    gamma, sigma2 = np.asarray(r.state.gamma), 1 / float(r.state.beta)
    P, Pt = np.asarray(sb.unit_basis(data)), np.asarray(Phi_t) / np.asarray(data.scale)
    C = sigma2 * np.eye(len(y)) + (P * gamma) @ P.T
    k = (Pt * gamma) @ P.T
    np.testing.assert_allclose(mean, k @ np.linalg.solve(C, y), rtol=1e-7, atol=1e-9)
    want = sigma2 + np.sum((Pt * gamma) * Pt, 1) - np.sum(k * np.linalg.solve(C, k.T).T, 1)
    np.testing.assert_allclose(var, want, rtol=1e-6, atol=1e-10)


def test_vmapped_fits_equal_separate_fits():
    sets = [_sinc(40, 0.2, seed=s) for s in range(3)]
    Phis = jnp.stack([sb.design(X, gamma=0.1) for X, _ in sets])
    ys = jnp.stack([y for _, y in sets])
    hp = sb.Hyperparams(prior="bls")  # noise and lambda re-estimated: every branch runs
    batch = jax.vmap(lambda P, t: sb.fit(P, t, hp, throw=False))(Phis, ys)
    assert len(set(np.asarray(batch.n_iter).tolist())) > 1  # the early finishers were frozen
    for b in range(3):
        one = sb.fit(Phis[b], ys[b], hp)
        np.testing.assert_allclose(batch.state.gamma[b], one.state.gamma, rtol=1e-9, atol=1e-12)
        assert int(batch.n_iter[b]) == int(one.n_iter)


def test_bad_input_is_refused():
    X, y = _sinc(10)
    Phi = sb.design(X, gamma=0.1)
    with pytest.raises(ValueError, match="non-finite"):
        sb.fit(Phi, np.where(np.arange(10) == 3, np.nan, y))
    with pytest.raises(ValueError, match="non-finite"):
        sb.fit(np.asarray(Phi).copy() * np.inf, y)
    with pytest.raises(ValueError, match="rows"):
        sb.fit(Phi, y[:-1])
    with pytest.raises(ValueError, match="two samples"):
        sb.fit(Phi[:1], y[:1])
    with pytest.raises(ValueError, match="prior"):
        sb.fit(Phi, y, sb.Hyperparams(prior="ard"))
    with pytest.raises(ValueError, match="kernel"):
        sb.design(X, kernel="laplace")
    with pytest.raises(ValueError, match="Phi must be a real numeric array; got dtype <U"):
        sb.fit(np.asarray(Phi).astype(str), y)
    with pytest.raises(ValueError, match="y must be a real numeric array; got dtype complex"):
        sb.fit(Phi, y + 0j)
    with pytest.raises(ValueError, match="no basis functions"):  # argmax of an empty sequence before
        sb.fit(np.zeros((10, 0)), y)


def test_an_integer_basis_fits_as_its_float_values():
    X, y = _sinc(20)
    counts = np.random.default_rng(2).integers(0, 4, size=(20, 6))
    as_int, as_float = sb.fit(counts, y), sb.fit(counts.astype(float), y)
    np.testing.assert_array_equal(np.asarray(as_int.state.gamma), np.asarray(as_float.state.gamma))
    assert int(as_int.n_iter) == int(as_float.n_iter)


@pytest.mark.parametrize("prior", ["rvm", "flap_sigma", "bls"])
def test_degenerate_problems_fit_without_nan(prior):
    """Constant y, duplicated inputs, a low-rank basis and noise-free data: finite fits,
    and the noise estimate stays at or above its floor var(y) / max_precision."""
    rng = np.random.default_rng(7)
    x = rng.uniform(-5, 5, 30)
    hp = sb.Hyperparams(prior=prior)
    cases = {
        "constant": (sb.design(x[:, None], gamma=0.3, bias=True), np.full(30, 2.5)),
        "duplicates": (sb.design(np.repeat(x[:10], 3)[:, None], gamma=0.3), np.repeat(np.sin(x[:10]), 3)),
        "low rank": (sb.design(x[:, None], gamma=1e-4), np.sin(x)),
        "noise free": (sb.design(x[:, None], gamma=0.3), np.sinc(x / np.pi)),
    }
    for name, (Phi, y) in cases.items():
        r = sb.fit(Phi, y, hp)
        data = sb.as_data(Phi, y)
        assert np.isfinite(float(r.objective)), name
        assert np.all(np.isfinite(np.asarray(r.state.mu))), name
        assert 1 / float(r.state.beta) >= float(data.y_var) / 1e6 * (1 - 1e-9), name
        mean, _ = sb.predict(r.state, Phi, data.scale)
        assert np.all(np.isfinite(np.asarray(mean))), name


def test_float32_fit_is_close_to_float64():
    X, y = _sinc(40, 0.1, seed=1)
    r64 = sb.fit(sb.design(X, gamma=0.1), y)
    r32 = sb.fit(sb.design(X.astype(np.float32), gamma=0.1), y.astype(np.float32))
    assert r32.state.mu.dtype == jnp.float32
    d64, d32 = sb.as_data(sb.design(X, gamma=0.1), y), sb.as_data(sb.design(X.astype(np.float32), gamma=0.1), y.astype(np.float32))
    Xt = np.linspace(-10, 10, 50)[:, None]
    m64, _ = sb.predict(r64.state, sb.design(Xt, X, gamma=0.1), d64.scale)
    m32, _ = sb.predict(r32.state, sb.design(Xt.astype(np.float32), X.astype(np.float32), gamma=0.1), d32.scale)
    assert np.sqrt(np.mean((np.asarray(m32) - np.asarray(m64)) ** 2)) < 0.01


@pytest.mark.parametrize("prior", ["rvm", "flap", "flap_sigma", "bls"])
def test_float32_fits_a_wide_kernel_as_well_as_float64(prior):
    """A wide RBF kernel on 2-D inputs puts bases nearly in the span of the active ones.
    There S and Q, and S / (1 - gamma S) of a well-determined basis, are differences of
    nearly equal numbers: in float32 they once came out 100% wrong, and the fits chased
    gains that were rounding errors (an RVM error against the truth 270 times float64's,
    FLAP's and BLS's 3 times). Each float32 fit must now be within twice float64's."""
    for seed in (1, 9, 11):
        rng = np.random.default_rng(seed)
        X = rng.uniform(-2, 2, size=(60, 2))
        y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(60)
        truth = np.sin(2 * X[:, 0])
        (X, _), (y, c) = unit_scale(X, exact=True), unit_scale(y, exact=True)  # as the estimators do
        truth = truth / c
        rmse = {}
        for dtype in (np.float64, np.float32):
            Phi = sb.design(X.astype(dtype), gamma=float(1 / (2 * np.var(X))), bias=True)
            r = sb.fit(Phi, y.astype(dtype), sb.Hyperparams(prior=prior))
            mean, _ = sb.predict(r.state, Phi, sb.as_data(Phi, y.astype(dtype)).scale)
            rmse[dtype] = np.sqrt(np.mean((np.asarray(mean, np.float64) - truth) ** 2))
        assert rmse[np.float32] <= 2 * rmse[np.float64] + 0.02, (seed, rmse)


def test_float32_leave_one_out_statistics_of_active_bases_are_accurate():
    """s_m, q_m of the active bases in float32 agree with float64 along the same moves."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.standard_normal(60)
    (X, _), (y, _) = unit_scale(X, exact=True), unit_scale(y, exact=True)
    hp = sb.Hyperparams(prior="rvm")
    move = jax.jit(lambda state, data: sb.move(state, data, hp)[0])  # compiled, as in a fit
    runs = {}
    for dtype in (np.float64, np.float32):
        data = sb.as_data(sb.design(X.astype(dtype), gamma=float(1 / (2 * np.var(X))), bias=True), y.astype(dtype))
        state, seen = sb.init(data, hp), []
        for _ in range(6):
            state = move(state, data)
            s, q = sb.leave_one_out(state)
            seen.append((np.asarray(state.gamma) > 0, np.asarray(s, np.float64), np.asarray(q, np.float64)))
        runs[dtype] = seen
    for (active, s64, q64), (active32, s32, q32) in zip(runs[np.float64], runs[np.float32]):
        np.testing.assert_array_equal(active, active32)  # the same moves
        np.testing.assert_allclose(s32[active], s64[active], rtol=1e-3)
        np.testing.assert_allclose(q32[active], q64[active], rtol=1e-3, atol=1e-3 * np.max(np.abs(q64[active])))


def test_rvm_recovers_sinc_with_few_relevance_vectors():
    """Tipping's sinc at noise 0.1: a smooth fit from a handful of relevance vectors and
    the noise level recovered."""
    X, y = _sinc(100, 0.1, seed=11)
    r = sb.fit(sb.design(X, gamma=0.1), y)
    Xt = np.linspace(-10, 10, 1000)[:, None]
    mean, _ = sb.predict(r.state, sb.design(Xt, X, gamma=0.1), sb.as_data(sb.design(X, gamma=0.1), y).scale)
    rmse = np.sqrt(np.mean((np.asarray(mean) - np.sinc(Xt[:, 0] / np.pi)) ** 2))
    assert rmse < 0.06 and 3 <= int(sb.relevance(r.state).sum()) <= 12
    assert 0.07 < 1 / np.sqrt(float(r.state.beta)) < 0.13


def test_fit_keeps_no_copy_of_the_basis():
    """The engine works with the unit columns without storing them: XLA's temporaries for a
    fit on a 600 x 600 kernel design stay well under one copy of the design."""
    X, y = _sinc(600, 0.1, seed=5)
    Phi = sb.design(X, gamma=0.1)
    hp = sb.Hyperparams(prior="rvm", max_basis=32)
    compiled = jax.jit(lambda P, t: sb.fit(P, t, hp, throw=False).state.mu).lower(Phi, y).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 0.25 * Phi.nbytes

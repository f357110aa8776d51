"""SBMoE: the factorised E-step, the LP, Bartlett sampling, the closed-form updates
against the ELBO, the KL terms, recovery of a bimodal conditional, batching."""

from __future__ import annotations

import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from scipy.optimize import linprog

from bayeskit.core import sampling
from bayeskit.datasets import sbmoe_synthetic_1d
from bayeskit.density import sbmoe
from bayeskit.density.sbmoe.model import LP_SENSES

# ----------------------------------------------------------------------------- E-step


def naive_omega(A, B, G):
    """The N x N x C responsibilities, normalised per target n (the 3-tensor)."""
    T = A[:, None, :] + B[None, :, :] + G[:, :, None]
    log_z = np.logaddexp.reduce(T.reshape(len(A), -1), axis=1)
    return np.exp(T - log_z[:, None, None]), log_z


def naive_reductions(A, B, G, X):
    w, log_z = naive_omega(A, B, G)
    Omega = w.sum(2)
    diff = X[:, None, :] - X[None, :, :]
    s_omega = np.einsum("nm,nmi,nmj->ij", Omega, diff, diff)
    logs = np.where(w > 0, np.log(np.where(w > 0, w, 1.0)), 0.0)
    return dict(log_z=log_z, a=w.sum(1), b=w.sum(0), s_omega=s_omega, entropy=-np.sum(w * logs))


def random_problem(rng, n=40, c=5, dx=3, scale=1.0, centre=0.0):
    A = centre + scale * rng.normal(size=(n, c))
    B = scale * rng.normal(size=(n, c))
    X = rng.normal(size=(n, dx))
    L = np.linalg.cholesky(np.eye(dx) + 0.3 * np.ones((dx, dx)))
    G = np.asarray(sbmoe.gate_logits(jnp.asarray(X), jnp.asarray(L), 2.0))
    return A, B, G, X


@pytest.mark.parametrize("fallback", [0, 7])
@pytest.mark.parametrize("scale", [1.0, 10.0, 60.0])
def test_factorised_estep_equals_naive_tensor(rng, scale, fallback):
    A, B, G, X = random_problem(rng, scale=scale, centre=-20.0)
    got = sbmoe.estep(jnp.asarray(A), jnp.asarray(B), jnp.asarray(G), jnp.asarray(X), fallback)
    want = naive_reductions(A, B, G, X)
    for name, value in want.items():
        np.testing.assert_allclose(getattr(got, name), value, rtol=1e-9, atol=1e-9 * (1 + np.abs(value).max()), err_msg=name)


def test_estep_float32_underflow_is_recomputed_in_log_space(rng):
    """When target and neighbour favour different experts and share only a mediocre one,
    every float32 product of a row underflows; the log-space fallback rows keep every
    normaliser finite and correct."""
    n = 30
    A = np.array([0.0, -120.0, -60.0]) + rng.normal(size=(n, 3))
    B = np.array([-120.0, 0.0, -60.0]) + rng.normal(size=(n, 3))
    _, _, G, X = random_problem(rng, n=n, c=3)
    f32 = lambda a: jnp.asarray(a, jnp.float32)
    fast = sbmoe.estep(f32(A), f32(B), f32(G), f32(X), 0)
    got = sbmoe.estep(f32(A), f32(B), f32(G), f32(X), 30)
    want = naive_reductions(A, B, G, X)
    assert not np.all(np.isfinite(fast.log_z)), "the test needs a case where the plain products underflow"
    np.testing.assert_allclose(got.log_z, want["log_z"], rtol=1e-5)
    np.testing.assert_allclose(got.a, want["a"], atol=1e-4)
    np.testing.assert_allclose(got.b, want["b"], atol=1e-4)


def test_estep_is_the_optimum_of_its_elbo_part(rng):
    """omega maximises T1 + T2(Omega) + H(omega) = sum_nmc omega (A + B + G) + H; the value
    at the optimum is sum_n log Z_n, and any other normalised omega is lower."""
    A, B, G, X = random_problem(rng, n=12, c=4)
    w, log_z = naive_omega(A, B, G)
    e = sbmoe.estep(*(jnp.asarray(v) for v in (A, B, G, X)), 0)
    Gf = np.where(np.isfinite(G), G, 0.0)
    value = lambda w: np.sum(w * (A[:, None, :] + B[None, :, :] + Gf[:, :, None])) - np.sum(np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0))
    T1 = np.sum(np.asarray(e.a) * A) + np.sum(np.asarray(e.b) * B)
    assert T1 + np.sum(w.sum(2) * Gf) + float(e.entropy) == pytest.approx(np.sum(log_z), rel=1e-12)
    assert value(w) == pytest.approx(np.sum(log_z), rel=1e-12)
    mask = ~np.eye(len(A), dtype=bool)[:, :, None]
    for _ in range(10):
        other = w * np.exp(0.3 * rng.normal(size=w.shape)) * mask
        other /= other.sum(axis=(1, 2), keepdims=True)
        assert value(other) < value(w)


# ----------------------------------------------------------------------------- LP (8)


@pytest.mark.parametrize("sense", ["min", "max"])
def test_sort_and_fill_solves_the_lp(rng, sense):
    n, c = 30, 7
    A = 5 * rng.normal(size=(n, c))
    caps = rng.uniform(0.0, 0.6, size=(n, c))
    caps[:, 0] += 1.0 / c  # feasible: caps sum above 1
    caps[3] = np.inf  # a point that is nobody's neighbour
    s = np.asarray(sbmoe.solve_lp(jnp.asarray(A), jnp.asarray(caps), sense))
    sign = 1 if sense == "min" else -1
    for i in range(n):
        bounds = [(0, None if np.isinf(u) else u) for u in caps[i]]
        ref = linprog(sign * A[i], A_eq=np.ones((1, c)), b_eq=[1.0], bounds=bounds, method="highs")
        assert ref.status == 0
        assert sign * A[i] @ s[i] == pytest.approx(ref.fun, abs=1e-10)
    np.testing.assert_allclose(s.sum(1), 1.0, atol=1e-12)
    assert np.all(s >= 0) and np.all(s <= caps + 1e-12)


# ----------------------------------------------------------------------------- Wishart


def test_bartlett_has_the_wishart_mean_and_variance():
    dim, dof, n = 3, 5.5, 40_000
    L = np.linalg.cholesky(np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]]))
    V = L @ L.T
    A = sbmoe.bartlett(jax.random.key(0), dim, jnp.asarray(dof), n, jnp.float64)
    M = jnp.asarray(L) @ A
    W = np.asarray(M @ jnp.swapaxes(M, -1, -2))
    mean, var = dof * V, dof * (V**2 + np.outer(np.diag(V), np.diag(V)))
    se_mean = np.sqrt(var / n)
    assert np.all(np.abs(W.mean(0) - mean) < 5 * se_mean)
    # variance of the sample variance: 4 standard errors from the sample fourth moments
    dev = W - W.mean(0)
    se_var = np.sqrt(np.var(dev**2, axis=0) / n)
    assert np.all(np.abs(W.var(0) - var) < 5 * se_var)


def test_bartlett_small_dof_float32_has_chi_square_diagonal():
    """At dof 3.05 in 4 dimensions the last diagonal is chi^2(0.05): most of its mass is
    below 1e-10, where a plain gamma sampler in float32 returns zeros and NaN gradients;
    the log-gamma route stays finite and keeps the chi-square means."""
    n, dof = 200_000, 3.05
    A = sbmoe.bartlett(jax.random.key(1), 4, jnp.asarray(dof, jnp.float32), n, jnp.float32)
    sq = np.asarray(jnp.diagonal(A, axis1=-2, axis2=-1), np.float64) ** 2
    assert np.all(np.isfinite(sq)) and np.all(sq >= 0)
    k = dof - np.arange(4)
    np.testing.assert_array_less(np.abs(sq.mean(0) - k), 5 * np.sqrt(2 * k / n))


def test_pathwise_gradient_of_the_gate_loss_matches_finite_differences(rng):
    n, dx = 25, 3
    X = jnp.asarray(rng.normal(size=(n, dx)))
    hp = sbmoe.Hyperparams(n_experts=2)
    priors = hp.priors(dx, 1, jnp.float64)
    s_omega = jnp.asarray(np.cov(rng.normal(size=(dx, 50))))
    params = sbmoe.GateParams(lower=jnp.asarray(0.2 * rng.normal(size=(dx, dx))), log_diag=jnp.asarray(0.1 * rng.normal(size=dx)))
    key = jax.random.key(3)  # common random numbers: the loss is a smooth function of L
    loss = jax.jit(lambda p: sbmoe.gate_loss(p, key, X, s_omega, priors, 3, None))
    grad = jax.grad(loss)(params)
    h = 1e-6
    for field in ("lower", "log_diag"):
        g = np.asarray(getattr(grad, field))
        base = np.asarray(getattr(params, field))
        for idx in [(1, 0), (2, 1)] if field == "lower" else [(0,), (2,)]:
            e = np.zeros_like(base)
            e[idx] = h
            plus = eqx.tree_at(lambda p: getattr(p, field), params, jnp.asarray(base + e))
            minus = eqx.tree_at(lambda p: getattr(p, field), params, jnp.asarray(base - e))
            fd = (loss(plus) - loss(minus)) / (2 * h)
            assert g[idx] == pytest.approx(float(fd), rel=1e-5, abs=1e-8)


def test_chunked_gate_normaliser_equals_the_plain_one(rng):
    X = jnp.asarray(rng.normal(size=(37, 3)))
    M = jnp.asarray(np.linalg.cholesky(np.eye(3) + 0.2))
    from bayeskit.density.sbmoe.gate import gate_log_normaliser

    full = gate_log_normaliser(X, M, None)
    assert float(gate_log_normaliser(X, M, 8)) == pytest.approx(float(full), rel=1e-12)
    g_full = jax.grad(lambda M: gate_log_normaliser(X, M, None))(M)
    g_chunk = jax.grad(lambda M: gate_log_normaliser(X, M, 8))(M)
    np.testing.assert_allclose(g_chunk, g_full, rtol=1e-10)


def test_kl_wishart_against_monte_carlo():
    V1, n1 = np.array([[1.5, 0.4], [0.4, 0.8]]), 6.0
    V0, n0 = np.array([[1.0, -0.2], [-0.2, 2.0]]), 4.0
    W = stats.wishart(df=n1, scale=V1).rvs(size=50_000, random_state=0)
    log_ratio = stats.wishart(df=n1, scale=V1).logpdf(W.transpose(1, 2, 0)) - stats.wishart(df=n0, scale=V0).logpdf(W.transpose(1, 2, 0))
    kl = float(sbmoe.kl_wishart(jnp.asarray(V1), jnp.asarray(n1), jnp.asarray(V0), jnp.asarray(n0)))
    assert kl == pytest.approx(log_ratio.mean(), abs=4 * log_ratio.std() / np.sqrt(len(W)))


def _niw_draws(m, kappa, psi, nu, size, seed):
    Sigma = stats.invwishart(df=nu, scale=psi).rvs(size=size, random_state=seed)
    z = np.random.default_rng(seed).normal(size=(size, len(m)))
    mu = m + np.einsum("nij,nj->ni", np.linalg.cholesky(Sigma / kappa), z)
    return mu, Sigma


def _mvn_logpdf(x, mean, cov):
    """Row-wise log N(x_i | mean_i, cov_i)."""
    diff = x - mean
    _, logdet = np.linalg.slogdet(cov)
    quad = np.einsum("ni,ni->n", diff, np.linalg.solve(cov, diff[..., None])[..., 0])
    return -0.5 * (quad + logdet + x.shape[-1] * np.log(2 * np.pi))


def _niw_logpdf(mu, Sigma, m, kappa, psi, nu):
    return stats.invwishart(df=nu, scale=psi).logpdf(Sigma.transpose(1, 2, 0)) + _mvn_logpdf(mu, m, Sigma / kappa)


def test_kl_experts_and_expected_loglik_against_monte_carlo():
    dy, size = 2, 20_000
    m, kappa, psi, nu = np.array([0.3, -0.5]), 3.0, np.array([[0.6, 0.1], [0.1, 0.4]]), 7.0
    prior = sbmoe.Hyperparams(n_experts=1, mu0=np.array([0.1, 0.2]), kappa0=0.5, nu0=4.0, sigma0=np.array([[0.5, 0.0], [0.0, 0.3]]))
    priors = prior.priors(3, dy, jnp.float64)
    experts = sbmoe.Experts(m=jnp.asarray(m[None]), kappa=jnp.asarray([kappa]), nu=jnp.asarray([nu]), psi=jnp.asarray(psi[None]))
    mu, Sigma = _niw_draws(m, kappa, psi, nu, size, 0)
    log_ratio = _niw_logpdf(mu, Sigma, m, kappa, psi, nu) - _niw_logpdf(mu, Sigma, np.array([0.1, 0.2]), 0.5, np.array([[0.5, 0.0], [0.0, 0.3]]), 4.0)
    kl = float(sbmoe.kl_experts(experts, priors))
    assert kl == pytest.approx(log_ratio.mean(), abs=4 * log_ratio.std() / np.sqrt(size))
    y = np.array([[0.1, 0.0], [1.0, -1.0]])
    A = np.asarray(sbmoe.expected_loglik(experts, jnp.asarray(y)))[:, 0]
    for i in range(2):
        ll = _mvn_logpdf(np.broadcast_to(y[i], mu.shape), mu, Sigma)
        assert A[i] == pytest.approx(ll.mean(), abs=4 * ll.std() / np.sqrt(len(ll)))


def test_kl_gate_is_zero_at_the_prior_and_positive_elsewhere():
    priors = sbmoe.Hyperparams.paper(n_experts=1).priors(3, 1, jnp.float64)
    assert float(priors.eta_q) == float(priors.eta0)
    L0 = jnp.linalg.cholesky(jnp.linalg.inv(priors.lambda0_inv))
    assert float(sbmoe.kl_gate(L0, priors)) == pytest.approx(0.0, abs=1e-12)
    assert float(sbmoe.kl_gate(1.3 * L0, priors)) > 0
    V0 = jnp.linalg.inv(priors.lambda0_inv)
    L1 = 1.3 * L0
    assert float(sbmoe.kl_gate(L1, priors)) == pytest.approx(float(sbmoe.kl_wishart(L1 @ L1.T, priors.eta0, V0, priors.eta0)), rel=1e-10)


def test_kl_gate_with_its_own_degrees_of_freedom_against_the_closed_form():
    """q(Lambda) = W(L L', eta_q) against W(Lambda0, eta0), eta_q != eta0: the L-dependent part is
    -eta0 log det L + eta_q/2 tr(Lambda0^-1 L L'), and the initial factor has the prior's mean."""
    hp = sbmoe.Hyperparams(n_experts=1, eta_q=40.0, lambda0=3.0)
    priors = hp.priors(2, 1, jnp.float64)
    X, Y = sbmoe_synthetic_1d(jax.random.key(0), 20)
    state = sbmoe.init(jax.random.key(0), sbmoe.prepare(X, Y), priors, hp, sbmoe.DEFAULT_OPTIMIZER, jnp.zeros(20, jnp.int32))
    L0 = state.gate.L
    np.testing.assert_allclose(40.0 * L0 @ L0.T, 3.0 * np.eye(2), rtol=1e-12)
    part = lambda L: -4.0 * jnp.sum(jnp.log(jnp.diagonal(L))) + 20.0 * jnp.sum(L * (priors.lambda0_inv @ L))
    L1 = jnp.array([[0.4, 0.0], [0.1, 0.2]])
    assert float(sbmoe.kl_gate(L1, priors) - sbmoe.kl_gate(L0, priors)) == pytest.approx(float(part(L1) - part(L0)), rel=1e-10)


def test_gate_loss_is_minus_the_l_dependent_part_of_the_elbo(rng):
    """N F(L) + [gate terms of the ELBO] does not depend on L, with the same Monte Carlo draws."""
    hp = sbmoe.Hyperparams(n_experts=2, eta_q=60.0)
    X = jnp.asarray(rng.normal(size=(30, 2)))
    priors = hp.priors(2, 1, jnp.float64)
    M = rng.normal(size=(2, 2))
    s_omega = jnp.asarray(M @ M.T)
    key = jax.random.key(3)

    def total(L):
        params = sbmoe.GateParams.from_factor(L)
        elbo_part = (-0.5 * priors.eta_q * jnp.sum(L * (s_omega @ L)) - sbmoe.kl_gate(L, priors)
                     - sbmoe.gate.expected_log_normaliser(key, X, L, priors.eta_q, 3))
        return float(30 * sbmoe.gate_loss(params, key, X, s_omega, priors, 3, None) + elbo_part)

    values = [total(jnp.array([[a, 0.0], [b, c]])) for a, b, c in ((0.1, 0.0, 0.1), (0.3, -0.05, 0.2), (0.05, 0.02, 0.4))]
    np.testing.assert_allclose(values, values[0], rtol=1e-9)


# ----------------------------------------------------------------------------- updates and ELBO


@pytest.fixture(scope="module")
def small_fit():
    X, Y = sbmoe_synthetic_1d(jax.random.key(0), 150)
    hp = sbmoe.Hyperparams(n_experts=6, gate_steps=10)
    result = sbmoe.fit(jax.random.key(1), X, Y, hp, max_iter=6)
    return X, Y, hp, result


def test_niw_update_maximises_its_part_of_the_elbo(small_fit, rng):
    """For fixed weights r >= 0, Proposition 2 maximises sum r A - sum KL over the NIW
    parameters: perturbing any of them lowers it."""
    X, Y, hp, result = small_fit
    state = result.state
    priors = hp.priors(2, 1, jnp.float64)
    r = jnp.maximum(state.a + state.b - state.s * jnp.sum(state.b, 1, keepdims=True), 0.0)
    part = lambda e: float(jnp.sum(r * sbmoe.expected_loglik(e, state.data.Y)) - sbmoe.kl_experts(e, priors))
    best = sbmoe.niw_update(r, state.data.Y, priors)
    value = part(best)
    for field, scale in (("m", 0.05), ("kappa", 0.05), ("nu", 0.05), ("psi", 0.05)):
        for _ in range(3):
            current = getattr(best, field)
            noise = jnp.asarray(rng.normal(size=current.shape))
            if field == "psi":
                noise = noise + jnp.swapaxes(noise, -1, -2)
                new = current + scale * noise * jnp.abs(current)
            elif field == "m":
                new = current + scale * noise
            else:
                new = current * jnp.exp(scale * noise)
            assert part(eqx.tree_at(lambda e: getattr(e, field), best, new)) < value


def test_monitor_identity_after_the_estep(small_fit):
    """With omega from (A, B, G): T1 + T2(Omega) + H(omega) = sum_n log Z_n."""
    _, _, hp, result = small_fit
    state = result.state
    priors = hp.priors(2, 1, jnp.float64)
    A = sbmoe.expected_loglik(state.experts, state.data.Y)
    s = jax.nn.softmax(A, axis=1)
    B = sbmoe.linearised_b(A, s, False)
    L = state.gate.L
    e = sbmoe.estep(A, B, sbmoe.gate_logits(state.data.X, L, priors.eta_q), state.data.X)
    t1 = jnp.sum(e.a * A) + jnp.sum(e.b * B)
    t2 = -0.5 * priors.eta_q * jnp.sum(L * (e.s_omega @ L))
    assert float(t1 + t2 + e.entropy) == pytest.approx(float(jnp.sum(e.log_z)), rel=1e-10)


def test_gate_step_lowers_the_gate_objective(small_fit):
    _, _, hp, result = small_fit
    state = result.state
    priors = hp.priors(2, 1, jnp.float64)
    s_omega = 3.0 * state.s_omega  # move the optimum away from the current L
    F = lambda p: float(sbmoe.gate_loss(p, jax.random.key(7), state.data.X, s_omega, priors, 64, None))
    params, _ = sbmoe.gate.stochastic_update(
        jax.random.key(8), state.gate, sbmoe.DEFAULT_OPTIMIZER.init(state.gate), state.data.X, s_omega, priors,
        sbmoe.DEFAULT_OPTIMIZER, steps=30, n_samples=2, chunk=None,
    )
    assert F(params) < F(state.gate)


def test_elbo_trace_trends_up_and_is_finite(small_fit):
    _, _, hp, result = small_fit
    trace = np.asarray(result.trace)
    assert np.all(np.isfinite(trace))
    assert trace[-1] > trace[0]
    terms = sbmoe.elbo_terms(result.state, hp.priors(2, 1, jnp.float64), hp)
    assert sum(float(v) for v in terms.values()) == pytest.approx(float(trace[-1]), rel=1e-10)


def test_new_hyperparameter_values_compile_no_new_predictive_or_bound(small_fit):
    """The predictive and the ELBO's terms trace the continuous hyperparameters: another
    eta_q gives another predictive and bound from the same programs; the predictive is
    shared by fits whose other settings differ."""
    from test_contract import count_compilations

    X, _, _, result = small_fit
    outputs = []
    for eta_q in (50.0, 80.0):
        hp = sbmoe.Hyperparams(n_experts=6, gate_steps=10, eta_q=eta_q)
        with count_compilations() as seen:
            mix = sbmoe.predictive(jax.random.key(3), result.state, X[:5], hp, n_gate=4, n_draws=3)
            bound = sbmoe.elbo_terms(result.state, hp.priors(2, 1, jnp.float64), hp)
        outputs.append((np.asarray(mix.log_weights), float(bound["kl_gate"])))
    assert seen["compiles"] == 0
    assert not np.allclose(outputs[0][0], outputs[1][0]) and outputs[0][1] != outputs[1][1]
    with count_compilations() as seen:  # settings the predictive does not use
        sbmoe.predictive(jax.random.key(3), result.state, X[:5], sbmoe.Hyperparams.paper(n_experts=6, eta_q=80.0), n_gate=4, n_draws=3)
    assert seen["compiles"] == 0


def test_settings_that_differ_in_values_or_defaults_share_one_compiled_fit():
    """The paper's defaults (eta_q, nu0, lambda0 left None) and the library's values of the
    same static settings run one compiled sweep, and so do the three senses of the LP (a
    value of the priors); only the small program that resolves the priors is new, and the
    fits differ as their priors and senses do."""
    from test_contract import count_compilations

    X, Y = sbmoe_synthetic_1d(jax.random.key(4), 60)
    fit = lambda hp: sbmoe.fit(jax.random.key(5), X, Y, hp, max_iter=3)
    library = fit(sbmoe.Hyperparams(n_experts=3, gate_steps=2))
    with count_compilations() as seen:
        paper = {sense: fit(sbmoe.Hyperparams.paper(n_experts=3, gate_steps=2, lp_sense=sense)) for sense in LP_SENSES}
    assert not any("_fit" in name for name in seen["compiled"]), seen["compiled"]
    finals = [float(library.trace[-1])] + [float(r.trace[-1]) for r in paper.values()]
    assert len(set(finals)) == len(finals), finals


def test_the_signed_lp_fills_as_each_sense():
    """Maximising over -A fills the caps in the order that minimising over A does: the signed
    LP of the compiled sweep, with the sign the priors give each sense, equals ``solve_lp``
    of that sense exactly, ties included."""
    from bayeskit.density.sbmoe.inference import signed_lp

    rng = np.random.default_rng(8)
    A = np.round(rng.normal(size=(40, 6)), 1)  # rounded: ties within rows
    caps = np.where(rng.random((40, 6)) < 0.2, np.inf, rng.uniform(0.05, 0.6, (40, 6)))
    for sense in ("max", "min"):
        sign = sbmoe.Hyperparams(n_experts=6, lp_sense=sense).priors(1, 1, jnp.float64).lp_sign
        np.testing.assert_array_equal(signed_lp(jnp.asarray(A), jnp.asarray(caps), sign),
                                      sbmoe.solve_lp(jnp.asarray(A), jnp.asarray(caps), sense))


def test_batched_bartlett_variates_are_each_keys_own():
    """One sampler for a batch of keys draws what each key's own Bartlett factors use, also
    when more rows are drawn than one key needs (the gate's and the bound's draws share it)."""
    keys = jax.random.split(jax.random.key(9), 3)
    log_gamma = sbmoe.gate.log_gammas(keys, 3, 4.5, 5, jnp.float64)
    factors = sbmoe.gate.bartlett_factors(keys, 3, 4.5, 5, jnp.float64)
    for b, m in ((0, 5), (1, 2), (2, 4)):
        own = sbmoe.bartlett(keys[b], 3, 4.5, m, jnp.float64)
        np.testing.assert_array_equal(sbmoe.bartlett(keys[b], 3, 4.5, m, jnp.float64, log_gamma[b, :m]), own)
        np.testing.assert_array_equal(factors[b, :m], own)
    assert not np.allclose(log_gamma[0], log_gamma[1])


def _own_log_gamma(key, dim, dof, n):
    """What a Bartlett factor of ``key`` draws alone: a (n, dim) log-Gamma draw of shapes (dof - i) / 2."""
    shape = (dof - np.arange(dim)) / 2
    return sampling.loggamma(jax.random.split(key)[0], jnp.asarray(shape), (n, dim), jnp.float64)


def test_grouped_bartlett_variates_are_each_keys_own():
    """One sampler for groups of keys of other dimensions, degrees of freedom and draw
    counts (the predictive's gate and its experts) draws what each key draws alone."""
    gate_key, expert_keys = jax.random.key(4)[None], jax.random.split(jax.random.key(5), 3)
    nus = np.array([4.0, 7.5, 30.0])
    gate, experts = sbmoe.gate.log_gamma_groups([(gate_key, 3, 1000.0, 6), (expert_keys, 2, jnp.asarray(nus), 4)], jnp.float64)
    assert gate.shape == (1, 6, 3) and experts.shape == (3, 4, 2)
    # The same uniforms and the same acceptances; XLA may round a vectorised loop of another
    # length one unit in the last place differently, so the values agree to 1e-14, not bitwise.
    np.testing.assert_allclose(gate[0], _own_log_gamma(gate_key[0], 3, 1000.0, 6), rtol=1e-14)
    for b in range(3):
        np.testing.assert_allclose(experts[b], _own_log_gamma(expert_keys[b], 2, nus[b], 4), rtol=1e-14)
    raw = jax.random.split(jax.random.PRNGKey(6), 3)  # old-style uint32 keys of shape (3, 2)
    assert sbmoe.gate.log_gammas(raw, 3, 5.0, 4, jnp.float64).shape == (3, 4, 3)


def test_projection_gate_runs_and_counts_floors():
    X, Y = sbmoe_synthetic_1d(jax.random.key(12), 120)
    hp = sbmoe.Hyperparams(n_experts=5, gate="projection")
    result = sbmoe.fit(jax.random.key(13), X, Y, hp, max_iter=5)
    assert np.all(np.isfinite(result.trace))
    L = np.asarray(result.state.gate.L)
    assert np.all(np.linalg.eigvalsh(L @ L.T) > 0)
    assert 0 <= int(result.state.floored) <= 5


# ----------------------------------------------------------------------------- recovery


def bimodal(key, n):
    """y | x = +-(1 + x) + 0.1 noise with equal probability: two modes at every x."""
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.uniform(k1, (n, 1), minval=0.0, maxval=1.0)
    sign = 2.0 * jax.random.bernoulli(k2, 0.5, (n, 1)) - 1
    return x, sign * (1 + x) + 0.1 * jax.random.normal(k3, (n, 1))


@pytest.fixture(scope="module")
def bimodal_fit():
    X, Y = bimodal(jax.random.key(20), 300)
    hp = sbmoe.Hyperparams(n_experts=8, gate_steps=20)
    return hp, sbmoe.fit(jax.random.key(21), X, Y, hp, max_iter=8)


def test_predictive_recovers_both_modes(bimodal_fit):
    hp, result = bimodal_fit
    x_test = jnp.array([[0.2], [0.8]])
    mix = sbmoe.predictive(jax.random.key(22), result.state, x_test, hp, n_gate=30, n_draws=30)
    grid = jnp.linspace(-3, 3, 601)
    dens = np.exp(np.asarray(mix.log_prob(jnp.broadcast_to(grid[:, None, None], (601, 2, 1)))))
    for j, x in enumerate([0.2, 0.8]):
        for mode in (1 + x, -(1 + x)):
            near = np.abs(np.asarray(grid) - mode) < 0.15
            valley = np.abs(np.asarray(grid)) < 0.3
            assert dens[near, j].max() > 5 * dens[valley, j].max()
    assert np.sum(dens[:, 0]) * 0.01 == pytest.approx(1.0, abs=0.02)  # integrates to 1
    samples = np.asarray(mix.sample(jax.random.key(23), 4000))
    assert abs(np.mean(samples[:, 0, 0] > 0) - 0.5) < 0.1


def test_mixture_moments_and_quantiles_agree_with_samples(bimodal_fit):
    hp, result = bimodal_fit
    mix = sbmoe.predictive(jax.random.key(32), result.state, jnp.array([[0.3], [0.6]]), hp, n_gate=30, n_draws=30)
    draws = np.asarray(mix.sample(jax.random.key(33), 50_000))
    np.testing.assert_allclose(mix.mean, draws.mean(0), atol=0.03)
    np.testing.assert_allclose(mix.covariance[:, 0, 0], draws.var(0)[:, 0], rtol=0.05)
    q = np.asarray(mix.quantile(0.8))
    np.testing.assert_allclose(np.asarray(mix.marginal_cdf(jnp.asarray(q))), 0.8, atol=1e-6)
    np.testing.assert_allclose(np.mean(draws[:, :, 0] <= q, axis=0), 0.8, atol=0.01)


def test_vmap_over_keys_equals_separate_fits(small_fit):
    X, Y, hp, first = small_fit
    labels = sbmoe.agglomerative_labels(np.asarray(Y), hp.n_experts)
    keys = jnp.stack([jax.random.key(1), jax.random.key(2)])
    batched = jax.vmap(lambda k: sbmoe.fit(k, X, Y, hp, max_iter=6, init_labels=labels, throw=False))(keys)
    second = sbmoe.fit(keys[1], X, Y, hp, max_iter=6, init_labels=labels)
    for i, single in enumerate([first, second]):
        np.testing.assert_allclose(batched.trace[i], single.trace, rtol=1e-9)
        np.testing.assert_allclose(batched.state.experts.m[i], single.state.experts.m, rtol=1e-9, atol=1e-12)


def test_kmeans_init_differs_per_key():
    X, Y = sbmoe_synthetic_1d(jax.random.key(42), 80)
    hp = sbmoe.Hyperparams(n_experts=4, gate_steps=3, init="kmeans++")
    fits = [sbmoe.fit(k, X, Y, hp, max_iter=2) for k in jax.random.split(jax.random.key(43), 2)]
    assert all(np.all(np.isfinite(f.trace)) for f in fits)
    assert not np.allclose(np.sort(fits[0].state.experts.m, 0), np.sort(fits[1].state.experts.m, 0))


def test_agglomerative_init_on_traced_data_asks_for_labels():
    X, Y = sbmoe_synthetic_1d(jax.random.key(44), 40)
    stacked = jnp.stack([Y, Y + 1.0])
    with pytest.raises(ValueError, match="init_labels"):
        jax.vmap(lambda y: sbmoe.fit(jax.random.key(0), X, y, sbmoe.Hyperparams(n_experts=3), max_iter=1, throw=False))(stacked)


# ----------------------------------------------------------------------------- input


@pytest.mark.parametrize(
    "X, Y, hp, match",
    [
        (np.array([[np.nan, 1.0], [1.0, 2.0], [0.0, 1.0]]), np.zeros(3), {}, "non-finite"),
        (np.ones((3, 2)), np.array([0.0, np.inf, 1.0]), {}, "non-finite"),
        (np.ones((3, 2)), np.zeros(4), {}, "same number of rows"),
        (np.ones((1, 2)), np.zeros(1), {}, "at least 2"),
        (np.ones(3), np.zeros(3), {}, "2-D"),
        (np.ones((3, 2)), np.zeros(3), {"n_experts": 0}, "n_experts"),
        (np.ones((3, 2)), np.zeros(3), {"kappa0": 0.0}, "kappa0"),
        (np.ones((3, 2)), np.zeros(3), {"eta0": 1.0}, "eta0"),
        (np.ones((3, 2)), np.zeros(3), {"nu0": -0.5}, "nu0"),
        (np.ones((3, 2)), np.zeros(3), {"nu0": 1.5}, "expert_width"),
        (np.ones((3, 2)), np.zeros(3), {"expert_width": -0.1}, "expert_width"),
        (np.ones((3, 2)), np.zeros(3), {"eta_q": 0.5}, "eta_q"),
        (np.ones((3, 2)), np.zeros(3), {"sigma0": np.array([[1.0]]) * -1}, "sigma0"),
        (np.ones((3, 2)), np.zeros(3), {"Lambda0": np.array([[1.0, 2.0], [2.0, 1.0]])}, "Lambda0"),
    ],
)
def test_bad_input_is_refused(X, Y, hp, match):
    params = {"n_experts": 2} | hp
    with pytest.raises(ValueError, match=match):
        sbmoe.fit(jax.random.key(0), X, Y, sbmoe.Hyperparams(**params), max_iter=1)


def test_awkward_float32_data_fits_without_nan(rng):
    """Inputs on scales 1e-4 .. 1e5, a constant input column, duplicated inputs and a
    constant output, in float32: finite fit and predictive; inputs never modified."""
    n = 60
    X = (rng.normal(size=(n, 3)) * np.array([1e-4, 1.0, 1e5])).astype(np.float32)
    X[:, 1] = X[0, 1]
    X[1] = X[0]
    Y = np.full((n, 1), 2.5, np.float32)
    X_before, Y_before = X.copy(), Y.copy()
    hp = sbmoe.Hyperparams(n_experts=3, gate_steps=3)
    result = sbmoe.fit(jax.random.key(0), X, Y, hp, max_iter=3)
    assert result.trace.dtype == jnp.float32 and np.all(np.isfinite(result.trace))
    mix = sbmoe.predictive(jax.random.key(1), result.state, X[:4], hp, n_gate=5, n_draws=5)
    assert np.all(np.isfinite(mix.mean)) and np.allclose(mix.mean, 2.5, atol=0.2)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(Y, Y_before)


# ----------------------------------------------------------------------------- the gate localises


def two_regimes(key, n):
    """y | x ~ N(-1.5, 0.25^2) for x < 0.5 and an even mixture of N(0.5, 0.25^2) and
    N(1.5, 0.25^2) above: the true conditional changes abruptly at x = 0.5."""
    k1, k2, k3 = jax.random.split(key, 3)
    x = jax.random.uniform(k1, (n, 1))
    mean = jnp.where(x < 0.5, -1.5, jnp.where(jax.random.bernoulli(k2, 0.5, (n, 1)), 0.5, 1.5))
    return x, mean + 0.25 * jax.random.normal(k3, (n, 1))


def two_regimes_logpdf(x, y):
    norm = lambda y, m: stats.norm(m, 0.25).logpdf(y)
    return norm(y, -1.5) if x < 0.5 else np.logaddexp(norm(y, 0.5), norm(y, 1.5)) - np.log(2)


@pytest.fixture(scope="module")
def two_regime_fit():
    """Started from a broad gate (E[Lambda] = I a priori, about the whole input range)."""
    X, Y = two_regimes(jax.random.key(30), 300)
    hp = sbmoe.Hyperparams(n_experts=8, gate_steps=20, lambda0=1.0)
    return X, Y, hp, sbmoe.fit(jax.random.key(31), X, Y, hp, max_iter=8)


def test_gate_neighbourhood_shrinks_over_sweeps(two_regime_fit):
    _, _, _, result = two_regime_fit
    trail = np.asarray(result.state.neighbourhood)
    assert np.all(np.isfinite(trail)) and trail.shape == (8,)
    assert np.all(np.diff(trail) < 0) and trail[-1] < 0.6 * trail[0], trail


@pytest.mark.parametrize("x", [0.2, 0.8])
def test_predictive_beats_an_input_independent_mixture(two_regime_fit, x):
    """Exact KL(truth || model) at a held-out x, by Monte Carlo over draws of the truth: the
    model with the learned gate against a Gaussian mixture of y alone (same C, scikit-learn)."""
    from sklearn.mixture import GaussianMixture

    _, Y, hp, result = two_regime_fit
    xs, y = map(np.asarray, two_regimes(jax.random.key(32), 20_000))
    y = y[(xs[:, 0] < 0.5) == (x < 0.5)][:3000]
    log_p = two_regimes_logpdf(x, y[:, 0])
    mix = sbmoe.predictive(jax.random.key(33), result.state, jnp.array([[x]]), hp, n_gate=30, n_draws=30)
    log_q = np.asarray(mix.log_prob(jnp.asarray(y)[:, None, :]))[:, 0]
    flat = GaussianMixture(8, random_state=0).fit(np.asarray(Y)).score_samples(y)
    kl_model, kl_flat = np.mean(log_p - log_q), np.mean(log_p - flat)
    assert kl_model < 0.5 * kl_flat, (kl_model, kl_flat)


def test_plug_in_predictive_is_the_mixture_at_the_posterior_means(two_regime_fit):
    X, _, hp, result = two_regime_fit
    state = result.state
    mix = sbmoe.predictive(jax.random.key(0), state, X[:3], hp, plug_in=True)
    data, e = state.data, state.experts
    priors = hp.priors(1, 1, jnp.float64)
    xs = (np.asarray(X[:3]) - np.asarray(data.x_shift)) / np.asarray(data.x_scale)
    d = (xs - np.asarray(data.X).T) ** 2 * float(priors.eta_q) * float(state.gate.L[0, 0]) ** 2
    g = np.exp(-0.5 * d - (-0.5 * d).max(1, keepdims=True))
    g /= g.sum(1, keepdims=True)
    var = np.asarray(e.psi[:, 0, 0] / (e.nu - 2))
    lg = stats.norm(np.asarray(e.m[:, 0]), np.sqrt(var)).logpdf(np.asarray(data.Y))
    gamma = np.exp(lg - lg.max(1, keepdims=True))
    gamma /= gamma.sum(1, keepdims=True)
    np.testing.assert_allclose(np.exp(np.asarray(mix.log_weights)), g @ gamma, atol=1e-9)
    np.testing.assert_allclose(np.asarray(mix.means)[:, 0], np.asarray(data.y_shift + data.y_scale * e.m[:, 0]), rtol=1e-12)


def test_no_expert_takes_more_than_a_quarter_of_the_points():
    X, Y = sbmoe_synthetic_1d(jax.random.key(40), 400)
    hp = sbmoe.Hyperparams(n_experts=16, gate_steps=10)
    result = sbmoe.fit(jax.random.key(41), X, Y, hp, max_iter=6)
    share = np.asarray(result.state.experts.nu - hp.priors(2, 1, jnp.float64).nu0) / 400
    assert share.sum() == pytest.approx(1.0, abs=0.05)
    assert share.max() < 0.25, share


def test_a_rebound_default_optimizer_is_used(monkeypatch):
    """The shipped optimizer reaches the compiled fit as None (a key alike in every process);
    another one, even bound to DEFAULT_OPTIMIZER, is passed as itself, so a stored program of
    the shipped one is never run for it."""
    import optax

    from bayeskit.density.sbmoe import inference

    assert inference._static_optimizer(inference.DEFAULT_OPTIMIZER) is None
    frozen = optax.sgd(0.0)
    monkeypatch.setattr(inference, "DEFAULT_OPTIMIZER", frozen)
    captured = {}
    real = inference._fit
    monkeypatch.setattr(inference, "_fit", lambda *a, **k: captured.update(k) or real(*a, **k))
    X, Y = sbmoe_synthetic_1d(jax.random.key(0), 40)
    sbmoe.fit(jax.random.key(1), X, Y, sbmoe.Hyperparams(n_experts=3, gate_steps=2), max_iter=2)
    assert captured["optimizer"] is frozen


def test_the_predictive_refuses_inputs_it_cannot_read():
    """NaN inputs gave a finite log-density and a wrong column count a raw dot_general error."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 1))
    Y = np.sin(X) + 0.1 * rng.normal(size=(30, 1))
    hp = sbmoe.Hyperparams(n_experts=3, gate_steps=3)
    state = sbmoe.fit(jax.random.key(0), X, Y, hp, max_iter=2).state
    with pytest.raises(ValueError, match="non-finite"):
        sbmoe.predictive(jax.random.key(1), state, np.array([[0.0], [np.nan]]), hp)
    with pytest.raises(ValueError, match=r"X must have shape \(m, 1\)"):
        sbmoe.predictive(jax.random.key(1), state, np.ones((3, 2)), hp)
    assert sbmoe.predictive(jax.random.key(1), state, np.array([0.5]), hp, n_gate=4, n_draws=4).mean.shape == (1, 1)


def test_kmeans_pp_labels_take_numpy_and_do_not_depend_on_x64():
    """A NumPy Y failed on the traced draws' indexing; and float32 data drew another first
    centre with jax_enable_x64 (an int64 randint), so init="kmeans++" fitted differently."""
    import subprocess
    import sys

    Y = np.random.default_rng(0).normal(size=(12, 1)).astype(np.float32)
    here = np.asarray(sbmoe.kmeans_pp_labels(jax.random.key(0), Y, 3))  # x64 on in the tests
    np.testing.assert_array_equal(here, sbmoe.kmeans_pp_labels(jax.random.key(0), jnp.asarray(Y), 3))
    code = ("import jax, numpy as np; from bayeskit.density import sbmoe; "
            "Y = np.random.default_rng(0).normal(size=(12, 1)).astype(np.float32); "
            "print(''.join(map(str, np.asarray(sbmoe.kmeans_pp_labels(jax.random.key(0), Y, 3)))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "JAX_ENABLE_X64": "0"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "".join(map(str, here))

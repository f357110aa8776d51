"""The LFRM sampler: its conditionals against brute-force posteriors (with covariates and
offsets), the handling of masks and symmetry, recovery of a planted network and of
covariate coefficients, the prior it samples when the data say nothing and in Geweke's
successive-conditional test, separate per-relation models, and bad input. (Vectorised chains equal separate chains: tested for the
shared kernel glue in test_ibp.py.)"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lapack_order import lapack_calls, one_at_a_time
from scipy.special import expit, gammaln, log_ndtr
from scipy.stats import multivariate_normal, norm
from sklearn.metrics import roc_auc_score

from bayeskit import datasets
from bayeskit.relational import data as relational_data
from bayeskit.relational import ibp, lfrm
from bayeskit.relational.lfrm import gibbs, model


def _np_eta(Z, W, reg, cov, symmetric=False):
    """eta of the full model in NumPy, term by term as the paper writes it."""
    if symmetric:
        W = np.triu(W) + np.swapaxes(np.triu(W, 1), 1, 2)
        reg = dict(reg, beta_c=reg["beta_p"], b=reg["a"])
        cov = dict(cov, receiver=cov["sender"])
    sender = cov["sender"] @ reg["beta_p"].T + reg["a"].T  # (N, R)
    receiver = cov["receiver"] @ reg["beta_c"].T + reg["b"].T
    return (np.einsum("ik,rkl,jl->rij", Z, W, Z) + np.einsum("rp,pij->rij", reg["beta"], cov["pair"])
            + sender.T[:, :, None] + receiver.T[:, None, :] + reg["c"][:, None, None])


def _np_loglik(Y, mask, Z, W, reg, cov, link="logistic", symmetric=False):
    """Full-tensor log-likelihood in NumPy (independent of the row-wise code)."""
    if symmetric:
        mask = mask & np.triu(np.ones(mask.shape[-2:], bool), 1)
    eta = _np_eta(Z, W, reg, cov, symmetric)
    ll = Y * eta - np.logaddexp(0, eta) if link == "logistic" else log_ndtr((2 * Y - 1) * eta)
    return float(np.sum(np.where(mask, ll, 0.0)))


def _np_log_prior_matrix(Z, alpha):
    n = Z.shape[0]
    m = Z.sum(0)
    m = m[m > 0]
    h_n = sum(1 / j for j in range(1, n + 1))
    return (len(m) * math.log(alpha) - gammaln(len(m) + 1) - alpha * h_n
            + np.sum(gammaln(n - m + 1) + gammaln(m) - gammaln(n + 1)))


def _problem(rng, n=5, r=2, k=3, k_max=5, p=2, dp=3, dc=1):
    """A random full-model problem: Y, mask, Z, W, regression terms and covariates."""
    Y = rng.integers(0, 2, (r, n, n)).astype(float)
    mask = rng.random((r, n, n)) < 0.8
    Z = np.pad(rng.integers(0, 2, (n, k)).astype(float), ((0, 0), (0, k_max - k)))
    W = rng.normal(size=(r, k_max, k_max))
    cov = {"pair": rng.normal(size=(p, n, n)), "sender": rng.normal(size=(n, dp)), "receiver": rng.normal(size=(n, dc))}
    reg = {"c": rng.normal(size=r), "beta": rng.normal(size=(r, p)), "beta_p": rng.normal(size=(r, dp)),
           "beta_c": rng.normal(size=(r, dc)), "a": rng.normal(size=(r, n)), "b": rng.normal(size=(r, n))}
    return Y, mask, Z, W, reg, cov


def _jax_terms(reg, cov, symmetric):
    """The same terms as the library's types (receiver terms dropped when symmetric)."""
    if symmetric:
        reg = dict(reg, beta_c=reg["beta_c"][:, :0], b=reg["b"][:, :0])
        cov = dict(cov, receiver=cov["receiver"][:, :0])
    return (model.Regression(*(jnp.asarray(reg[k]) for k in model.REGRESSION_TERMS)),
            relational_data.Covariates(*(jnp.asarray(cov[k]) for k in ("pair", "sender", "receiver"))))


def _row_setup(rng, Y, mask, Z, reg, cov, symmetric):
    """The library's data and offset for a problem, a random row i and Z without it."""
    jreg, jcov = _jax_terms(reg, cov, symmetric)
    data = relational_data.as_data(Y.astype(np.int8), mask, symmetric, jcov)
    i = int(rng.integers(Z.shape[0]))
    Zo = Z.copy()
    Zo[i] = 0
    return data, model.offset(jreg, data.covariates, symmetric), i, Zo


@pytest.mark.parametrize("link,symmetric", [("logistic", False), ("probit", False), ("logistic", True)])
def test_flip_log_odds_equal_the_brute_force_posterior_ratio(link, symmetric):
    rng = np.random.default_rng(0)
    alpha = 1.4
    for _ in range(6):
        Y, mask, Z, W, reg, cov = _problem(rng)
        if symmetric:
            Y, mask = np.triu(Y, 1) + np.swapaxes(np.triu(Y, 1), 1, 2), mask & np.swapaxes(mask, 1, 2)
        data, O, i, Zo = _row_setup(rng, Y, mask, Z, reg, cov, symmetric)
        m_o = Zo.sum(0)
        Wf = model.symmetrise(jnp.asarray(W), symmetric)
        for k in np.flatnonzero(m_o > 0):
            one, zero = Z.copy(), Z.copy()
            one[i, k], zero[i, k] = 1, 0
            want = (_np_log_prior_matrix(one, alpha) + _np_loglik(Y, mask, one, W, reg, cov, link, symmetric)
                    - _np_log_prior_matrix(zero, alpha) - _np_loglik(Y, mask, zero, W, reg, cov, link, symmetric))
            got = gibbs._flip_log_odds(jnp.asarray(Z[i]), int(k), i, jnp.asarray(Zo), jnp.asarray(m_o), Wf, O, data, link)
            assert float(got) == pytest.approx(want, abs=1e-8)


@pytest.mark.parametrize("symmetric", [False, True])
def test_fitted_birth_proposal_is_one_fisher_scoring_step(symmetric):
    """births="fitted": for a new feature of row i alone, the proposal's precision is minus
    the Hessian (logistic: the expected Fisher information) of the log-likelihood of row i's
    and column i's off-diagonal cells in the new weights, plus the prior precision, and its
    mean one Newton step from zero; both by finite differences of the NumPy likelihood.
    (The probit link's expected Fisher information is not its Hessian; it is not checked.)"""
    rng = np.random.default_rng(3)
    sigma_w, h = 0.8, 1e-4
    Y, mask, Z, W, reg, cov = _problem(rng)
    if symmetric:
        Y, mask = np.triu(Y, 1) + np.swapaxes(np.triu(Y, 1), 1, 2), mask & np.swapaxes(mask, 1, 2)
    data, O, i, Zo = _row_setup(rng, Y, mask, Z, reg, cov, symmetric)
    shared = Zo.sum(0) > 0
    Z[i] *= shared  # row i without features of its own
    new = int(np.flatnonzero(~shared)[0])
    Zb = Z.copy()
    Zb[i, new] = 1
    cells = np.zeros_like(mask)
    cells[:, i, :], cells[:, :, i] = mask[:, i, :], mask[:, :, i]
    cells[:, i, i] = False
    hp = lfrm.Hyperparams(k_max=Z.shape[1], symmetric=symmetric, births="fitted")
    etas = gibbs._row_etas(jnp.asarray(Z[i]), i, jnp.asarray(Zo), model.symmetrise(jnp.asarray(W), symmetric), O)
    Ls, cs = gibbs.fitted_weights(etas, i, jnp.asarray(Zo), jnp.asarray(shared), sigma_w, data, hp)
    S = np.flatnonzero(shared)
    for L, c, side in zip(Ls, cs, ["row"] if symmetric else ["row", "col"], strict=True):
        for r in range(Y.shape[0]):
            def loglik(w, r=r, side=side):
                Wx = W.copy()
                Wx[:, new, :], Wx[:, :, new] = 0.0, 0.0
                if side == "row" or symmetric:
                    Wx[r, new, S] = w
                if side == "col" or symmetric:
                    Wx[r, S, new] = w
                return _np_loglik(Y, cells, Zb, Wx, reg, cov, "logistic", symmetric)

            def grad(w):
                return np.array([(loglik(w + h * e) - loglik(w - h * e)) / (2 * h) for e in np.eye(len(S))])

            zero = np.zeros(len(S))
            g = grad(zero)
            hess = np.array([(grad(h * e) - grad(-h * e)) / (2 * h) for e in np.eye(len(S))])
            F = -hess + np.eye(len(S)) / sigma_w**2
            got = np.asarray(L[r] @ L[r].T)[np.ix_(S, S)]
            np.testing.assert_allclose(got, F, atol=1e-5)
            m = np.linalg.solve(np.asarray(L[r]).T, np.asarray(c[r]))  # the mean L'^-1 c
            np.testing.assert_allclose(m[S], np.linalg.solve(F, g), atol=1e-5)


def test_fitted_birth_draws_and_ratio_follow_the_proposal():
    """The fitted proposal N(L'^-1 c, (L L')^-1) on the shared entries: its draws' mean and
    covariance (Monte Carlo) and its log density in the acceptance ratio (scipy)."""
    rng = np.random.default_rng(4)
    k, r, sigma_w = 5, 2, 0.7
    shared = np.array([True, False, True, True, False])
    S = np.flatnonzero(shared)
    F = np.stack([np.eye(k)] * r)
    for j in range(r):
        A = rng.normal(size=(len(S), len(S)))
        F[j][np.ix_(S, S)] = A @ A.T + np.eye(len(S))
    L = np.linalg.cholesky(F)
    c = np.where(shared, rng.normal(size=(r, k)), 0.0)
    mean = np.linalg.solve(np.swapaxes(L, 1, 2), c[..., None])[..., 0]
    draws = np.asarray(gibbs._draw_fitted((jax.random.key(0),), jnp.asarray(L)[None], jnp.asarray(c)[None], 40000))[0]
    for j in range(r):
        cov = np.linalg.inv(F[j])[np.ix_(S, S)]
        np.testing.assert_allclose(draws[j][:, S].mean(0), mean[j][S], atol=4 * np.sqrt(np.diag(cov).max() / 40000))
        np.testing.assert_allclose(np.cov(draws[j][:, S].T), cov, atol=0.05 * np.abs(cov).max())
    w = rng.normal(size=(r, 3, k))
    got = np.asarray(gibbs._log_ratio_fitted(jnp.asarray(w), jnp.asarray(L), jnp.asarray(c), sigma_w, jnp.asarray(shared)))
    want = sum(norm.logpdf(w[j][:, S], scale=sigma_w).sum(-1)
               - multivariate_normal(mean[j][S], np.linalg.inv(F[j])[np.ix_(S, S)]).logpdf(w[j][:, S]) for j in range(r))
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("symmetric", [False, True])
def test_fitted_birth_calls_lapack_one_call_at_a_time(symmetric):
    """A row's update under births="fitted", vmapped over two chains as the sampler runs
    it, makes its LAPACK calls (one Cholesky factorisation, two triangular solves) one after
    another, within and across its branches (``lapack_order``: a kinship fit with two
    chains on two cores stopped for good when two could run at once)."""
    rng = np.random.default_rng(5)
    Y, mask, Z, W, reg, cov = _problem(rng)
    if symmetric:
        Y, mask = np.triu(Y, 1) + np.swapaxes(np.triu(Y, 1), 1, 2), mask & np.swapaxes(mask, 1, 2)
    data, O, i, Zo = _row_setup(rng, Y, mask, Z, reg, cov, symmetric)
    hp = lfrm.Hyperparams(k_max=Z.shape[1], symmetric=symmetric, births="fitted")
    update = jax.vmap(lambda key, Z, W: gibbs._update_row(key, i, Z, W, O, 2.0, 1.0, data, hp))
    keys = jax.random.split(jax.random.key(0), 2)
    bodies = lapack_calls(jax.make_jaxpr(update)(keys, jnp.stack([jnp.asarray(Z)] * 2), jnp.stack([jnp.asarray(W)] * 2)))
    assert one_at_a_time(bodies), bodies
    # the proposal in a branch (skipped when no chain's row proposes or holds a feature of
    # its own), its draws in a branch within it (skipped when no chain's row proposes one)
    assert [[name for name, _ in calls] for calls in bodies] == [["cond"], ["cholesky", "triangular_solve", "cond"],
                                                                 ["triangular_solve"]]


@pytest.mark.parametrize("symmetric", [False, True])
def test_fitted_births_skipped_where_nothing_is_born_or_dies_change_nothing(monkeypatch, symmetric):
    """births="fitted" computes its proposal only for rows that propose a feature of their
    own or hold one (in any of the chains); the sweeps of two chains equal, bit for bit,
    those computing it for every row (with births, and rows holding features of their own
    whose removal the proposal prices)."""
    rng = np.random.default_rng(6)
    n, k_max, r = 30, 10, 3
    Y, mask = rng.integers(0, 2, (r, n, n)).astype(np.int8), rng.random((r, n, n)) < 0.9
    data = relational_data.as_data(Y, mask, symmetric)
    hp = lfrm.Hyperparams(k_max=k_max, births="fitted", symmetric=symmetric)
    Z = np.pad(rng.random((2, n, 6)) < 0.25, ((0, 0), (0, 0), (0, k_max - 6))).astype(float)
    Z[:, :, 6:8] = 0.0
    Z[:, 3, 6] = Z[:, 11, 7] = 1.0  # rows 3 and 11 hold a feature of their own: deaths are proposed
    Z = jnp.asarray(Z)
    W = jnp.asarray(rng.normal(size=(2, r, k_max, k_max)))
    reg = gibbs.init(jax.random.key(0), data, hp).reg

    def sweeps():
        run = jax.jit(jax.vmap(lambda k, Z, W: gibbs.sweep_z(k, Z, W, reg, 15.0, 1.0, data, hp)))
        return [run(jax.random.split(jax.random.key(t), 2), Z, W) for t in range(3)]

    skipping = sweeps()
    monkeypatch.setattr(gibbs, "cond_any", lambda pred, true_fn, false_fn, *operands: true_fn(*operands))
    always = sweeps()
    jax.tree.map(np.testing.assert_array_equal, skipping, always)
    assert sum(int(b.sum()) for _, _, b in skipping) > 0


def test_row_likelihood_differences_equal_full_likelihood_differences():
    """The birth move's ratio: changing row i and the weights of columns only row i uses
    changes the full likelihood exactly as the row's cells say."""
    rng = np.random.default_rng(1)
    for _ in range(6):
        Y, mask, Z, W, reg, cov = _problem(rng)
        data, O, i, Zo = _row_setup(rng, Y, mask, Z, reg, cov, False)
        free = Zo.sum(0) == 0
        z_new = Z[i] * ~free
        z_new[np.flatnonzero(free)[:2]] = 1
        W_new = np.where(free[:, None] | free[None, :], rng.normal(size=W.shape), W)
        Z_new = Z.copy()
        Z_new[i] = z_new
        want = _np_loglik(Y, mask, Z_new, W_new, reg, cov) - _np_loglik(Y, mask, Z, W, reg, cov)
        f = lambda z, w: gibbs._row_loglik(jnp.asarray(z), i, jnp.asarray(Zo), jnp.asarray(w), O, data, "logistic")
        assert float(f(z_new, W_new) - f(Z[i], W)) == pytest.approx(want, abs=1e-8)


def _planted(seed=0, n=40, k=3, r=2):
    rng = np.random.default_rng(seed)
    Z = (rng.random((n, k)) < 0.35).astype(float)
    W = rng.normal(0, 3, (r, k, k))
    P = expit(np.einsum("ik,rkl,jl->rij", Z, W, Z) - 1.5)
    Y = (rng.random(P.shape) < P).astype(np.int8)
    off = ~np.eye(n, dtype=bool)
    test = (rng.random(Y.shape) < 0.2) & off
    return Y, P, off & ~test, test


def test_planted_network_is_recovered():
    Y, P, train, test = _planted()
    hp = lfrm.Hyperparams(k_max=10)
    s = lfrm.sample_posterior(jax.random.key(0), Y, train, hp, num_warmup=60, num_samples=90)
    prob = np.asarray(lfrm.predict_proba(s, hp))
    auc, best = roc_auc_score(Y[test], prob[test]), roc_auc_score(Y[test], P[test])
    assert auc > best - 0.03
    assert 0.3 < float(np.mean(s["accept"])) < 1.0


def test_masked_cells_have_no_effect():
    Y, _, train, _ = _planted(1, n=20, k=2, r=1)
    flipped = np.where(train, Y, 1 - Y)
    hp = lfrm.Hyperparams(k_max=6)
    run = jax.jit(lambda d: jax.lax.scan(lambda s, _: (gibbs.step(s, d, hp), s.Z), gibbs.init(jax.random.key(3), d, hp), None, length=4))
    (a, Za), (b, Zb) = run(relational_data.as_data(Y, train, False)), run(relational_data.as_data(flipped, train, False))
    np.testing.assert_array_equal(Za, Zb)
    np.testing.assert_allclose(a.W, b.W)


def test_symmetric_model_gives_symmetric_weights_and_predictions():
    Y, _, _, _ = _planted(2, n=20, k=2, r=1)
    Y = np.triu(Y, 1) | np.triu(Y, 1).transpose(0, 2, 1)
    hp = lfrm.Hyperparams(k_max=6, symmetric=True)
    s = lfrm.sample_posterior(jax.random.key(0), Y, None, hp, num_warmup=5, num_samples=5)
    prob = np.asarray(lfrm.predict_proba(s, hp))
    np.testing.assert_allclose(prob, prob.transpose(0, 2, 1), atol=1e-6)
    W = np.asarray(model.symmetrise(jnp.asarray(s["W"][0, -1]), True))
    np.testing.assert_allclose(W, W.transpose(0, 2, 1))


def test_with_one_observed_cell_the_features_follow_the_prior():
    """Almost no data: K+ must follow the IBP with alpha ~ Gamma(1, 1), i.e. E[K+] = H_N."""
    n = 6
    Y = np.zeros((1, n, n), np.int8)
    mask = np.zeros((1, n, n), bool)
    mask[0, 0, 1] = True
    hp = lfrm.Hyperparams(k_max=24, hmc_steps=2)
    data = relational_data.as_data(Y, mask, False)

    def run(key):
        state = gibbs.init(key, data, hp, Z=jnp.zeros((n, 1)))
        return jax.lax.scan(lambda s, _: (gibbs.step(s, data, hp), s.Z.sum(0) > 0), state, None, length=1500)[1]

    k_plus = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 3)).sum(-1))[:, 200:].ravel()
    h_n = float(ibp.harmonic(n))
    sd = math.sqrt(h_n + h_n**2)  # negative binomial: Poisson(alpha H_N), alpha ~ Gamma(1, 1)
    assert abs(k_plus.mean() - h_n) < 4 * sd / math.sqrt(len(k_plus) / 10)


@pytest.mark.parametrize("Y,mask,hp,match", [
    (np.full((4, 4), 2), None, lfrm.Hyperparams(), "0 or 1"),
    (np.zeros((4, 5)), None, lfrm.Hyperparams(), r"\(N, N\)"),
    (np.zeros((2, 4, 4)), np.ones((3, 4, 4), bool), lfrm.Hyperparams(), "mask must have Y.s shape"),
    (np.zeros((4, 4)), np.zeros((4, 4), bool), lfrm.Hyperparams(), "no observed"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(k_max=0), "k_max"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(alpha_prior=(-1.0, 1.0)), "alpha_prior"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(link="cauchit"), "link"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(births="data"), "births"),
    (np.triu(np.ones((4, 4)), 1), None, lfrm.Hyperparams(symmetric=True), "symmetric"),
])
def test_bad_input(Y, mask, hp, match):
    with pytest.raises(ValueError, match=match):
        lfrm.sample_posterior(jax.random.key(0), Y, mask, hp, num_warmup=1, num_samples=1)


@pytest.mark.parametrize("init_Z,match", [(np.full((4, 2), 0.5), "0 and 1"), (np.ones((4, 4)), "more than k_max"),
                                           (np.ones((5, 2)), "N = 4"), (np.ones((3, 4, 2)), "N = 4")])
def test_bad_start(init_Z, match):
    with pytest.raises(ValueError, match=match):
        lfrm.sample_posterior(jax.random.key(0), np.zeros((4, 4)), None, lfrm.Hyperparams(k_max=3), num_warmup=1, num_samples=1,
                              init_Z=init_Z)


@pytest.mark.filterwarnings("ignore:some draws use all")
def test_random_and_given_starts_share_one_program():
    """A start Z narrower than k_max, then the random start, of the same data: the second
    run compiles nothing; and the random start keeps the draws of ``init`` without Z."""
    from test_contract import count_compilations

    Y, _, train, _ = _planted(4, n=10, k=2, r=2)
    hp = lfrm.Hyperparams(k_max=4)
    run = lambda **kw: lfrm.sample_posterior(jax.random.key(2), Y, train, hp, num_warmup=2, num_samples=2, num_chains=2,
                                             progress=False, **kw)
    run(init_Z=np.tile(np.eye(2)[np.arange(10) % 2], (2, 1, 1)))  # (chain, N, 2): two clusters
    with count_compilations() as seen:
        draws = run()
    assert seen["compiles"] == 0
    data = relational_data.as_data(Y, train, False)
    start = gibbs.init(jax.random.split(jax.random.key(2), 2)[1], data, hp)
    drawn = gibbs.init(jax.random.split(jax.random.key(2), 2)[1], data, hp, Z=gibbs.random_start(10, 4))
    np.testing.assert_array_equal(drawn.Z, start.Z)
    assert draws["Z"].shape == (2, 2, 10, 4)


def test_frozen_feature_counts_flag_chains_stuck_at_different_k():
    """The warning needs every chain of a model constant over at least FROZEN_MIN_DRAWS
    draws and the chains at different K+; the single-relation case names the values."""
    d = lfrm.FROZEN_MIN_DRAWS
    stuck = np.stack([np.full(d, 3), np.full(d, 7)])
    assert "(3, 7)" in lfrm.frozen_feature_counts(stuck)
    assert lfrm.frozen_feature_counts(stuck[:, :-1]) is None  # too few draws to say
    assert lfrm.frozen_feature_counts(np.full((2, d), 5)) is None  # one K+ for both: perhaps the posterior's
    moving = stuck.copy()
    moving[1, d // 2] = 8
    assert lfrm.frozen_feature_counts(moving) is None
    assert lfrm.frozen_feature_counts(stuck[:1]) is None  # one chain: nothing to compare
    per_relation = np.stack([moving, stuck, np.full((2, d), 4)])  # (relation, chain, draw)
    assert "in 1 of 3 relations" in lfrm.frozen_feature_counts(per_relation)


@pytest.mark.filterwarnings("ignore:some draws use all")
def test_chains_that_keep_their_start_k_are_warned_about():
    """Countries, all 56 relations in one model: chains started at 2 and 6 one-hot features
    lose or gain none once their weights fit (a birth draws about 56 (2K + 1) weights from
    the prior, and is rejected), so each keeps a K+ of its own; the sampler says so."""
    d = datasets.load_relational("nations")
    n = d["Y"].shape[-1]
    Z = np.zeros((2, n, 6))
    Z[0, :, :2], Z[1] = np.eye(2)[np.arange(n) % 2], np.eye(6)[np.arange(n) % 6]
    with pytest.warns(RuntimeWarning, match="K\\+ did not change in any chain.*births='fitted'"):
        s = lfrm.sample_posterior(jax.random.key(0), d["Y"], d["mask"], lfrm.Hyperparams(k_max=8), num_warmup=5,
                                  num_samples=lfrm.FROZEN_MIN_DRAWS, num_chains=2, init_Z=Z, progress=False)
    k = np.asarray(s["n_features"])
    assert np.all(k == k[:, :1]) and k[0, 0] != k[1, 0] and np.sum(s["births"]) == 0
    # births proposed from weights fitted to the row's cells are accepted: the chains grow
    fitted = lfrm.sample_posterior(jax.random.key(0), d["Y"], d["mask"], lfrm.Hyperparams(k_max=16, births="fitted"),
                                   num_warmup=5, num_samples=lfrm.FROZEN_MIN_DRAWS, num_chains=2, init_Z=Z, progress=False)
    assert np.sum(fitted["births"]) > 0 and np.mean(fitted["n_features"]) > np.mean(k) + 1


@pytest.mark.filterwarnings("ignore:some draws use all")
def test_separate_relations_equal_one_relation_runs():
    """The "single" setting runs every relation's chains in one call; relation r's chain
    c is exactly chain (r, c) of a one-relation run with the same chain keys."""
    Y, _, train, _ = _planted(3, n=12, k=2, r=2)
    hp = lfrm.Hyperparams(k_max=4)
    key = jax.random.key(5)
    sep = lfrm.sample_posterior(key, Y, train, hp, num_warmup=2, num_samples=3, num_chains=2, separate_relations=True)
    assert sep["Z"].shape == (2, 2, 3, 12, 4) and sep["W"].shape == (2, 2, 3, 1, 4, 4)
    one = lfrm.sample_posterior(key, Y[1:], train[1:], hp, num_warmup=2, num_samples=3, num_chains=4)
    np.testing.assert_array_equal(sep["Z"][1], one["Z"][2:])  # relation 1's chains are chains 2 and 3
    np.testing.assert_allclose(sep["W"][1], one["W"][2:])
    prob = np.asarray(lfrm.predict_proba(sep, hp))
    want = np.concatenate([lfrm.predict_proba({k: v[r] for k, v in sep.items()}, hp) for r in range(2)])
    np.testing.assert_allclose(prob, want, rtol=1e-6)


def test_hmc_mass_of_the_regression_terms_is_the_fisher_diagonal():
    """The mass from the transposed offset map equals sum over cells of v (d eta / d theta)^2
    from the Jacobian."""
    rng = np.random.default_rng(6)
    for symmetric in (False, True):
        Y, mask, Z, W, reg, cov = _problem(rng)
        hp = lfrm.Hyperparams(k_max=5, symmetric=symmetric, offsets=True, coefficient_scale=2.0, offset_scale=0.5)
        jreg, jcov = _jax_terms(reg, cov, symmetric)
        data = relational_data.as_data(Y.astype(np.int8), mask, symmetric, jcov)
        _, got = gibbs._mass(jnp.asarray(Z), jreg, 1.0, data, hp)
        rate = Y.sum((1, 2), where=np.asarray(data.mask)) / np.asarray(data.mask).sum((1, 2))
        v = rate * (1 - rate)
        jac = jax.jacfwd(lambda r: model.offset(r, data.covariates, symmetric))(jreg)
        scales = {"c": hp.bias_scale, "beta": 2.0, "beta_p": 2.0, "beta_c": 2.0, "a": 0.5, "b": 0.5}
        for name in model.REGRESSION_TERMS:
            J = np.asarray(getattr(jac, name))  # (R, N, N) + shape of the term
            weights = (v[:, None, None] * np.asarray(data.mask)).reshape(J.shape[:3] + (1,) * (J.ndim - 3))
            want = np.sum(weights * J**2, axis=(0, 1, 2)) + 1 / scales[name] ** 2
            np.testing.assert_allclose(getattr(got, name), want, rtol=1e-10, err_msg=name)


@pytest.mark.filterwarnings("ignore:some draws use all")
def test_covariate_coefficients_are_recovered():
    """No latent structure, one pair and one sender covariate with known coefficients:
    the posterior means are within four posterior standard deviations of the truth."""
    rng = np.random.default_rng(7)
    n = 40
    cov = {"pair": rng.normal(size=(n, n)), "sender": rng.normal(size=(n, 1))}
    eta = 1.5 * cov["pair"] - 1.0 * cov["sender"] - 0.5
    Y = (rng.random((n, n)) < expit(eta)).astype(np.int8)
    hp = lfrm.Hyperparams(k_max=4)
    s = lfrm.sample_posterior(jax.random.key(1), Y, None, hp, num_warmup=100, num_samples=200, covariates=cov)
    for name, truth in (("beta", 1.5), ("beta_p", -1.0), ("c", -0.5)):
        draws = np.asarray(s[name]).ravel()
        assert abs(draws.mean() - truth) < 4 * draws.std() + 0.05, name
    prob = np.asarray(lfrm.predict_proba(s, hp, cov))
    off = ~np.eye(n, dtype=bool)
    assert roc_auc_score(Y[off], prob[0][off]) > 0.95 * roc_auc_score(Y[off], expit(eta)[off])


def _batch_se(x, batches=10):
    """Monte Carlo standard error of the mean of (chain, draw) draws by batch means."""
    chains, draws = x.shape
    means = x[:, : draws - draws % batches].reshape(chains, batches, -1).mean(-1)
    return means.std(ddof=1) / math.sqrt(means.size)


@pytest.mark.parametrize("births,symmetric", [("prior", False), ("fitted", False), ("fitted", True)])
def test_successive_conditional_simulation_recovers_the_prior(births, symmetric, link="logistic"):
    """Geweke's "getting it right" test of the whole sampler: alternate one sweep given Y
    with a fresh Y drawn from the likelihood given the state. The chain then samples the
    prior, so K+, alpha, the bias and the weight precision must have their prior moments
    (E K+ = E[alpha] H_N for the IBP). (The probit link's conditionals are checked against
    brute force above; it shares every other step.)"""
    n, k_max, steps = 5, 14, 2500
    hp = lfrm.Hyperparams(k_max=k_max, link=link, hmc_steps=4, alpha_prior=(2.0, 2.0), sigma_w_prior=(3.0, 3.0), bias_scale=1.0,
                          births=births, symmetric=symmetric)
    mask = jnp.asarray(np.triu(np.ones((n, n), bool), 1) if symmetric else ~np.eye(n, dtype=bool))[None]
    data = relational_data.as_data(np.zeros((1, n, n), np.int8), mask, symmetric)

    def transition(carry, key):
        state, d = carry
        state = gibbs.step(state, d, hp)  # the sweep's own key lives in the state
        eta = model.logits(state.Z, state.W, state.reg, d.covariates, symmetric)
        Y = jax.random.bernoulli(key, model.link_prob(eta, link)).astype(d.Y.dtype)
        stats = (jnp.sum(state.Z.sum(0) > 0).astype(float), state.alpha, state.reg.c[0], 1 / state.sigma_w**2)
        return (state, relational_data.Data(jnp.where(mask, Y, 0.0), mask, d.covariates)), stats

    def chain(key):
        k_init, k_run = jax.random.split(key)
        state = gibbs.init(k_init, data, hp, Z=jnp.zeros((n, 1)))
        return jax.lax.scan(transition, (state, data), jax.random.split(k_run, steps))[1]

    k_plus, alpha, c, precision = (np.asarray(a)[:, 300:] for a in jax.jit(jax.vmap(chain))(jax.random.split(jax.random.key(0), 8)))
    prior_means = {"K+": (k_plus, float(ibp.harmonic(n))), "alpha": (alpha, 1.0), "c": (c, 0.0), "c^2": (c**2, 1.0),
                   "1/sigma_w^2": (precision, 1.0)}
    for name, (x, want) in prior_means.items():
        assert abs(x.mean() - want) < 4 * _batch_se(x) + 0.02, (name, x.mean(), want, _batch_se(x))

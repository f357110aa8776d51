"""The LFRM sampler: its conditionals against brute-force posteriors, the handling of
masks and symmetry, recovery of a planted network, the prior it samples when the data
say nothing, and bad input. (Vectorised chains equal separate chains: tested for the
shared kernel glue in test_ibp.py.)"""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.special import expit, gammaln, log_ndtr
from sklearn.metrics import roc_auc_score

from bayeskit import ibp, lfrm
from bayeskit.lfrm import gibbs, model


def _np_loglik(Y, mask, Z, W, c, link="logistic", symmetric=False):
    """Full-tensor log-likelihood in NumPy (independent of the row-wise code)."""
    if symmetric:
        W = np.triu(W) + np.swapaxes(np.triu(W, 1), 1, 2)
        mask = mask & np.triu(np.ones(mask.shape[-2:], bool), 1)
    eta = np.einsum("ik,rkl,jl->rij", Z, W, Z) + c[:, None, None]
    ll = Y * eta - np.logaddexp(0, eta) if link == "logistic" else log_ndtr((2 * Y - 1) * eta)
    return float(np.sum(np.where(mask, ll, 0.0)))


def _np_log_prior_matrix(Z, alpha):
    n = Z.shape[0]
    m = Z.sum(0)
    m = m[m > 0]
    h_n = sum(1 / j for j in range(1, n + 1))
    return (len(m) * math.log(alpha) - gammaln(len(m) + 1) - alpha * h_n
            + np.sum(gammaln(n - m + 1) + gammaln(m) - gammaln(n + 1)))


def _problem(rng, n=5, r=2, k=3, k_max=5):
    Y = rng.integers(0, 2, (r, n, n)).astype(float)
    mask = rng.random((r, n, n)) < 0.8
    Z = np.pad(rng.integers(0, 2, (n, k)).astype(float), ((0, 0), (0, k_max - k)))
    W = rng.normal(size=(r, k_max, k_max))
    c = rng.normal(size=r)
    return Y, mask, Z, W, c


@pytest.mark.parametrize("link,symmetric", [("logistic", False), ("probit", False), ("logistic", True)])
def test_flip_log_odds_equal_the_brute_force_posterior_ratio(link, symmetric):
    rng = np.random.default_rng(0)
    alpha = 1.4
    for _ in range(6):
        Y, mask, Z, W, c = _problem(rng)
        if symmetric:
            Y, mask = np.triu(Y, 1) + np.swapaxes(np.triu(Y, 1), 1, 2), mask & np.swapaxes(mask, 1, 2)
        data = model.as_data(Y.astype(np.int8), mask, symmetric)
        i = int(rng.integers(Z.shape[0]))
        Zo = Z.copy()
        Zo[i] = 0
        m_o = Zo.sum(0)
        Wf = model.symmetrise(jnp.asarray(W, jnp.float32), symmetric)
        for k in np.flatnonzero(m_o > 0):
            one, zero = Z.copy(), Z.copy()
            one[i, k], zero[i, k] = 1, 0
            want = (_np_log_prior_matrix(one, alpha) + _np_loglik(Y, mask, one, W, c, link, symmetric)
                    - _np_log_prior_matrix(zero, alpha) - _np_loglik(Y, mask, zero, W, c, link, symmetric))
            got = gibbs._flip_log_odds(jnp.asarray(Z[i], jnp.float32), int(k), i, jnp.asarray(Zo, jnp.float32),
                                       jnp.asarray(m_o, jnp.float32), Wf, jnp.asarray(c, jnp.float32), data, link)
            assert float(got) == pytest.approx(want, abs=1e-3)


def test_row_likelihood_differences_equal_full_likelihood_differences():
    """The birth move's ratio: changing row i and the weights of columns only row i uses
    changes the full likelihood exactly as the row's cells say."""
    rng = np.random.default_rng(1)
    for _ in range(6):
        Y, mask, Z, W, c = _problem(rng)
        data = model.as_data(Y.astype(np.int8), mask, False)
        i = int(rng.integers(Z.shape[0]))
        Zo = Z.copy()
        Zo[i] = 0
        free = Zo.sum(0) == 0
        z_new = Z[i] * ~free
        z_new[np.flatnonzero(free)[:2]] = 1
        W_new = np.where(free[:, None] | free[None, :], rng.normal(size=W.shape), W)
        Z_new = Z.copy()
        Z_new[i] = z_new
        want = _np_loglik(Y, mask, Z_new, W_new, c) - _np_loglik(Y, mask, Z, W, c)
        f = lambda z, w: gibbs._row_loglik(jnp.asarray(z, jnp.float32), i, jnp.asarray(Zo, jnp.float32),
                                           jnp.asarray(w, jnp.float32), jnp.asarray(c, jnp.float32), data, "logistic")
        assert float(f(z_new, W_new) - f(Z[i], W)) == pytest.approx(want, abs=1e-3)


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
    (a, Za), (b, Zb) = run(model.as_data(Y, train, False)), run(model.as_data(flipped, train, False))
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
    data = model.as_data(Y, mask, False)

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
    (np.zeros((2, 4, 4)), np.ones((3, 4, 4), bool), lfrm.Hyperparams(), "mask has shape"),
    (np.zeros((4, 4)), np.zeros((4, 4), bool), lfrm.Hyperparams(), "no observed"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(k_max=0), "k_max"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(alpha_prior=(-1.0, 1.0)), "alpha_prior"),
    (np.zeros((4, 4)), None, lfrm.Hyperparams(link="cauchit"), "link"),
    (np.triu(np.ones((4, 4)), 1), None, lfrm.Hyperparams(symmetric=True), "symmetric"),
])
def test_bad_input(Y, mask, hp, match):
    with pytest.raises(ValueError, match=match):
        lfrm.sample_posterior(jax.random.key(0), Y, mask, hp, num_warmup=1, num_samples=1)


@pytest.mark.filterwarnings("ignore:some draws use all")
def test_separate_relations_equal_one_relation_runs():
    """The "single" setting runs every relation's chains in one call; relation r's chain
    c is exactly chain (r, c) of a one-relation run with the same chain keys."""
    Y, _, train, _ = _planted(3, n=12, k=2, r=2)
    hp = lfrm.Hyperparams(k_max=4)
    key = jax.random.key(5)
    sep = lfrm.sample_posterior(key, Y, train, hp, num_warmup=2, num_samples=3, num_chains=2, separate_relations=True)
    assert sep["Z"].shape == (2, 2, 3, 12, 4) and sep["W"].shape == (2, 2, 3, 1, 4, 4)
    for r in range(2):
        one = lfrm.sample_posterior(key, Y[r:r + 1], train[r:r + 1], hp, num_warmup=2, num_samples=3, num_chains=4)
        np.testing.assert_array_equal(sep["Z"][r], one["Z"][2 * r:2 * r + 2])
        np.testing.assert_allclose(sep["W"][r], one["W"][2 * r:2 * r + 2])
    prob = np.asarray(lfrm.predict_proba(sep, hp))
    want = np.concatenate([lfrm.predict_proba({k: v[r] for k, v in sep.items()}, hp) for r in range(2)])
    np.testing.assert_allclose(prob, want)

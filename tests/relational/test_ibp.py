"""The IBP prior samplers and probabilities, and the linear-Gaussian collapsed Gibbs
sampler, against closed forms, brute-force enumeration and known truth."""

import itertools
import math
from collections import Counter

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from lapack_order import lapack_calls, one_at_a_time
from scipy import stats

from bayeskit.datasets import ibp_toy_images
from bayeskit.relational import ibp
from bayeskit.relational.ibp import linear_gaussian as lg


def _mc_close(samples, expected, sd, n_sigma=4.0):
    """|mean - expected| within n_sigma standard errors (sd is the per-draw spread)."""
    assert abs(float(np.mean(samples)) - expected) < n_sigma * sd / math.sqrt(len(samples))


@pytest.mark.parametrize("alpha,n", [(1.0, 50), (3.0, 20)])
def test_buffet_counts_are_poisson(alpha, n):
    draws = 3000
    Z, overflow = jax.jit(jax.vmap(lambda k: ibp.sample_buffet(k, n, alpha, 48)))(jax.random.split(jax.random.key(0), draws))
    assert not bool(overflow.any())
    k_plus = np.asarray((Z.sum(1) > 0).sum(-1))
    mean = alpha * float(ibp.harmonic(n))
    _mc_close(k_plus, mean, math.sqrt(mean))
    assert abs(k_plus.var() / mean - 1) < 0.12  # Poisson: variance = mean
    row_sums = np.asarray(Z.sum(-1))[:, 0]  # any row is Poisson(alpha) (exchangeability)
    _mc_close(row_sums, alpha, math.sqrt(alpha))
    _mc_close(np.asarray(Z.sum((1, 2))), n * alpha, math.sqrt(n * alpha))


def test_buffet_overflow_is_flagged():
    _, overflow = ibp.sample_buffet(jax.random.key(0), 30, 5.0, 4)
    assert bool(overflow)


def test_finite_and_stick_breaking_row_sums():
    alpha, k, n, draws = 2.0, 8, 10, 4000
    keys = jax.random.split(jax.random.key(1), draws)
    Zf = jax.vmap(lambda kk: ibp.sample_finite(kk, n, alpha, k))(keys)
    # E[row sum] = K E[pi] = K (alpha / K) / (alpha / K + 1).
    expected = k * (alpha / k) / (alpha / k + 1)
    _mc_close(np.asarray(Zf[:, 0].sum(-1)), expected, math.sqrt(expected))
    Zs, _ = jax.vmap(lambda kk: ibp.sample_stick_breaking(kk, n, alpha, k))(keys)
    # E[pi_k] = (alpha / (alpha + 1))^k, summed over the k_max sticks.
    r = alpha / (alpha + 1)
    expected = r * (1 - r**k) / (1 - r)
    _mc_close(np.asarray(Zs[:, 0].sum(-1)), expected, math.sqrt(expected))
    # Sticks decrease: column frequencies are non-increasing on average.
    freq = np.asarray(Zs.mean((0, 1)))
    assert np.all(np.diff(freq) < 0.02)


def test_left_ordered_form():
    Z = jnp.array([[0, 1, 0, 1, 0], [1, 1, 0, 0, 1], [1, 0, 0, 1, 1.0]])
    L = np.asarray(ibp.left_ordered(Z))
    np.testing.assert_array_equal(L, [[1, 1, 0, 0, 0], [1, 0, 1, 1, 0], [0, 1, 1, 1, 0]])


def _classes_n2(r):
    """Every left-ordered class of 2-row matrices with up to r columns of each of the
    three non-zero histories (1,0), (0,1), (1,1), padded to 3r columns."""
    out = []
    for counts in itertools.product(range(r), repeat=3):
        Z = np.zeros((2, 3 * r))
        cols = [np.array(c)[:, None] for c, m in zip(((1, 0), (0, 1), (1, 1)), counts) for _ in range(m)]
        if cols:
            Z[:, : len(cols)] = np.hstack(cols)
        out.append(Z)
    return np.stack(out)


def test_class_probabilities_sum_to_one_and_match_the_buffet():
    classes = _classes_n2(12)
    log_p = jax.jit(jax.vmap(lambda Z: ibp.log_prob(Z, 1.3)))(jnp.asarray(classes))
    assert float(jnp.exp(log_p).sum()) == pytest.approx(1.0, abs=1e-9)
    # N = 1: K+ ~ Poisson(alpha).
    one = [np.pad(np.ones((1, k)), ((0, 0), (0, 8 - k))) for k in range(8)]
    got = jax.vmap(lambda Z: ibp.log_prob(Z, 1.3))(jnp.asarray(np.stack(one)))
    np.testing.assert_allclose(got, stats.poisson(1.3).logpmf(np.arange(8)), rtol=1e-12)
    # The buffet's class frequencies at N = 2 against P([Z]).
    draws = 20_000
    Z, _ = jax.jit(jax.vmap(lambda k: ibp.sample_buffet(k, 2, 1.3, 16)))(jax.random.split(jax.random.key(3), draws))
    Z = np.asarray(Z)
    hist = lambda z, h: int(np.sum(np.all(z.T == h, axis=1)))
    observed = {}
    for z in Z:
        key = tuple(hist(z, h) for h in ((1, 0), (0, 1), (1, 1)))
        observed[key] = observed.get(key, 0) + 1
    for key in [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 1, 0), (1, 0, 1), (2, 0, 0)]:
        idx = np.ravel_multi_index(key, (12, 12, 12))
        p = float(jnp.exp(ibp.log_prob(jnp.asarray(classes[idx], jnp.float32), 1.3)))
        assert abs(observed.get(key, 0) / draws - p) < 4 * math.sqrt(p * (1 - p) / draws) + 1e-4, key


def test_collapsed_likelihood_against_the_gaussian_marginal_and_zero_columns():
    rng = np.random.default_rng(0)
    Z = rng.integers(0, 2, (7, 3)).astype(float)
    X = rng.normal(size=(7, 4))
    sx, sa = 0.7, 1.3
    cov = sa**2 * Z @ Z.T + sx**2 * np.eye(7)  # each column of X ~ N(0, sa^2 ZZ' + sx^2 I)
    brute = stats.multivariate_normal(np.zeros(7), cov).logpdf(X.T).sum()
    got = lg.log_likelihood(jnp.asarray(X, jnp.float32), jnp.asarray(Z, jnp.float32), sx, sa)
    padded = lg.log_likelihood(jnp.asarray(X, jnp.float32), jnp.asarray(np.pad(Z, ((0, 0), (0, 5))), jnp.float32), sx, sa)
    assert float(got) == pytest.approx(brute, rel=1e-5)
    assert float(padded) == pytest.approx(brute, rel=1e-5)


def _log_prior(Z, alpha, lof):
    """P(Z) of a matrix with exchangeable labels, or of its left-ordered class, computed
    from the formulas with plain Python (independent of bayeskit.relational.ibp.prior)."""
    n = Z.shape[0]
    cols = [tuple(c) for c in Z.T if c.any()]
    h_n = sum(1 / j for j in range(1, n + 1))
    out = len(cols) * math.log(alpha) - alpha * h_n
    out += sum(math.lgamma(n - sum(c) + 1) + math.lgamma(sum(c)) - math.lgamma(n + 1) for c in cols)
    if lof:
        return out - sum(math.lgamma(v + 1) for v in Counter(cols).values())
    return out - math.lgamma(len(cols) + 1)


def _brute_log_post(X, Z, alpha, sx, sa, lof=False):
    """log P(Z) + log p(X | Z), the likelihood from the Gaussian marginal of each column."""
    cov = sa**2 * Z @ Z.T + sx**2 * np.eye(len(Z))
    return _log_prior(Z, alpha, lof) + stats.multivariate_normal(np.zeros(len(Z)), cov).logpdf(X.T).sum()


def test_gibbs_conditionals_against_enumeration():
    """The flip log-odds and the birth probabilities of the sweep equal the ratios of
    the full posterior P(Z) p(X | Z) computed by brute force, for every 4 x 3 binary
    matrix and every row (N = 4, K = 3, padded to 6 columns)."""
    rng = np.random.default_rng(1)
    n, d, alpha, sx, sa = 4, 3, 1.7, 0.8, 1.2
    X = rng.normal(size=(n, d))
    Xj = jnp.asarray(X, jnp.float32)
    mats = np.array(list(itertools.product((0.0, 1.0), repeat=n * 3))).reshape(-1, n, 3)
    mats = mats[rng.permutation(len(mats))[:48]]
    rows = rng.integers(n, size=len(mats))

    @jax.jit
    @jax.vmap
    def sweep_terms(Z, i):
        Z = jnp.pad(Z, ((0, 0), (0, 3)))
        m_o, _, _, P, M = lg._row_posterior(i, Z, lg._gram(Z, sx, sa), Z.T @ Xj, Xj, sx, sa)
        odds = jax.vmap(lambda k: lg._flip_log_odds(Z[i], k, m_o, P, M, Xj[i], sx**2, n))(jnp.arange(3))
        births = lg._birth_log_probs(Z[i] * (m_o > 0), P, M, Xj[i], sx**2, alpha, sa, n, 3)
        return m_o[:3], odds, births - births[0]

    m_o, odds, births = (np.asarray(a) for a in sweep_terms(jnp.asarray(mats, jnp.float32), jnp.asarray(rows)))
    for Z, i, m, odd, birth in zip(mats, rows, m_o, odds, births):
        for k in np.flatnonzero(m > 0):
            one, zero = Z.copy(), Z.copy()
            one[i, k], zero[i, k] = 1, 0
            want = _brute_log_post(X, one, alpha, sx, sa) - _brute_log_post(X, zero, alpha, sx, sa)
            assert odd[k] == pytest.approx(want, abs=2e-4)
        # Births: row i without its singletons, plus c new columns of its own.
        base = Z.copy()
        base[i] = Z[i] * (m > 0)
        brute = []
        for c in range(4):
            Zc = np.hstack([base, np.zeros((n, c))])
            Zc[i, 3:] = 1
            brute.append(_brute_log_post(X, Zc, alpha, sx, sa, lof=True))
        np.testing.assert_allclose(birth, np.array(brute) - brute[0], atol=2e-4)


def _exact_class_posterior(X, alpha, sx, sa, k_most):
    """P(left-ordered class of Z | X) by enumeration of every class with at most ``k_most``
    features: a class is the multiset of its columns' histories, each column an N-bit
    integer (row 0 the highest bit)."""
    n = len(X)
    histories = [h for h in itertools.product((0, 1), repeat=n) if any(h)]
    harmonic = sum(1 / j for j in range(1, n + 1))
    log_post = {}
    for counts in itertools.product(range(k_most + 1), repeat=len(histories)):
        if sum(counts) > k_most:
            continue
        cols = [h for h, c in zip(histories, counts) for _ in range(c)]
        Z = np.array(cols, float).T if cols else np.zeros((n, 0))
        log_prior = sum(counts) * math.log(alpha) - alpha * harmonic - sum(math.lgamma(c + 1) for c in counts)
        log_prior += sum(c * (math.lgamma(n - sum(h) + 1) + math.lgamma(sum(h)) - math.lgamma(n + 1))
                         for h, c in zip(histories, counts))
        cov = sa**2 * Z @ Z.T + sx**2 * np.eye(n)
        key = tuple(sorted(int("".join(map(str, h)), 2) for h in cols))
        log_post[key] = log_prior + stats.multivariate_normal(np.zeros(n), cov).logpdf(X.T).sum()
    top = max(log_post.values())
    total = sum(math.exp(v - top) for v in log_post.values())
    return {k: math.exp(v - top) / total for k, v in log_post.items()}


def test_sampler_draws_the_exact_posterior_of_a_small_problem():
    """The chain's frequencies of left-ordered classes against the enumerated posterior
    (N = 3, D = 2, alpha and the sigmas fixed). The sweep flipped the shared features
    with the row's singletons removed, which composes the conditionals into a chain with
    another stationary law: class {110} (column history 6) came out at 0.087 against 0.074."""
    X = np.array([[1.0, 0.2], [0.9, -0.1], [-0.3, 1.1]])
    alpha, sx, sa = 1.0, 0.5, 1.0
    exact = _exact_class_posterior(X, alpha, sx, sa, k_most=7)  # prior mass beyond 7 features: 6e-4
    hp = lg.Hyperparams(k_max=12, k_new_max=6, sample_alpha=False, sample_sigmas=False)
    Xj = jnp.asarray(X)

    def run(key):
        state = lg.init(key, Xj, hp, alpha=alpha, sigma_x=sx, sigma_a=sa)
        return jax.lax.scan(lambda s, _: (lg.step(s, Xj, hp), s.Z), state, None, length=3000)[1]

    draws = np.asarray(jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 16)))[:, 200:].reshape(-1, 3, 12)
    bits = np.array([4, 2, 1]) @ draws.astype(int)  # each column's history
    seen = Counter(tuple(sorted(b[b > 0])) for b in bits)
    top = sorted(exact, key=exact.get, reverse=True)[:12]  # 0.65 of the mass, each class above 0.02
    worst = max(abs(seen[k] / len(bits) - exact[k]) for k in top)
    assert worst < 0.007


def test_sampler_with_a_flat_likelihood_draws_from_the_prior():
    """With sigma_x huge the data say nothing: K+ must follow Poisson(alpha H_N)."""
    n, alpha = 8, 2.0
    X = jnp.zeros((n, 1))
    hp = lg.Hyperparams(k_max=24, sample_alpha=False, sample_sigmas=False)

    def run(key):
        state = lg.init(key, X, hp, alpha=alpha, sigma_x=1e4, sigma_a=1.0)
        return jax.lax.scan(lambda s, _: (lg.step(s, X, hp), s.Z.sum(0) > 0), state, None, length=1500)[1]

    active = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 4))
    k_plus = np.asarray(active.sum(-1))[:, 300:].ravel()
    mean = alpha * float(ibp.harmonic(n))
    # Autocorrelated draws: allow for an effective sample size of a fifth of the draws.
    assert abs(k_plus.mean() - mean) < 4 * math.sqrt(mean) / math.sqrt(len(k_plus) / 5)
    assert abs(k_plus.var() / mean - 1) < 0.25


def test_births_beyond_k_new_max_are_counted_as_lost():
    """Under a flat likelihood a row's births are Poisson(alpha / N): with N = 2 and
    alpha = 4, P(K_new > 4) = 0.053 per row. Births were cut at k_new_max without a trace
    (K+ averaged 5.4 against alpha H_N = 6, lost_births 0); the cut mass is now reported,
    and with room for them the births follow the prior."""
    n, alpha = 2, 4.0
    X = jnp.zeros((n, 1))

    def k_plus_and_lost(hp):
        def run(key):
            state = lg.init(key, X, hp, alpha=alpha, sigma_x=1e4, sigma_a=1.0)
            return jax.lax.scan(lambda s, _: (lg.step(s, X, hp), (s.Z.sum(0) > 0, s.lost_births)), state, None,
                                length=1500)[1]

        active, lost = jax.jit(jax.vmap(run))(jax.random.split(jax.random.key(0), 4))
        return np.asarray(active.sum(-1))[:, 300:].ravel(), np.asarray(lost)[:, 300:].ravel()

    _, lost = k_plus_and_lost(lg.Hyperparams(k_max=30, k_new_max=4, sample_alpha=False, sample_sigmas=False))
    assert 0.05 < lost.mean() < 0.16  # two rows, each P(Poisson(2) > 4) = 0.053
    k_plus, lost = k_plus_and_lost(lg.Hyperparams(k_max=30, k_new_max=16, sample_alpha=False, sample_sigmas=False))
    assert lost.max() < 1e-3
    mean = alpha * float(ibp.harmonic(n))
    assert abs(k_plus.mean() - mean) < 4 * math.sqrt(mean) / math.sqrt(len(k_plus) / 5)


def test_toy_images_features_and_noise_are_recovered():
    X, Z_true, A_true = ibp_toy_images(jax.random.key(0), 60)
    s = ibp.sample_posterior(jax.random.key(1), X, ibp.Hyperparams(k_max=20), num_warmup=80, num_samples=60)
    assert s["Z"].shape == (1, 60, 60, 20)
    sigma_x = float(s["sigma_x"].mean())
    assert 0.4 < sigma_x < 0.6  # truth 0.5
    # The posterior mean of the clean images, Z E[A | X, Z] averaged over the draws, is within
    # 1.5 times the error of Z E[A | X, Z] at the true Z and sigma_x (0.5), sigma_a = 1 (A
    # estimated from the noisy X).
    def clean(Z, sigma_x, sigma_a):
        Z = jnp.asarray(Z, X.dtype)
        return Z @ ibp.feature_means(X, Z, sigma_x, sigma_a)

    rmse = lambda images: float(jnp.sqrt(jnp.mean((images - Z_true @ A_true) ** 2)))
    posterior = jnp.mean(jax.vmap(clean)(s["Z"][0], s["sigma_x"][0], s["sigma_a"][0]), axis=0)
    assert rmse(posterior) < 1.5 * rmse(clean(Z_true, 0.5, 1.0))
    assert float(s["lost_births"].max()) < 1e-6


def test_vectorised_chains_equal_separate_chains():
    """numpyro's vectorised chains run the sweep under vmap: the same draws as one chain
    at a time."""
    X, _, _ = ibp_toy_images(jax.random.key(0), 20)
    hp = ibp.Hyperparams(k_max=8)
    states = jax.vmap(lambda k: lg.init(k, X, hp))(jax.random.split(jax.random.key(5), 2))
    run = lambda s: jax.lax.scan(lambda s, _: (lg.step(s, X, hp),) * 2, s, None, length=4)[1]
    both = jax.jit(jax.vmap(run))(states)
    one = jax.jit(run)(jax.tree.map(lambda a: a[1], states))
    np.testing.assert_array_equal(both.Z[1], one.Z)
    np.testing.assert_allclose(both.sigma_x[1], one.sigma_x, rtol=1e-10)


def test_vectorised_chains_make_their_lapack_calls_one_at_a_time():
    """A step of four chains under vmap (the Z sweep, the hyperparameters, the log joint)
    makes its LAPACK calls one after another, the sweep's row updates included
    (``lapack_order``): the draw of A, mean plus noise, solves with the Cholesky factor
    twice in a row rather than twice side by side."""
    X, _, _ = ibp_toy_images(jax.random.key(0), 20)
    hp = ibp.Hyperparams(k_max=8)
    states = jax.vmap(lambda k: lg.init(k, X, hp))(jax.random.split(jax.random.key(5), 4))
    bodies = lapack_calls(jax.make_jaxpr(jax.vmap(lambda s: lg.step(s, X, hp)))(states))
    assert [name for name, _ in bodies[0]] == ["scan", "cholesky", "triangular_solve", "triangular_solve", "cholesky",
                                               "triangular_solve"]
    assert len(bodies) > 1  # the sweep's body is looked into
    assert one_at_a_time(bodies), bodies


@pytest.mark.parametrize("X,hp,match", [
    (np.full((3, 2), np.nan), lg.Hyperparams(), "non-finite"),
    (np.ones(3), lg.Hyperparams(), "2-D"),
    (np.ones((3, 2)), lg.Hyperparams(k_max=0), "k_max"),
    (np.ones((3, 2)), lg.Hyperparams(alpha_prior=(0.0, 1.0)), "alpha_prior"),
])
def test_bad_input(X, hp, match):
    with pytest.raises(ValueError, match=match):
        ibp.sample_posterior(jax.random.key(0), X, hp, num_warmup=1, num_samples=1)


def test_data_beyond_float32_on_its_scale_are_refused_by_name():
    """X at 1e20 in float32 ran to NaN sigma_x and log joint without a word."""
    X = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32) * np.float32(1e20)
    with jax.enable_x64(False), pytest.raises(ValueError, match="X is at scale .*float32 holds; divide X"):
        ibp.sample_posterior(jax.random.key(0), X, lg.Hyperparams(k_max=4), num_warmup=1, num_samples=1)


def test_float32_data_sample_in_float32_with_x64_on():
    """Inside the sampler's program the priors are traced float64 arrays (x64 is on here):
    alpha's and the sigmas' draws became float64 and the run stopped on a carry of
    mismatched types. They stay in the data's float32 now, and a step takes a NumPy X (it
    failed on the sweep's traced row index)."""
    X = np.asarray(ibp_toy_images(jax.random.key(0), 12)[0], np.float32)
    draws = ibp.sample_posterior(jax.random.key(1), X, ibp.Hyperparams(k_max=6), num_warmup=3, num_samples=4)
    for name in ("alpha", "sigma_x", "sigma_a"):
        assert draws[name].dtype == np.float32 and np.all(np.isfinite(draws[name])), name
    hp = ibp.Hyperparams(k_max=6)
    state = lg.init(jax.random.key(2), X, hp)
    from_numpy, from_jax = lg.step(state, X, hp), lg.step(state, jnp.asarray(X), hp)
    np.testing.assert_array_equal(from_numpy.Z, from_jax.Z)
    assert from_numpy.sigma_x.dtype == np.float32

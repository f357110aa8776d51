"""HSIC estimators and independence tests against direct NumPy formulas, brute-force
U-statistics, permutation distributions and binomial bands."""

import itertools
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskit.covariance import hsic


def np_median_sigma(x, kernel="gaussian"):
    """The median heuristic computed directly: all pairs i < j, nonzero distances."""
    x = np.asarray(x, float).reshape(len(x), -1)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)[np.triu_indices(len(x), 1)]
    d2 = d2[d2 > 0]
    if d2.size == 0:
        return 1.0
    return np.sqrt(np.median(d2) / 2) if kernel == "gaussian" else np.median(np.sqrt(d2))


def np_gram(x, kernel):
    x = np.asarray(x, float).reshape(len(x), -1)
    d2 = ((x[:, None, :] - x[None, :, :]) ** 2).sum(-1)
    if kernel == "gaussian":
        return np.exp(-d2 / (2 * np_median_sigma(x) ** 2))
    if kernel == "laplace":
        return np.exp(-np.sqrt(d2) / np_median_sigma(x, "laplace"))
    return x @ x.T


def np_hsic_biased(K, L):
    m = len(K)
    H = np.eye(m) - np.ones((m, m)) / m
    return np.trace(K @ H @ L @ H) / m**2


def np_hsic_unbiased(K, L):
    m = len(K)
    Kt, Lt, one = K - np.diag(np.diag(K)), L - np.diag(np.diag(L)), np.ones(m)
    return (np.trace(Kt @ Lt) + Kt.sum() * Lt.sum() / ((m - 1) * (m - 2)) - 2 / (m - 2) * one @ Kt @ Lt @ one) / (m * (m - 3))


def dependent(rng, m, noise=0.5):
    x = rng.normal(size=m)
    return x, x**2 + noise * rng.normal(size=m)


@pytest.mark.parametrize("kernel", ["gaussian", "laplace", "linear", "precomputed"])
def test_estimators_equal_numpy_formulas(kernel, rng):
    x, y = rng.normal(size=(40, 2)), rng.normal(size=40) + rng.normal(size=(40, 2))[:, 0]
    base = "gaussian" if kernel == "precomputed" else kernel
    K, L = np_gram(x, base), np_gram(y, base)
    args = (K, L) if kernel == "precomputed" else (x, y)
    np.testing.assert_allclose(hsic.hsic(*args, kernel=kernel), np_hsic_biased(K, L), rtol=1e-10)
    np.testing.assert_allclose(hsic.hsic(*args, kernel=kernel, estimator="unbiased"), np_hsic_unbiased(K, L), rtol=1e-9)


def test_unbiased_estimator_is_the_u_statistic(rng):
    """HSIC_u equals the mean over distinct (i, j, q, r) of k_ij l_ij + k_ij l_qr - 2 k_ij l_iq
    (Song et al. 2012), by brute force."""
    m = 7
    K, L = np_gram(rng.normal(size=m), "gaussian"), np_gram(rng.normal(size=m), "laplace")
    h = [K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q] for i, j, q, r in itertools.permutations(range(m), 4)]
    np.testing.assert_allclose(hsic.hsic_unbiased_gram(jnp.asarray(K), jnp.asarray(L)), np.mean(h), rtol=1e-10)


def test_mixed_kernels_and_explicit_bandwidths(rng):
    x, y = dependent(rng, 30)
    L = np_gram(y, "laplace")
    d2 = (x[:, None] - x[None]) ** 2
    K = np.exp(-d2 / (2 * 0.3**2))
    got = hsic.hsic(x, L, kernel=("gaussian", "precomputed"), bandwidth_x=0.3)
    np.testing.assert_allclose(got, np_hsic_biased(K, L), rtol=1e-10)
    assert not np.isclose(got, hsic.hsic(x, L, kernel=("gaussian", "precomputed")))


@pytest.mark.parametrize("kernel", ["gaussian", "laplace"])
@pytest.mark.parametrize("data", ["one feature", "ties", "three features", "two points"])
def test_median_heuristic_equals_numpy(kernel, data, rng):
    x = {"one feature": rng.normal(size=301), "ties": np.round(rng.normal(size=200) * 2) / 2,
         "three features": rng.normal(size=(120, 3)), "two points": np.array([0.0, 0.0, 1.5, 0.0])}[data]
    np.testing.assert_allclose(hsic.median_bandwidth(x, kernel), np_median_sigma(x, kernel), rtol=1e-12)


def test_repeated_points_in_a_compiled_program_at_the_users_level(tmp_path):
    """Several features with a third of the points at one value, in a fresh process at the
    optimisation level users get (the tests run at level 0): XLA fused the centring into the
    distances there, equal points came out 1e-16 apart, and the median heuristic counted
    their pairs as distinct (HSIC 0.0107 against 0.0070)."""
    import os
    import subprocess
    import sys

    rng = np.random.default_rng(1)
    x = np.repeat(rng.standard_normal((1, 2)), 60, 0)
    moved = rng.random(60) < 0.35
    x[moved] = rng.standard_normal((moved.sum(), 2))
    y = x[:, :1] ** 2 + 0.3 * rng.standard_normal((60, 1))
    np.savez(tmp_path / "xy.npz", x=x, y=y)
    code = ("import jax, numpy as np\njax.config.update('jax_enable_x64', True)\nfrom bayeskit.covariance import hsic\n"
            f"d = np.load({str(tmp_path / 'xy.npz')!r})\nprint(repr(float(hsic.hsic(d['x'], d['y']))))")
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if "optimization_level" not in f)
    env = {**os.environ, "XLA_FLAGS": flags, "BAYESKIT_CACHE_DIR": str(tmp_path), "BAYESKIT_EXECUTABLE_CACHE": "0"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-1500:]
    np.testing.assert_allclose(float(run.stdout.strip()), np_hsic_biased(np_gram(x, "gaussian"), np_gram(y, "gaussian")), rtol=1e-9)


def test_median_heuristic_float32(rng):
    x = rng.normal(size=500).astype(np.float32)
    sigma = hsic.median_bandwidth(x)
    assert sigma.dtype == jnp.float32
    np.testing.assert_allclose(sigma, np_median_sigma(x), rtol=1e-6)


def test_median_heuristic_and_hsic_in_float16(rng):
    """float16 samples: the bisection over the differences' bit patterns uses 16-bit integers
    (it asked for 32-bit ones and failed); the result is numpy's median of the same float16
    values to float16's precision, and HSIC is the float32 value to a few parts in 1e3."""
    x = rng.normal(size=200).astype(np.float16)
    sigma = hsic.median_bandwidth(x)
    assert sigma.dtype == jnp.float16
    np.testing.assert_allclose(float(sigma), np_median_sigma(x.astype(np.float64)), rtol=2e-3)
    y = (x.astype(np.float32) ** 2 + 0.3 * rng.normal(size=200)).astype(np.float16)
    np.testing.assert_allclose(float(hsic.hsic(x, y)), float(hsic.hsic(x.astype(np.float32), y.astype(np.float32))), rtol=5e-3)


def test_constant_variable_gives_zero_not_nan(rng):
    x, c = rng.normal(size=20), np.full(20, 3.0)
    assert float(hsic.median_bandwidth(c)) == 1.0
    for estimator in ("biased", "unbiased"):
        assert float(hsic.hsic(x, c, estimator=estimator)) == pytest.approx(0.0, abs=1e-15)
        assert float(hsic.hsic(c, c, estimator=estimator)) == pytest.approx(0.0, abs=1e-15)
    for method in ("gamma", "permutation"):
        r = hsic.test(jax.random.key(0), x, c, method=method, n_permutations=50)
        assert np.isfinite(r.statistic) and float(r.p_value) == 1.0


def test_gamma_moments_match_the_permutation_distribution(rng):
    """At m = 200 the moments (3)-(4) agree with 2000 permutations within Monte Carlo error
    (four standard errors) plus the O(1/m) of the approximation."""
    m, B = 200, 2000
    x, y = rng.normal(size=m), rng.normal(size=(m, 2))
    K, L = jnp.asarray(np_gram(x, "gaussian")), jnp.asarray(np_gram(y, "laplace"))
    Kc, Lc = hsic.centre(K), hsic.centre(L)
    draws = np.asarray(hsic.permutation_null(jax.random.key(1), Kc, lambda u, v: Lc[u, v], jnp.arange(m), B))
    for b in (0, 1, B - 1):  # draws recomputed by the m^2 sum (6), from the documented key per permutation
        p = np.asarray(jax.random.permutation(jax.random.split(jax.random.key(1), B)[b], m))
        assert np.isclose(np.sum(np.asarray(Kc) * np.asarray(L)[p][:, p]) / m, draws[b], rtol=1e-10)
    mean, var = hsic.gamma_null(K, L)
    se_mean = draws.std() / np.sqrt(B)
    se_var = np.std((draws - draws.mean()) ** 2) / np.sqrt(B)
    assert abs(draws.mean() - mean) < 4 * se_mean + mean / m
    assert abs(draws.var(ddof=1) - var) < 4 * se_var + 5 * var / m


def rejection_rate(method, m, n_sets=200, B=200, seed=0):
    keys = jax.random.split(jax.random.key(seed), 3 * n_sets).reshape(3, n_sets)
    x = jax.vmap(lambda k: jax.random.normal(k, (m,)))(keys[0])
    y = jax.vmap(lambda k: jax.random.uniform(k, (m,)))(keys[1])
    run = jax.jit(jax.vmap(lambda k, a, b: hsic.test(k, a, b, method=method, n_permutations=B).p_value))
    return float(np.mean(np.asarray(run(keys[2], x, y)) <= 0.05))


@pytest.mark.parametrize("method", ["permutation", "gamma"])
def test_level_is_calibrated(method):
    """200 independent data sets of m = 50: the rejection rate at alpha = 0.05 lies in the
    binomial 99.9% band."""
    lo, hi = stats.binom.ppf([0.0005, 0.9995], 200, 0.05) / 200
    assert lo <= rejection_rate(method, 50) <= hi


@pytest.mark.parametrize("method", ["permutation", "gamma"])
def test_power_against_quadratic_dependence(method, rng):
    x, y = dependent(rng, 100)
    assert float(hsic.test(jax.random.key(0), x, y, method=method, n_permutations=500).p_value) < 0.005


def test_permutation_p_value_formula(rng):
    B = 199
    x = rng.normal(size=60)
    # y = x with the linear kernel: T = |K~|_F^2 / m is the largest T* (Cauchy-Schwarz), reached by pi = id only
    r = hsic.test(jax.random.key(0), x, x, method="permutation", n_permutations=B, kernel="linear")
    assert float(r.p_value) == pytest.approx(1 / (B + 1))
    # a binary y: many T* tie with T up to rounding, and count
    x, y = rng.normal(size=12), np.repeat([0.0, 1.0], 6)
    r = hsic.test(jax.random.key(1), x, y, method="permutation", n_permutations=B, kernel="linear")
    K = np.outer(x, x)
    Kc = K - K.mean(0) - K.mean(1)[:, None] + K.mean()
    Ly = np.outer(y, y)
    draws = np.asarray(hsic.permutation_null(jax.random.key(1), jnp.asarray(Kc), lambda u, v: jnp.asarray(Ly)[u, v],
                                             jnp.arange(12), B))
    T = np.sum(Kc * Ly) / 12
    assert float(r.statistic) == pytest.approx(T, rel=1e-12)
    assert float(r.p_value) == pytest.approx((1 + np.sum(draws >= T - 1e-12)) / (B + 1))
    assert np.sum(np.isclose(draws, T, rtol=1e-12)) > 0  # the case has ties


@pytest.mark.parametrize("m", [7, 8])
def test_cyclic_band_sum_equals_the_full_sum(rng, m):
    """(6') over floor(m/2) + 1 cyclic diagonals equals (6) over all m^2 pairs, for odd and
    even m, with the kernel recomputed from a permuted two-feature sample."""
    x, y = rng.normal(size=(m, 1)), rng.normal(size=(m, 2))
    Kc = hsic.centre(jnp.asarray(np_gram(x, "gaussian")))
    kernel = lambda u, v: hsic.paired_kernel(u, v, "laplace", 0.7)  # noqa: E731
    draws = np.asarray(hsic.permutation_null(jax.random.key(4), Kc, kernel, jnp.asarray(y), 5))
    for b in range(5):
        p = np.asarray(jax.random.permutation(jax.random.split(jax.random.key(4), 5)[b], m))
        L = np.exp(-np.sqrt(((y[p][:, None] - y[p][None]) ** 2).sum(-1)) / 0.7)
        assert np.isclose(np.sum(np.asarray(Kc) * L) / m, draws[b], rtol=1e-12)


def test_reproducible_from_the_key(rng):
    x, y = rng.normal(size=40), rng.normal(size=40)
    run = lambda key: float(hsic.test(key, x, y, method="permutation", n_permutations=300).p_value)  # noqa: E731
    assert run(jax.random.key(5)) == run(jax.random.key(5))
    assert run(jax.random.key(5)) != run(jax.random.key(6))
    draws = [hsic.permutation_null(jax.random.key(2), jnp.eye(9), lambda u, v: (u == v) * u, jnp.arange(9.0), 10, bs)
             for bs in (1, 3, 16)]
    np.testing.assert_allclose(draws[0], draws[1], rtol=1e-14)  # the same permutations whatever the batch size
    np.testing.assert_allclose(draws[0], draws[2], rtol=1e-14)


def test_rff_is_close_to_the_exact_statistic(rng):
    """D = 2000 frequencies: the statistic within 10% on dependent data (m = 400), and the
    gamma test's null mean within 5% and p-value within 0.05 on independent data."""
    x, y = dependent(rng, 400)
    exact = float(hsic.hsic(x, y))
    approx = float(hsic.hsic_rff(jax.random.key(0), x, y, n_features=2000))
    assert abs(approx - exact) < 0.1 * exact
    z = rng.normal(size=400)
    exact_test = hsic.test(jax.random.key(0), x, z)
    rff_test = hsic.test(jax.random.key(0), x, z, approximation="rff", n_features=2000)
    assert abs(float(rff_test.null_mean) - float(exact_test.null_mean)) < 0.05 * float(exact_test.null_mean)
    assert abs(float(rff_test.p_value) - float(exact_test.p_value)) < 0.05
    assert float(hsic.test(jax.random.key(0), x, y, approximation="rff", n_features=500).p_value) < 1e-6


def test_rff_laplace_features_approximate_the_kernel(rng):
    x = rng.normal(size=(50, 2))
    Phi = hsic.random_features(jax.random.key(0), jnp.asarray(x), 1.3, 20000, "laplace")
    d = np.sqrt(((x[:, None] - x[None]) ** 2).sum(-1))
    np.testing.assert_allclose(Phi @ Phi.T, np.exp(-d / 1.3), atol=0.03)


def test_float32(rng):
    x, y = dependent(rng, 80)
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    for estimator in ("biased", "unbiased"):
        value = hsic.hsic(x32, y32, estimator=estimator)
        assert value.dtype == jnp.float32
        np.testing.assert_allclose(value, hsic.hsic(x, y, estimator=estimator), rtol=1e-4)
    for method in ("gamma", "permutation"):
        r = hsic.test(jax.random.key(0), x32, y32, method=method, n_permutations=200)
        assert r.statistic.dtype == jnp.float32 and r.p_value.dtype == jnp.float32
        np.testing.assert_allclose(r.statistic, hsic.test(jax.random.key(0), x, y, method=method).statistic, rtol=1e-4)
    assert float(hsic.test(jax.random.key(0), x32, y32, approximation="rff").p_value) < 1e-3


def test_jit_and_vmap_agree_with_single_calls(rng):
    xs, ys = rng.normal(size=(3, 30)), rng.normal(size=(3, 30))
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.jit(jax.vmap(lambda k, a, b: hsic.test(k, a, b, method="permutation", n_permutations=99)))(keys, xs, ys)
    for i in range(3):
        one = hsic.test(keys[i], xs[i], ys[i], method="permutation", n_permutations=99)
        np.testing.assert_allclose(batched.p_value[i], one.p_value)
        np.testing.assert_allclose(batched.statistic[i], one.statistic, rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda x, y: hsic.test(jax.random.key(0), x[:5], y[:5]), "at least 6"),
    (lambda x, y: hsic.hsic(x[:3], y[:3], estimator="unbiased"), "at least 4"),
    (lambda x, y: hsic.hsic(x, y[:-1]), "paired"),
    (lambda x, y: hsic.hsic(np.where(np.arange(10) == 3, np.nan, x), y), "non-finite"),
    (lambda x, y: hsic.hsic(x, np.where(np.arange(10) == 3, np.inf, y)), "non-finite"),
    (lambda x, y: hsic.hsic(x, y, kernel="polynomial"), "kernel"),
    (lambda x, y: hsic.hsic(x, y, estimator="fast"), "estimator"),
    (lambda x, y: hsic.test(jax.random.key(0), x, y, method="bootstrap"), "method"),
    (lambda x, y: hsic.test(jax.random.key(0), x, y, approximation="nystrom"), "approximation"),
    (lambda x, y: hsic.test(jax.random.key(0), x, y, method="permutation", approximation="rff"), "gamma"),
    (lambda x, y: hsic.test(jax.random.key(0), x, y, kernel="linear", approximation="rff"), "kernel"),
    (lambda x, y: hsic.hsic(x, y, bandwidth_x=0.0), "bandwidth_x"),
    (lambda x, y: hsic.hsic(x, y, bandwidth_y=-1.0), "bandwidth_y"),
    (lambda x, y: hsic.hsic(x, y, kernel="linear", bandwidth_x=1.0), "bandwidth_x"),
    (lambda x, y: hsic.hsic(np.ones((10, 9)), np.ones((10, 10)), kernel="precomputed"), "square"),
    (lambda x, y: hsic.hsic(np.triu(np.ones((10, 10))), np.ones((10, 10)), kernel="precomputed"), "symmetric"),
    (lambda x, y: hsic.test(jax.random.key(0), x, y, n_permutations=0), "n_permutations"),
    (lambda x, y: hsic.hsic(np.ones((10, 2, 2)), y), "2-D"),
])
def test_bad_input_raises(call, message, rng):
    with pytest.raises(ValueError, match=message):
        call(rng.normal(size=10), rng.normal(size=10))


@pytest.mark.parametrize("scale", [1e-20, 1e-8, 1e8, 1e20])
def test_scale_invariant_in_float32(scale):
    """With the median bandwidth the statistic and every p-value are invariant under x -> a x,
    y -> c y; in float32 at 1e+-20 the squared distances would overflow or underflow unless
    the data are standardised first. The linear kernel's p-value is invariant too."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=120)
    y = x**2 + 0.5 * rng.normal(size=120)  # strongly dependent: p ~ 1e-20 at unit scale
    unit = [np.float32(x), np.float32(y)]
    scaled = [np.float32(x * scale), np.float32(y / np.sqrt(scale))]
    key = jax.random.key(0)
    for kwargs in (dict(), dict(method="permutation", n_permutations=200), dict(approximation="rff"),
                   dict(kernel="laplace"), dict(kernel="linear")):
        ref, got = hsic.test(key, *unit, **kwargs), hsic.test(key, *scaled, **kwargs)
        assert np.isfinite(float(got.p_value)) and float(got.p_value) == pytest.approx(float(ref.p_value), rel=1e-3)
        assert float(got.shape) == pytest.approx(float(ref.shape), rel=1e-4)
    assert float(ref.p_value) > 0.01  # the linear kernel misses y = x^2: a real check of its p-value above
    assert float(hsic.test(key, *scaled).p_value) < 1e-6
    assert float(hsic.hsic(*scaled)) == pytest.approx(float(hsic.hsic(*unit)), rel=1e-5)
    bandwidths = dict(bandwidth_x=0.7 * scale, bandwidth_y=1.3 / np.sqrt(scale))
    assert float(hsic.hsic(*scaled, **bandwidths)) == pytest.approx(
        float(hsic.hsic(*unit, bandwidth_x=0.7, bandwidth_y=1.3)), rel=1e-5)


def test_numpy_float64_data_run_without_a_dtype_warning_under_float32_defaults_and_integers_run_as_floats():
    """The out-of-the-box setting (x64 off) with ordinary float64 NumPy data: no JAX warning
    about an unavailable dtype (the samples' dtype is canonicalised before promotion); integer
    samples, on the host and traced, are tested as their float copies."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=60)
    y = x**2 + 0.5 * rng.normal(size=60)
    with jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        result = hsic.test(jax.random.key(0), x, y)
        assert result.statistic.dtype == np.float32
        value = hsic.hsic(x, y)
    assert value.dtype == np.float32 and 0 < float(result.p_value) < 1e-3
    xi, yi = np.round(3 * x).astype(int), np.round(3 * y).astype(int)
    for f in (lambda a, b: hsic.test(jax.random.key(0), a, b).p_value, hsic.hsic):
        want = np.asarray(f(xi.astype(float), yi.astype(float)))
        np.testing.assert_allclose(np.asarray(f(xi, yi)), want, rtol=1e-10)
        np.testing.assert_allclose(np.asarray(jax.jit(f)(xi, yi)), want, rtol=1e-10)


def test_a_linear_kernel_beyond_float32_is_refused_by_name(rng):
    """Data at 1e20 in float32: the linear kernel's statistic (1e40 times a number) came back inf."""
    x = rng.normal(size=50).astype(np.float32)
    with jax.enable_x64(False):
        assert np.isfinite(float(hsic.hsic(x * np.float32(1e15), x**2, kernel="linear")))
        with pytest.raises(ValueError, match="linear kernel scales as the squared spread.*beyond float32"):
            hsic.hsic(x * np.float32(1e20), x**2, kernel="linear")
        with pytest.raises(ValueError, match="beyond float32"):
            hsic.test(jax.random.key(0), x * np.float32(1e20), x**2, kernel="linear")
    np.testing.assert_allclose(float(hsic.hsic(x.astype(np.float64) * 1e20, x**2, kernel="linear")),
                               1e40 * float(hsic.hsic(x.astype(np.float64), x**2, kernel="linear")), rtol=1e-6)


def test_a_nan_inside_vmap_gives_a_nan_p_value():
    """Data are not checked inside vmap: a data set with a NaN has a NaN statistic, and its
    p-value was 1 (gamma) or 1 / (B + 1), the strongest evidence (permutations). It is NaN
    now, and the other data sets of the batch are untouched."""
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(3, 30, 1))
    ys = xs + 0.1 * rng.normal(size=(3, 30, 1))
    xs[1, 0, 0] = np.nan
    keys = jax.random.split(jax.random.key(0), 3)
    for kwargs in ({"method": "gamma"}, {"method": "permutation", "n_permutations": 50},
                   {"method": "gamma", "approximation": "rff", "n_features": 20}):
        p = np.asarray(jax.vmap(lambda k, x, y: hsic.test(k, x, y, **kwargs).p_value)(keys, xs, ys))  # noqa: B023
        assert np.isnan(p[1]) and np.all(np.isfinite(p[[0, 2]])), kwargs
        alone = float(hsic.test(keys[0], xs[0], ys[0], **kwargs).p_value)
        np.testing.assert_allclose(p[0], alone, rtol=1e-6, err_msg=str(kwargs))

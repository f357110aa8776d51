"""The Gamma sampler of bayeskit.core.sampling against SciPy's distribution functions."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from bayeskit.core import sampling


@pytest.mark.parametrize("a", [0.02, 0.3, 1.0, 2.5, 40.0, 1e5])
def test_gamma_and_loggamma_follow_the_gamma_law(a):
    """Kolmogorov-Smirnov against Gamma(a) for 20000 draws (both boosted and direct shapes),
    and the mean of log G against E[log G] = digamma(a) to four standard errors."""
    g = np.asarray(sampling.gamma(jax.random.key(1), a, (20000,)))
    assert np.all(g >= 0) and stats.kstest(g, stats.gamma(a).cdf).pvalue > 1e-3
    lg = np.asarray(sampling.loggamma(jax.random.key(2), a, (20000,)))
    assert np.all(np.isfinite(lg))
    assert abs(lg.mean() - special.digamma(a)) < 4 * np.sqrt(special.polygamma(1, a) / lg.size)


def test_loggamma_stays_finite_where_the_variates_underflow():
    """Shape 1e-3: nearly half the Gamma variates (e^{-0.745}) are below the smallest double;
    their logarithms stay finite."""
    lg = np.asarray(sampling.loggamma(jax.random.key(0), 1e-3, (2000,)))
    assert np.all(np.isfinite(lg)) and np.mean(lg < -745) > 0.4
    assert abs(lg.mean() - special.digamma(1e-3)) < 4 * np.sqrt(special.polygamma(1, 1e-3) / lg.size)


def test_draws_under_vmap_are_those_of_separate_calls_and_prefixes_agree():
    keys = jax.random.split(jax.random.key(0), 3)
    shapes = jnp.array([0.5, 2.0, 9.0])
    batched = jax.vmap(lambda k, a: sampling.gamma(k, a))(keys, shapes)
    np.testing.assert_array_equal(batched, [sampling.gamma(k, a) for k, a in zip(keys, shapes)])
    long, short = sampling.loggamma(jax.random.key(3), 0.7, (50,)), sampling.loggamma(jax.random.key(3), 0.7, (20,))
    np.testing.assert_array_equal(long[:20], short)


def test_vmap_over_shapes_alone_and_nested_vmaps_over_raw_keys_are_separate_calls():
    """The vmap rule folds any mapped axes into one loop: shapes mapped under one key, and two
    nested vmaps over old-style uint32 keys (their word axis kept), give each call's draws."""
    key, shapes = jax.random.key(4), jnp.array([0.3, 1.0, 7.0])
    np.testing.assert_array_equal(jax.vmap(lambda a: sampling.gamma(key, a, (5,)))(shapes),
                                  [sampling.gamma(key, a, (5,)) for a in shapes])
    raw = jax.random.split(jax.random.PRNGKey(8), 6).reshape(2, 3, 2)
    nested = jax.vmap(jax.vmap(lambda k: sampling.loggamma(k, 0.4, (4,))))(raw)
    np.testing.assert_array_equal(nested, [[sampling.loggamma(k, 0.4, (4,)) for k in row] for row in raw])


def test_shapes_outside_the_positive_reals_end_the_loop_as_jax_does():
    """Shape 0 gives 0 (log: -inf), an infinite shape inf, a negative or NaN shape NaN, each
    without a single round (the loop would otherwise never accept), beside valid shapes."""
    a = jnp.array([0.0, np.inf, -1.0, np.nan, 2.0])
    g, lg = sampling.gamma(jax.random.key(0), a), sampling.loggamma(jax.random.key(0), a)
    np.testing.assert_array_equal(g[:4], [0.0, np.inf, np.nan, np.nan])
    np.testing.assert_array_equal(lg[:4], [-np.inf, np.inf, np.nan, np.nan])
    assert np.isfinite(g[4]) and g[4] > 0 and np.isclose(lg[4], np.log(g[4]))  # the same key draws the same variate


@pytest.mark.parametrize("a", [1e4, 1e6, 1e7])
def test_single_precision_large_shapes_are_exact_and_never_nan(a):
    """In float32 the acceptance bracket d (1 - v + log v) must not be formed as d - d v + ...,
    whose rounding at d >= 1e4 exceeds the bracket: no NaN, and Kolmogorov-Smirnov against
    Gamma(a) on 200,000 draws."""
    g = np.asarray(sampling.gamma(jax.random.key(7), a, (200_000,), jnp.float32), np.float64)
    assert not np.isnan(g).any()
    assert stats.kstest(g, stats.gamma(a).cdf).pvalue > 1e-3


def test_the_boost_uniform_is_never_zero():
    """(2) takes log(1 - u), u uniform on [0, 1): a draw of u = 0 gives log 1, not -inf. With
    the boost's uniforms (the third of each variate's three) forced to 0, the log-variates of
    shape 1/2 stay finite and equal those of shape 3/2."""
    draw = sampling._next_key_and_uniforms

    def zero_boost(key, count, dtype):
        key, u = draw(key, count, dtype)
        return key, u.at[2::3].set(0)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sampling, "_next_key_and_uniforms", zero_boost)
        lg = sampling.loggamma(jax.random.key(0), 0.5, (4,), jnp.float32)
        # a = 1/2 runs (1) at b = 3/2 on the same uniforms, and (2) adds log(1 - 0) / a = 0
        np.testing.assert_array_equal(lg, sampling.loggamma(jax.random.key(0), 1.5, (4,), jnp.float32))
    assert np.all(np.isfinite(np.asarray(lg)))


def test_shapes_broadcast_and_dtypes_follow_the_request():
    g = sampling.gamma(jax.random.key(0), jnp.array([1.0, 3.0]), (4, 2), jnp.float32)
    assert g.shape == (4, 2) and g.dtype == jnp.float32
    assert sampling.loggamma(jax.random.key(0), jnp.ones(3)).shape == (3,)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_normal_from_uniform_is_the_normal_quantile(dtype):
    u = jnp.asarray(np.linspace(0, 1, 1001, endpoint=False), dtype)
    z = sampling.normal_from_uniform(u)
    assert z.dtype == dtype
    z = np.asarray(z, np.float64)
    assert np.all(np.isfinite(z))  # u = 0 stays finite
    inner = slice(1, None)
    tol = 1e-5 if dtype == jnp.float32 else 1e-12
    np.testing.assert_allclose(z[inner], stats.norm.ppf(np.asarray(u, np.float64)[inner]), rtol=tol, atol=tol)


def test_categorical_from_uniform_is_the_inverse_cdf():
    logits = jnp.array([-jnp.inf, 0.0, np.log(3.0), -jnp.inf, np.log(6.0), -jnp.inf])
    p = np.array([0, 1, 3, 0, 6, 0]) / 10
    grid = (np.arange(10_000) + 0.5) / 10_000  # midpoints: each index takes its probability's share
    idx = np.asarray(jax.vmap(lambda u: sampling.categorical_from_uniform(u, logits))(jnp.asarray(grid)))
    np.testing.assert_allclose(np.bincount(idx, minlength=6) / grid.size, p, atol=1e-4)
    assert np.all(np.diff(idx) >= 0)  # monotone in u: the inverse CDF
    # the ends of [0, 1] land on indices of positive probability (u = 1 on the last one, not past the -inf tail)
    for u in (0.0, np.nextafter(1.0, 0.0)):
        assert p[int(sampling.categorical_from_uniform(jnp.asarray(u), logits))] > 0
    assert int(sampling.categorical_from_uniform(jnp.asarray(1.0), logits)) == 4
    assert int(sampling.categorical_from_uniform(jnp.asarray(np.nextafter(1.0, 0.0)), jnp.array([0.0, -800.0]))) == 0
    # logits far from zero (exp would overflow without the shift by their maximum)
    shifted = jax.vmap(lambda u: sampling.categorical_from_uniform(u, logits + 1000.0))(jnp.asarray(grid))
    np.testing.assert_array_equal(np.asarray(shifted), idx)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_round_uniforms_are_jax_uniforms_after_the_next_key(dtype):
    """A round's uniforms are JAX's own uniforms of one draw, past the elements that hold the
    next round's key, and that key is a fresh one (typed and raw keys alike)."""
    for key in (jax.random.key(5), jax.random.PRNGKey(5)):
        following, u = sampling._next_key_and_uniforms(key, 7, dtype)
        lead = 2 * 32 // jnp.finfo(dtype).bits  # elements that hold a Threefry key's two 32-bit words
        np.testing.assert_array_equal(u, jax.random.uniform(key, (lead + 7,), dtype)[lead:])
        data = lambda k: jax.random.key_data(k) if jnp.issubdtype(k.dtype, jax.dtypes.prng_key) else k
        assert data(following).shape == data(key).shape
        assert not np.array_equal(data(following), data(key))


@pytest.mark.parametrize("draw, args", [(jax.random.normal, (jnp.float64,)), (jax.random.uniform, (jnp.float32,)),
                                        (jax.random.bits, (jnp.uint32,))])
@pytest.mark.parametrize("partitionable", [True, False])
def test_flat_draws_are_the_shaped_draws(draw, args, partitionable):
    """A draw of a shape of several axes made flat and reshaped gives the same numbers, for a
    key and for keys under vmap, with JAX's partitionable Threefry and without."""
    with jax.threefry_partitionable(partitionable):
        key = jax.random.key(11)
        np.testing.assert_array_equal(sampling.flat(draw, key, (3, 4, 5), *args), draw(key, (3, 4, 5), *args))
        keys = jax.random.split(key, 3)
        np.testing.assert_array_equal(jax.vmap(lambda k: sampling.flat(draw, k, (2, 7), *args))(keys),
                                      jax.vmap(lambda k: draw(k, (2, 7), *args))(keys))

"""The SBMoE paper's generators: any size up to ``MIN_ROWS`` runs one compiled program and
gives exactly the draws of its own size."""

import jax
import numpy as np
import pytest
from compilations import count_compilations

from bayeskit.datasets import sbmoe as data


@pytest.mark.parametrize("n", [1, 37, 200, 2000, data.MIN_ROWS, data.MIN_ROWS + 1])
def test_the_first_rows_of_a_larger_draw_are_the_draw_of_that_size(n):
    """Drawing MIN_ROWS or more rows and keeping n is the same as drawing n: each row's
    variates (normal, Bernoulli, Gamma, Wishart) come from its own counter-based key. The
    inputs' 2 x 2 matrix product may round by an ulp at another shape (one row)."""
    key, dtype = jax.random.key(n), np.float64
    for got, direct in [(data.sbmoe_synthetic_1d(key, n, dtype), data._synthetic_1d(key, n, dtype)),
                        (data.sbmoe_synthetic_2d(key, n, dtype, return_latent=True), data._synthetic_2d(key, n, dtype))]:
        assert len(got) == len(direct)
        for a, b in zip(got, direct):
            assert a.shape[0] == n
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-13, atol=0)


def test_sizes_up_to_min_rows_share_one_generator_program():
    """A second size up to MIN_ROWS compiles nothing but the slicing of its rows."""
    data.sbmoe_synthetic_1d(jax.random.key(0), 11)
    with count_compilations() as seen:
        X, Y = data.sbmoe_synthetic_1d(jax.random.key(1), 2000)
    assert X.shape == (2000, 2) and Y.shape == (2000, 1)
    assert set(seen["compiled"]) <= {"jit(dynamic_slice)"}, seen
    assert data.drawn_rows(1) == data.drawn_rows(data.MIN_ROWS) == data.MIN_ROWS and data.drawn_rows(data.MIN_ROWS + 1) == 2 * data.MIN_ROWS


@pytest.mark.parametrize("shape, dtype", [((3, 5), np.float64), ((1000, 20, 2), np.float64), ((data.GAMMA_DRAWS + 1,), np.float32)])
def test_the_shared_gamma_sampler_draws_what_jax_draws(shape, dtype):
    """The padded flat draw gives JAX's Gamma variates for the shape itself, bit for bit
    (Gamma shapes from 0.1 to 5; the last size above the block, padded to twice it)."""
    key = jax.random.key(len(shape))
    a = jax.random.uniform(jax.random.key(7), shape, dtype, 0.1, 5.0)
    got = data._gamma(key, a)
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.random.gamma(key, a, dtype=dtype)))


def test_the_generators_keep_the_dtype_they_are_given():
    key = jax.random.key(2)
    for arrays in (data.sbmoe_synthetic_1d(key, 30, np.float32), data.sbmoe_synthetic_2d(key, 30, np.float32, return_latent=True)):
        assert all(a.dtype == np.float32 for a in arrays)
    X, _, E = data.sbmoe_synthetic_2d(key, 6, np.float32, return_latent=True)
    assert data.sbmoe_conditional_1d(key, X[:, :2], 5).dtype == np.float32
    assert data.sbmoe_conditional_2d(key, E, 5).dtype == np.float32


def test_every_generator_draws_through_one_gamma_program(monkeypatch):
    """After one generator has run, the other three (other shapes of Gamma draws, up to
    GAMMA_DRAWS variates, sizes no other test draws) trace no Gamma sampler of their own."""
    key = jax.random.key(5)
    X, _ = data.sbmoe_synthetic_1d(key, 50)
    traced = []
    gamma = jax.random.gamma
    monkeypatch.setattr(jax.random, "gamma", lambda *args, **kwargs: traced.append(args[1].shape) or gamma(*args, **kwargs))
    data.sbmoe_conditional_1d(key, X[:7], 301)
    _, _, E = data.sbmoe_synthetic_2d(key, 50, return_latent=True)
    data.sbmoe_conditional_2d(key, E[:9], 203)
    assert traced == [], traced


def test_the_exact_density_of_the_1d_problem_matches_scipy_and_integrates_to_one():
    """log p(y | x) against scipy's Gamma density by the change of variables y = log(zeta +
    0.4 tau + 0.1); over a fine grid of y it integrates to 1 at every input."""
    from scipy import integrate, stats

    X = np.array([[0.6, 1.3], [2.5, 0.7], [1.0, 3.0]])
    y = np.linspace(np.log(0.1) + 1e-6, 4.0, 200001)
    ey = np.exp(y)[:, None]
    want = np.log(0.7 * stats.gamma.pdf(ey - 0.1, X[:, 0], scale=1 / X[:, 1]) * ey
                  + 0.3 * stats.gamma.pdf(ey - 0.5, X[:, 0], scale=1 / X[:, 1]) * ey)
    got = np.asarray(data.sbmoe_logpdf_1d(X, y[:, None, None]))
    assert got.shape == (y.size, 3)
    np.testing.assert_allclose(got[5000:], want[5000:], rtol=1e-9)  # away from the edge, where shape < 1 diverges
    np.testing.assert_allclose(integrate.trapezoid(np.exp(got[:, 1:]), y, axis=0), 1.0, atol=1e-4)


def test_bad_sizes_and_shapes_are_refused():
    key = jax.random.key(0)
    for bad in (-5, 0, 10.0, True):
        with pytest.raises(ValueError, match="n must be"):
            data.sbmoe_synthetic_1d(key, bad)
        with pytest.raises(ValueError, match="n must be"):
            data.sbmoe_synthetic_2d(key, bad)
    assert data.sbmoe_synthetic_1d(key, np.int64(3))[0].shape == (3, 2)  # a NumPy integer is a size
    X, Y = data.sbmoe_synthetic_1d(key, 5)
    with pytest.raises(ValueError, match=r"Y must have shape \(\.\.\., 5, 1\)"):
        data.sbmoe_logpdf_1d(X, Y[:, 0])  # the output axis dropped would read every row at Y[0]
    with pytest.raises(ValueError, match=r"X must have shape \(m, 2\)"):
        data.sbmoe_conditional_1d(key, X[:, :1], 3)
    with pytest.raises(ValueError, match="n_samples must be"):
        data.sbmoe_conditional_2d(key, X, 0)

"""core.scaling: the robust scale taken out of data far from unit scale."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest

from bayeskit.core.scaling import check_products_in_range, check_representable, median, out_of_range, unit_scale


def test_scale_is_the_median_absolute_deviation_as_a_power_of_two_on_host_and_in_jax():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(51, 3)) * 1e20
    X[0] = 1e35  # one outlier does not set the scale
    mad = np.median(np.abs(X - np.median(X, 0)))
    unit, s = unit_scale(X)
    assert s == 2.0 ** np.round(np.log2(mad)) and mad / np.sqrt(2) <= s <= mad * np.sqrt(2)
    np.testing.assert_array_equal(unit * s, X)  # dividing by a power of two is exact
    unit_jax, s_jax = unit_scale(jnp.asarray(X, jnp.float32))
    assert float(s_jax) in (s / 2, s, 2 * s) and unit_jax.dtype == jnp.float32  # float32 rounding of the median
    np.testing.assert_array_equal(unit_scale(X * 2.0**60)[0], unit)  # a power of two leaves no trace


def test_degenerate_data_fall_back_to_the_largest_deviation_or_one():
    X = np.zeros((10, 2))
    X[0, 0] = 4e-30  # more than half of the entries at the median
    assert unit_scale(X)[1] == 2.0 ** np.round(np.log2(4e-30))
    assert unit_scale(np.full((5, 2), 7.0))[1] == 1.0
    assert float(unit_scale(jnp.zeros((5, 2)))[1]) == 1.0


def test_a_result_beyond_range_is_refused_with_the_scale():
    out_of_range(np.array([1e300]), 1e150, np.float64, "the covariance")
    with np.errstate(over="ignore"):
        beyond = np.array([1e300]) * 1e300
    with pytest.raises(ValueError, match="covariance of data at scale 1e\\+300 would lie beyond the range of float64"):
        out_of_range(beyond, 1e300, np.float64, "the covariance")


def test_an_input_beyond_the_dtype_on_the_unit_scale_is_refused_and_zero_passes():
    check_representable("alpha", np.float64(1e-30), 1e10, np.float32)
    check_representable("alpha", 0.0, 1e30, np.float32)  # zero stays zero
    check_representable("alpha", 1e-300, 1e30, np.float64)
    with pytest.raises(ValueError, match=r"alpha on data at scale 1e\+20 is 1e-41 .* float32; give alpha in proportion"):
        check_representable("alpha", 1e-41, 1e20, np.float32)
    with pytest.raises(ValueError, match=r"Sigma .* is 1e\+39 .* float32; divide it, or fit in float64"):
        check_representable("Sigma", np.array([[1.0, 0.0], [0.0, 1e39]]), 1e-20, np.float32, "divide it")


@pytest.mark.parametrize("scale, dtype, refused", [(1.0, np.float32, False), (1e15, np.float32, False), (1e-15, np.float32, False),
                                                   (1e18, np.float32, True), (1e-17, np.float32, True), (1e-300, np.float64, True),
                                                   (1e20, np.float64, False), (1e160, np.float64, True)])
def test_products_of_the_entries_must_stay_within_the_dtype(scale, dtype, refused):
    """Sums of products of data at scale s span s^2 ... n p s^2: refused below tiny / eps or above
    max / 16 / (n p)."""
    X = np.random.default_rng(0).normal(size=(20, 4)) * scale
    if refused:
        with pytest.raises(ValueError, match=f"X is at scale .* leave what {np.dtype(dtype).name} holds; standardise"):
            check_products_in_range("X", X, dtype, "standardise")
    else:
        s = check_products_in_range("X", X, dtype, "standardise")
        assert scale / 4 < s < scale * 4


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_median_is_numpys_median_along_any_axis_with_nan_and_ties(dtype):
    rng = np.random.default_rng(7)
    for shape in [(1,), (2,), (7,), (8, 3), (5, 4, 2)]:
        x = rng.normal(size=shape).astype(dtype)
        x.ravel()[::3] = np.round(x.ravel()[::3])  # ties
        for axis in [None, *range(-len(shape), len(shape))]:
            got = median(jnp.asarray(x), axis)
            assert got.dtype == x.dtype
            np.testing.assert_array_equal(got, np.median(x, axis))
    x = np.array([[1.0, 2.0], [np.nan, 3.0], [4.0, 5.0]], dtype)
    np.testing.assert_array_equal(median(jnp.asarray(x), 0), np.median(x, 0))  # NaN where a column has one
    assert np.isnan(median(jnp.asarray(x)))

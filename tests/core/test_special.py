"""Truncated-normal moments and helpers of ``bayeskit.core.special`` against mpmath.

The reference values (``tests/data/truncnorm_reference.json``) come from
``tests/data/make_truncnorm_reference.py`` (mpmath, 60 digits). Every abscissa in that
table is exactly representable in float32, so float32 and float64 are evaluated at the
same points.

Compiling these functions is what costs time, so each one is compiled once per dtype on
one concatenated input (``_lower_eval``) and the tests slice the results.
Derivatives are reverse mode (``jax.jacrev``, i.e. ``jax.grad`` per output), as in a fit.

Tolerances: relative, ``rtol = 1e-11`` (float64) and ``5e-5`` (float32), with an
absolute floor of the dtype's ``tiny`` (for values that underflow) and, for the entropy
(a sum of O(1) log terms that crosses zero), of ``8 eps``.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from bayeskit.core import special as sp

DATA = pathlib.Path(__file__).parents[1] / "data" / "truncnorm_reference.json"
RTOL = {np.float64: 1e-11, np.float32: 5e-5}
DTYPES = [np.float64, np.float32]
QUANTITIES = ("log_z", "mean", "var", "entropy")
SWITCHES = (2.0, 4.0, 12.0)  # branch switches of special.py (float32 tail, float64 tail, far)
HALF_LOG_2PIE = 0.5 * math.log(2 * math.pi * math.e)
# Gradients are compared where lambda(a) = phi(a)/Phi(-a) (the derivative's size) is a
# normal number with a margin: a >= -37.4 (float64), a >= -11.6 (float32).
LAMBDA_FLOOR = {np.float64: 1e-300, np.float32: 1e-30}


# ----------------------------------------------------------------------------------------
# Reference table and helpers
# ----------------------------------------------------------------------------------------


@functools.cache
def _table():
    table = json.loads(DATA.read_text())

    def floats(v):
        return np.array([float(s) for s in v])

    lower = table["lower"]
    return {
        "a": np.array(lower["a"]),
        "lower": {k: floats(lower[k]) for k in QUANTITIES},
        "lnd_x": np.array(table["log_ndtr"]["x"]),
        "lnd": floats(table["log_ndtr"]["value"]),
    }


@pytest.fixture(scope="module")
def ref():
    return _table()


def _atol(dtype, quantity="mean"):
    fi = np.finfo(dtype)
    return 8 * float(fi.eps) if quantity == "entropy" else float(fi.tiny)


def assert_close(got, want, dtype, quantity="mean", *, rtol=None, where="", x=None):
    """``|got - want| <= rtol |want| + atol`` elementwise (NaN fails), with a readable message."""
    rtol = RTOL[dtype] if rtol is None else rtol
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    err = np.abs(got - want)
    bound = rtol * np.abs(want) + _atol(dtype, quantity)
    bad = ~(err <= bound)
    if np.any(bad):
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.nan_to_num(err / bound, nan=np.inf)
        i = int(np.argmax(np.where(bad, ratio, -1.0)))
        at = f"x={x[i]!r}" if x is not None else f"index {i}"
        raise AssertionError(
            f"{where} {quantity} ({np.dtype(dtype).name}): {int(bad.sum())} of {bad.size} "
            f"outside rtol={rtol:g}; worst at {at}: got {got[i]!r}, want {want[i]!r}, "
            f"rel. err. {err[i] / max(abs(want[i]), 1e-300):.3g}"
        )


def _moments(m):
    return jnp.stack([getattr(m, q) for q in QUANTITIES])


def _switch_points(dtype):
    pts = []
    for s in SWITCHES:
        for v in (dtype(s), dtype(-s)):
            pts += [v, np.nextafter(v, dtype(np.inf)), np.nextafter(v, dtype(-np.inf))]
    return np.array(pts, dtype)


@jax.jit
def _lower_all(a):
    lower = _moments(sp.truncnorm_lower(a))
    upper = _moments(sp.truncnorm_upper(a))
    jac = jax.vmap(jax.jacrev(lambda x: _moments(sp.truncnorm_lower(x))))(a)
    return lower, upper, jac, sp.inverse_mills(a)


@functools.cache
def _lower_eval(dtype):
    """truncnorm_lower / truncnorm_upper / inverse_mills and d/da, on grid + switch points."""
    grid = _table()["a"]
    sw = _switch_points(dtype)
    x = np.concatenate([grid, sw]).astype(dtype)
    assert np.array_equal(x[: grid.size].astype(np.float64), grid)  # exact in float32
    lower, upper, jac, lam = (np.asarray(v) for v in _lower_all(jnp.asarray(x)))
    n = grid.size
    return {
        "dtype": lower.dtype,
        "lower": {q: lower[k, :n] for k, q in enumerate(QUANTITIES)},
        "upper": {q: upper[k, :n] for k, q in enumerate(QUANTITIES)},
        "grad": {q: jac[:n, k] for k, q in enumerate(QUANTITIES)},
        "grad_switch": {q: jac[n:, k] for k, q in enumerate(QUANTITIES)},
        "switch_points": sw,
        "inverse_mills": lam[:n],
    }


# ----------------------------------------------------------------------------------------
# One-sided: (a, inf) and (-inf, b)
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_lower_matches_mpmath(ref, dtype):
    ev = _lower_eval(dtype)
    assert ev["dtype"] == dtype
    for q in QUANTITIES:
        assert_close(ev["lower"][q], ref["lower"][q], dtype, q, where="truncnorm_lower", x=ref["a"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_inverse_mills_matches_mpmath(ref, dtype):
    lam = _lower_eval(dtype)["inverse_mills"]
    assert lam.dtype == dtype
    assert_close(lam, ref["lower"]["mean"], dtype, where="inverse_mills", x=ref["a"])


@pytest.mark.parametrize("dtype", DTYPES)
def test_upper_matches_mpmath(ref, dtype):
    # (-inf, b) is the mirror image of (-b, inf); the reference grid is symmetric about 0.
    b = ref["a"]
    index = {float(v): i for i, v in enumerate(ref["a"])}
    mirror = np.array([index[float(-v)] for v in b])
    want = {q: ref["lower"][q][mirror] for q in QUANTITIES}
    want["mean"] = -want["mean"]
    up = _lower_eval(dtype)["upper"]
    for q in QUANTITIES:
        assert up[q].dtype == dtype
        assert_close(up[q], want[q], dtype, q, where="truncnorm_upper", x=b)


@pytest.mark.parametrize("dtype", DTYPES)
def test_upper_is_the_reflection_of_lower(ref, dtype):
    ev = _lower_eval(dtype)
    index = {float(v): i for i, v in enumerate(ref["a"])}
    mirror = np.array([index[float(-v)] for v in ref["a"]])
    # bit-equal with XLA's optimisation on; the tests run with it off, where the two
    # compiled graphs round differently, so they must agree to the accuracy tolerance
    assert_close(ev["upper"]["mean"], -ev["lower"]["mean"][mirror], dtype, "mean", where="reflection")
    for q in ("log_z", "var", "entropy"):
        assert_close(ev["upper"][q], ev["lower"][q][mirror], dtype, q, where="reflection")


@pytest.mark.parametrize("dtype", DTYPES)
def test_lower_invariants(ref, dtype):
    ev = _lower_eval(dtype)["lower"]
    log_z, mean, var, ent = (ev[q].astype(np.float64) for q in QUANTITIES)
    a = ref["a"]
    slack = RTOL[dtype]
    for name, v in zip(QUANTITIES, (log_z, mean, var, ent)):
        assert np.all(np.isfinite(v)), f"{name} not finite at a={a[~np.isfinite(v)][:5]}"
    assert np.all(log_z <= 0)
    assert np.all(mean > a), a[~(mean > a)][:5]
    assert np.all(mean >= 0)
    ok = (var > 0) & (var <= 1)
    assert np.all(ok), a[~ok][:5]
    # Monotone in a: the normaliser falls, the mean rises, the variance falls
    # (log-concavity of the normal); rounding-level wiggles allowed.
    assert np.all(np.diff(log_z) <= slack * np.abs(log_z[1:]))
    assert np.all(np.diff(mean) >= -slack * np.abs(mean[1:]))
    assert np.all(np.diff(var) <= slack * var[:-1])
    # Maximum entropy at given variance: H <= 1/2 log(2 pi e var) <= 1/2 log(2 pi e).
    assert np.all(ent <= 0.5 * np.log(2 * np.pi * np.e * var) + slack * (1 + np.abs(ent)))
    assert np.all(ent <= HALF_LOG_2PIE * (1 + slack))


# ----------------------------------------------------------------------------------------
# Gradients of the one-sided moments
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_finite_at_branch_switches(dtype):
    ev = _lower_eval(dtype)
    for q, g in ev["grad_switch"].items():
        assert g.dtype == dtype
        bad = ~np.isfinite(g)
        assert not bad.any(), f"d {q}/da not finite at a={ev['switch_points'][bad]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_finite_where_lambda_is_normal(ref, dtype):
    # The part of [-40, 40] where lambda(a) is a normal number with room to spare.
    keep = ref["lower"]["mean"] >= LAMBDA_FLOOR[dtype]
    assert keep.sum() > 800
    for q, g in _lower_eval(dtype)["grad"].items():
        bad = ~np.isfinite(g[keep])
        assert not bad.any(), f"d {q}/da not finite at a={ref['a'][keep][bad][:5]}"


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_finite_everywhere_on_grid(ref, dtype):
    for q, g in _lower_eval(dtype)["grad"].items():
        bad = ~np.isfinite(g)
        assert not bad.any(), (
            f"d {q}/da not finite at {bad.sum()} points, a in [{ref['a'][bad].min()}, {ref['a'][bad].max()}]"
        )


@pytest.mark.parametrize("dtype", DTYPES)
def test_grad_log_z_is_minus_inverse_mills(ref, dtype):
    # d/da log Phi(-a) = -phi(a)/Phi(-a) = -lambda(a), against the mpmath lambda, where
    # lambda is a normal number with room to spare (lambda >= LAMBDA_FLOOR).
    keep = ref["lower"]["mean"] >= LAMBDA_FLOOR[dtype]
    g = _lower_eval(dtype)["grad"]["log_z"][keep]
    assert_close(-g, ref["lower"]["mean"][keep], dtype, where="-d log_z/da", x=ref["a"][keep])


def test_grad_mean_float64(ref):
    # d lambda/da = lambda (lambda - a), from the mpmath lambda.
    # Where lambda >= 1e-30: further left lambda = exp(log phi - log Phi) is subnormal and
    # its derivative (then below ~1e-153) loses its digits.
    keep = ref["lower"]["mean"] >= 1e-30
    a, lam = ref["a"][keep], ref["lower"]["mean"][keep]
    g = _lower_eval(np.float64)["grad"]["mean"][keep]
    assert_close(g, lam * (lam - a), np.float64, rtol=1e-10, where="d mean/da", x=a)


# ----------------------------------------------------------------------------------------
# log_ndtr
# ----------------------------------------------------------------------------------------

_log_ndtr = jax.jit(sp.log_ndtr)


@pytest.mark.parametrize("dtype", DTYPES)
def test_log_ndtr_right_tail(ref, dtype):
    # What the wrapper documents: accurate also for large positive x.
    x = ref["lnd_x"]
    keep = x >= 0
    got = _log_ndtr(jnp.asarray(x, dtype))
    assert got.dtype == dtype
    got = np.asarray(got)[keep]
    assert_close(got, ref["lnd"][keep], dtype, "log_z", where="log_ndtr", x=x[keep])


def test_log_ndtr_full_range_float32(ref):
    x = ref["lnd_x"]  # -300 ... 40
    assert_close(_log_ndtr(jnp.asarray(x, np.float32)), ref["lnd"], np.float32, "log_z", where="log_ndtr", x=x)


def test_log_ndtr_full_range_float64(ref):
    x = ref["lnd_x"]
    assert_close(_log_ndtr(jnp.asarray(x)), ref["lnd"], np.float64, "log_z", where="log_ndtr", x=x)


# ----------------------------------------------------------------------------------------
# dtypes
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
def test_dtype_preserved(dtype):
    """Every output of the cached evaluations (lower, upper, inverse_mills, d/da) has the
    input's dtype."""
    one = _lower_eval(dtype)
    assert one["inverse_mills"].dtype == dtype
    for group in ("lower", "upper", "grad", "grad_switch"):
        for q in QUANTITIES:
            assert one[group][q].dtype == dtype, (group, q)


@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16])
def test_lower_tail_half_precision(ref, dtype):
    """``lower_tail`` on half-precision inputs (computed in float32, returned in the input's
    dtype) matches scipy to the half type's precision over the whole table, the far upper
    tail included, where erfc and the series' coefficients leave float16's range."""
    keep = np.abs(ref["a"]) <= 40
    a = jnp.asarray(ref["a"][keep], dtype)
    log_z, lam = jax.jit(sp.lower_tail)(a)
    assert log_z.dtype == lam.dtype == dtype
    eps = float(jnp.finfo(dtype).eps)
    a64 = np.asarray(a, np.float64)  # the abscissae as rounded to the half type
    want_log_z = stats.norm.logsf(a64)
    want_lam = np.exp(stats.norm.logpdf(a64) - want_log_z)
    for got, want in ((log_z, want_log_z), (lam, want_lam)):
        got = np.asarray(got, np.float64)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, want, rtol=4 * eps, atol=float(jnp.finfo(dtype).tiny))


def test_lower_tail_takes_python_numbers_and_integers():
    """A Python float and an integer array are read as JAX's default float, as
    ``log_ndtr`` and ``truncnorm_lower`` read them."""
    want = sp.lower_tail(jnp.asarray([0.0, 1.0, 2.0]))
    for got in (sp.lower_tail(jnp.arange(3)), tuple(jnp.stack(v) for v in zip(*(sp.lower_tail(x) for x in (0.0, 1.0, 2))))):
        for g, w in zip(got, want):
            assert g.dtype == jnp.result_type(float)
            np.testing.assert_array_equal(g, w)


def test_integer_input_gives_default_float(ref):
    m = jax.jit(sp.truncnorm_lower)(jnp.arange(3))
    assert m.mean.dtype == jnp.result_type(float)  # float64 here (conftest enables x64)
    idx = np.searchsorted(ref["a"], [0.0, 1.0, 2.0])
    for q in QUANTITIES:
        assert_close(getattr(m, q), ref["lower"][q][idx], np.float64, q, where="integer input")


@pytest.mark.parametrize("df", [1, 2, 3, 10, 41, 300])
def test_chi2_cdf_matches_scipy(df):
    """The loop-free chi-square distribution function against SciPy's, from 0 to far in the
    tail (to 1e-13 absolute), and in single precision (to the rounding of its df/2 terms)
    without overflow where y^j alone would overflow (y up to 1500, j up to 149)."""
    x = np.r_[0.0, np.geomspace(1e-4, 3000, 80)]
    np.testing.assert_allclose(np.asarray(sp.chi2_cdf(jnp.asarray(x), df)), stats.chi2.cdf(x, df), rtol=0, atol=1e-13)
    single = np.asarray(sp.chi2_cdf(jnp.asarray(x, jnp.float32), df))
    assert single.dtype == np.float32
    np.testing.assert_allclose(single, stats.chi2.cdf(x, df), rtol=0, atol=1e-4)

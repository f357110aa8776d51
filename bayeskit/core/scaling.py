"""Data far from unit scale: one positive number s per array is divided out before a fit
and multiplied back into its results.

Finite data at 1e-20 or 1e20 (or float64 data at 1e300) overflow or underflow float32 in
the squares of covariances and distances, and a float64 array beyond float32's range
becomes inf in the cast itself. A model that is equivariant under ``X -> X / s`` (MCD,
ROBPCA, the sparse-Bayes regressors, ...) is fitted on ``X / s`` and its results are put back by the powers of s
the model's equivariance says. :func:`unit_scale` works on NumPy arrays on the host, in
their own precision before any cast, and on JAX arrays inside a jitted fit.

The scale is the median absolute deviation of all entries from their column medians
(robust: an outlier does not push the bulk of the data towards underflow), or the largest
deviation when more than half of the entries equal their column median, or 1 when all
do; rounded to a power of two, so that dividing by it is exact: data already near unit
scale fit exactly as they would unscaled, and a X fits as X when a is a power of two.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def unit_scale(X, *, exact: bool = False):
    """``(X / s, s)`` for the scale s of the module docstring: NumPy in, NumPy out (in X's
    precision, s a Python float), or JAX in, JAX out (s a scalar array, traceable).

    ``exact=True`` skips the rounding to a power of two: then a X / s(a X) equals X / s(X)
    up to rounding for every a, so a model with fixed constants (tolerances, priors) fitted
    on X / s is equivariant by construction, at the price of rounding X near unit scale."""
    xp = np if isinstance(X, np.ndarray) else jnp
    middle = np.median if xp is np else median
    deviations = xp.abs(X - middle(X, axis=0))
    spread, largest = middle(deviations), xp.max(deviations)
    s = xp.where(spread > 0, spread, largest)
    s = xp.where((s > 0) & xp.isfinite(s), s, 1.0) if exact else power_of_two(s)
    return (X / s, float(s)) if xp is np else (X / s.astype(X.dtype), s.astype(X.dtype))


def median(x, axis: int | None = None):
    """``jnp.median(x, axis)`` from one sort: the middle order statistic, or the mean of the
    two middle ones, and NaN where the entries hold a NaN (which sorts last). The same
    values (but a subnormal middle float32, which ``jnp.median``'s arithmetic flushes to
    zero); ``jnp.median`` goes through the general quantile, which compiles and runs
    several times longer than the sort on small arrays."""
    x = jnp.ravel(x) if axis is None else jnp.moveaxis(x, axis, 0)
    s = jnp.sort(x, axis=0)
    n = s.shape[0]
    middle = s[n // 2] if n % 2 else s[n // 2 - 1] * 0.5 + s[n // 2] * 0.5
    return jnp.where(jnp.isnan(s[-1]), jnp.nan, middle)


def column_scales(X):
    """Per column, the power of two nearest its largest deviation from its median (1 for a
    constant column): dividing by it puts every column within [-2, 2] of its median, so
    that its variance can neither overflow nor underflow. NumPy or JAX, like X."""
    xp = np if isinstance(X, np.ndarray) else jnp
    middle = np.median if xp is np else median
    return power_of_two(xp.max(xp.abs(X - middle(X, axis=0)), axis=0)).astype(X.dtype)


def power_of_two(s):
    """The power of two nearest each positive finite entry of s, exactly; 1 elsewhere."""
    xp = np if isinstance(s, (np.ndarray, np.generic, float)) else jnp
    s = xp.where((s > 0) & xp.isfinite(s), s, 1.0)
    return xp.ldexp(xp.ones_like(s), xp.round(xp.log2(s)).astype(np.int32))


def squared_scale(s: float, what: str) -> float:
    """``s^2``, the scale of the covariance of data at scale ``s``, refused (``ValueError``
    naming ``what``) where float64 cannot hold it as a normal number: data at 1e-200 have a
    covariance at 1e-400, which is 0 in float64, data at 1e-157 one at 1e-314, subnormal
    (the precision, 1 / v, is inf), and data at 1e160 one at 1e320, which is inf."""
    v = float(s) * float(s)
    if not np.finfo(np.float64).tiny <= v < np.inf:  # a subnormal v would make the precision (1 / v) inf
        raise ValueError(f"{what} of data at scale {s:.3g} would be at {s:.3g}^2, beyond the range of float64; multiply or "
                         f"divide the data by a constant nearer their scale (the estimates scale with it).")
    return v


def out_of_range(result, s: float, dtype, what: str) -> None:
    """Refuse a result that the data's scale ``s`` has put beyond ``dtype``'s range (a
    covariance of data at 1e300 is 1e600): a ``ValueError`` that says so and what to do."""
    with np.errstate(over="ignore", invalid="ignore"):
        finite = np.all(np.isfinite(np.asarray(result)))
    if not finite:
        raise ValueError(f"{what} of data at scale {s:.3g} would lie beyond the range of {np.dtype(dtype).name}; divide "
                         f"the data by a constant nearer their scale (the estimates scale with it).")


def check_representable(name: str, unit_value, s: float, dtype, fix: str | None = None) -> None:
    """Refuse an input given in the data's units whose counterpart on the unit scale
    (``unit_value``, e.g. alpha / s^2 for a penalty on the covariance of data at scale s) is
    beyond the range of the dtype the fit computes in (``dtype``, the data's, as JAX holds
    it): it would become 0 or inf in the cast. Zeros stay zero and pass. ``fix`` says what
    to do (by default: give the input in proportion to the data's scale)."""
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    info, u = np.finfo(dtype), np.abs(np.asarray(unit_value, np.float64))
    if np.any((u != 0) & ((u < info.tiny) | (u > info.max))):
        extreme = float(u[u != 0].max() if np.any(u > info.max) else u[u != 0].min())
        fix = fix or f"give {name} in proportion to the data's scale"
        raise ValueError(f"{name} on data at scale {s:.3g} is {extreme:.3g} in that scale's units, beyond the range "
                         f"of {dtype.name}; {fix}, or fit in float64 (jax_enable_x64).")


def check_products_in_range(name: str, X, dtype, fix: str) -> float:
    """For models whose priors set a scale (so the data are not rescaled inside): refuse data
    whose scale s puts sums of products of two entries (X'X, X w) beyond ``dtype``'s range,
    s^2 below tiny / eps (they would lose all precision) or s^2 times the number of entries
    above max / 16 (they would overflow), with the scale and ``fix``. Returns s."""
    _, s = unit_scale(np.asarray(X))
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    info, square = np.finfo(dtype), s * s
    if not float(info.tiny) / float(info.eps) <= square <= float(info.max) / 16 / max(np.size(X), 1):
        raise ValueError(f"{name} is at scale {s:.3g}, where the products of its entries ({square:.3g}) leave what "
                         f"{dtype.name} holds; {fix}, or fit in float64 (jax_enable_x64).")
    return s

"""Truncated-normal moments that stay accurate far in the tails, in float32 and float64.

For a standard normal truncated to ``(a, inf)`` write ``Z = Phi(-a)``,
``lambda(a) = phi(a) / Phi(-a)`` (the inverse Mills ratio) and ``r(a) = lambda(a) - a``.
Then

    log Z = log_ndtr(-a),  mean = lambda,  var = 1 - lambda * r,
    entropy = 1/2 log(2 pi e) + log Z + a lambda / 2.

The naive forms break down in the tail (``a`` large): ``phi/Phi`` is 0/0 in float32 for
``a >~ 13``, ``lambda - a`` cancels, and ``1 - lambda r`` cancels to the square of the
truncation point. Here ``log Z`` and ``lambda`` come from ``erfc`` in log space and, from
``a = 12`` on, the asymptotic series of the Mills ratio (see :func:`lower_tail`, the
cheap path the models use), and for the variance and entropy,
from ``a >= 4`` (``a >= 2`` in float32), ``r`` comes from the continued fraction

    r(a) = 1 / (a + 2 / (a + 3 / (a + 4 / (a + ...)))),

which has only positive terms. With ``c = 2 / (a + d)``, ``d = 3 / (a + ...)`` the two
inner tails of that fraction, the variance is ``r^2 (1 - d c + c^2)`` and the entropy
``1/2 - log(lambda) + a r / 2``, free of cancellation. Every branch is evaluated on
clamped inputs (the double-``where`` pattern), so gradients stay finite everywhere.
The upper-truncated case follows by reflection; BSSML's two-piece truncation is a
mixture of the two one-sided cases.

The chi-square distribution function and quantiles for an integer number of degrees of
freedom (:func:`chi2_cdf`, :func:`chi2_quantile`) are loop-free and traceable in the
probability, for the consistency factors and cutoffs of FAST-MCD and ROBPCA.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import xlogy
from jaxtyping import Array, ArrayLike, Float
from scipy.special import gammaln

# (switch point, continued-fraction depth) per precision: below the switch the direct
# log-space form is used; above it the fraction, deep enough for full precision.
_TAIL = {4: (2.0, 36), 8: (4.0, 40)}
_FAR = 12.0  # from here lambda comes from the Mills ratio's asymptotic series instead of erfc
_FAR_SERIES = tuple(float((-1) ** k * math.prod(range(1, 2 * k, 2))) for k in range(14))  # (-1)^k (2k-1)!!
_SQRT_HALF = math.sqrt(0.5)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


class TruncNormMoments(eqx.Module):
    """Moments of a standard normal truncated to an interval.

    Attributes
    ----------
    log_z : log of the normaliser, the probability of the interval.
    mean, var : mean and variance of the truncated variable.
    entropy : its differential entropy.
    """

    log_z: Array
    mean: Array
    var: Array
    entropy: Array


def log_normal_pdf(x: ArrayLike) -> Array:
    """``log phi(x)`` of the standard normal."""
    x = jnp.asarray(x)
    return -0.5 * x * x - _HALF_LOG_2PI


def log_ndtr(x: ArrayLike) -> Array:
    """``log Phi(x)``, accurate in both tails (``log Phi(x) = log Z`` of ``(-x, inf)``)."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        x = x.astype(jnp.result_type(float))
    return lower_tail(-x)[0]


def _continued_fraction_tails(a: Array, depth: int) -> tuple[Array, Array, Array]:
    """Tails ``(r, c, d)`` of ``r = 1/(a + c)``, ``c = 2/(a + d)``, ``d = 3/(a + ...)``."""
    tail = jax.lax.fori_loop(0, depth - 3, lambda i, t: (depth - i) / (a + t), jnp.zeros_like(a))
    d = 3 / (a + tail)
    c = 2 / (a + d)
    r = 1 / (a + c)
    return r, c, d


def _far_mills(a: Array) -> Array:
    """``a Phi(-a) / phi(a)`` for ``a >= 12`` by its asymptotic series
    ``sum_k (-1)^k (2k - 1)!! a^(-2k)`` (Abramowitz & Stegun 26.2.12), summed by Horner's
    rule in ``1/a^2``: from ``a = 12`` on the first omitted term is below 2e-16."""
    u = 1 / (a * a)
    s = jnp.full_like(a, _FAR_SERIES[-1])
    for c in _FAR_SERIES[-2::-1]:
        s = c + u * s
    return s


def lower_tail(a: ArrayLike) -> tuple[Array, Array]:
    """``(log Phi(-a), lambda(a))``: the cheap path used inside the fitting loops.

    One ``erfc`` serves both sides of zero: with ``x = |a| / sqrt 2`` and
    ``c = erfc(x)``, ``Phi(-a) = 1 - c/2`` for ``a < 0`` and ``c/2`` for ``0 <= a < 12``,
    and ``lambda = exp(log phi(a) - log Phi(-a))`` (no quotient of tiny numbers, whose
    derivative would underflow). From ``a = 12`` on (where ``c`` nears the smallest normal
    float32) ``lambda = a / (a Phi(-a) / phi(a))`` by the asymptotic series
    (:func:`_far_mills`) and ``log Phi(-a) = log phi(a) - log lambda``. Each branch sees
    only inputs from its own range, so values and gradients stay finite; the whole function
    is one elementwise pass (no loop), which matters where it runs over every label of
    every sample. Integers are read as the default float; half precision is computed in
    float32.
    """
    a = jnp.asarray(a)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.result_type(float))
    if jnp.finfo(a.dtype).bits < 32:  # erfc and the series' coefficients need float32's range
        return tuple(v.astype(a.dtype) for v in lower_tail(a.astype(jnp.float32)))
    neg = a < 0
    far = a >= _FAR
    x = jnp.where(neg, -a, jnp.where(far, 0.0, a)) * _SQRT_HALF
    half_c = 0.5 * jax.lax.erfc(x)
    log_z_near = jnp.where(neg, jnp.log1p(-half_c), jnp.log(jnp.where(neg, 1.0, half_c)))  # log Phi(-a) below 12
    a_far = jnp.where(far, a, _FAR)
    lam_far = a_far / _far_mills(a_far)
    lam = jnp.where(far, lam_far, jnp.exp(-x * x - _HALF_LOG_2PI - log_z_near))
    log_z = jnp.where(far, log_normal_pdf(a_far) - jnp.log(lam_far), log_z_near)
    return log_z, lam


def truncnorm_lower(a: ArrayLike) -> TruncNormMoments:
    """Moments of ``N(0, 1)`` truncated to ``(a, inf)``, stable for ``a`` in [-40, 40].

    Parameters
    ----------
    a : array_like, floating
        Lower truncation point(s). The dtype of the result follows ``a``.

    Returns
    -------
    TruncNormMoments
        ``log_z = log Phi(-a)``, mean ``lambda(a)``, variance and entropy.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> m = truncnorm_lower(jnp.array([0.0, 30.0]))
    >>> [round(float(v), 4) for v in m.mean]
    [0.7979, 30.0333]
    """
    a = jnp.asarray(a)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.result_type(float))
    log_z, lam = lower_tail(a)
    switch, depth = _TAIL[8 if a.dtype == jnp.float64 else 4]
    tail = a >= switch
    # Below the switch: the direct forms.
    a_lo = jnp.where(tail, 0.0, a)
    lam_lo = jnp.where(tail, 1.0, lam)
    var_lo = 1 - lam_lo * (lam_lo - a_lo)
    ent_lo = 0.5 + _HALF_LOG_2PI + log_z + 0.5 * a_lo * lam_lo
    # Above it: the continued fraction, free of cancellation.
    a_hi = jnp.where(tail, a, switch)
    r, c, d = _continued_fraction_tails(a_hi, depth)
    var_hi = r * r * (1 - d * c + c * c)
    ent_hi = 0.5 - jnp.log(a_hi + r) + 0.5 * a_hi * r
    return TruncNormMoments(
        log_z=log_z,
        mean=lam,
        var=jnp.where(tail, var_hi, var_lo),
        entropy=jnp.where(tail, ent_hi, ent_lo),
    )


def truncnorm_upper(b: ArrayLike) -> TruncNormMoments:
    """Moments of ``N(0, 1)`` truncated to ``(-inf, b)``, by reflection of the lower case."""
    m = truncnorm_lower(-jnp.asarray(b))
    return TruncNormMoments(log_z=m.log_z, mean=-m.mean, var=m.var, entropy=m.entropy)


def inverse_mills(a: ArrayLike) -> Float[Array, ...]:
    """``lambda(a) = phi(a) / Phi(-a)``, the mean of ``N(0, 1)`` truncated to ``(a, inf)``."""
    return truncnorm_lower(a).mean


def chi2_cdf(x, df: int) -> Array:
    """The chi^2 distribution function with an integer number ``df`` of degrees of freedom,
    P(df/2, y) with y = x/2, by its finite sums (no loop, so it compiles small):

        df = 2k:      1 - sum_{j<k} e^{-y} y^j / j!,
        df = 2k + 1:  erf(sqrt(y)) - sum_{j<k} e^{-y} y^{j+1/2} / Gamma(j + 3/2),

    the terms taken in logarithms (no overflow for large y or df). Accurate to rounding in
    absolute terms; relative accuracy is lost only where the value is far below 1/2, which
    quantiles and consistency factors (FAST-MCD, ROBPCA) never need."""
    y = 0.5 * jnp.asarray(x)
    k, odd = divmod(df, 2)
    j = np.arange(k) + 0.5 * odd
    log_terms = xlogy(j.astype(y.dtype), y[..., None]) - gammaln(j + 1).astype(y.dtype)  # j is static
    head = jax.lax.erf(jnp.sqrt(y)) if odd else 1.0
    return head - jnp.sum(jnp.exp(log_terms - y[..., None]), -1)


def chi2_quantile(a, df: int, dtype=None) -> Array:
    """The ``a``-quantile of chi^2 with ``df`` degrees of freedom, by bisection on
    :func:`chi2_cdf` (traceable in ``a``, so a new h compiles nothing); to the last bit of
    ``dtype`` (default: ``a``'s, or the default float)."""
    a = jnp.asarray(a, dtype if dtype is not None else jnp.result_type(float, a))

    def halve(_, bounds):
        low, high = bounds
        mid = 0.5 * (low + high)
        below = chi2_cdf(mid, df) < a
        return jnp.where(below, mid, low), jnp.where(below, high, mid)

    high = jnp.asarray(df + 20.0 * np.sqrt(2.0 * df) + 100.0, a.dtype)
    low, high = jax.lax.fori_loop(0, 8 * a.dtype.itemsize + 16, halve, (jnp.zeros_like(a), high))
    return 0.5 * (low + high)

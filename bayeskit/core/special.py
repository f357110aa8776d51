"""Truncated-normal moments that stay accurate far in the tails, in float32 and float64.

For a standard normal truncated to ``(a, inf)`` write ``Z = Phi(-a)``,
``lambda(a) = phi(a) / Phi(-a)`` (the inverse Mills ratio) and ``r(a) = lambda(a) - a``.
Then

    log Z = log_ndtr(-a),  mean = lambda,  var = 1 - lambda * r,
    entropy = 1/2 log(2 pi e) + log Z + a lambda / 2.

The naive forms break down in the tail (``a`` large): ``phi/Phi`` is 0/0 in float32 for
``a >~ 13``, ``lambda - a`` cancels, and ``1 - lambda r`` cancels to the square of the
truncation point. Here, for ``a >= 4`` (``a >= 2`` in float32), ``r`` comes from the continued fraction

    r(a) = 1 / (a + 2 / (a + 3 / (a + 4 / (a + ...)))),

which has only positive terms, and with ``c = 2 / (a + d)``, ``d = 3 / (a + ...)`` the
two inner tails of that fraction, the variance is ``r^2 (1 - d c + c^2)`` and the entropy
``1/2 - log(lambda) + a r / 2``, all free of cancellation. Below that the direct log-space
form ``lambda = exp(log phi(a) - log_ndtr(-a))`` is accurate. Both branches are evaluated on
clamped inputs (the double-``where`` pattern), so gradients stay finite everywhere.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax.numpy as jnp
from jax.scipy.special import log_ndtr as _log_ndtr
from jax.scipy.special import erfc, erfcx, ndtr
from jaxtyping import Array, ArrayLike, Float

# (switch point, continued-fraction depth) per precision: below the switch the direct
# log-space form is used; above it the fraction, deep enough for full precision.
_TAIL = {4: (2.0, 36), 8: (4.0, 40)}
_FAR, _FAR_DEPTH = 12.0, 16  # from here the mean uses the fraction instead of erfcx
_SQRT_HALF = math.sqrt(0.5)
_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
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
    """``log Phi(x)``, accurate also for large positive ``x`` (as ``log1p(-Phi(-x))``)."""
    x = jnp.asarray(x)
    pos = x > 0
    return jnp.where(pos, jnp.log1p(-ndtr(-jnp.where(pos, x, 0.0))), _log_ndtr(jnp.where(pos, 0.0, x)))


def _continued_fraction_tails(a: Array, depth: int) -> tuple[Array, Array, Array]:
    """Tails ``(r, c, d)`` of ``r = 1/(a + c)``, ``c = 2/(a + d)``, ``d = 3/(a + ...)``."""
    tail = jnp.zeros_like(a)
    for k in range(depth, 3, -1):
        tail = k / (a + tail)
    d = 3 / (a + tail)
    c = 2 / (a + d)
    r = 1 / (a + c)
    return r, c, d


def _lower_tail(a: Array) -> tuple[Array, Array]:
    """``(log Phi(-a), lambda(a))`` from ``erfcx``; the cheap path of the fitting loops.

    ``lambda(a) = sqrt(2/pi) / erfcx(a / sqrt 2)`` and, for ``a >= 0``,
    ``log Phi(-a) = log phi(a) - log lambda(a)``; for ``a < 0``,
    ``log Phi(-a) = log1p(-erfc(-a / sqrt 2) / 2)``. ``erfcx`` returns exactly 0 in a
    narrow band of large arguments, so from ``a >= 12`` the continued fraction is used.
    """
    far = a >= _FAR
    a_near = jnp.where(far, 0.0, a)
    lam_near = _SQRT_2_OVER_PI / erfcx(a_near * _SQRT_HALF)
    a_far = jnp.where(far, a, _FAR)
    r_far, _, _ = _continued_fraction_tails(a_far, _FAR_DEPTH)
    lam = jnp.where(far, a_far + r_far, lam_near)
    a_neg = jnp.where(a < 0, a, 0.0)
    log_z = jnp.where(a < 0, jnp.log1p(-0.5 * erfc(-a_neg * _SQRT_HALF)), log_normal_pdf(a) - jnp.log(lam))
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
    >>> m = truncnorm_lower(jnp.array([0.0, 30.0]))
    >>> [round(float(v), 4) for v in m.mean]
    [0.7979, 30.0333]
    """
    a = jnp.asarray(a)
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a = a.astype(jnp.result_type(float))
    log_z, lam = _lower_tail(a)
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


def inverse_mills(a: ArrayLike) -> Float[Array, "..."]:
    """``lambda(a) = phi(a) / Phi(-a)``, the mean of ``N(0, 1)`` truncated to ``(a, inf)``."""
    return truncnorm_lower(a).mean


def log1mexp(x: ArrayLike) -> Array:
    """``log(1 - exp(x))`` for ``x <= 0`` (Maechler's two-branch form)."""
    x = jnp.asarray(x)
    small = x > -math.log(2)
    x_small = jnp.where(small, x, -1.0)
    x_large = jnp.where(small, -1.0, x)
    return jnp.where(small, jnp.log(-jnp.expm1(x_small)), jnp.log1p(-jnp.exp(x_large)))


def truncnorm(a: ArrayLike, b: ArrayLike) -> TruncNormMoments:
    """Moments of ``N(0, 1)`` truncated to ``(a, b)`` with ``a < b``; either may be infinite.

    One-sided intervals use :func:`truncnorm_lower` / :func:`truncnorm_upper`. For a
    two-sided interval the normaliser is taken on the side away from the mode,
    ``log Phi(-a) + log1mexp(log Phi(-b) - log Phi(-a))`` when ``a > 0`` (and its mirror
    image when ``b < 0``), so it keeps its relative accuracy in the tails.
    """
    a, b = jnp.broadcast_arrays(jnp.asarray(a), jnp.asarray(b))
    if not jnp.issubdtype(a.dtype, jnp.floating):
        a, b = a.astype(jnp.result_type(float)), b.astype(jnp.result_type(float))
    lower_only = jnp.isposinf(b)
    upper_only = jnp.isneginf(a) & ~lower_only
    two_sided = ~(lower_only | upper_only)
    lo = truncnorm_lower(jnp.where(lower_only, a, 0.0))
    up = truncnorm_upper(jnp.where(upper_only, b, 0.0))

    # Two-sided: reflect so that the interval lies mostly right of zero (a' = -b, b' = -a).
    flip = two_sided & (a + b < 0)
    a2 = jnp.where(two_sided, jnp.where(flip, -b, a), -1.0)
    b2 = jnp.where(two_sided, jnp.where(flip, -a, b), 1.0)
    log_upper_a = log_ndtr(-a2)  # log P(X > a')
    log_upper_b = log_ndtr(-b2)  # log P(X > b')
    log_z = log_upper_a + log1mexp(jnp.minimum(log_upper_b - log_upper_a, 0.0))
    pa = jnp.exp(log_normal_pdf(a2) - log_z)
    pb = jnp.exp(log_normal_pdf(b2) - log_z)
    mean2 = pa - pb
    var2 = 1 + a2 * pa - b2 * pb - mean2 * mean2
    ent2 = 0.5 + _HALF_LOG_2PI + log_z + 0.5 * (a2 * pa - b2 * pb)
    mean2 = jnp.where(flip, -mean2, mean2)

    def pick(f_lo, f_up, f_two):
        return jnp.where(lower_only, f_lo, jnp.where(upper_only, f_up, f_two))

    return TruncNormMoments(
        log_z=pick(lo.log_z, up.log_z, log_z),
        mean=pick(lo.mean, up.mean, mean2),
        var=pick(lo.var, up.var, var2),
        entropy=pick(lo.entropy, up.entropy, ent2),
    )

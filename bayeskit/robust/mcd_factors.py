"""The subset size h and the factors that make the MCD's estimates consistent
(:mod:`bayeskit.robust.mcd`, whose docstring holds equations (2) and (4)): h under both
conventions, the consistency factor c(a) of Croux & Haesbroeck (J. Multivariate Anal. 71,
1999) and the small-sample correction factors of Pison, Van Aelst & Willems (Metrika 55,
2002) that robustbase's ``covMcd`` applies.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from bayeskit.core.special import chi2_cdf, chi2_quantile


def default_h(n: int, p: int) -> int:
    """h = floor((n + p + 1) / 2), the MCD's highest breakdown point."""
    return (n + p + 1) // 2


def h_from_alpha(alpha: float, n: int, p: int) -> int:
    """h = max(floor(alpha n), floor((n + p + 1) / 2)), at most n."""
    return min(max(int(np.floor(alpha * n)), default_h(n, p)), n)


def h_alpha_n(alpha: float, n: int, p: int) -> int:
    """robustbase's h(alpha; n, p) of (4): (n + p + 1) // 2 at alpha = 0.5, n at alpha = 1."""
    n2 = (n + p + 1) // 2
    return int(np.floor(2 * n2 - n + 2 * (n - n2) * alpha))


# Pison, Van Aelst & Willems (2002): 1 - 1/f(p, n) = exp(a) / n^b at alpha = 0.5 and 0.875. For p = 1, 2 the
# (a, b) are fitted directly; for p > 2 from (g, q) pairs at two values of the exponent e: a and b solve
# log(-g / p^q) = a - b log(e p^2) for both pairs.
_PISON_SMALL_P = {  # (p, reweighted): ((a, b) at 0.5, (a, b) at 0.875)
    (1, False): ((0.262024211897096, 0.604756680630497), (-0.351584646688712, 1.01646567502486)),
    (2, False): ((0.673292623522027, 0.691365864961895), (0.446537815635445, 1.06690782995919)),
    (1, True): ((1.11098143415027, 1.5182890270453), (-0.66046776772861, 0.88939595831888)),
    (2, True): ((3.11101712909049, 1.91401056721863), (0.79473550581058, 1.10081930350091)),
}
_PISON_LARGE_P = {  # reweighted: (((g, q, e), (g, q, e)) at 0.5, (...) at 0.875)
    False: (((-1.42764571687802, 1.26263336932151, 2), (-1.06141115981725, 1.28907991440387, 3)),
            ((-0.455179464070565, 1.11192541278794, 2), (-0.294241208320834, 1.09649329149811, 3))),
    True: (((-1.02842572724793, 1.67659883081926, 2), (-0.26800273450853, 1.35968562893582, 3)),
           ((-0.544482443573914, 1.25994483222292, 2), (-0.343791072183285, 1.25159004257133, 3))),
}


def small_sample_factor(p: int, n: int, alpha: float, reweighted: bool) -> float:
    """f_raw (``reweighted=False``) or f_rew of (4): the factor that makes det(S)^(1/p) of the
    MCD covariance average 1 for n standard normal points in p dimensions (robustbase's ``.MCDcnp2`` and
    ``.MCDcnp2.rew`` without their alpha = 0.5 table)."""

    def one_minus_inverse(at: int) -> float:
        if p <= 2:
            a, b = _PISON_SMALL_P[(p, reweighted)][at]
        else:
            (g1, q1, e1), (g2, q2, e2) = _PISON_LARGE_P[reweighted][at]
            A = np.array([[1.0, -np.log(e1 * p**2)], [1.0, -np.log(e2 * p**2)]])
            a, b = np.linalg.solve(A, np.log([-g1 / p**q1, -g2 / p**q2]))
        return 1.0 - np.exp(a) / n**b

    f500, f875 = one_minus_inverse(0), one_minus_inverse(1)
    f = f500 + (f875 - f500) / 0.375 * (alpha - 0.5) if alpha <= 0.875 else f875 + (1 - f875) / 0.125 * (alpha - 0.875)
    return float(1.0 / f)


def robustbase_factors(p: int, n: int, alpha: float) -> tuple[float, float]:
    """(f_raw, f_rew) of (4), remembered per (p, n, alpha): each fit under robustbase's
    conventions asks. ``alpha`` may be any real scalar (a 0-d array too)."""
    return _robustbase_factors(int(p), int(n), float(alpha))


@functools.lru_cache(maxsize=256)
def _robustbase_factors(p: int, n: int, alpha: float) -> tuple[float, float]:
    return small_sample_factor(p, n, alpha, False), small_sample_factor(p, n, alpha, True)


def consistency_factor(p: int, a, dtype=None) -> Array:
    """c(a) of (2): makes the covariance of the a-fraction of normal points closest to the
    centre consistent for the covariance; 1 at a = 1. Traceable in ``a``."""
    a = jnp.asarray(a, dtype if dtype is not None else jnp.result_type(float, a))
    q = chi2_quantile(jnp.where(a < 1, a, 0.5), p)  # a = 1 takes the other branch
    return jnp.where(a < 1, a / chi2_cdf(q, p + 2), 1.0)


__all__ = ["default_h", "h_from_alpha", "h_alpha_n", "small_sample_factor", "robustbase_factors", "consistency_factor"]

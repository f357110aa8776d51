"""The Stahel-Donoho outlyingness that starts ROBPCA (:mod:`bayeskit.robust.robpca`, whose
docstring holds equation (2) and the steps): directions through pairs of points (all pairs,
random ones, or rrcov's fixed generator), the univariate MCD of the projections on each
(rrcov's reweighted form under its conventions), and the h least outlying points, with the
data projected onto the hyperplane of any direction whose MCD scale is 0.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float
from scipy import stats

from bayeskit.core.special import chi2_quantile
from bayeskit.robust import mcd


def rrcov_pairs(n: int, n_directions: int) -> tuple[np.ndarray, np.ndarray]:
    """rrcov's ``n_directions`` pairs of distinct indices, drawn by its generator
    u_{t+1} = (5761 u_t + 999) mod 65536 from u_0 = 0, index floor(n u / 65536)."""
    state = 0
    out = np.empty((n_directions, 2), np.int64)

    def draw():
        nonlocal state
        state = (5761 * state + 999) % 65536
        return state * n // 65536

    for r in range(n_directions):
        a = draw()
        b = draw()
        while b == a:
            b = draw()
        out[r] = a, b
    return out[:, 0], out[:, 1]


def pairs(key, n: int, n_directions: int, conventions: str = "bayeskit") -> tuple[Array, Array]:
    """Index pairs (i, j), i != j: all of them when n(n - 1)/2 <= ``n_directions``, else
    ``n_directions`` random ones (rrcov's fixed ones under ``conventions="rrcov"``), from 32
    random bits per index taken modulo the number of choices."""
    if n * (n - 1) // 2 <= n_directions:
        i, j = np.triu_indices(n, 1)
        return jnp.asarray(i), jnp.asarray(j)
    if conventions == "rrcov":
        return tuple(map(jnp.asarray, rrcov_pairs(n, n_directions)))
    bits = jax.random.bits(key, (2, n_directions), jnp.uint32)  # i uniform, j uniform among the others
    i = (bits[0] % n).astype(jnp.int32)
    return i, (i + 1 + (bits[1] % (n - 1)).astype(jnp.int32)) % n


ALL_PAIRS = 20_000


def default_directions(n: int) -> int:
    """The estimator's number of directions: all n(n - 1)/2 pairs when there are at most
    ``ALL_PAIRS`` (the fit then does not depend on the key), else 250."""
    return n * (n - 1) // 2 if n * (n - 1) // 2 <= ALL_PAIRS else 250


def unit_rows(v):
    """Each row scaled to unit length; zero rows stay zero."""
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    return jnp.where(norm > 0, v / jnp.where(norm > 0, norm, 1), 0.0)


def reweighted_univariate_mcd(y: Float[Array, " n"], h, t0=None) -> tuple[Array, Array]:
    """rrcov's ``unimcd``: the mean and standard deviation (divisor m - 1) of the m points
    with (y_i - t_0)^2 < r_(h) chi2_{1,0.975} / chi2_{1,h/n}, t_0 the mean of the window of
    the univariate MCD and r_(h) the h-th smallest (y_i - t_0)^2; the mean and standard
    deviation of all points when h = n. ``h`` may be traced; ``t0`` when already known."""
    n = y.shape[0]
    if t0 is None:
        t0, _, _ = mcd.univariate_mcd(y, h)
    r = (y - t0) ** 2
    full = h >= n
    r_h = jnp.max(jnp.where(mcd.closest(r, h), r, 0.0))  # the h-th smallest r, without a sort
    scale = r_h / chi2_quantile(jnp.where(full, 0.5, jnp.asarray(h, y.dtype) / n), 1)
    w = jnp.where(full, True, r < scale * stats.chi2.ppf(mcd.REWEIGHT_QUANTILE, 1)).astype(y.dtype)
    m = jnp.sum(w)
    t = jnp.sum(w * y) / m
    return t, jnp.sqrt(jnp.sum(w * (y - t) ** 2) / jnp.maximum(m - 1, 1))


def outlyingness(Z: Float[Array, "n r"], i: Array, j: Array, h: int,
                 conventions: str = "bayeskit") -> tuple[Array, Array, Array, Array]:
    """(2) of :mod:`bayeskit.robust.robpca` over the directions through the pairs (i, j): the outlyingness of every point, and
    whether some direction has s_MCD = 0, with the first such direction v and t_MCD(v) (its
    h points lie on the hyperplane z'v = t_MCD(v)). Under ``conventions="rrcov"`` t_MCD
    and s_MCD are reweighted (:func:`reweighted_univariate_mcd`)."""
    V = unit_rows(Z[i] - Z[j])
    scale = jnp.sqrt(jnp.sum(Z**2, 1).max())
    proj = Z @ V.T
    t, var, _ = jax.vmap(lambda y: mcd.univariate_mcd(y, h), in_axes=1)(proj)
    s = jnp.sqrt(var)
    real = jnp.any(V != 0, 1)
    flat = real & (s <= mcd.SINGULAR * scale)
    usable = real & ~flat
    first = jnp.argmax(flat)
    t_flat = t[first]
    if conventions == "rrcov":
        t, s = jax.vmap(lambda y, t0: reweighted_univariate_mcd(y, h, t0), in_axes=(1, 0))(proj, t)
    ratio = jnp.abs(proj - t) / jnp.where(usable, s, 1.0)
    return jnp.max(jnp.where(usable, ratio, 0.0), 1), jnp.any(flat), V[first], t_flat


def least_outlying(Z, i, j, h: int, conventions: str = "bayeskit") -> tuple[Array, Array, Array, Array]:
    """ROBPCA's step 2 H_0 (indicator), the outlyingness, the number of exact-fit projections, and
    Z projected onto the hyperplanes z'v = t of the exact-fit directions (the rest of the
    algorithm works in that lower-dimensional space). One loop: the first pass projects
    along v = 0 (no change), so :func:`outlyingness` is compiled once."""

    def cond(carry):
        k, _, flat, *_ = carry
        return flat & (k <= Z.shape[1])

    def body(carry):
        k, Z, _, v, t, _ = carry
        Z = Z - jnp.outer(Z @ v - t, v)
        outl, flat, v, t = outlyingness(Z, i, j, h, conventions)
        return k + 1, Z, flat, v, t, outl

    start = (jnp.asarray(0), Z, jnp.asarray(True), jnp.zeros_like(Z[0]), jnp.zeros((), Z.dtype), jnp.zeros_like(Z[:, 0]))
    k, Z, _, _, _, outl = jax.lax.while_loop(cond, body, start)
    return mcd.closest(outl, h), outl, k - 1, Z


__all__ = ["ALL_PAIRS", "rrcov_pairs", "pairs", "default_directions", "unit_rows", "reweighted_univariate_mcd", "outlyingness",
           "least_outlying"]

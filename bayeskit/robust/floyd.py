"""Random subsets of m of n points by Floyd's algorithm (Bentley & Floyd, "Programming
pearls: a sample of brilliance", Commun. ACM 30, 1987): m draws and O(m^2) comparisons, no
sort of n keys, so that FAST-MCD's hundreds of elemental starts (:mod:`bayeskit.robust.mcd`)
take their random numbers from one block of random bits.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool

from bayeskit.core.sampling import flat


def floyd_draws(key, n: int, m: int, shape: tuple = ()) -> Array:
    """The draws of :func:`floyd_subset` (t_j uniform in {0, ..., j}, j = n - m, ..., n - 1),
    for ``shape`` subsets at once."""
    return _floyd_from_bits(flat(jax.random.bits, key, (*shape, m), jnp.uint32), n)


def _floyd_from_bits(bits: Array, n: int) -> Array:
    """Floyd's draws t_j = b_j mod (j + 1) from 32 random bits b_j each (the last of the
    ``bits``' axes, one per j; each value's probability is off by less than (j + 1) / 2^32)."""
    m = bits.shape[-1]
    return (bits % jnp.arange(n - m + 1, n + 1, dtype=bits.dtype)).astype(jnp.int32)


def start_draws(key, n: int, m: int, shape: tuple = ()) -> tuple[Array, Array]:
    """The random numbers of ``shape`` elemental starts of m points among n, from one draw of
    random bits: Floyd's draws (:func:`floyd_draws`) and the random order (n 32-bit integers)
    in which a singular start takes further points."""
    bits = flat(jax.random.bits, key, (*shape, m + n), jnp.uint32)
    return _floyd_from_bits(bits[..., :m], n), bits[..., m:]


def floyd_subset(draws: Array, n: int) -> Bool[Array, " n"]:
    """The indicator of m distinct points of n drawn uniformly, by Floyd's algorithm: for
    j = n - m, ..., n - 1 take t_j (``draws``), or j when t_j is taken already (O(m^2)
    comparisons; no sort of n keys)."""
    m = draws.shape[0]

    def take(i, chosen):
        taken = jnp.any((chosen == draws[i]) & (jnp.arange(m) < i))
        return chosen.at[i].set(jnp.where(taken, n - m + i, draws[i]))

    chosen = jax.lax.fori_loop(0, m, take, jnp.zeros(m, draws.dtype))
    return jnp.zeros(n, bool).at[chosen].set(True)


__all__ = ["floyd_draws", "start_draws", "floyd_subset"]

"""Gamma variates by Marsaglia & Tsang's method (ACM Trans. Math. Softw. 26, 2000), with
every variate's rejection loop run as one.

For a shape b >= 1, with d = b - 1/3, c = 1 / sqrt(9 d), x standard normal and u uniform,

    v = (1 + c x)^3,   d v ~ Gamma(b) when v > 0 and log u < x^2 / 2 + d (1 - v + log v)    (1)

(otherwise draw again). A shape a < 1 takes b = a + 1 and a further uniform u':

    Gamma(a) = Gamma(a + 1) u'^(1/a),   log Gamma(a) = log Gamma(a + 1) + log(u') / a,        (2)

the logarithm staying finite where Gamma(a) itself underflows (u' is taken as 1 - u for u
uniform on [0, 1), never 0). The bracket of (1) is written as a whole: in single precision,
d - d v + d log v loses the bracket's value to the rounding of d v once d reaches about 1e4.

JAX's sampler runs a rejection loop per variate (vmapped, with a split of the key per
variate and round); in a conjugate update it is the largest piece of the compiled program.
Here each round draws one candidate (1)-(2) for every variate from one block of random
bits, which also holds the next round's key, and a variate keeps the first it accepts, so
the program holds one small loop with one Threefry computation. Each variate is exact; the
draws differ from JAX's for the same key. The key's words lead the block and a variate's
uniforms sit side by side after them, so under JAX's partitionable Threefry (the default)
the first m variates of a longer draw (of a one-dimensional shape) are those a draw of m
gives.

Normal and categorical variates by the inverse CDF of uniforms (``normal_from_uniform``,
``categorical_from_uniform``) let a sampler take all the random numbers of a step from one
block of uniforms: each ``jax.random`` call is a Threefry computation compiled at its place
in the program.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erfinv
from jaxtyping import Array, ArrayLike, PRNGKeyArray

from bayeskit.core.device import batch_axis_in_front


def _next_key_and_uniforms(key: PRNGKeyArray, count: int, dtype) -> tuple[PRNGKeyArray, Array]:
    """The next round's key and ``count`` uniforms on [0, 1) from one draw of random bits:
    the key's words first, then the uniforms' (JAX's conversion of bits to uniforms for 32-
    and 64-bit floats; half precision takes the top bits of 32-bit words), so the i-th
    uniform does not depend on ``count`` under the partitionable Threefry. One
    Threefry computation per round instead of a split and a draw (each compiled at its
    place in the program: a third of the sampler's compile time)."""
    typed = jnp.issubdtype(key.dtype, jax.dtypes.prng_key)
    key_words = (jax.random.key_data(key) if typed else key).shape[-1]
    width = max(jnp.finfo(dtype).bits, 32)  # at least a word per uniform
    bits_dtype = jnp.dtype(f"uint{width}")
    lead = -(-32 * key_words // width)  # elements that hold the key's words
    bits = jax.random.bits(key, (lead + count,), bits_dtype)
    words = jax.lax.bitcast_convert_type(bits[:lead], jnp.uint32).reshape(-1)[:key_words]
    following = jax.random.wrap_key_data(words, impl=jax.random.key_impl(key)) if typed else words
    unsigned = jnp.dtype(f"uint{jnp.finfo(dtype).bits}")
    mantissa = (bits[lead:] >> (width - jnp.finfo(dtype).nmant)).astype(unsigned)
    one = jax.lax.bitcast_convert_type(jnp.asarray(1, dtype), unsigned)
    return following, jax.lax.bitcast_convert_type(mantissa | one, dtype) - 1


def _rounds(keys: PRNGKeyArray, a: Array, log: bool) -> Array:
    """Gamma(a) variates (their logarithms with ``log``) by (1)-(2) for a batch of keys
    (b,) and shapes ``a`` (b, ...): every key's rounds in one loop."""
    dtype = a.dtype
    small = a < 1
    d = jnp.where(small, a + 1, a) - 1 / 3
    c = 1 / jnp.sqrt(9 * d)
    count = 3 * math.prod(a.shape[1:])  # a variate's three uniforms side by side: see above

    def draw(carry):
        keys, value, waiting = carry
        keys, u = jax.vmap(lambda k: _next_key_and_uniforms(k, count, dtype))(keys)
        u = u.reshape(*a.shape, 3)
        x = normal_from_uniform(u[..., 0])
        v = (1 + c * x) ** 3
        log_v = jnp.log(jnp.where(v > 0, v, 1))
        accept = (v > 0) & (jnp.log(u[..., 1]) < 0.5 * x * x + d * (1 - v + log_v))
        boost = jnp.where(small, jnp.log1p(-u[..., 2]) / a, 0)  # (2)
        candidate = jnp.log(d) + log_v + boost if log else d * v * jnp.exp(boost)
        value = jnp.where(waiting & accept, candidate, value)
        return keys, value, waiting & jnp.isnan(value)  # waiting variates hold NaN until they accept

    # shapes outside (0, inf) draw nothing: Gamma(0) = 0, Gamma(inf) = inf, NaN otherwise (as JAX's)
    valid = (a > 0) & (a < jnp.inf)
    limit = jnp.where(a == 0, 0.0, jnp.where(a == jnp.inf, jnp.inf, jnp.nan)).astype(dtype)
    limit = jnp.log(limit) if log else limit
    start = (keys, jnp.where(valid, jnp.nan, limit).astype(dtype), valid)
    return jax.lax.while_loop(lambda carry: jnp.any(carry[2]), draw, start)[1]


def _batched_rounds(log: bool):
    """:func:`_rounds` whose ``vmap`` folds the mapped axis into the batch of keys: one
    loop for all, where JAX's batching of a loop would keep a loop per key and a select of
    every carried value per round (under a vmap over 33 keys the program compiled in 1.1-1.2
    s against 0.75 s for a single key)."""

    @jax.custom_batching.custom_vmap
    def rounds(keys, a):
        return _rounds(keys, a, log)

    @rounds.def_vmap
    def _folded(axis_size, in_batched, keys, a):
        keys, a = batch_axis_in_front(axis_size, in_batched, (keys, a))
        tail = keys.shape[2:]  # a raw key's words
        out = rounds(keys.reshape(-1, *tail), a.reshape(-1, *a.shape[2:]))
        return out.reshape(a.shape), True

    return rounds


_ROUNDS = {log: _batched_rounds(log) for log in (False, True)}


def _marsaglia_tsang(key: PRNGKeyArray, a, shape, dtype, log: bool) -> Array:
    """Gamma(a) variates of ``shape`` (their logarithms with ``log``), by (1)-(2)."""
    dtype = jnp.result_type(float) if dtype is None else dtype
    a = jnp.asarray(a, dtype)
    shape = a.shape if shape is None else tuple(shape)
    return _ROUNDS[log](key[None], jnp.broadcast_to(a, shape)[None])[0]


def flat(draw: Callable[..., Array], key: PRNGKeyArray, shape: tuple[int, ...], *args) -> Array:
    """``draw(key, shape, *args)``, a ``jax.random`` draw whose second argument is the shape
    (``normal``, ``uniform``, ``bits``, ``gumbel``, ...), drawn as a vector and reshaped.
    The same numbers: JAX counts a draw's entries in row-major order (with the
    partitionable Threefry or without). A shape of two or three axes compiles its counters
    as one integer computation per axis, 0.05-0.35 s more at each place on the CPU (a
    normal draw of (30, 32, 32): 0.52 s against 0.22 s flat)."""
    return draw(key, (math.prod(shape),), *args).reshape(shape)


def normal_from_uniform(u: Array) -> Array:
    """Standard normal variates from uniforms ``u`` on [0, 1) by the inverse CDF,
    sqrt(2) erfinv(2 u - 1), the argument kept above -1. A program that needs
    normal and uniform variates takes them from one block of uniforms this way: every
    separate draw is a Threefry computation of its own, compiled at each place the program
    draws (about 0.08 s each in the LFRM sweep's program on the CPU)."""
    lowest = np.nextafter(np.asarray(-1, u.dtype), np.asarray(0, u.dtype))
    return np.sqrt(2).astype(u.dtype) * erfinv(jnp.maximum(2 * u - 1, lowest))


def categorical_from_uniform(u: ArrayLike, logits: Array) -> Array:
    """The index drawn with probabilities proportional to exp(``logits``) (one-dimensional)
    by the inverse CDF at ``u`` in [0, 1]: with c the cumulative sums of exp(logits - max),
    the first index whose c exceeds u c_last; at u = 1 the first that reaches c_last. Every
    index returned has positive probability."""
    c = jnp.cumsum(jnp.exp(logits - jnp.max(logits)))
    return jnp.sum((c <= u * c[-1]) & (c < c[-1]))


def gamma(key: PRNGKeyArray, a, shape=None, dtype=None) -> Array:
    """Gamma(``a``, 1) variates of ``shape`` (default ``a``'s), as ``jax.random.gamma``."""
    return _marsaglia_tsang(key, a, shape, dtype, log=False)


def loggamma(key: PRNGKeyArray, a, shape=None, dtype=None) -> Array:
    """The logarithms of Gamma(``a``, 1) variates, as ``jax.random.loggamma`` (finite for
    shapes so small that the variates underflow)."""
    return _marsaglia_tsang(key, a, shape, dtype, log=True)


__all__ = ["categorical_from_uniform", "flat", "gamma", "loggamma", "normal_from_uniform"]

"""Host data onto the device without a compiled program; the batch axis of a ``custom_vmap``
rule's arguments."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def as_array(x, dtype=None) -> jax.Array:
    """``jnp.asarray(x, dtype)`` without a compiled program for host data.

    Outside a trace, ``jnp.asarray`` of a NumPy array compiles and runs an identity program
    per shape and dtype: one more program in a user's first fit or prediction, and one more
    read of the persistent cache in every new process. Here a NumPy array or scalar goes onto
    the device by ``jax.device_put``, as a copy (the caller may change their array
    afterwards), its dtype canonicalised as ``jnp.asarray`` does.

    Parameters
    ----------
    x : array-like
        A NumPy array or scalar; a Python number, or a tuple or list of numbers (with a
        ``dtype`` these go through NumPy too; without one a number stays weakly typed, as
        ``jnp.asarray`` makes it); anything else NumPy can read, such as a pandas DataFrame;
        a JAX array or a tracer, which go to ``jnp.asarray``.
    dtype : dtype, optional
        The requested dtype, canonicalised (float64 becomes float32 without x64).

    Returns
    -------
    jax.Array
        The same array as ``jnp.asarray(x, dtype)``: dtype, weak type, shape and values.

    Raises
    ------
    ValueError
        For a NumPy masked array, which ``jnp.asarray`` refuses too.
    """
    copy = _host_copy(x, dtype)
    return jnp.asarray(x, dtype) if copy is None else jax.device_put(copy)  # the transfer may read the copy after we return


def call_arg(x, dtype=None):
    """:func:`as_array` for an argument passed straight to a jitted function: host data as a
    NumPy copy in the dtype ``jnp.asarray`` would give it, which the call puts on the device
    itself (about 3 us an argument against about 30 us for ``jax.device_put``: a call of a
    few milliseconds on small data, with several such arguments, feels it). The same compiled
    program runs as for :func:`as_array`'s array. A JAX array or tracer, or a Python number
    without a dtype, goes to ``jnp.asarray``."""
    copy = _host_copy(x, dtype)
    return jnp.asarray(x, dtype) if copy is None else copy


def real_dtype(dtype) -> np.dtype:
    """The dtype of arithmetic on data of ``dtype``: itself when it is floating (bfloat16
    too), the default float dtype for integers and booleans, whose dtype would truncate a
    penalty of 0.5 or a tolerance of 1e-4 to 0."""
    dtype = np.dtype(dtype)
    return dtype if jnp.issubdtype(dtype, jnp.inexact) else np.dtype(jnp.result_type(float))


def float_arg(x):
    """:func:`call_arg` of data whose arithmetic is floating, in :func:`real_dtype` (a
    covariance of counts, a 0/1 matrix: the default float dtype). The dtype is chosen from
    the data's own before any canonicalising, so int64 counts past 2**31 under float32
    defaults are converted whole, not through int32."""
    raw = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    return call_arg(x, jax.dtypes.canonicalize_dtype(real_dtype(raw)))  # canonical: no float64 request under float32 defaults


def _host_copy(x, dtype) -> np.ndarray | None:
    """A NumPy copy of host data in JAX's canonical dtype (see :func:`as_array`), or None for
    what goes to ``jnp.asarray``."""
    if isinstance(x, np.ma.MaskedArray):
        raise ValueError("a masked array cannot be read (as jnp.asarray refuses it): use its .filled() or drop the masked entries")
    if not isinstance(x, (jax.Array, np.ndarray)) and hasattr(x, "__array__") and not hasattr(x, "__jax_array__"):
        x = np.asarray(x)  # a pandas DataFrame or Series, for example
    if isinstance(x, (np.ndarray, np.generic)) or (dtype is not None and _numbers(x)):
        x = np.asarray(x, dtype)
        return x.astype(jax.dtypes.canonicalize_dtype(x.dtype), copy=True)  # one copy, cast or not
    return None


def _numbers(x) -> bool:
    number = (bool, int, float, np.generic)
    return isinstance(x, number) or (isinstance(x, (tuple, list)) and all(isinstance(v, number) for v in x))


def program_input(x, dtype):
    """The input of a jitted program that casts it to ``dtype`` itself: a JAX array as it is
    (its cast runs inside the program, not as an eager program of its own), anything else
    through :func:`call_arg` with ``dtype`` (converted on the host, put on the device by the
    call)."""
    return x if isinstance(x, jax.Array) else call_arg(x, dtype)


def batch_axis_in_front(axis_size: int, in_batched, args) -> tuple:
    """The arguments of a ``jax.custom_batching.custom_vmap`` rule, each with the batch axis
    in front: the batched ones as they come, the others broadcast to ``axis_size`` copies."""
    return tuple(a if batched else jnp.broadcast_to(a, (axis_size, *jnp.shape(a))) for a, batched in zip(args, in_batched))

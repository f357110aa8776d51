"""Host data onto the device without a compiled program."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def as_array(x, dtype=None):
    """``jnp.asarray(x, dtype)``, but a NumPy array or scalar goes onto the device by
    ``jax.device_put``: outside a trace ``jnp.asarray`` of one compiles and runs an identity
    program per shape and dtype, one more program in a user's first fit or prediction
    (and one more read of the persistent cache in every new process). The same array, its
    dtype canonicalised as ``jnp.asarray`` does. So do a Python number and a tuple or list
    of numbers given a ``dtype`` (without one a number stays weakly typed, as
    ``jnp.asarray`` makes it), and anything else NumPy can read (a pandas DataFrame); a
    tracer or a JAX array goes to ``jnp.asarray``."""
    if not isinstance(x, (jax.Array, np.ndarray)) and hasattr(x, "__array__"):
        x = np.asarray(x)  # a pandas DataFrame or Series, for example
    if isinstance(x, (np.ndarray, np.generic)) or (dtype is not None and _numbers(x)):
        return jax.device_put(np.asarray(x, dtype))
    return jnp.asarray(x, dtype)


def _numbers(x) -> bool:
    number = (bool, int, float, np.generic)
    return isinstance(x, number) or (isinstance(x, (tuple, list)) and all(isinstance(v, number) for v in x))

"""Helpers shared by the estimator wrappers: the key from ``random_state`` and the
choice among vmapped restarts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.status import Status


def _key(random_state) -> jax.Array:
    if random_state is None:
        random_state = int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, np.random.RandomState):
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    return jax.random.key(int(random_state))


def _best_restart(result, n_restarts: int, name: str):
    """The fit itself, or of a vmapped batch of restarts the one with the highest final
    bound among those that did not fail; a ``RuntimeError`` when all failed."""
    failed = lambda status: (status == Status.nonfinite) | (status == Status.not_positive_definite)
    if n_restarts > 1:
        score = jnp.where(failed(result.status), -jnp.inf, result.objective)
        result = jax.tree.map(lambda a: a[int(jnp.argmax(score))], result)
    if bool(failed(result.status)):
        raise RuntimeError(f"{name} failed: {Status[result.status]}")
    return result

"""``cond_any``: a ``lax.cond`` that still skips work under ``vmap``.

Under ``vmap`` a ``lax.cond`` with a batched predicate runs both branches for every element
and selects. A sampler's vectorised chains often take an expensive branch rarely (a birth
proposal in a few percent of row updates); ``cond_any`` runs the expensive branch for the
whole batch only when some element needs it and the cheap one otherwise, then picks each
element's result by its own predicate: the results of ``lax.cond`` element by element, with
the expensive work skipped whenever no element needs it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from bayeskit.core.device import batch_axis_in_front


def cond_any(pred, true_fn, false_fn, *operands):
    """``lax.cond(pred, true_fn, false_fn, *operands)``; under ``vmap``, ``true_fn`` runs on
    the whole batch if any element's ``pred`` holds (so it must be safe to evaluate where
    ``pred`` is false) and ``false_fn`` otherwise, each element keeping its own branch's
    result. The branches must not close over batched values: pass them as ``operands``
    (pytrees of arrays)."""

    leaves, tree = jax.tree.flatten(operands)
    true_leaves = lambda *leaves: true_fn(*jax.tree.unflatten(tree, leaves))
    false_leaves = lambda *leaves: false_fn(*jax.tree.unflatten(tree, leaves))

    @jax.custom_batching.custom_vmap
    def run(pred, *leaves):
        return jax.lax.cond(pred, true_leaves, false_leaves, *leaves)

    @run.def_vmap
    def _batched(axis_size, in_batched, pred, *leaves):
        pred, *leaves = batch_axis_in_front(axis_size, in_batched, (pred, *leaves))
        both = jax.vmap(lambda *o: (true_leaves(*o), false_leaves(*o)))
        only_false = jax.vmap(false_leaves)

        def taken(*o):
            t, f = both(*o)
            pick = lambda a, b: jnp.where(jnp.reshape(pred, pred.shape + (1,) * (a.ndim - 1)), a, b)
            return jax.tree.map(pick, t, f)

        out = jax.lax.cond(jnp.any(pred), taken, only_false, *leaves)
        return out, jax.tree.map(lambda _: True, out)

    return run(pred, *leaves)

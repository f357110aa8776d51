"""``cond_any``: a ``lax.cond`` that still skips work under one ``vmap``.

Under ``vmap`` a ``lax.cond`` with a batched predicate runs both branches for every element
and selects. A sampler's vectorised chains often take an expensive branch rarely (a birth
proposal in a few percent of row updates); ``cond_any`` runs both branches for the whole
batch only when some element needs the expensive one, and the cheap one alone otherwise,
each element keeping its own branch's result: the results of ``lax.cond`` element by
element. Under a second ``vmap`` the outer one turns that choice into a select again (both
run), so the saving is that of the innermost batch.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def cond_any(pred, true_fn, false_fn, *operands):
    """``lax.cond(pred, true_fn, false_fn, *operands)``; under ``vmap``, ``true_fn`` and
    ``false_fn`` both run on the whole batch if any element's ``pred`` holds (so each must
    be safe to evaluate where the other is taken) and ``false_fn`` alone otherwise, each
    element keeping its own branch's result. The branches must not close over batched
    values: pass them as ``operands`` (pytrees of arrays). Forward-mode derivatives only."""
    leaves, tree = jax.tree.flatten(operands)
    true_leaves = lambda *leaves: true_fn(*jax.tree.unflatten(tree, leaves))
    false_leaves = lambda *leaves: false_fn(*jax.tree.unflatten(tree, leaves))

    @jax.custom_batching.custom_vmap
    def run(pred, *leaves):
        return jax.lax.cond(pred, true_leaves, false_leaves, *leaves)

    @run.def_vmap
    def _batched(axis_size, in_batched, pred, *leaves):
        if not in_batched[0]:
            pred = jnp.broadcast_to(pred, (axis_size,))
        in_axes = [0 if batched else None for batched in in_batched[1:]]  # unbatched operands stay single
        both = jax.vmap(lambda *o: (true_leaves(*o), false_leaves(*o)), in_axes=in_axes, axis_size=axis_size)
        only_false = jax.vmap(false_leaves, in_axes=in_axes, axis_size=axis_size)

        def taken(*o):
            t, f = both(*o)
            pick = lambda a, b: jnp.where(jnp.reshape(pred, pred.shape + (1,) * (a.ndim - 1)), a, b)
            return jax.tree.map(pick, t, f)

        out = jax.lax.cond(jnp.any(pred), taken, only_false, *leaves)
        return out, jax.tree.map(lambda _: True, out)

    return run(pred, *leaves)

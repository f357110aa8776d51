"""cond_any: lax.cond's results element by element under vmap, the expensive branch
skipped when no element needs it."""

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.control import cond_any


def _branches(runs):
    def true_fn(x, pair):
        jax.debug.callback(lambda: runs.append(1))
        return {"sum": x * 2 + pair[0], "sin": jnp.sin(x) * pair[1]}

    def false_fn(x, pair):
        return {"sum": x - pair[0], "sin": jnp.zeros_like(x)}

    return true_fn, false_fn


def test_cond_any_equals_lax_cond_under_vmap_and_alone():
    true_fn, false_fn = _branches([])
    rng = np.random.default_rng(0)
    x, y = jnp.asarray(rng.normal(size=(4, 3))), jnp.asarray(rng.normal(size=(4, 3)))
    pred = jnp.array([True, False, False, True])
    ours = lambda p, x, y: cond_any(p, true_fn, false_fn, x, (y, 2.0))
    theirs = lambda p, x, y: jax.lax.cond(p, true_fn, false_fn, x, (y, 2.0))
    same = lambda a, b: jax.tree.map(np.testing.assert_array_equal, a, b)
    same(jax.jit(jax.vmap(ours))(pred, x, y), jax.vmap(theirs)(pred, x, y))
    same(jax.vmap(ours, in_axes=(0, 0, None))(pred, x, y[0]), jax.vmap(theirs, in_axes=(0, 0, None))(pred, x, y[0]))
    twice = lambda f: jax.vmap(jax.vmap(f), in_axes=(None, 0, None))
    same(twice(ours)(pred, jnp.stack([x, x + 1]), y), twice(theirs)(pred, jnp.stack([x, x + 1]), y))
    same(jax.vmap(lambda p: cond_any(p, lambda: jnp.ones(2), lambda: jnp.zeros(2)))(pred),  # no operands
         jax.vmap(lambda p: jax.lax.cond(p, lambda: jnp.ones(2), lambda: jnp.zeros(2)))(pred))
    for p in (True, False):
        same(cond_any(jnp.asarray(p), true_fn, false_fn, x[0], (y[0], 2.0)), theirs(jnp.asarray(p), x[0], y[0]))


def test_cond_any_skips_the_true_branch_when_no_element_needs_it():
    """Under vmap lax.cond runs both branches; cond_any runs true_fn only when some
    element's predicate holds."""
    runs = []
    true_fn, false_fn = _branches(runs)
    x = jnp.ones((4, 3))
    run = jax.jit(jax.vmap(lambda p, x: cond_any(p, true_fn, false_fn, x, (x, 1.0))))
    jax.block_until_ready(run(jnp.zeros(4, bool), x))
    assert runs == []
    jax.block_until_ready(run(jnp.array([False, True, False, False]), x))
    assert len(runs) == 1
    jax.block_until_ready(jax.jit(jax.vmap(lambda p, x: jax.lax.cond(p, true_fn, false_fn, x, (x, 1.0))))(jnp.zeros(4, bool), x))
    assert len(runs) == 2  # lax.cond ran the branch nobody needed

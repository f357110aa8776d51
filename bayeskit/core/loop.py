"""The fit-loop driver shared by every iterative model.

``run`` repeats a pure ``update`` in a bounded ``lax.while_loop`` and records the
objective after each sweep in a fixed-length trace. It stops when the relative change
``|f_k - f_{k-1}| <= tol * (1 + |f_k|)`` or after ``max_iter`` sweeps. A sweep whose
objective is not finite, or whose state holds a NaN, is rejected: the last finite state is
kept and the status says ``nonfinite`` (a NaN result never reports success). Under ``vmap`` every element keeps its own counter and status, and
elements that have stopped are frozen (the while loop's batching selects their old
carry), so they are never driven into NaN by the others' iterations.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextvars import ContextVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from bayeskit.core import progress as _progress
from bayeskit.core.device import real_dtype
from bayeskit.core.status import FitResult, Status, all_finite, is_failure

_RUNNING = -1
_BATCHED: ContextVar[str | None] = ContextVar("bayeskit_batched", default=None)


@contextlib.contextmanager
def batched(where: str):
    """While the elements of a batched program (``where``, e.g. ``bayeskit.core.sweep``) are
    traced, a fit asked to raise on failure refuses (:func:`check_throw`)."""
    token = _BATCHED.set(where)
    try:
        yield
    finally:
        _BATCHED.reset(token)


def check_throw(throw) -> None:
    """Refuse ``throw=True`` while tracing inside :func:`batched`: one element's failure
    cannot raise inside a batched program (it surfaced as an XLA callback error)."""
    where = _BATCHED.get()
    if throw and where is not None:
        raise ValueError(f"throw=True inside {where}: one element's failure cannot raise inside a batched program; "
                         "pass throw=False and read each element's status (result.status).")


def as_arrays(tree: PyTree, dtype) -> PyTree:
    """Every leaf of ``tree`` (the continuous hyperparameters of an ``eqx.Module``, whose
    static fields are not leaves) as an array of ``dtype``, so that a jitted fit traces
    them as values: a new value compiles nothing. Host values become NumPy arrays (no
    device dispatch per leaf); JAX arrays and tracers stay JAX arrays. Integer or boolean
    data's hyperparameters take the default float dtype (:func:`~bayeskit.core.device.real_dtype`)."""
    host = real_dtype(dtype)
    return jax.tree.map(lambda v: jnp.asarray(v, host) if isinstance(v, jax.Array) else np.asarray(v, host), tree)



def check_tol(tol) -> None:
    """Refuse a ``tol`` that is not a finite number >= 0 (a tracer passes: checked outside)."""
    if isinstance(tol, jax.core.Tracer):
        return
    value = np.asarray(tol)
    if value.shape != () or not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value) \
            or not np.isfinite(value) or value < 0:
        raise ValueError(f"tol must be a finite number >= 0 (0 runs all max_iter iterations), got {tol!r}.")


def tolerance(tol, dtype) -> Array:
    """``tol`` checked (:func:`check_tol`) and as an array of ``dtype``, traced by the
    jitted fits: a new value compiles nothing."""
    check_tol(tol)
    dtype = real_dtype(dtype)
    return jnp.asarray(tol, dtype) if isinstance(tol, jax.Array) else np.asarray(tol, dtype)


SMALL_LEAF = 4096  # has_nan checks leaves up to this size as one vector


def has_nan(tree: PyTree) -> Array:
    """True when a floating leaf of ``tree`` holds a NaN (inf can be meaningful in a state,
    a pruned basis function's precision; NaN never is). The small leaves (scalars,
    hyperparameters, optimiser moments) are checked as one vector, the others each alone
    (not copied): a state of tens of leaves otherwise compiles a reduction for each."""
    leaves = [leaf for leaf in jax.tree.leaves(tree) if isinstance(leaf, jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)]
    small = [jnp.ravel(jnp.isnan(leaf)) for leaf in leaves if leaf.size <= SMALL_LEAF]  # masks: no dtype promotion
    checks = [jnp.any(jnp.isnan(leaf)) for leaf in leaves if leaf.size > SMALL_LEAF]
    if small:
        checks.append(jnp.any(jnp.concatenate(small)))
    return jnp.any(jnp.stack(checks)) if checks else jnp.asarray(False)


def run(
    update: Callable[[PyTree], PyTree],
    objective: Callable[[PyTree], Array],
    state: PyTree,
    *,
    max_iter: int,
    tol: float | Array,
    progress: bool | None = None,
    throw: bool = True,
    failed: Callable[[PyTree], Array] | None = None,
    done: Callable[[PyTree], Array] | None = None,
    inputs: PyTree = None,
) -> FitResult:
    """Iterate ``state = update(state)`` until convergence; see the module docstring.

    Parameters
    ----------
    update : callable
        One full sweep, ``State -> State``; pure and traceable.
    objective : callable
        ``State -> scalar`` (e.g. the ELBO), evaluated after every sweep.
    state : PyTree
        The initial state.
    max_iter : int
        Maximum number of sweeps (static: it sets the trace length).
    tol : float
        Relative tolerance on the change of the objective, checked from the second
        sweep on; 0 runs all ``max_iter`` sweeps.
    progress : bool, optional
        Show a tqdm bar (off under the ``CI`` environment variable).
    throw : bool
        Raise on failure (``nonfinite``, ``not_positive_definite``). Use ``False``
        under ``vmap`` and read ``result.status`` per element.
    failed : callable, optional
        ``State -> bool``: a model-specific check that the new state is unusable (for
        example a Cholesky factorisation that failed even with jitter).
    done : callable, optional
        ``State -> bool``: a model-specific convergence test, checked besides ``tol``
        (for example "no basis function can raise the evidence any more").
    inputs : PyTree, optional
        The fit's data: where any of it is NaN or inf (data that only a caller's ``jit``
        kept from the host checks), a ``failed`` state is reported as ``nonfinite``, the
        input's fault, rather than as ``not_positive_definite``.
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}.")
    check_throw(throw)
    show = _progress.enabled(progress)
    token = _progress.new_token() if show else None
    dtype = jax.eval_shape(objective, state).dtype
    trace = jnp.full((max_iter,), jnp.nan, dtype)
    code = jnp.asarray(_RUNNING, jnp.int32)
    inputs_finite = all_finite(*leaves) if (leaves := jax.tree.leaves(inputs)) else jnp.asarray(True)

    def cond(carry):
        i, _, _, _, code = carry
        return (i < max_iter) & (code == _RUNNING)

    def body(carry):
        i, state, previous, trace, code = carry
        new_state = update(state)
        f = objective(new_state)
        bad_linalg = (failed(new_state) if failed is not None else jnp.asarray(False)) & inputs_finite
        finite = jnp.isfinite(f) & ~has_nan(new_state)
        ok = finite & ~bad_linalg
        converged = ok & (i > 0) & (tol > 0) & (jnp.abs(f - previous) <= tol * (1 + jnp.abs(f)))
        if done is not None:
            converged = converged | (ok & done(new_state))
        code = jnp.where(
            bad_linalg,
            Status.not_positive_definite._value,
            jnp.where(
                ~finite,
                Status.nonfinite._value,
                jnp.where(
                    converged,
                    Status.successful._value,
                    jnp.where(i + 1 >= max_iter, Status.max_iter_reached._value, _RUNNING),
                ),
            ),
        ).astype(jnp.int32)
        state = jax.tree.map(lambda new, old: jnp.where(ok, new, old), new_state, state)
        trace = trace.at[i].set(jnp.where(ok, f, jnp.nan).astype(dtype))
        if show:
            _progress.report(token, max_iter, i, f)
        return i + 1, state, jnp.where(ok, f, previous).astype(dtype), trace, code

    carry = (jnp.asarray(0, jnp.int32), state, jnp.asarray(jnp.nan, dtype), trace, code)
    n_iter, state, _, trace, code = jax.lax.while_loop(cond, body, carry)
    if show:
        _progress.close(token, n_iter)
    status = Status.where(code == Status.successful._value, Status.successful, Status.max_iter_reached)
    status = Status.where(code == Status.nonfinite._value, Status.nonfinite, status)
    status = Status.where(
        code == Status.not_positive_definite._value, Status.not_positive_definite, status
    )
    if throw:
        trace = status.error_if(trace, is_failure(status))
    return FitResult(state=state, trace=trace, n_iter=n_iter, status=status)

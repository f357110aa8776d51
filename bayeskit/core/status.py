"""Outcome of a fit: the :class:`Status` enumeration and the :class:`FitResult` record.

Errors are data: a fit returns a ``Status`` per element (readable under ``vmap``) and,
with ``throw=True``, raises a readable error when the status is a failure.
"""

from __future__ import annotations

import functools
import inspect

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PyTree


class Status(eqx.Enumeration):
    """How a fit ended. Each item's text says what to do about it."""

    successful = ("converged: the relative change of the objective fell below tol (or, for a fit "
                  "without iterations, the solution is finite).")
    max_iter_reached = (
        "stopped at max_iter before the relative change of the objective fell below "
        "tol; the result is usable, but raise max_iter or tol for a converged fit."
    )
    nonfinite = (
        "the objective or the estimates became NaN or inf (an iterative fit returns its last "
        "finite state). Check the input for NaN or inf values and extreme scales, or fit in float64 (jax_enable_x64)."
    )
    not_positive_definite = (
        "a covariance matrix was not positive definite even after adding jitter; the "
        "problem is ill-conditioned (duplicated features, extreme hyperparameters)."
    )


def message(status: Status) -> str:
    """``Status[status]`` of one fit, read on the host: one transfer of its code (equinox's
    ``Status[...]`` maps every entry through ``np.vectorize``, about 15 us a call)."""
    code = np.asarray(status._value)
    if code.ndim:
        raise ValueError(f"message reads the status of one fit; got a batch of shape {code.shape} (index it first).")
    return _MESSAGES[int(code)]


_MESSAGES = {int(item._value): Status[item] for item in Status._name_to_item.values()}


def is_failure(status: Status) -> Array:
    """True where ``status`` is one of the failures (not success, not max_iter)."""
    return (status == Status.nonfinite) | (status == Status.not_positive_definite)


class FitResult(eqx.Module):
    """The result of a ``fit``.

    Attributes
    ----------
    state : PyTree
        The final state (variational parameters or sampler state) of the model.
    trace : array of shape (max_iter,)
        The objective after each iteration, NaN-padded after ``n_iter``.
    n_iter : int array
        Number of iterations run.
    status : Status
        How the fit ended; ``Status.successful`` when it converged.
    """

    state: PyTree
    trace: Float[Array, " max_iter"]
    n_iter: Int[Array, ""]
    status: Status

    @property
    def objective(self) -> Array:
        """The last finite objective value (the ELBO for variational models); one compiled
        program, not a string of eager operations after a fit."""
        return _last_finite(self.trace)

    @property
    def converged(self) -> Array:
        return self.status == Status.successful


@jax.jit
def _last_finite(trace: Array) -> Array:
    """The last finite entry along the last axis (the finite ones come first)."""
    last = jnp.maximum(jnp.sum(jnp.isfinite(trace), axis=-1) - 1, 0)
    return jnp.take_along_axis(trace, last[..., None], axis=-1)[..., 0]


def solved(state: PyTree, objective, ok=None) -> FitResult:
    """The :class:`FitResult` of a fit without an iteration trace (a closed form, a search
    over starts, a host-driven solver): ``trace`` holds the one ``objective`` at the
    solution and ``n_iter`` is 0. The status is successful where ``ok`` (default: the
    objective is finite) and nonfinite elsewhere. Call it unbatched (inside ``vmap``)."""
    objective = jnp.asarray(objective)
    ok = jnp.isfinite(objective) if ok is None else jnp.asarray(ok)
    status = Status.where(ok, Status.successful, Status.nonfinite)
    return FitResult(state, objective[None], jnp.zeros((), jnp.int32), status)


def all_finite(*arrays) -> Array:
    """True when every entry of every array is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays]))


def readable_failure(fit):
    """Decorate a public fit that takes ``throw``: called with concrete data and
    ``throw=True``, it runs the fit with ``throw=False`` and raises a failure from the
    returned status as a ``RuntimeError`` that names the fit and gives the :class:`Status`
    sentence alone. The compiled program then holds no error callback, so that it is the
    same program as ``throw=False`` and can be kept on disk between processes
    (:mod:`bayeskit.core.executables` and JAX's cache keep no program with a host
    callback). Under the caller's ``jit`` or ``vmap`` (traced arguments, or data its
    function closes over) the fit raises from inside the program, as ``throw=True`` does."""
    signature = inspect.signature(fit)
    default = signature.parameters["throw"].default
    name = f"{fit.__module__.removeprefix('bayeskit.')}.{fit.__name__}"

    @functools.wraps(fit)
    def wrapper(*args, **kwargs):
        throw = kwargs.get("throw", default)
        if not throw or any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((args, kwargs))):
            return fit(*args, **kwargs)
        result = fit(*args, **{**kwargs, "throw": False})
        status = result.status
        if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(status)):  # data closed over by the caller's jit
            return eqx.tree_at(lambda r: r.trace, result, status.error_if(result.trace, is_failure(status)))
        codes = np.asarray(status._value)  # one read of the codes: comparing items runs an eager program each
        for failure in (Status.nonfinite, Status.not_positive_definite):
            if np.any(codes == np.asarray(failure._value)):
                raise RuntimeError(f"{name} failed: {Status[failure]}")
        return result

    return wrapper

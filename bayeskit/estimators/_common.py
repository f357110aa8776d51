"""Helpers shared by the estimator wrappers: the key from ``random_state``, the choice
among vmapped restarts and :func:`finish`, which turns a fit's ``Status`` into what a
scikit-learn user expects (an exception or a ``ConvergenceWarning``),
:func:`warn_unmixed`, the same warning for MCMC draws whose diagnostics say the chains
have not mixed, and :class:`OneCallAtATime`, which keeps two threads from running the
estimators' compiled programs at once."""

from __future__ import annotations

import functools
import inspect
import os
import threading
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import validate_data

from bayeskit.core.notices import warn
from bayeskit.core.status import Status, is_failure
from bayeskit.core.status import message as status_message
from bayeskit.core.validation import check_real, is_sparse
from bayeskit.core.xla import host_blas

_NO_Y = object()
_RUNNING = threading.RLock()


class OneCallAtATime:
    """Mixin: every public method a subclass defines (``fit``, ``predict``, ``transform``,
    ...) holds one process-wide lock until its results are computed, so that two threads
    never run the estimators' compiled programs at the same time.

    JAX's CPU runtime (jaxlib 0.10) can deadlock when two threads run, at once, programs
    whose loop body holds a LAPACK call beside further control flow: every idle worker
    waits for work and both callers wait for their results, for ever. Each iterative fit
    here has that shape (a Cholesky factor in the sweep of a ``while_loop``). Calls of
    the estimators' methods from several threads therefore run one after the other; a
    functional call (``bsml.fit``, :func:`bayeskit.sweep`) running beside other JAX work
    is not protected. For fits in parallel use processes started by spawning (joblib's
    default backend, or ``ProcessPoolExecutor(mp_context=multiprocessing.get_context("spawn"))``;
    a forked child of a process that has started JAX can hang) or one batched program
    (``n_init``, :func:`bayeskit.sweep`). A call made inside another (``score`` calling
    ``predict``) takes the lock again without waiting. A forked child starts with a new,
    free lock."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, method in list(vars(cls).items()):
            if not name.startswith("_") and inspect.isfunction(method):
                setattr(cls, name, _one_at_a_time(method))


def _one_at_a_time(method):
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        return _locked_call(method, self, args, kwargs)

    return run


def _locked_call(method, self, args, kwargs):
    """``method(self, *args, **kwargs)`` under the lock. The wrapper above refers to the lock
    only through this function, so that a user's subclass defined in a notebook (which
    cloudpickle copies by value, lock and all) still pickles. A fit (``fit``, ``fit_*``)
    that raises leaves the estimator as it was: a refit refused for a bad parameter or bad
    data kept the earlier fit's arrays beside the new data's feature count."""
    with _RUNNING:
        fitting = method.__name__ == "fit" or method.__name__.startswith("fit_")
        before = dict(vars(self)) if fitting else None
        try:
            out = method(self, *args, **kwargs)
            # fit returns self: its fitted attributes are what may still be computing
            jax.block_until_ready(list(vars(self).values()) if out is self else out)
        except BaseException:
            if before is not None:
                vars(self).clear()
                vars(self).update(before)
            raise
    return out


def _new_lock() -> None:
    global _RUNNING
    _RUNNING = threading.RLock()


os.register_at_fork(after_in_child=_new_lock)  # a thread of the parent may have held it


def validate(estimator, X, y=_NO_Y, *, numeric_y: bool = True, x_name: str = "X", y_name: str = "y", min_rows: int = 1,
             **kwargs):
    """scikit-learn's ``validate_data(estimator, X[, y], **kwargs)`` after checks whose
    messages name the argument as the caller's signature does (``x_name``, ``y_name``;
    scikit-learn's say "Expected 2D array", "Found array with 0 sample(s)" or "Input X" for
    any first argument): X must be a dense, finite 2-D array of real numbers with at least
    ``min_rows`` rows, y (unless ``numeric_y`` is False, for class labels, which may be
    sparse) a dense finite array of real numbers, with as many rows as X. A DataFrame keeps
    its column names for scikit-learn's checks (``feature_names_in_``)."""
    check_real(X, x_name, min_rows=min_rows)
    kwargs.setdefault("ensure_all_finite", False)  # checked above, with the argument's name
    kwargs.setdefault("ensure_min_samples", min_rows)  # likewise
    if y is _NO_Y:
        return validate_data(estimator, X, **kwargs)
    if y is None:
        raise ValueError(f"{type(estimator).__name__} requires {y_name} to be passed, but the target {y_name} is None.")
    if numeric_y:
        check_real(y, y_name, two_d=False)
    elif not is_sparse(y) and np.iscomplexobj(np.asarray(y)):
        raise ValueError(f"{y_name} must hold class labels; got complex numbers.")
    rows = lambda a: a.shape[:1] if is_sparse(a) else np.asarray(a).shape[:1]
    if rows(y) != rows(X):
        raise ValueError(f"{x_name} has {rows(X)[0]} rows but {y_name} has {rows(y)[0] if rows(y) else 'none'}; one per sample.")
    return validate_data(estimator, X, y, **kwargs)


def _key(random_state, n: int | None = None) -> jax.Array | tuple[jax.Array, ...]:
    """A JAX key from scikit-learn's ``random_state``: None (fresh entropy), a non-negative
    int or a NumPy ``RandomState``; with ``n``, the tuple ``jax.random.split(key, n)``. Both
    come from one compiled program (not the three or four that seeding, splitting and
    unpacking run one by one), with the same keys, of JAX's default PRNG implementation
    (``jax_default_prng_impl``) at the time of the call. A seed of 2**32 or more is made
    eagerly, as ``jax.random.key`` makes it under x64 whether x64 is on or not (its bits
    beyond 64 folded in), so that no two seeds share a key."""
    integer = isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool)
    if not (random_state is None or isinstance(random_state, np.random.RandomState) or (integer and random_state >= 0)):
        raise ValueError(f"random_state must be None, a non-negative int or a numpy RandomState, got {random_state!r}.")
    if random_state is None:
        random_state = int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, np.random.RandomState):
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    seed = int(random_state)
    if seed >= 2**32:  # JAX's own 64-bit seeding, which needs x64 (without it the seed would lose its high bits)
        with jax.enable_x64(True):
            key = jax.random.key(np.uint64(seed % 2**64))
        for shift in range(64, seed.bit_length(), 32):  # bits beyond 64, 32 at a time
            key = jax.random.fold_in(key, np.uint32((seed >> shift) & 0xFFFFFFFF))
        return key if n is None else tuple(jax.random.split(key, n))
    return _derive_keys(np.uint32(seed), n, jax.config.jax_default_prng_impl)


@partial(jax.jit, static_argnums=(1, 2))
def _derive_keys(seed, n: int | None, impl: str):
    key = jax.random.key(seed, impl=impl)
    return key if n is None else tuple(jax.random.split(key, n))


_FAILURES = frozenset(Status[item] for item in (Status.nonfinite, Status.not_positive_definite))


def finish(result, name: str, *, detail: str = "", warn_max_iter: bool = True):
    """Raise or warn as ``result.status`` (one fit, not a batch) says, and return it.

    A failure (``nonfinite``, ``not_positive_definite``) raises ``RuntimeError``; a fit
    stopped at ``max_iter`` warns ``ConvergenceWarning`` unless ``warn_max_iter`` is
    False; ``detail`` is appended to either message. The status is read on the host
    once (its message), with no device computation."""
    message = status_message(result.status)
    if message in _FAILURES:
        raise RuntimeError(f"{name} failed: {message}{detail}")
    if warn_max_iter and message == Status[Status.max_iter_reached]:
        warn(f"{name}: {message}{detail}", ConvergenceWarning)
    return result


def _best_restart(result, n_restarts: int, name: str, *, warn_max_iter: bool = True):
    """The fit itself, or of a vmapped batch of restarts the one with the highest final
    bound among those that did not fail, passed through :func:`finish` (a
    ``RuntimeError`` when all failed)."""
    if n_restarts > 1:
        result = _best_of(result)
    return finish(result, name, warn_max_iter=warn_max_iter)


@jax.jit
def _best_of(results):
    """Of a batch of fits, the one with the highest final bound among those that did not fail."""
    score = jnp.where(is_failure(results.status), -jnp.inf, results.objective)
    return jax.tree.map(lambda a: a[jnp.argmax(score)], results)


R_HAT_MAX = 1.05  # split R-hat above this: the chains disagree (Vehtari et al. 2021 advise 1.01; 1.05 is the older rule)
ESS_MIN = 100  # effective draws below this: too few for a posterior mean


def warn_unmixed(diagnostics: dict, name: str) -> None:
    """Warn ``ConvergenceWarning`` when a traced quantity's split R-hat exceeds
    ``R_HAT_MAX`` or its effective sample size (all chains together) is below ``ESS_MIN``,
    naming each quantity with its numbers. ``diagnostics`` is
    :func:`bayeskit.core.mcmc.diagnostics`' dict; NaN (one chain, constant draws) is no
    evidence either way and stays silent."""
    show = lambda v: "n/a" if np.isnan(v) else f"{v:.3g}"
    bad = [f"{q} (R-hat {show(d['r_hat'])}, ESS {show(d['ess'])})" for q, d in diagnostics.items()
           if d["r_hat"] > R_HAT_MAX or d["ess"] < ESS_MIN]
    if bad:
        warn(f"{name}: the chains have not mixed: {', '.join(bad)}; want R-hat <= {R_HAT_MAX} and ESS >= {ESS_MIN}. "
             "Run more sweeps (num_warmup, num_samples) or more chains, and check the traces in samples_.",
             ConvergenceWarning)


@host_blas()
def gaussian_score(Z, location, covariance) -> float:
    """Mean log-density of the rows of Z under N(location, covariance), in float64."""
    L = np.linalg.cholesky(np.asarray(covariance, np.float64))
    half = np.linalg.solve(L, (np.asarray(Z, np.float64) - location).T)
    logdet = 2 * np.sum(np.log(np.diagonal(L)))
    return float(np.mean(-0.5 * (np.sum(half**2, 0) + logdet + Z.shape[1] * np.log(2 * np.pi))))

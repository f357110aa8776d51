"""The fit-loop driver ``bayeskit.core.loop.run`` and ``bayeskit.core.status``.

``run`` is not jitted itself; as a model's ``fit`` would, the tests wrap it in
``eqx.filter_jit`` (or ``jax.jit``). The toy problem is the contraction
``x <- x / 2 + 1`` (fixed point 2) with the objective ``-(x - 2)^2``, increasing
monotonically; expected values come from a plain-Python replay of the documented rule.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compilations import count_compilations

from bayeskit.core import status
from bayeskit.core.loop import SMALL_LEAF, as_arrays, has_nan, run, tolerance
from bayeskit.core.status import FitResult, Status, is_failure

NEVER = -1


def update(state):
    """One sweep; the state carries a counter and the sweep at which x turns NaN (if any)."""
    x, i, nan_at, bad_at = state
    i = i + 1
    x = jnp.where(i == nan_at, jnp.nan, 0.5 * x + 1.0)
    return x, i, nan_at, bad_at


def objective(state):
    return -((state[0] - 2.0) ** 2)


def failed(state):
    _, i, _, bad_at = state
    return i == bad_at


def init(x0, nan_at=NEVER, bad_at=NEVER):
    return (
        jnp.asarray(x0, jnp.float64),
        jnp.asarray(0, jnp.int32),
        jnp.asarray(nan_at, jnp.int32),
        jnp.asarray(bad_at, jnp.int32),
    )


@eqx.filter_jit
def fit(state, *, max_iter=200, tol=1e-10, throw=True, use_failed=False, progress=None):
    return run(
        update, objective, state, max_iter=max_iter, tol=tol, throw=throw,
        failed=failed if use_failed else None, progress=progress,
    )


def replay(x0, *, max_iter, tol):
    """The documented rule in plain Python: the objective after each sweep; stop when
    |f_k - f_{k-1}| <= tol (1 + |f_k|) (from the second sweep on) or after max_iter."""
    x, previous, trace = float(x0), -((float(x0) - 2.0) ** 2), []
    for k in range(max_iter):
        x = 0.5 * x + 1.0
        f = -((x - 2.0) ** 2)
        trace.append(f)
        if k > 0 and abs(f - previous) <= tol * (1 + abs(f)):
            return x, trace, "successful"
        previous = f
    return x, trace, "max_iter_reached"


def _status_name(status):
    for name in ("successful", "max_iter_reached", "nonfinite", "not_positive_definite"):
        if bool(status == getattr(Status, name)):
            return name
    raise AssertionError(status)


def _status_names(status):
    """Per-element status names of a batched status."""
    names = ("successful", "max_iter_reached", "nonfinite", "not_positive_definite")
    hits = np.stack([np.asarray(status == getattr(Status, name)) for name in names])
    assert np.all(hits.sum(axis=0) == 1)
    return [names[k] for k in hits.argmax(axis=0)]


def test_converges_with_padded_trace():
    res = fit(init(0.0), max_iter=200, tol=1e-10)
    assert isinstance(res, FitResult)
    x, trace, status = replay(0.0, max_iter=200, tol=1e-10)
    assert status == "successful"
    n = int(res.n_iter)
    assert n == len(trace) < 200
    assert _status_name(res.status) == "successful" and bool(res.converged)
    assert not bool(is_failure(res.status))
    np.testing.assert_allclose(np.asarray(res.trace[:n]), trace, rtol=1e-14, atol=1e-300)
    assert np.all(np.isnan(np.asarray(res.trace[n:])))
    assert res.trace.shape == (200,)
    assert np.all(np.diff(np.asarray(res.trace[:n])) >= 0)  # monotone objective
    np.testing.assert_allclose(float(res.state[0]), x, rtol=1e-15)
    assert int(res.state[1]) == n
    assert float(res.objective) == float(res.trace[n - 1])


def test_tol_zero_runs_max_iter():
    res = fit(init(0.0), max_iter=20, tol=0.0)
    _, trace, status = replay(0.0, max_iter=20, tol=0.0)
    assert status == "max_iter_reached"
    assert int(res.n_iter) == 20
    assert _status_name(res.status) == "max_iter_reached"
    assert not bool(res.converged) and not bool(is_failure(res.status))
    np.testing.assert_allclose(np.asarray(res.trace), trace, rtol=1e-14)
    assert float(res.objective) == float(res.trace[-1])


def test_tol_zero_runs_max_iter_even_when_objective_is_stationary():
    res = fit(init(0.0), max_iter=100, tol=0.0)
    assert int(res.n_iter) == 100
    assert _status_name(res.status) == "max_iter_reached"


def test_max_iter_below_one_raises():
    with pytest.raises(ValueError, match="max_iter"):
        run(update, objective, init(0.0), max_iter=0, tol=1e-6)


@pytest.mark.parametrize("k", [1, 4])
def test_nonfinite_keeps_last_finite_state(k):
    res = fit(init(0.0, nan_at=k), throw=False)
    _, trace, _ = replay(0.0, max_iter=k - 1, tol=0.0)
    assert _status_name(res.status) == "nonfinite"
    assert bool(is_failure(res.status)) and not bool(res.converged)
    assert int(res.n_iter) == k
    x, i, _, _ = res.state
    assert int(i) == k - 1  # the state before the bad sweep
    want_x = 0.0 if k == 1 else 2.0 - 2.0 * 0.5 ** (k - 1)
    assert float(x) == want_x and np.isfinite(float(x))
    tr = np.asarray(res.trace)
    np.testing.assert_allclose(tr[: k - 1], trace, rtol=1e-14)
    assert np.all(np.isnan(tr[k - 1 :]))
    if k > 1:  # the last finite objective (with k = 1 none was recorded)
        assert float(res.objective) == trace[-1]


def test_nonfinite_with_throw_raises_filter_jit():
    with pytest.raises(eqx.EquinoxRuntimeError, match="the objective or the estimates became NaN or inf"):
        jax.block_until_ready(fit(init(0.0, nan_at=3), throw=True))
    assert issubclass(eqx.EquinoxRuntimeError, RuntimeError)


def test_nonfinite_with_throw_raises_jax_jit():
    f = jax.jit(lambda s: run(update, objective, s, max_iter=50, tol=1e-10, throw=True))
    with pytest.raises(RuntimeError, match="the objective or the estimates became NaN or inf"):
        jax.block_until_ready(f(init(0.0, nan_at=3)))


def test_failed_callback_gives_not_positive_definite():
    res = fit(init(0.0, bad_at=3), throw=False, use_failed=True)
    assert _status_name(res.status) == "not_positive_definite"
    assert bool(is_failure(res.status))
    assert int(res.n_iter) == 3
    assert int(res.state[1]) == 2  # the bad sweep's state is rejected
    assert np.isnan(float(res.trace[2]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="not positive definite"):
        jax.block_until_ready(fit(init(0.0, bad_at=3), throw=True, use_failed=True))


def test_failed_callback_false_does_not_interfere():
    a = fit(init(0.0), use_failed=True)
    b = fit(init(0.0))
    assert int(a.n_iter) == int(b.n_iter)
    np.testing.assert_array_equal(np.asarray(a.trace), np.asarray(b.trace))


def test_status_enumeration():
    for name in ("successful", "max_iter_reached", "nonfinite", "not_positive_definite"):
        assert bool(is_failure(getattr(Status, name))) == (name in ("nonfinite", "not_positive_definite"))


def test_vmap_per_element_status_equals_separate_runs():
    x0 = np.array([0.0, 1.999, 10.0, 0.0, 0.0])
    nan_at = np.array([NEVER, NEVER, NEVER, 3, NEVER])
    bad_at = np.array([NEVER, NEVER, NEVER, NEVER, 5])
    kw = dict(max_iter=200, tol=1e-8, throw=False, use_failed=True)

    @eqx.filter_jit
    def batched(x0, nan_at, bad_at):
        return jax.vmap(lambda a, b, c: run(update, objective, init(a, b, c), max_iter=200, tol=1e-8,
                                            throw=False, failed=failed))(x0, nan_at, bad_at)

    res = batched(jnp.asarray(x0), jnp.asarray(nan_at, jnp.int32), jnp.asarray(bad_at, jnp.int32))
    assert res.n_iter.shape == (5,) and res.trace.shape == (5, 200)
    names = []
    for j in range(5):
        single = fit(init(x0[j], nan_at[j], bad_at[j]), **kw)
        names.append(_status_name(single.status))
        assert int(res.n_iter[j]) == int(single.n_iter)
        np.testing.assert_array_equal(np.asarray(res.trace[j]), np.asarray(single.trace))
        for leaf_b, leaf_s in zip(res.state, single.state):
            np.testing.assert_array_equal(np.asarray(leaf_b[j]), np.asarray(leaf_s))
        assert float(res.objective[j]) == float(single.objective) or (
            np.isnan(float(res.objective[j])) and np.isnan(float(single.objective))
        )
    assert names == ["successful", "successful", "successful", "nonfinite", "not_positive_definite"]
    assert _status_names(res.status) == names
    # Per-element status comparisons under vmap.
    np.testing.assert_array_equal(np.asarray(res.status == Status.successful), [True, True, True, False, False])
    np.testing.assert_array_equal(np.asarray(is_failure(res.status)), [False, False, False, True, True])
    # The element started near the fixed point converges first and stays frozen: its
    # state is the one of its own run, not advanced by the others' sweeps.
    n = np.asarray(res.n_iter)
    assert n[1] < n[0] and n[1] < n[2]
    assert int(res.state[1][1]) == n[1]
    _, trace, _ = replay(1.999, max_iter=200, tol=1e-8)
    assert n[1] == len(trace)


@pytest.mark.parametrize("batched", [False, True], ids=["jit", "vmap"])
def test_progress_bar_under_jit_and_vmap(monkeypatch, capsys, batched):
    monkeypatch.delenv("CI", raising=False)
    if batched:
        @eqx.filter_jit
        def go(x0):
            return jax.vmap(lambda a: run(update, objective, init(a), max_iter=30, tol=1e-6, progress=True))(x0)

        res = go(jnp.asarray([0.0, 1.5]))
        jax.effects_barrier()
        assert np.all(np.asarray(res.status == Status.successful))
    else:
        res = fit(init(0.0), max_iter=30, tol=1e-6, progress=True)
        jax.effects_barrier()
        assert _status_name(res.status) == "successful"
        _, trace, _ = replay(0.0, max_iter=30, tol=1e-6)
        assert int(res.n_iter) == len(trace)
    err = capsys.readouterr().err
    assert "fit" in err  # the tqdm bar was drawn (on stderr)


def test_solved_reports_the_objective_and_a_status_per_element():
    """A fit without iterations: its objective is the one trace entry, n_iter 0, and the
    status is nonfinite exactly where the objective (or the ``ok`` given) says so."""
    result = jax.vmap(status.solved)(jnp.arange(3.0), jnp.array([1.0, jnp.nan, -jnp.inf]))
    assert result.trace.shape == (3, 1) and np.all(np.asarray(result.n_iter) == 0)
    np.testing.assert_array_equal(np.asarray(result.objective), [1.0, np.nan, -np.inf])
    np.testing.assert_array_equal(np.asarray(result.converged), [True, False, False])
    exact = status.solved(jnp.zeros(2), -jnp.inf, status.all_finite(jnp.zeros(2), jnp.ones(3)))
    assert bool(exact.converged)
    assert not bool(status.all_finite(jnp.zeros(2), jnp.array([1.0, jnp.inf])))


def test_message_reads_a_fits_status_as_equinox_does():
    """``status.message`` gives equinox's ``Status[...]`` sentence for every item, from a
    device array (a fit's result, also after jit) and from a host one."""
    for item in (Status.successful, Status.max_iter_reached, Status.nonfinite, Status.not_positive_definite):
        on_device = jax.jit(lambda ok, it=item: Status.where(ok, it, Status.successful))(jnp.asarray(True))
        assert status.message(on_device) == Status[on_device] == Status[item]
        assert status.message(item) == Status[item]
    assert status.message(run(lambda s: s + 1.0, lambda s: -s, jnp.zeros(()), max_iter=3, tol=0.0, throw=False).status) == \
        Status[Status.max_iter_reached]
    batch = jax.vmap(status.solved)(jnp.arange(2.0), jnp.array([1.0, jnp.nan]))
    with pytest.raises(ValueError, match="one fit"):
        status.message(batch.status)


def test_a_nan_in_the_state_is_nonfinite_even_when_the_objective_is_finite():
    """The objective stays finite but the third sweep puts a NaN into the state: that sweep
    is rejected, the last state without NaN is returned and the status is nonfinite."""
    update = lambda s: {"t": s["t"] + 1, "w": jnp.where(s["t"] >= 2, jnp.nan, s["w"] + 1.0)}
    objective = lambda s: -s["t"].astype(jnp.float64) ** 2  # finite, never converging
    result = run(update, objective, {"t": jnp.asarray(0), "w": jnp.zeros(3)}, max_iter=10, tol=0.0, throw=False)
    assert Status[result.status] == Status[Status.nonfinite]
    assert int(result.state["t"]) == 2 and np.all(np.asarray(result.state["w"]) == 2.0)
    inf_ok = run(lambda s: s + jnp.array([0.0, jnp.inf]), lambda s: s[0], jnp.zeros(2), max_iter=3, tol=0.0, throw=False)
    assert Status[inf_ok.status] == Status[Status.max_iter_reached]  # inf in a state can be meaningful


def test_a_public_fit_raises_the_status_sentence_alone():
    """With throw=True a decorated fit raises a failure as a RuntimeError naming the fit,
    without equinox's stack dump; throw=False and calls under the caller's jit are
    untouched."""
    public = status.readable_failure(fit)
    with pytest.raises(RuntimeError) as caught:
        public(init(0.0, nan_at=3), throw=True)
    message = str(caught.value)
    assert message.endswith(f"test_loop.fit failed: {Status[Status.nonfinite]}")
    assert type(caught.value) is RuntimeError and "EquinoxRuntimeError" not in message and "JIT" not in message
    with pytest.raises(RuntimeError, match="not positive definite even after adding jitter"):
        public(init(0.0, bad_at=2), use_failed=True)  # throw defaults to True
    assert _status_name(public(init(0.0, nan_at=3), throw=False).status) == "nonfinite"
    assert _status_name(jax.jit(lambda s: public(s, throw=False))(init(0.0)).status) == "successful"


def test_a_public_fit_with_throw_runs_the_program_without_the_error_callback():
    """At top level throw=True runs the throw=False program (no host callback, so it can be
    kept on disk between processes): after one call with either, the other compiles nothing
    and both return the same result."""
    public = status.readable_failure(fit)
    raising = public(init(0.5), throw=True)
    with count_compilations() as seen:
        quiet = public(init(0.5), throw=False)
    assert seen["compiles"] == 0, seen
    np.testing.assert_array_equal(np.asarray(raising.trace), np.asarray(quiet.trace))
    assert "callback" not in jax.jit(lambda s: fit(s, throw=False)).lower(init(0.5)).as_text()
    assert "callback" in jax.jit(lambda s: fit(s, throw=True)).lower(init(0.5)).as_text()  # what a traced call keeps


def test_a_public_fit_on_data_closed_over_by_a_jit_raises_from_inside_it():
    """Under the caller's jit with the data closed over (no traced argument) the fit still
    runs and, on failure, raises from inside the program as throw=True does."""
    public = status.readable_failure(fit)
    ok = jax.jit(lambda: public(init(0.5)).trace)()
    np.testing.assert_array_equal(np.asarray(ok), np.asarray(public(init(0.5)).trace))
    assert jax.eval_shape(lambda: public(init(0.5)).trace).shape == (200,)
    with pytest.raises((eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError), match="the objective or the estimates became NaN or inf"):
        jax.block_until_ready(jax.jit(lambda: public(init(0.0, nan_at=3)).trace)())  # equinox's error, wrapped by jax.jit


def test_throw_inside_a_sweep_is_refused_before_compiling():
    import bayeskit

    states = jax.vmap(lambda x: init(x))(jnp.arange(3.0))
    with pytest.raises(ValueError, match="throw=True inside bayeskit.core.sweep.*pass throw=False"):
        bayeskit.sweep(lambda s: run(update, objective, s, max_iter=5, tol=0.0, throw=True), None, (states,))
    swept = bayeskit.sweep(lambda s: run(update, objective, s, max_iter=5, tol=0.0, throw=False), None, (states,))
    assert _status_names(swept.status) == ["max_iter_reached"] * 3


@pytest.mark.parametrize("where", ["scalar", "small", "large", "none"])
def test_has_nan_finds_a_nan_in_any_floating_leaf(where):
    """Small leaves are checked together, large ones alone: a NaN anywhere is found, inf,
    integer, empty and complex leaves are not NaN, and leaves of several precisions mix (also
    under strict dtype promotion)."""
    tree = {"scalar": jnp.asarray(jnp.inf, jnp.float32), "small": jnp.full((3, 4), -jnp.inf),
            "large": jnp.zeros(SMALL_LEAF + 1), "count": jnp.arange(3), "empty": jnp.zeros((0, 2)),
            "complex": jnp.full(2, 1j, jnp.complex64)}
    if where != "none":
        tree[where] = tree[where].at[()].set(jnp.nan) if where == "scalar" else tree[where].at[-1].set(jnp.nan)
    with jax.numpy_dtype_promotion("strict"):
        assert bool(jax.jit(has_nan)(tree)) == (where != "none")
    assert not bool(has_nan({"count": jnp.arange(3)}))


def test_hyperparameters_of_integer_data_stay_real_numbers():
    """as_arrays and tolerance give integer or boolean data's hyperparameters the default
    float dtype (in the data's dtype a penalty of 0.5 and a tolerance of 1e-4 were 0), and
    floating data's hyperparameters their own dtype."""
    tree = {"alpha": 0.5, "beta": jnp.asarray(0.25)}
    for dtype in (np.int32, np.int64, np.uint8, bool):
        got = as_arrays(tree, dtype)
        assert got["alpha"] == 0.5 and got["beta"] == 0.25
        assert got["alpha"].dtype == got["beta"].dtype == jnp.result_type(float)
        assert tolerance(1e-4, dtype) == np.asarray(1e-4, jnp.result_type(float))
    for dtype in (np.float32, np.float64, jnp.bfloat16):
        got = as_arrays(tree, dtype)
        assert got["alpha"].dtype == got["beta"].dtype == dtype and tolerance(1e-4, dtype).dtype == dtype

"""Tests of bayeskit.core.executables: a second process loads the programs the first one
compiled, runs them without tracing and gets the same results; keys, fallbacks, damage."""

import collections
import functools
import json
import os
import subprocess
import sys
import typing

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskit.core import executables

PROGRAM = r'''
import json, sys
import jax, jax.numpy as jnp
import bayeskit.core
from bayeskit.core import executables

import os
import equinox as eqx

traces = {"f": 0, "g": 0, "e": 0}

@executables.jit
def f(key, x, *, scale):
    traces["f"] += 1
    w = jnp.linalg.eigh(x @ x.T)[0]  # a LAPACK call: its kernels must be set up before a load
    return {"w": w * scale, "noise": jax.random.normal(key, x.shape[:1])}

def f_static(key, x, n):
    return f(key, x, scale=float(n))

@executables.jit
def g(x):
    traces["g"] += 1
    jax.debug.callback(lambda v: None, x)  # a host callback: not serialisable
    return x + 1

@executables.jit
def e(x):
    traces["e"] += 1
    return eqx.error_if(x, x < 0, "negative")  # a callback, or none under EQX_ON_ERROR=nan

x = jnp.arange(12.0).reshape(3, 4) / 5
if os.environ.get("WARM_FIRST"):  # the same program through jax.jit first, in this process
    os.environ["BAYESKIT_EXECUTABLE_CACHE"] = "0"
    f(jax.random.key(0), x, scale=2.0)
    del os.environ["BAYESKIT_EXECUTABLE_CACHE"]
    traces["f"] = 0
e(x)
out = {"a": f(jax.random.key(0), x, scale=2.0), "b": f(jax.random.key(1), x[:2], scale=2.0), "c": g(x)}
print(json.dumps({"traces": traces, "out": jax.tree.map(lambda v: v.tolist(), out)}))
'''


def run_program(tmp_path, **env):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    environ = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BAYESKIT_EXECUTABLE_CACHE")}
    environ.update(BAYESKIT_CACHE_DIR=str(tmp_path / "cache"), BAYESKIT_COMPILATION_CACHE="1", JAX_ENABLE_X64="1", **env)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environ, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def stored(tmp_path):
    return sorted((tmp_path / "cache" / "executables").glob("*.bin"))


def test_second_process_loads_without_tracing(tmp_path):
    first = run_program(tmp_path)
    assert first["traces"] == {"f": 2, "g": 1, "e": 1}
    assert len(stored(tmp_path)) == 2  # f at two shapes; g and e hold callbacks
    second = run_program(tmp_path)
    assert second["traces"] == {"f": 0, "g": 1, "e": 1}
    assert second["out"] == first["out"]


EVERY_PROGRAM = {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # JAX's own cache keeps every program, as bayeskit sets it


@pytest.mark.parametrize("warm", ["earlier process", "same process"])
def test_programs_in_jax_cache_are_compiled_afresh_before_they_are_stored(tmp_path, warm):
    # an executable that JAX reads back from its disk cache has no kernels
    reference = run_program(tmp_path, BAYESKIT_EXECUTABLE_CACHE="0", **EVERY_PROGRAM)
    run_program(tmp_path, **EVERY_PROGRAM, **({"WARM_FIRST": "1"} if warm == "same process" else {}))
    later = run_program(tmp_path, **EVERY_PROGRAM)
    assert later["traces"]["f"] == 0
    assert later["out"] == reference["out"]


def test_fresh_compiles_never_come_back_from_jax_cache(tmp_path):
    # a program stored once, then wanted again under a new key (a deleted folder, a new
    # setting): its second fresh compile must not be read from JAX's cache either
    reference = run_program(tmp_path, **EVERY_PROGRAM)
    for path in stored(tmp_path):
        path.unlink()
    run_program(tmp_path, **EVERY_PROGRAM)
    assert run_program(tmp_path, **EVERY_PROGRAM)["out"] == reference["out"]
    run_program(tmp_path, CI="1", **EVERY_PROGRAM)
    later = run_program(tmp_path, CI="1", **EVERY_PROGRAM)
    assert later["traces"]["f"] == 0
    assert later["out"] == reference["out"]


def test_settings_read_while_tracing_are_in_the_key(tmp_path):
    run_program(tmp_path, EQX_ON_ERROR="nan")  # e has no callback then, and is stored
    assert run_program(tmp_path)["traces"]["e"] == 1  # raising again needs its own program


def test_damaged_file_is_compiled_again_and_replaced(tmp_path):
    first = run_program(tmp_path)
    for path in stored(tmp_path):
        path.write_bytes(b"not an executable")
    second = run_program(tmp_path)
    assert second["traces"]["f"] == 2
    assert second["out"] == first["out"]
    assert run_program(tmp_path)["traces"]["f"] == 0  # the replacements load


def test_switched_off(tmp_path):
    run_program(tmp_path, BAYESKIT_EXECUTABLE_CACHE="0")
    assert stored(tmp_path) == []


@pytest.fixture
def cache_on(tmp_path, monkeypatch):
    monkeypatch.setattr(executables, "folder", lambda: tmp_path)
    return tmp_path


TRACES = []


def scaled(x, n):
    TRACES.append(n)
    return x * n


def test_key_holds_static_arguments_shapes_and_dtypes(cache_on):
    TRACES.clear()
    h = executables.jit(scaled, static_argnums=1)
    results = [h(jnp.ones(3), 2), h(jnp.ones(3), 3), h(jnp.ones(4), 2), h(jnp.ones(3, jnp.int32), 2), h(jnp.ones(3), 2)]
    assert len(TRACES) == 4  # the last call repeats the first
    assert len(list(cache_on.glob("*.bin"))) == 4
    for r, expected in zip(results, [2.0, 3.0, 2.0, 2, 2.0], strict=True):
        np.testing.assert_array_equal(r, expected * np.ones(r.shape))
    assert results[3].dtype == jnp.int32


def test_traced_arguments_go_to_jax_jit(cache_on):
    @executables.jit
    def h(x):
        return jnp.sum(x**2)

    xs = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(jax.vmap(h)(xs), [5.0, 50.0])
    np.testing.assert_allclose(jax.grad(h)(xs[1]), 2 * xs[1])
    np.testing.assert_allclose(jax.jit(lambda x: h(x) + 1)(xs[0]), 6.0)


def square_sum(x):
    return jnp.sum(x**2)


@pytest.mark.parametrize("cache", [True, False])
def test_compiler_options_stay_at_the_top_level(cache, tmp_path, monkeypatch):
    """A program with compiler options runs with them when called at the top level (an
    option XLA does not know is refused there), and as part of the caller's program under
    jit, grad, vmap and eval_shape, which JAX does not allow options for; also when the
    caller's jit closes over concrete data, so that no argument is traced."""
    monkeypatch.setattr(executables, "folder", lambda: tmp_path if cache else None)
    h = executables.jit(square_sum, compiler_options={"xla_backend_optimization_level": 1})
    xs = jnp.arange(6.0).reshape(2, 3)
    np.testing.assert_allclose(h(xs[1]), 50.0)
    np.testing.assert_allclose(jax.vmap(h)(xs), [5.0, 50.0])
    np.testing.assert_allclose(jax.grad(h)(xs[1]), 2 * xs[1])
    np.testing.assert_allclose(jax.jit(lambda x: h(x) + 1)(xs[0]), 6.0)
    np.testing.assert_allclose(jax.jit(lambda: h(xs[1]))(), 50.0)
    assert jax.eval_shape(h, xs[0]).shape == ()
    bad = executables.jit(square_sum, compiler_options={"no_such_option": 1})
    with pytest.raises(Exception, match="no_such_option"):
        bad(xs[0])
    np.testing.assert_allclose(jax.jit(bad)(xs[0]), 5.0)
    assert len(list(tmp_path.glob("*.bin"))) == (1 if cache else 0)  # the top-level call, stored


def test_static_argument_without_a_stable_repr_is_not_stored(cache_on):
    def apply(x, *, f):
        return f(x)

    h = executables.jit(apply, static_argnames="f")
    np.testing.assert_allclose(h(jnp.ones(2), f=jnp.exp), np.e * np.ones(2))
    np.testing.assert_allclose(h(jnp.ones(2), f=lambda v: v + 1), 2 * np.ones(2))
    assert list(cache_on.glob("*.bin")) == []


class Meta(type):
    pass


class Covered(metaclass=Meta):  # in the calling module, whose file is in the key; a metaclass, as MCMC kernels' ABCMeta
    pass


def kind(x, *, cls):
    return x + len(cls.__name__)


def test_code_outside_the_key_goes_to_jax_jit(cache_on):
    def make(c):
        return executables.jit(lambda x: x * c)

    np.testing.assert_allclose(make(2.0)(jnp.ones(2)), 2.0)
    np.testing.assert_allclose(make(3.0)(jnp.ones(2)), 3.0)
    h = executables.jit(kind, static_argnames="cls")
    np.testing.assert_allclose(h(jnp.zeros(1), cls=collections.OrderedDict), 11.0)  # another module's class
    assert list(cache_on.glob("*.bin")) == []
    np.testing.assert_allclose(h(jnp.zeros(1), cls=Covered), 7.0)
    assert len(list(cache_on.glob("*.bin"))) == 1


def test_configuration_at_the_call_is_in_the_key(cache_on):
    h = executables.jit(lambda_free_add)
    x = np.ones(3, np.float32)
    with jax.enable_x64(False):
        narrow = h(x)
    with jax.enable_x64(True):
        wide = h(x)
    assert narrow.dtype == jnp.float32 and wide.dtype == jnp.float64


def lambda_free_add(x):
    return x + jnp.arange(3.0)


def outer(n):
    return executables.jit(scaled, static_argnums=1)(np.ones(2), n) + 1


def test_static_arguments_by_name_or_position_and_nested_calls(cache_on):
    h = executables.jit(scaled, static_argnums=1)
    np.testing.assert_allclose(h(jnp.ones(2), n=3), 3.0)
    np.testing.assert_allclose(h(jnp.ones(2), 3), 3.0)
    assert len(list(cache_on.glob("*.bin"))) == 2  # the keyword and the positional call split alike
    np.testing.assert_allclose(executables.jit(outer, static_argnums=0)(2), 3.0)  # no deadlock (the inner call runs at trace time)


def offset(x, n, *, m=0):
    return x * n + m


def test_both_static_lists_split_calls_as_jax_jit_does(cache_on):
    h = executables.jit(offset, static_argnums=1, static_argnames="m")
    for call in (lambda: h(jnp.ones(2), 3, m=1), lambda: h(jnp.ones(2), n=3, m=1)):
        np.testing.assert_allclose(call(), 4.0)
    np.testing.assert_allclose(executables.jit(scaled, static_argnums=-1)(jnp.ones(2), 5), 5.0)


def test_equinox_modules_are_keyed_by_their_static_fields(cache_on):
    h = executables.jit(apply_module)
    np.testing.assert_allclose(h(Shift(jnp.ones(2), "add")), 2.0)
    np.testing.assert_allclose(h(Shift(jnp.ones(2), "sub")), 0.0)
    assert len(list(cache_on.glob("*.bin"))) == 2


class Shift(eqx.Module):
    x: jax.Array
    how: str = eqx.field(static=True)


def apply_module(m):
    return m.x + 1 if m.how == "add" else m.x - 1


class Ns:
    class Shift(eqx.Module):  # the same name and fields as the module-level Shift
        x: jax.Array
        how: str = eqx.field(static=True)


def test_classes_are_keyed_by_module_and_qualified_name(cache_on):
    h = executables.jit(apply_module)
    np.testing.assert_allclose(h(Shift(jnp.ones(2), "add")), 2.0)
    np.testing.assert_allclose(h(Ns.Shift(jnp.ones(2), "add")), 2.0)
    assert len(list(cache_on.glob("*.bin"))) == 2


def times(c):
    def wrap(f):
        @functools.wraps(f)
        def g(x):
            return f(x) * c

        return g

    return wrap


def identity(x):
    return x


class Factor(typing.NamedTuple):
    k: int

    def factor(self):
        return 2


def by_factor(x, cfg):
    return x * cfg.factor()


def test_wrapped_closures_and_named_tuples_go_to_jax_jit(cache_on):
    np.testing.assert_allclose(executables.jit(times(2.0)(identity))(jnp.ones(2)), 2.0)
    np.testing.assert_allclose(executables.jit(times(3.0)(identity))(jnp.ones(2)), 3.0)
    np.testing.assert_allclose(executables.jit(by_factor, static_argnums=1)(jnp.ones(2), Factor(1)), 2.0)
    assert list(cache_on.glob("*.bin")) == []


NESTED_FITS = r'''
import jax, jax.numpy as jnp, numpy as np
from bayeskit.core.xla import loop_program
from bayeskit.density import sbmoe
from bayeskit.relational import mmsb

assert loop_program("cpu"), "the loop-program options must be on in this process"
Y = (np.random.default_rng(0).random((12, 12)) < 0.3).astype(float)
hp = mmsb.Hyperparams(n_blocks=2)
top = mmsb.fit(jax.random.key(0), Y, hparams=hp, max_iter=5, throw=False).objective
inner = jax.jit(lambda y: mmsb.fit(jax.random.key(0), y, hparams=hp, max_iter=5, throw=False).objective)(Y)
np.testing.assert_allclose(inner, top, rtol=1e-6)
X = np.linspace(0.0, 1.0, 40)[:, None]
hs = sbmoe.Hyperparams(n_experts=3, gate_steps=2, init="kmeans++")
trace = jax.jit(lambda X: sbmoe.fit(jax.random.key(1), X, 2 * X, hs, max_iter=2, throw=False).trace)(X)
assert np.all(np.isfinite(np.asarray(trace)))
print("ok")
'''


def test_fits_with_loop_options_run_under_a_callers_jit(tmp_path):
    """The MMSB's and SBMoE's fits carry compiler options at the top level (the tests' own
    XLA level turns them off in this process, so a fresh process without it runs them): under
    a caller's jit they run as part of its program, with the top level's results."""
    env = {**os.environ, "XLA_FLAGS": "--xla_cpu_enable_concurrency_optimized_scheduler=false", "BAYESKIT_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", NESTED_FITS], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]

"""bayeskit.sweep: the same numbers as a plain vmap (padding, chunks, shared arguments,
keys in and out), per-element status, bad input, and two processes over loopback."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskit
from bayeskit.core.status import Status
from bayeskit.covariance import glasso
from bayeskit.multilabel import bsml
from bayeskit.robust import robpca

# XLA's CPU runtime can deadlock when several virtual devices share two cores and each runs
# FAST-MCD's 500 vmapped starts (bayeskit.core.sweep's docstring); 20 starts run.
N_STARTS = 20


def robpca_problem():
    """Eight contaminated (30, 4) data sets and their keys."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(8, 30, 4)) * np.sqrt([8.0, 4.0, 2.0, 1.0])
    X[:, :3, 3] += 10.0
    return jax.random.split(jax.random.key(5), 8), X


def glasso_problem():
    """A sample covariance of 6 variables and a path of 6 penalties."""
    rng = np.random.default_rng(4)
    return np.cov(rng.normal(size=(40, 6)) @ rng.normal(size=(6, 6)), rowvar=False), np.linspace(0.05, 0.5, 6)


def noisy_mean(key, X, scale):
    return X.mean(0) * scale + jax.random.normal(key, X.shape[1:]), jax.random.split(key)[0]


@pytest.mark.parametrize("chunk_size", [None, 2, 5])
def test_sweep_equals_vmap_with_padding_and_chunks(chunk_size):
    keys = jax.random.split(jax.random.key(0), 7)
    X = jax.random.normal(jax.random.key(1), (7, 10, 3))
    scale = jnp.arange(7.0)
    mean, next_key = jax.vmap(noisy_mean)(keys, X, scale)
    swept = bayeskit.sweep(noisy_mean, keys, (X,), scale, chunk_size=chunk_size)
    np.testing.assert_allclose(swept.results[0], mean, rtol=1e-12)
    np.testing.assert_array_equal(jax.random.key_data(swept.results[1]), jax.random.key_data(next_key))
    assert isinstance(swept.results[0], np.ndarray) and swept.results[0].shape == (7, 3)
    assert swept.ok.all()


def test_compiler_options_reach_the_compiled_program():
    """LLVM's lighter level gives the same numbers; an option XLA does not know is refused
    by the compiler, so the options are handed to it."""
    keys = jax.random.split(jax.random.key(0), 3)
    X = jax.random.normal(jax.random.key(1), (3, 10, 3))
    plain = bayeskit.sweep(noisy_mean, keys, (X,), 2.0, in_axes=(0, None))
    loop = bayeskit.sweep(noisy_mean, keys, (X,), 2.0, in_axes=(0, None), compiler_options={"xla_backend_optimization_level": 1})
    np.testing.assert_allclose(loop.results[0], plain.results[0], rtol=1e-12)
    with pytest.raises(Exception, match="no_such_option"):
        bayeskit.sweep(noisy_mean, keys, (X,), 2.0, in_axes=(0, None), compiler_options={"no_such_option": 1})


def test_shared_arguments_and_fit_status():
    S, alphas = glasso_problem()
    swept = bayeskit.sweep(lambda S, hp: glasso.fit(S, hp, throw=False), None, (S,), glasso.Hyperparams(alphas),
                           in_axes=(None, 0))
    ref = jax.vmap(lambda a: glasso.fit(S, glasso.Hyperparams(a), throw=False))(alphas)
    np.testing.assert_allclose(swept.results.state.precision, ref.state.precision, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(swept.status._value), np.asarray(swept.results.status._value))
    assert swept.ok.all()
    nonzero = (np.abs(swept.results.state.precision) > 1e-10).sum((1, 2))
    assert nonzero[0] > nonzero[-1]  # each element got its own penalty


def test_one_field_of_the_hyperparameters_swept():
    """With in_axes 0 the scalar leaves of the hyperparameters are shared, so batching one
    field sweeps it; hparam_axes names the batched fields when a shared leaf is not a
    scalar. Both equal a vmap with the axes spelled out."""
    keys = jax.random.split(jax.random.key(0), 7)
    X = jax.random.normal(jax.random.key(1), (7, 10, 3))
    fit = lambda k, x, hp: noisy_mean(k, x * hp["weight"] + hp["shift"], hp["scale"])  # noqa: E731
    hp = {"scale": jnp.arange(7.0), "shift": 2.0, "weight": jnp.array([1.0, 2.0, 3.0])}
    ref = jax.vmap(fit, in_axes=(0, 0, {"scale": 0, "shift": None, "weight": None}))(keys, X, hp)
    swept = bayeskit.sweep(fit, keys, (X,), hp, in_axes=(0, bayeskit.hparam_axes(hp, lambda h: h["scale"])))
    np.testing.assert_allclose(swept.results[0], ref[0], rtol=1e-12)
    with pytest.raises(ValueError, match="disagree on the batch size"):  # axis 0 reads the weights as batched too
        bayeskit.sweep(fit, keys, (X,), hp)
    scalar_shared = {"scale": hp["scale"], "shift": 2.0}
    fit2 = lambda k, x, hp: noisy_mean(k, x + hp["shift"], hp["scale"])  # noqa: E731
    swept = bayeskit.sweep(fit2, keys, (X,), scalar_shared)
    np.testing.assert_allclose(swept.results[0], jax.vmap(fit2, in_axes=(0, 0, {"scale": 0, "shift": None}))(keys, X, scalar_shared)[0],
                               rtol=1e-12)
    with pytest.raises(ValueError, match="PyTree prefix"):
        bayeskit.sweep(fit2, keys, (X,), scalar_shared, in_axes=(0, {"scale": 0}))
    with pytest.raises(ValueError, match="batches a scalar leaf"):
        bayeskit.sweep(fit2, keys, (X,), scalar_shared, in_axes=(0, {"scale": 0, "shift": 0}))
    with pytest.raises(ValueError, match="leaves must be 0 or None"):
        bayeskit.sweep(fit2, keys, (X,), scalar_shared, in_axes=(0, {"scale": 1, "shift": None}))
    with pytest.raises(ValueError, match="scalar leaves are shared"):  # nothing but scalars: nothing to sweep
        bayeskit.sweep(lambda h: h["shift"], None, (), {"shift": 2.0})
    with pytest.raises(ValueError, match="holds no array"):
        bayeskit.hparam_axes({"scale": None, "shift": 2.0}, lambda h: h["scale"])


def test_a_key_among_the_hyperparameters_is_one_leaf():
    """A scalar key is shared and a batch of keys is batched (by their key shape, not the
    shape of their raw data); a NumPy 0 is an axis."""
    scale = jnp.arange(4.0)
    draw = lambda h: jax.random.normal(h["k"]) * h["s"]  # noqa: E731
    shared = bayeskit.sweep(draw, None, (), {"s": scale, "k": jax.random.key(1)}, in_axes=((), np.int64(0)))
    np.testing.assert_allclose(shared.results, jax.random.normal(jax.random.key(1)) * np.arange(4.0), rtol=1e-6)
    keys = jax.random.split(jax.random.key(2), 4)
    batched = bayeskit.sweep(draw, None, (), {"s": scale, "k": keys})
    np.testing.assert_allclose(batched.results, jax.vmap(draw)({"s": scale, "k": keys}), rtol=1e-6)
    with pytest.raises(ValueError, match="batches a scalar leaf"):
        bayeskit.sweep(draw, None, (), {"s": scale, "k": jax.random.key(1)}, in_axes=((), {"s": 0, "k": 0}))


def test_a_model_swept_over_one_hyperparameter():
    """BSML over three values of sigma_z, the other priors scalars: each element is the fit
    with that value."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    Y = (X @ rng.normal(size=(4, 2)) > 0).astype(np.int8)
    hp = bsml.Hyperparams(n_components=2)
    sigmas = np.array([0.05, 0.1, 0.3])
    key = jax.random.key(2)
    swept = bayeskit.sweep(lambda h: bsml.fit(key, X, Y, h, max_iter=5, throw=False).trace, None, (),
                           eqx.tree_at(lambda h: h.sigma_z, hp, jnp.asarray(sigmas)))
    for s, trace in zip(sigmas, swept.results):
        want = bsml.fit(key, X, Y, eqx.tree_at(lambda h: h.sigma_z, hp, float(s)), max_iter=5).trace
        np.testing.assert_allclose(trace, want, rtol=1e-8)
    assert not np.allclose(swept.results[0], swept.results[-1])


def test_status_without_a_fit_result_marks_nonfinite_elements():
    x = jnp.array([1.0, -1.0, 4.0])
    swept = bayeskit.sweep(lambda v: (jnp.sqrt(v), v), None, (x,))
    np.testing.assert_array_equal(swept.status == Status.nonfinite, [False, True, False])
    np.testing.assert_array_equal(swept.ok, [True, False, True])


def test_bad_input():
    x = jnp.ones((4, 2))
    with pytest.raises(ValueError, match="nothing is batched"):
        bayeskit.sweep(lambda v: v, None, (x,), in_axes=(None, None))
    with pytest.raises(ValueError, match="disagree on the batch size"):
        bayeskit.sweep(lambda k, v: v, jax.random.split(jax.random.key(0), 3), (x,))
    with pytest.raises(ValueError, match="chunk_size"):
        bayeskit.sweep(lambda v: v, None, (x,), chunk_size=0)
    with pytest.raises(ValueError, match="in_axes"):
        bayeskit.sweep(lambda v: v, None, (x,), in_axes=(1, 0))
    with pytest.raises(ValueError, match=r"in_axes must be a pair .*; got 0\."):
        bayeskit.sweep(lambda v: v, None, (x,), in_axes=0)
    S, alphas = glasso_problem()
    with pytest.raises(ValueError, match="throw=True inside bayeskit.core.sweep"):
        bayeskit.sweep(lambda S, a: glasso.fit(S, glasso.Hyperparams(a)), None, (S,), alphas, in_axes=(None, 0))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_processes_over_loopback(tmp_path):
    """Two processes of two CPU devices each run one sweep under jax.distributed; both
    receive every element, equal to a vmap in this process."""
    root = Path(__file__).resolve().parents[2]
    port = str(_free_port())
    env = {**os.environ, "PYTHONPATH": str(root), "XLA_FLAGS": ""}
    procs = [subprocess.Popen([sys.executable, str(root / "tests" / "core" / "distributed_worker.py"), str(i), port,
                               str(tmp_path / f"{i}.npz")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
             for i in range(2)]
    logs = [p.communicate(timeout=300)[0].decode()[-3000:] for p in procs]
    assert all(p.returncode == 0 for p in procs), logs

    keys, X = robpca_problem()
    ref = jax.vmap(lambda k, x: robpca.fit(k, x, 2, n_starts=N_STARTS).state)(keys, X)
    S, alphas = glasso_problem()
    path = jax.vmap(lambda a: glasso.fit(S, glasso.Hyperparams(a), throw=False))(alphas)
    for i in range(2):
        got = np.load(tmp_path / f"{i}.npz")
        np.testing.assert_allclose(got["eigenvalues"], ref.eigenvalues, rtol=1e-8)
        np.testing.assert_allclose(np.abs(got["components"]), np.abs(ref.components), atol=1e-8)
        np.testing.assert_allclose(got["precision"], path.state.precision, atol=1e-10)
        assert got["converged"].all()


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 7, 50])
def test_map_blocks_equals_the_whole_batch(chunk_size):
    from bayeskit.core.chunks import map_blocks

    x = jax.random.normal(jax.random.key(2), (7, 4))
    f = lambda v: (jnp.tanh(v) @ jnp.ones((4, 2)), jnp.zeros((v.shape[0], 0)))  # noqa: E731
    for got in (jax.jit(lambda v: map_blocks(f, v, chunk_size))(x), map_blocks(f, x, chunk_size)):  # in a program, at the top level
        np.testing.assert_allclose(got[0], f(x)[0], rtol=1e-12)
        assert got[1].shape == (7, 0)
    with pytest.raises(ValueError, match="chunk_size"):
        map_blocks(f, x, 0)


def test_arguments_it_cannot_take_are_refused_by_name():
    """A single key gave JAX's "invalid PRNG key data", one array as datasets was split into
    one argument per row, a float chunk_size failed in the chunking, and a sweep inside the
    caller's jit or vmap failed on sharding or on reading its status."""
    x = jnp.arange(6.0)
    keys = jax.random.split(jax.random.key(0), 6)
    with pytest.raises(ValueError, match="a batch of keys"):
        bayeskit.sweep(lambda k, v: v, jax.random.key(0), (x,))
    with pytest.raises(ValueError, match="a batch of keys"):
        bayeskit.sweep(lambda k, v: v, jax.random.PRNGKey(0), (x,))
    with pytest.raises(ValueError, match=r"tuple of the data arguments, e.g. \(X,\)"):
        bayeskit.sweep(lambda k, v: v, keys, x)
    for bad in (2.5, "2", True):
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            bayeskit.sweep(lambda k, v: v, keys, (x,), chunk_size=bad)
    with pytest.raises(ValueError, match="top level"):
        jax.jit(lambda v: bayeskit.sweep(lambda w: w * 2, None, (v,)).results)(x)
    with pytest.raises(ValueError, match="top level"):
        jax.vmap(lambda v: bayeskit.sweep(lambda w: w * 2, None, (v,)).results)(x[:, None])
    for nothing in ((), {}, (None,)):  # gave IndexError when reading the status
        with pytest.raises(ValueError, match="returned no arrays"):
            bayeskit.sweep(lambda k, v, nothing=nothing: nothing, keys, (x,))


def test_a_process_local_mesh_must_group_each_process_s_devices():
    """With process_local, the gathered rows are read back process by process: a mesh whose
    devices alternate between processes returned rows out of order, one lost and a padding
    copy in its place. It is refused now, as are unequal device counts per process."""
    from types import SimpleNamespace

    from bayeskit.core import sweep as sweep_module

    def mesh(owners):
        return SimpleNamespace(devices=np.array([SimpleNamespace(process_index=o) for o in owners]))

    sweep_module._check_process_order(mesh([0, 0, 0]))  # one process
    with pytest.MonkeyPatch.context() as m:
        m.setattr(jax, "process_count", lambda: 2)
        sweep_module._check_process_order(mesh([0, 0, 1, 1]))
        for owners in ([0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 0, 1, 1]):
            with pytest.raises(ValueError, match="process_local=True the mesh must hold"):
                sweep_module._check_process_order(mesh(owners))

"""Sharded sweeps equal unsharded ones, one model of each family, over 8 virtual CPU
devices. Run in CI's own step:

    XLA_FLAGS=--xla_force_host_platform_device_count=8 python -m pytest tests/test_sharded.py

and skipped in a process with fewer devices. Each sweep has 10 elements: 2 per device on
the first 5 devices, padding on the rest. The reference is a plain ``jit(vmap(...))`` on
one device."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import bayeskit
from bayeskit.core import sweep as sweep_module
from bayeskit.covariance import glasso, hsic, sparse_pca
from bayeskit.density import sbmoe
from bayeskit.multilabel import bsml
from bayeskit.relational import data as relational_data
from bayeskit.relational import lfrm, mmsb
from bayeskit.relational.lfrm import gibbs
from bayeskit.robust import mcd, robpca
from bayeskit.sparse import sparse_bayes

pytestmark = pytest.mark.skipif(jax.device_count() < 8, reason="needs 8 devices (XLA_FLAGS=--xla_force_host_platform_device_count=8)")

B = 10
# FAST-MCD's default 500 starts on 8 virtual devices of two cores can deadlock XLA's CPU
# runtime (bayeskit.core.sweep); 20 starts keep the comparison.
N_STARTS = 20


def keys(seed=0):
    return jax.random.split(jax.random.key(seed), B)


def check(fit_fn, keys_, datasets=(), hparams=None, in_axes=(0, 0), rtol=1e-9, atol=1e-10, leaves=None):
    """The sweep over 8 devices (chunked too) equals jit(vmap) on one device, leaf by leaf."""
    args = [a for a in (keys_,) if a is not None]
    vm_axes = ([0] if keys_ is not None else []) + (list(in_axes[0]) if isinstance(in_axes[0], tuple) else [in_axes[0]] * len(datasets))
    if hparams is not None:
        vm_axes.append(in_axes[1])
    ref = jax.jit(jax.vmap(fit_fn, in_axes=tuple(vm_axes)))(*args, *datasets, *([hparams] if hparams is not None else []))
    for chunk in (None, 1):
        swept = bayeskit.sweep(fit_fn, keys_, datasets, hparams, in_axes=in_axes, chunk_size=chunk)
        got, want = leaves(swept.results) if leaves else swept.results, leaves(ref) if leaves else ref
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
            if jax.dtypes.issubdtype(w.dtype, jax.dtypes.prng_key):
                g, w = jax.random.key_data(g), jax.random.key_data(w)
            np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=rtol, atol=atol)
    return swept


def test_sweep_spans_all_devices():
    assert sweep_module.default_mesh().devices.size == 8


def test_multilabel_bsml_restarts():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5))
    Y = (X @ rng.normal(size=(5, 3)) > 0).astype(np.int8)
    hp = bsml.Hyperparams(n_components=2)
    swept = check(lambda k: bsml.fit(k, X, Y, hp, max_iter=20, throw=False), keys(), leaves=lambda r: (r.state, r.trace))
    assert swept.ok.all()
    sigmas = eqx.tree_at(lambda h: h.sigma_z, hp, jnp.linspace(0.05, 0.5, B))  # one field batched, the other priors shared
    key = jax.random.key(1)
    check(lambda h: bsml.fit(key, X, Y, h, max_iter=20, throw=False), None, (), sigmas,
          in_axes=((), bayeskit.hparam_axes(hp, lambda h: h.sigma_z)), leaves=lambda r: r.trace)


def test_mixture_of_experts_sbmoe_restarts():
    rng = np.random.default_rng(1)
    X = rng.uniform(-1, 1, size=(60, 1))
    Y = np.sin(3 * X) + 0.1 * rng.normal(size=X.shape)
    hp = sbmoe.Hyperparams(n_experts=3, gate_steps=5)
    check(lambda k: sbmoe.fit(k, X, Y, hp, max_iter=3, throw=False), keys(), leaves=lambda r: r.trace, rtol=1e-7)


def test_sparse_bayes_stacked_data_sets():
    rng = np.random.default_rng(2)
    x = np.sort(rng.uniform(-10, 10, size=(B, 50, 1)), axis=1)
    y = np.sinc(x[..., 0] / np.pi) + 0.1 * rng.normal(size=(B, 50))
    Phi = np.stack([sparse_bayes.design(xi, gamma=0.1) for xi in x])
    hp = sparse_bayes.Hyperparams(prior="rvm")
    check(lambda P, t: sparse_bayes.fit(P, t, hp, throw=False), None, (Phi, y), leaves=lambda r: (r.state, r.trace),
          rtol=1e-5, atol=1e-6)


def test_relational_mmsb_restarts_and_lfrm_chains():
    rng = np.random.default_rng(3)
    truth = np.repeat(np.arange(3), 6)
    Y = (rng.random((18, 18)) < np.where(truth[:, None] == truth, 0.8, 0.1)).astype(np.int8)
    mask = ~np.eye(18, dtype=bool)
    hp = mmsb.Hyperparams(n_blocks=3)
    check(lambda k: mmsb.fit(k, Y, mask, hp, max_iter=15, tol=0.0, throw=False), keys(), leaves=lambda r: r.trace)
    data, lhp = relational_data.as_data(Y[None], mask[None], False), lfrm.Hyperparams(k_max=6)
    chain = lambda k: jax.lax.fori_loop(0, 3, lambda _, s: gibbs.step(s, data, lhp), gibbs.init(k, data, lhp))  # noqa: E731
    check(chain, keys(), leaves=lambda s: (s.Z, s.W))


def test_components_robpca_mcd_glasso_sparse_pca():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(B, 30, 4)) * np.sqrt([8.0, 4.0, 2.0, 1.0])
    X[:, :3, 3] += 10.0
    check(lambda k, x: robpca.fit(k, x, 2, n_starts=N_STARTS).state, keys(), (X,),
          leaves=lambda r: (r.eigenvalues, jnp.abs(r.components), r.score_distances))
    check(lambda k, x: mcd.fit(k, x, n_starts=N_STARTS).state, keys(), (X,), leaves=lambda r: (r.location, r.covariance))
    S = np.cov(rng.normal(size=(40, 6)) @ rng.normal(size=(6, 6)), rowvar=False)
    check(lambda S, hp: glasso.fit(S, hp, throw=False), None, (S,), glasso.Hyperparams(np.linspace(0.05, 0.5, B)),
          in_axes=(None, 0), leaves=lambda r: r.state.precision, atol=1e-6)  # vmapped problems sweep the
    # union of their free sets in lockstep (glasso's batching rule): another batch, another union
    check(lambda lam: sparse_pca.fit(S, sparse_pca.Hyperparams(lam), max_iter=10).state.X, None, (np.linspace(0.05, 0.5, B),))


def test_dependence_hsic_tests():
    rng = np.random.default_rng(5)
    x = rng.normal(size=(B, 40, 1))
    y = x ** 2 + 0.5 * rng.normal(size=x.shape)
    check(lambda k, a, b: hsic.test(k, a, b, method="gamma").p_value, keys(), (x, y))
    check(lambda k, a, b: hsic.test(k, a, b, method="permutation", n_permutations=50).p_value, keys(), (x, y))


def test_mcmc_chains_spread_over_devices():
    """Vectorised chains (here 3 LFRM restarts) are laid over as many devices as divide
    their number, and each equals its chain run alone (numpyro gives chain c the key
    split(key, 3)[c])."""
    rng = np.random.default_rng(6)
    truth = np.repeat(np.arange(2), 6)
    Y = (rng.random((12, 12)) < np.where(truth[:, None] == truth, 0.8, 0.1)).astype(np.int8)
    hp, key = lfrm.Hyperparams(k_max=6), jax.random.key(7)
    run = lambda k, c: lfrm.sample_posterior(k, Y, None, hp, num_warmup=2, num_samples=3, num_chains=c)  # noqa: E731
    together = run(key, 3)
    assert len(together["W"].sharding.device_set) == 3
    for c, k in enumerate(jax.random.split(key, 3)):
        alone = run(k, 1)
        np.testing.assert_array_equal(np.asarray(together["Z"])[c], np.asarray(alone["Z"])[0])
        np.testing.assert_allclose(np.asarray(together["W"])[c], np.asarray(alone["W"])[0], rtol=1e-9, atol=1e-12)

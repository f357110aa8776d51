"""Estimators: the scikit-learn style wrappers of ``bayeskit.estimators`` against the functional
call each one wraps, in one run.

For every estimator in ``bayeskit.estimators.__all__`` and each size (small, medium):

1. first fit: one ``fit`` in a fresh process (compilation included), wall time;
2. second fit: ``fit`` of a new estimator on new data of the same shapes (another random
   draw, subsample or held-out split: ``--repeats`` of them, one per repeat) and, where the
   estimator has continuous hyperparameters, new values of them (e.g. GraphicalLasso alpha
   0.1 -> 0.12); the median over the repeats;
3. functional call: the call the estimator wraps, jitted as a whole (``jax.jit`` or
   ``eqx.filter_jit``) where it is not a sampler or a host loop, on the same data and
   settings as the second fits, after one warm-up call, ``jax.block_until_ready``; the
   median over the repeats. The MCMC models (LFRM, IRM, Bayesian Lasso) use the module's
   ``sample_posterior`` and SparsePCA ``sparse_pca.fit_components`` (host loops by design),
   and the host step a function needs (SBMoE's agglomerative initial labels, the relational
   models' ``check_relations``) is inside the timed call;
4. the JAX traces and XLA compilations during the (first) second fit, counted with
   ``jax.monitoring`` (events ``/jax/core/compile/jaxpr_trace_duration`` and
   ``/jax/core/compile/backend_compile_duration``), with the names of what was traced.

Target: second fit <= 1.5 x functional call + 5 ms. Each (estimator, size) runs in its own
process, so that the first fit starts from nothing compiled; everything is float64 with the
safe CPU scheduler (``bayeskit.core.xla.use_safe_cpu_scheduler``). Results:
``benchmarks/results/estimators.json``; ``benchmarks/report.py`` renders them.

    python benchmarks/bench_estimators.py                       # every estimator, small and medium, 3 repeats
    python benchmarks/bench_estimators.py --quick               # small sizes, 1 repeat
    python benchmarks/bench_estimators.py --only GraphicalLasso RCA --sizes medium
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import contextlib
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from bayeskit.core.xla import use_safe_cpu_scheduler

use_safe_cpu_scheduler()  # before JAX starts its backend

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import bayeskit.estimators as estimators
from bayeskit import datasets
from bayeskit.covariance import glasso, rca, sparse_pca
from bayeskit.density import sbmoe
from bayeskit.multilabel import bsml, probit
from bayeskit.relational import irm, lfrm, mmsb
from bayeskit.relational.data import check_relations
from bayeskit.robust import mcd, robpca
from bayeskit.sparse import bayesian_lasso, sparse_bayes

HERE = Path(__file__).resolve().parent
TRACE_EVENT = "/jax/core/compile/jaxpr_trace_duration"
COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
TARGET_FACTOR, TARGET_SLACK_S = 1.5, 0.005
SIZES = ("small", "medium")


@dataclass
class Case:
    """One estimator at one size. ``draw(seed)`` gives the fit's positional arguments (seed 0
    for the first fit, 1.. for the second fits); ``make(hp, seed)`` an unfitted estimator;
    ``functional(hp)`` a callable ``call(seed, *fit_args)`` running the functional route with
    the same settings; ``first`` / ``second`` the continuous hyperparameters of each fit."""

    problem: str
    draw: Callable[[int], tuple]
    make: Callable[[dict, int], object]
    functional: Callable[[dict], Callable]
    route: str
    first: dict = field(default_factory=dict)
    second: dict = field(default_factory=dict)
    note: str = ""


# ----------------------------------------------------------------------------- data


def key(seed: int):
    return jax.random.key(seed)


def as_arrays(tree):
    """Float leaves as float64 arrays, so that ``eqx.filter_jit`` traces them (new values
    compile nothing) instead of baking them in."""
    return jax.tree.map(lambda v: jnp.asarray(v, jnp.float64) if isinstance(v, float) else v, tree)


def covariance_of(X):
    """The second moment of the centred rows, divisor n (as the covariance estimators)."""
    Xc = X - X.mean(0)
    return Xc.T @ Xc / X.shape[0]


def zscore(X):
    return (X - X.mean(0)) / X.std(0)


@cache
def sachs() -> np.ndarray:
    return datasets.load_sachs((1, 2, 3))


def sachs_subsample(seed: int) -> np.ndarray:
    """A random 10% of the 2,666 cells of conditions 1-3, z-scored (the RCA authors' protocol)."""
    X = sachs()
    return zscore(X[np.random.default_rng(seed).choice(len(X), int(np.ceil(0.1 * len(X))), replace=False)])


@cache
def sparse_precision_covariance(p: int) -> np.ndarray:
    """The covariance of a sparse, well-conditioned precision (about two random edges per
    variable, as ``bench_glasso.py``)."""
    return np.linalg.inv(datasets.sparse_precision(p, np.random.default_rng(12345)))


def gaussian_rows(cov: np.ndarray, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).multivariate_normal(np.zeros(len(cov)), cov, size=n)


@cache
def low_rank_plus_sparse(p: int, q: int) -> np.ndarray:
    """W W' + Lambda^-1 + 0.1 I: EM/RCA's model with q components and a sparse precision."""
    W = np.random.default_rng(54321).normal(size=(p, q))
    return W @ W.T + sparse_precision_covariance(p) + 0.1 * np.eye(p)


@cache
def ar1(p: int, rho: float = 0.6) -> np.ndarray:
    return rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))


def rows_without_replacement(X, n: int, seed: int):
    rows = np.random.default_rng(seed).choice(len(X), n, replace=False)
    return X[rows]


@cache
def mulan_pool(name: str):
    X_train, Y_train, X_test, Y_test = datasets.load_mulan(name)
    return np.concatenate([X_train, X_test]), np.concatenate([Y_train, Y_test])


def mulan_draw(name: str, n: int, seed: int):
    """``n`` rows of the train and test pool without replacement."""
    X, Y = mulan_pool(name)
    rows = np.random.default_rng(seed).choice(len(X), n, replace=False)
    return X[rows], Y[rows]


@cache
def relational(name: str) -> dict:
    return datasets.load_relational(name)


def relational_draw(name: str, symmetric: bool, seed: int):
    """Y and the training mask of a random 20% held-out split (unordered pairs when symmetric)."""
    d = relational(name)
    train, _ = datasets.holdout_split(d["Y"], d["mask"], symmetric, seed=seed)
    return d["Y"], train


def sinc_draw(n: int, seed: int):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-10, 10, (n, 1))
    return X, datasets.sinc(X[:, 0]) + 0.1 * rng.standard_normal(n)


@cache
def diabetes():
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True, scaled=False)
    return zscore(X), y - y.mean()


def contaminated(n: int, p: int, seed: int) -> np.ndarray:
    """N(0, AR(1)) rows, the last 10% shifted by 5 in every coordinate."""
    X = gaussian_rows(ar1(p), n, seed)
    X[-n // 10:] += 5.0
    return X


# ----------------------------------------------------------------------------- cases


def case_graphical_lasso(size: str) -> Case:
    if size == "small":
        draw, problem = (lambda s: (sachs_subsample(s),)), "Sachs conditions 1-3, 10% subsamples (267 x 11), z-scored"
    else:
        draw, problem = (lambda s: (gaussian_rows(sparse_precision_covariance(200), 400, s),)), "synthetic sparse precision, 400 x 200"

    def functional(hp):
        f = jax.jit(lambda X, alpha: glasso.fit(covariance_of(X), glasso.Hyperparams(alpha), max_iter=100, tol=1e-4, throw=False))
        return lambda seed, X: f(X, hp["alpha"])

    return Case(problem, draw, lambda hp, seed: estimators.GraphicalLasso(hp["alpha"]), functional,
                "covariance.glasso.fit on the centred second moment, jax.jit", {"alpha": 0.1}, {"alpha": 0.12})


def case_emrca(size: str) -> Case:
    if size == "small":
        draw, problem, max_iter = (lambda s: (sachs_subsample(s),)), "Sachs conditions 1-3, 10% subsamples (267 x 11), z-scored", 1000
    else:
        draw, problem, max_iter = ((lambda s: (gaussian_rows(low_rank_plus_sparse(50, 3), 500, s),)),
                                   "synthetic W W' + sparse-precision covariance + 0.1 I, 500 x 50, 3 components", 300)

    def functional(hp):
        def run(X, alpha):
            C = covariance_of(X)
            em = rca.EMHyperparams(alpha, 0.5 * jnp.trace(C) / C.shape[0], True, None)
            return rca.em_fit(C, em, max_iter=max_iter, tol=1e-7, throw=False)

        f = jax.jit(run)
        return lambda seed, X: f(X, hp["alpha"])

    return Case(problem, draw, lambda hp, seed: estimators.EMRCA(hp["alpha"], max_iter=max_iter), functional,
                "covariance.rca.em_fit on the centred second moment, s2 = tr(C) / 2p, jax.jit", {"alpha": 0.1}, {"alpha": 0.12})


def case_rca(size: str) -> Case:
    if size == "small":
        sim = datasets.load_rca_simulation()
        q, problem = 3, "the RCA authors' simulation: 80 of its 100 rows (80 x 50) and its Sigma, 3 components"
        draw = lambda s: (rows_without_replacement(sim["Y"], 80, s), sim["Sigma"])
    else:
        q, problem = 5, "synthetic W W' + AR(1) Sigma, 1000 x 400, 5 components"
        W = np.random.default_rng(7).normal(size=(400, q))
        draw = lambda s: (gaussian_rows(W @ W.T + ar1(400), 1000, s), ar1(400))

    def functional(hp):
        f = jax.jit(lambda Y, Sigma: rca.fit(covariance_of(Y), Sigma, q))
        return lambda seed, Y, Sigma: f(Y, Sigma)

    return Case(problem, draw, lambda hp, seed: estimators.RCA(q), functional, "covariance.rca.fit on the centred second moment, jax.jit",
                note="no continuous hyperparameter (Sigma is data)")


def case_sparse_pca(size: str) -> Case:
    if size == "small":
        draw, problem = (lambda s: (datasets.zipf_corpus(1000, 5000, seed=s)[0],)), "zipf_corpus 1000 documents x 5000 words (CSR)"
    else:
        draw, problem = (lambda s: (datasets.zipf_corpus(10_000, 100_000, seed=s)[0],)), "zipf_corpus 10,000 documents x 100,000 words (CSR)"
    # the penalty: the 40th largest word variance of the first draw, then 1.2 times it
    alpha = float(np.sort(sparse_pca.feature_variances(draw(0)[0]))[::-1][40])
    options = dict(max_features=2000, beta=1e-4, max_iter=20, threshold=1e-3)

    def functional(hp):
        if hasattr(sparse_pca, "fit_components"):
            return lambda seed, X: sparse_pca.fit_components(X, 2, alpha=hp["alpha"], **options).state.components

        def call(seed, X):  # the same host loop, where sparse_pca has no fit_components
            moments, V = sparse_pca.Moments(X), np.zeros((X.shape[1], 0))
            for _ in range(2):
                v, _ = sparse_pca.component_at(sparse_pca.Deflated(moments, V), hp["alpha"], **options)
                V = np.c_[V, v]
            return V

        return call

    route = ("covariance.sparse_pca.fit_components" if hasattr(sparse_pca, "fit_components") else
             "covariance.sparse_pca.component_at per component")
    return Case(problem, draw, lambda hp, seed: estimators.SparsePCA(2, alpha=hp["alpha"]), functional,
                f"{route}, 2 components (a host loop over a jitted solve per padded block size)", {"alpha": alpha}, {"alpha": 1.2 * alpha})


def case_min_cov_det(size: str) -> Case:
    n, p = (200, 5) if size == "small" else (1000, 20)
    h = mcd.default_h(n, p)

    def functional(hp):
        f = jax.jit(lambda k, X: mcd.fit(k, X, h, n_starts=500))
        return lambda seed, X: f(key(seed), X)

    return Case(f"N(0, AR(1)) with 10% shifted rows, {n} x {p}, 500 starts", lambda s: (contaminated(n, p, s),),
                lambda hp, seed: estimators.MinCovDet(random_state=seed), functional, "robust.mcd.fit, jax.jit",
                note="support_fraction is kept: it sets the integer h, a static shape")


def case_robpca(size: str) -> Case:
    if size == "small":
        X, n, k, name = datasets.load_robpca("octane")["X"], 35, 2, "octane"
    else:
        X, n, k, name = datasets.load_robpca("glass")["X"], 160, 3, "glass"

    def functional(hp):
        # the estimator's default directions: all pairs up to robpca.ALL_PAIRS (the same work)
        f = jax.jit(lambda kk, X: robpca.fit(kk, X, k, 0.75, 10, n_directions=robpca.default_directions(n)))
        return lambda seed, X: f(key(seed), X)

    return Case(f"{name}: {n} of its {len(X)} rows (x {X.shape[1]}), k = {k}", lambda s: (rows_without_replacement(X, n, s),),
                lambda hp, seed: estimators.ROBPCA(k, random_state=seed), functional, "robust.robpca.fit, jax.jit",
                note="alpha is kept: it sets the integer h, a static shape")


def multilabel_problem(size: str):
    if size == "small":
        return "emotions", 391, 6, "emotions: 391 of its 593 rows (x 72, 6 labels)"
    return "yeast", 1500, 14, "yeast: 1500 of its 2417 rows (x 103, 14 labels)"


def case_bsml(size: str) -> Case:
    name, n, r, problem = multilabel_problem(size)
    max_iter = 100 if size == "small" else 50

    def functional(hp):
        f = eqx.filter_jit(lambda k, X, Y, h: bsml.fit(k, X, Y, h, max_iter=max_iter, tol=1e-6, throw=False))
        h = as_arrays(bsml.Hyperparams(n_components=r, sigma_z=hp["sigma_z"]))
        return lambda seed, X, Y: f(key(seed), X, jnp.asarray(Y, jnp.int8), h)

    return Case(f"{problem}, R = {r}, at most {max_iter} sweeps", lambda s: mulan_draw(name, n, s),
                lambda hp, seed: estimators.BSMLClassifier(r, max_iter=max_iter, random_state=seed, sigma_z=hp["sigma_z"]),
                functional, "multilabel.bsml.fit, eqx.filter_jit", {"sigma_z": 0.1}, {"sigma_z": 0.12})


def case_probit(size: str) -> Case:
    name, n, _, problem = multilabel_problem(size)
    max_iter = 100 if size == "small" else 50

    def functional(hp):
        f = eqx.filter_jit(lambda k, X, Y, pr: probit.fit(k, X, Y, pr, max_iter=max_iter, tol=1e-6, throw=False))
        priors = as_arrays(probit.Hyperparams(alpha_lambda=hp["alpha_lambda"]))
        return lambda seed, X, Y: f(key(seed), X, jnp.asarray(Y, jnp.int8), priors)

    return Case(f"{problem}, at most {max_iter} sweeps", lambda s: mulan_draw(name, n, s),
                lambda hp, seed: estimators.ProbitClassifier(max_iter=max_iter, random_state=seed, alpha_lambda=hp["alpha_lambda"]),
                functional, "multilabel.probit.fit, eqx.filter_jit", {"alpha_lambda": 1.0}, {"alpha_lambda": 1.2})


def case_sbmoe(size: str) -> Case:
    if size == "small":
        n, c, sweeps, steps, problem = 200, 8, 5, 10, "sbmoe_synthetic_1d, N = 200"
        generate = datasets.sbmoe_synthetic_1d
    else:
        n, c, sweeps, steps, problem = 500, 32, 5, 20, "sbmoe_synthetic_2d, N = 500 (x 32, y 2)"
        generate = datasets.sbmoe_synthetic_2d
    draw = lambda s: tuple(np.asarray(a) for a in generate(key(s), n))

    def functional(hp):
        f = eqx.filter_jit(lambda k, X, Y, h, labels: sbmoe.fit(k, X, Y, h, max_iter=sweeps, init_labels=labels, throw=False))
        h = as_arrays(sbmoe.Hyperparams(n_experts=c, gate_steps=steps, kappa0=hp["kappa0"]))

        def call(seed, X, Y):
            fit_key, _ = jax.random.split(key(seed))  # as the estimator: the second key is its predictive's
            return f(fit_key, X, Y, h, sbmoe.agglomerative_labels(Y, c))

        return call

    return Case(f"{problem}, C = {c}, {sweeps} sweeps x {steps} gate steps", draw,
                lambda hp, seed: estimators.SBMoERegressor(c, max_iter=sweeps, gate_steps=steps, random_state=seed, kappa0=hp["kappa0"]),
                functional, "density.sbmoe.fit, eqx.filter_jit, after sbmoe.agglomerative_labels (host)",
                {"kappa0": 0.01}, {"kappa0": 0.012})


def sparse_bayes_case(size: str, cls, prior: str, label: str) -> Case:
    n = 100 if size == "small" else 1000
    engine = sparse_bayes.Hyperparams(prior=prior, max_basis=min(n + 1, 64))  # as the estimator: max_basis=None is 64

    def functional(hp):
        def run(X, y, gamma):
            return sparse_bayes.fit(sparse_bayes.design(X, kernel="rbf", gamma=gamma, bias=True), y, engine, max_iter=200, throw=False)

        f = jax.jit(run)
        return lambda seed, X, y: f(X, y, hp["gamma"])

    return Case(f"sinc, noise sd 0.1, N = {n}, RBF basis + intercept (max 64 bases)", lambda s: sinc_draw(n, s),
                lambda hp, seed: cls(gamma=hp["gamma"]), functional, f"sparse.sparse_bayes.fit ({label}) of design(X), jax.jit",
                {"gamma": 0.1}, {"gamma": 0.12})


def case_rvm(size: str) -> Case:
    return sparse_bayes_case(size, estimators.RVMRegressor, "rvm", "rvm")


def case_bls(size: str) -> Case:
    return sparse_bayes_case(size, estimators.BLSRegressor, "bls", "bls")


def case_flap(size: str) -> Case:
    return sparse_bayes_case(size, estimators.FLAPRegressor, "flap", "flap")


def case_bayesian_lasso(size: str) -> Case:
    if size == "small":
        warmup, samples, problem = 200, 1000, "Tibshirani's example (50 x 8, sd 3)"
        draw = lambda s: tuple(a[0] for a in datasets.tibshirani_datasets(1, 3.0, seed=s)[:2])
    else:
        warmup, samples, problem = 500, 3000, "diabetes (scikit-learn): 400 of its 442 rows (x 10), standardised"
        draw = lambda s: tuple(a[np.random.default_rng(s).choice(442, 400, replace=False)] for a in diabetes())

    def functional(hp):
        h = bayesian_lasso.Hyperparams(lambda_prior=tuple(hp["lambda_prior"]))
        return lambda seed, X, y: bayesian_lasso.sample_posterior(key(seed), X, y, h, method="gibbs", num_warmup=warmup,
                                                                  num_samples=samples)

    return Case(f"{problem}, Gibbs, {warmup} + {samples} draws", draw,
                lambda hp, seed: estimators.BayesianLassoRegressor(num_samples=samples, num_warmup=warmup, random_state=seed,
                                                                   lambda_prior=tuple(hp["lambda_prior"])),
                functional, "sparse.bayesian_lasso.sample_posterior (numpyro MCMC driver)",
                {"lambda_prior": [0.1, 0.1]}, {"lambda_prior": [0.12, 0.1]})


def relational_problem(size: str):
    if size == "small":
        return "nations", False, "nations (56 x 14 x 14), 20% held out"
    return "nips234", True, "NIPS-234 (234 x 234, undirected), 20% of the pairs held out"


def case_lfrm(size: str) -> Case:
    name, sym, problem = relational_problem(size)
    k_max, warmup, samples = (8, 20, 20) if size == "small" else (16, 10, 10)

    def functional(hp):
        h = lfrm.Hyperparams(k_max=k_max, symmetric=sym)

        def call(seed, Y, mask):
            _, k_mcmc = jax.random.split(key(seed))  # as the estimator: the first key is for an IRM start
            return lfrm.sample_posterior(k_mcmc, Y, mask, h, num_warmup=warmup, num_samples=samples)

        return call

    return Case(f"{problem}, K_max = {k_max}, {warmup} + {samples} sweeps", lambda s: relational_draw(name, sym, s),
                lambda hp, seed: estimators.LFRMLinkPredictor(k_max, symmetric=sym, num_warmup=warmup, num_samples=samples,
                                                              random_state=seed),
                functional, "relational.lfrm.sample_posterior (numpyro MCMC driver)", note="no continuous hyperparameter in the estimator")


def case_irm(size: str) -> Case:
    name, sym, problem = relational_problem(size)
    c_max, warmup, samples = (12, 10, 10) if size == "small" else (24, 10, 10)

    def functional(hp):
        h = irm.Hyperparams(c_max=c_max, symmetric=sym, gamma=hp["gamma"], beta=hp["beta"])
        return lambda seed, Y, mask: irm.sample_posterior(key(seed), Y, mask, h, num_warmup=warmup, num_samples=samples)

    return Case(f"{problem}, C_max = {c_max}, {warmup} + {samples} sweeps", lambda s: relational_draw(name, sym, s),
                lambda hp, seed: estimators.IRMLinkPredictor(c_max, symmetric=sym, gamma=hp["gamma"], beta=hp["beta"], num_warmup=warmup,
                                                             num_samples=samples, random_state=seed),
                functional, "relational.irm.sample_posterior (numpyro MCMC driver)",
                {"gamma": 1.0, "beta": 1.0}, {"gamma": 1.2, "beta": 1.2})


def case_mmsb(size: str) -> Case:
    name, sym, problem = relational_problem(size)
    blocks, max_iter, restarts = (4, 100, 2) if size == "small" else (8, 25, 2)

    def functional(hp):
        def run(keys, Y, mask, alpha):
            h = mmsb.Hyperparams(n_blocks=blocks, symmetric=sym, alpha=alpha)
            return jax.vmap(lambda k: mmsb.fit(k, Y, mask, h, max_iter=max_iter, tol=1e-6, throw=False))(keys)

        f = jax.jit(run)

        def call(seed, Y, mask):
            Y, mask = check_relations(Y, mask, sym)
            return f(jax.random.split(key(seed), restarts), Y, mask, hp["alpha"])

        return call

    return Case(f"{problem}, K = {blocks}, at most {max_iter} sweeps, {restarts} vmapped restarts", lambda s: relational_draw(name, sym, s),
                lambda hp, seed: estimators.MMSBLinkPredictor(blocks, symmetric=sym, alpha=hp["alpha"], max_iter=max_iter,
                                                              n_init=restarts, random_state=seed),
                functional, "relational.mmsb.fit vmapped over the restart keys, jax.jit (after check_relations)",
                {"alpha": 0.1}, {"alpha": 0.12})


CASES = {
    "BayesianLassoRegressor": case_bayesian_lasso, "BLSRegressor": case_bls, "BSMLClassifier": case_bsml, "EMRCA": case_emrca,
    "FLAPRegressor": case_flap, "GraphicalLasso": case_graphical_lasso, "IRMLinkPredictor": case_irm, "LFRMLinkPredictor": case_lfrm,
    "MinCovDet": case_min_cov_det, "MMSBLinkPredictor": case_mmsb, "ProbitClassifier": case_probit, "RCA": case_rca,
    "ROBPCA": case_robpca, "RVMRegressor": case_rvm, "SBMoERegressor": case_sbmoe, "SparsePCA": case_sparse_pca,
}


# ----------------------------------------------------------------------------- measuring


class CompileCounter:
    """Counts top-level JAX traces and XLA compilations (by function name) while active."""

    def __init__(self):
        self.active = False
        self.traces, self.compiles = Counter(), Counter()
        jax.monitoring.register_event_duration_secs_listener(self)

    def __call__(self, event: str, duration: float, **kwargs):
        if self.active and event in (TRACE_EVENT, COMPILE_EVENT):
            (self.traces if event == TRACE_EVENT else self.compiles)[str(kwargs.get("fun_name", "?"))] += 1

    @contextlib.contextmanager
    def counting(self):
        self.traces, self.compiles = Counter(), Counter()
        self.active = True
        try:
            yield self
        finally:
            self.active = False


def settle(estimator):
    """Wait for whatever the fitted estimator still holds on the device."""
    jax.block_until_ready([v for v in vars(estimator).values() if isinstance(v, (jax.Array, eqx.Module, dict))])


def n_iter(obj):
    """The iterations a fit ran (``n_iter_`` of an estimator, ``n_iter`` of a FitResult), to
    check that both routes did the same work; None where there is no such count."""
    value = getattr(obj, "n_iter_", getattr(obj, "n_iter", None))
    return None if value is None else np.asarray(value).tolist()


def same_work(iters: dict) -> bool:
    """Whether both routes ran the same iterations in every repeat (an estimator that keeps
    the best of vmapped restarts reports that restart's count, one of the functional call's)."""
    return all(e == f or (isinstance(f, list) and e in f) for e, f in zip(iters["estimator"], iters["functional"]))


def timed_fit(case: Case, hp: dict, seed: int, args: tuple, caught: list) -> tuple[float, float, object]:
    """Wall and process CPU seconds of one ``fit`` of a new estimator, and the estimator."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        estimator = case.make(hp, seed)
        t, cpu = time.perf_counter(), time.process_time()
        estimator.fit(*args)
        settle(estimator)
        seconds, cpu = time.perf_counter() - t, time.process_time() - cpu
    caught.extend(f"{x.category.__name__}: {x.message}"[:300] for x in w)
    return seconds, cpu, estimator


def timed_call(call: Callable, seed: int, args: tuple) -> tuple[float, float, object]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t, cpu = time.perf_counter(), time.process_time()
        result = jax.block_until_ready(call(seed, *args))
        return time.perf_counter() - t, time.process_time() - cpu, result


def run_case(name: str, size: str, repeats: int) -> dict:
    """Measure one estimator at one size in this process (fresh, for the first fit)."""
    case = CASES[name](size)
    data = {seed: case.draw(seed) for seed in range(repeats + 1)}
    jax.block_until_ready(jnp.zeros(1) + 1)  # start the backend outside the timings
    counter, caught = CompileCounter(), []
    first_s, _, _ = timed_fit(case, case.first, 0, data[0], caught)
    second, second_cpu, traces, compiles, names, iters = [], [], [], [], [], []
    for seed in range(1, repeats + 1):
        with counter.counting():
            seconds, cpu, estimator = timed_fit(case, case.second, seed, data[seed], caught)
        second.append(seconds)
        second_cpu.append(cpu)
        iters.append(n_iter(estimator))
        traces.append(sum(counter.traces.values()))
        compiles.append(sum(counter.compiles.values()))
        names.append({"traced": dict(counter.traces.most_common(8)), "compiled": dict(counter.compiles.most_common(8))})
    call = case.functional(case.second)
    warmup_s, _, _ = timed_call(call, 1, data[1])
    with counter.counting():
        runs = [timed_call(call, seed, data[seed]) for seed in range(1, repeats + 1)]
    functional, functional_cpu = [r[0] for r in runs], [r[1] for r in runs]
    second_s, functional_s = statistics.median(second), statistics.median(functional)
    target_s = TARGET_FACTOR * functional_s + TARGET_SLACK_S
    return {"estimator": name, "size": size, "problem": case.problem, "functional": case.route, "note": case.note,
            "hyperparameters": {"first": case.first, "second": case.second}, "repeats": repeats,
            "first_fit_s": first_s, "second_fit_s": second_s, "second_fit_runs_s": second, "second_fit_cpu_s": second_cpu,
            "functional_s": functional_s, "functional_runs_s": functional, "functional_cpu_s": functional_cpu,
            "functional_warmup_s": warmup_s, "n_iter": {"estimator": iters, "functional": [n_iter(r[2]) for r in runs]},
            "same_iterations": same_work({"estimator": iters, "functional": [n_iter(r[2]) for r in runs]}),
            "second_fit_traces": traces[0], "second_fit_compilations": compiles[0], "second_fit_traced": names[0]["traced"],
            "second_fit_compiled": names[0]["compiled"], "repeat_traces": traces, "repeat_compilations": compiles,
            "functional_traces": sum(counter.traces.values()), "functional_compilations": sum(counter.compiles.values()),
            "second_over_functional": second_s / functional_s, "target_s": target_s, "meets_target": bool(second_s <= target_s),
            "warnings": sorted(set(caught))}


def run_in_subprocess(name: str, size: str, repeats: int, timeout: float) -> dict:
    """``run_case`` in a fresh Python process; a failure or a timeout becomes an ``error``."""
    env = {**os.environ}
    use_safe_cpu_scheduler(env)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "case.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--case", name, size, "--repeats", str(repeats), "--case-out", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE.parent)
        except subprocess.TimeoutExpired:
            return {"estimator": name, "size": size, "error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not out.exists():
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return {"estimator": name, "size": size, "error": f"exit {proc.returncode}: " + " / ".join(tail)[-600:]}
        return json.loads(out.read_text())


def machine() -> dict:
    devices = ", ".join(sorted({d.device_kind for d in jax.devices()}))
    summary = (f"{platform.platform()}; {os.cpu_count()} CPU cores; Python {platform.python_version()}; jax {jax.__version__}; "
               f"devices: {devices}")
    return {"platform": summary, "processor": platform.processor() or platform.machine(), "cpu_count": os.cpu_count(),
            "jax": jax.__version__, "devices": devices}


def print_row(r: dict) -> None:
    if "error" in r:
        print(f"{r['estimator']:<23} {r['size']:<6}  failed: {r['error']}", flush=True)
        return
    print(f"{r['estimator']:<23} {r['size']:<6} {r['first_fit_s']:9.3f} {r['second_fit_s']:9.4f} {r['functional_s']:9.4f} "
          f"{r['second_over_functional']:7.2f} {r['second_fit_traces']:4d}/{r['second_fit_compilations']:<4d} "
          f"{'yes' if r['meets_target'] else 'NO'}"
          f"{'' if r['same_iterations'] else '  (iterations differ: ' + str(r['n_iter']) + ')'}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes only, 1 repeat")
    parser.add_argument("--only", nargs="+", choices=sorted(CASES), metavar="ESTIMATOR", help="these estimators only")
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES))
    parser.add_argument("--repeats", type=int, default=3, help="second fits and functional calls, each on its own draw")
    parser.add_argument("--case-timeout", type=float, default=900.0, help="seconds before one case's process is stopped")
    parser.add_argument("--out", default=str(HERE / "results" / "estimators.json"))
    parser.add_argument("--case", nargs=2, metavar=("ESTIMATOR", "SIZE"), help=argparse.SUPPRESS)
    parser.add_argument("--case-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        result = run_case(args.case[0], args.case[1], args.repeats)
        Path(args.case_out).write_text(json.dumps(result, indent=2, default=float))
        return 0
    sizes, repeats = (["small"], 1) if args.quick else (args.sizes, args.repeats)
    names = args.only or sorted(estimators.__all__, key=str.lower)
    missing = sorted(set(estimators.__all__) - set(CASES))
    results = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "quick": args.quick, "repeats": repeats,
               "target": f"second fit <= {TARGET_FACTOR} x functional call + {1e3 * TARGET_SLACK_S:g} ms",
               "not_benchmarked": missing, "cases": []}
    if args.only and Path(args.out).is_file():  # keep the other estimators' cases of the earlier run
        earlier = json.loads(Path(args.out).read_text())
        for case in earlier["cases"]:
            if case["estimator"] not in names or case["size"] not in sizes:
                results["cases"].append({**case, "kept_from": case.get("kept_from", earlier["date"])})
    if missing:
        print(f"estimators without a case here: {', '.join(missing)}")
    print(f"{'estimator':<23} {'size':<6} {'first s':>9} {'second s':>9} {'func s':>9} {'ratio':>7} tr/comp target")
    for name in names:
        for size in sizes:
            r = run_in_subprocess(name, size, repeats, args.case_timeout)
            results["cases"].append(r)
            results["cases"].sort(key=lambda c: (c["estimator"].lower(), c["size"] != "small"))  # the report's order
            print_row(r)
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

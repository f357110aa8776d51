"""The contract every estimator keeps (DESIGN.md): the fit is compiled once per shape, so a
second fit on new data of the same shapes with new values of the continuous
hyperparameters compiles nothing; bad input is refused with a ``ValueError`` before
anything is traced or compiled; a prediction is a few compiled programs, not one per array
operation, and a second one (in one piece or in chunks) compiles nothing. Compilations are counted from JAX's own monitoring events.
Every random functional fit, vmapped over keys, equals the separate fits; every public fit
returns the one shape of a fit, :class:`~bayeskit.core.status.FitResult`."""

from __future__ import annotations

import copy
import importlib
import inspect
import pkgutil
import warnings

import jax
import numpy as np
import pytest
from compilations import count_compilations
from identical import assert_identical

from bayeskit import estimators as E
from bayeskit.core.status import FitResult
from bayeskit.density import sbmoe
from bayeskit.multilabel import bsml, probit
from bayeskit.relational import mmsb
from bayeskit.robust import mcd, robpca
from bayeskit.sparse import sparse_bayes


def multilabel(rng):
    X = rng.normal(size=(30, 4))
    return X, (X[:, :3] + 0.3 * rng.normal(size=(30, 3)) > 0).astype(int)


def regression(rng):
    X = rng.normal(size=(30, 2))
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)


def relations(rng):
    z = np.repeat(np.arange(2), 5)
    return ((rng.random((10, 10)) < np.where(z[:, None] == z[None], 0.8, 0.1)).astype(int),)


def gaussian(rng):
    return (rng.normal(size=(40, 4)) @ (np.eye(4) + 0.3 * rng.normal(size=(4, 4))),)


def residual(rng):
    return rng.normal(size=(40, 4)), np.eye(4) * 0.5


def with_nan(data):
    first = np.array(data[0], dtype=float)
    first[1, 0] = np.nan
    return (first, *data[1:])


def with_bad_link(data):
    Y = np.array(data[0])
    Y[0, 1] = 2
    return (Y, *data[1:])


# name: (estimator with the continuous hyperparameters set from v, data, bad data)
CASES = {
    "BSMLClassifier": (lambda v: E.BSMLClassifier(n_components=2, max_iter=4, alpha_lambda=1.0 + v, beta_psi=1.0 + v),
                       multilabel, with_nan),
    "ProbitClassifier": (lambda v: E.ProbitClassifier(max_iter=4, alpha_lambda=1.0 + v), multilabel, with_nan),
    "SBMoERegressor": (lambda v: E.SBMoERegressor(n_experts=3, max_iter=2, gate_steps=2, n_gate=8, n_draws=8,
                                                   kappa0=0.01 + v / 100), regression, with_nan),
    "RVMRegressor": (lambda v: E.RVMRegressor(gamma=0.5 + v, max_iter=10), regression, with_nan),
    "BLSRegressor": (lambda v: E.BLSRegressor(gamma=0.5 + v, max_iter=10), regression, with_nan),
    "FLAPRegressor": (lambda v: E.FLAPRegressor(gamma=0.5 + v, max_iter=10), regression, with_nan),
    "BayesianLassoRegressor": (lambda v: E.BayesianLassoRegressor(num_samples=4, num_warmup=2, alpha=0.05 + v / 100),
                               regression, with_nan),
    "LFRMLinkPredictor": (lambda v: E.LFRMLinkPredictor(n_features_max=3, num_warmup=1, num_samples=2), relations,
                          with_bad_link),
    "IRMLinkPredictor": (lambda v: E.IRMLinkPredictor(n_clusters_max=3, num_warmup=1, num_samples=2, gamma=1.0 + v, beta=1.0 + v),
                         relations, with_bad_link),
    "MMSBLinkPredictor": (lambda v: E.MMSBLinkPredictor(n_blocks=2, max_iter=4, n_init=2, alpha=0.1 + v / 10), relations,
                          with_bad_link),
    "GraphicalLasso": (lambda v: E.GraphicalLasso(alpha=0.1 + v / 10), gaussian, with_nan),
    "MinCovDet": (lambda v: E.MinCovDet(n_starts=5, support_fraction=0.7 + v / 10), gaussian, with_nan),  # new h
    "ROBPCA": (lambda v: E.ROBPCA(n_components=2, n_starts=5, n_directions=20, alpha=0.75 + v / 10), gaussian, with_nan),
    "RCA": (lambda v: E.RCA(n_components=1), residual, with_nan),
    "EMRCA": (lambda v: E.EMRCA(alpha=0.1 + v / 10, noise_variance=0.5 + v / 10, n_components=1, max_iter=4), gaussian, with_nan),
    "SparsePCA": (lambda v: E.SparsePCA(cardinality=2, beta=1e-4 * (1 + v)), gaussian, with_nan),
}


def test_every_estimator_has_a_case():
    assert set(CASES) == set(E.__all__)


@pytest.mark.parametrize("name", sorted(CASES))
def test_second_fit_compiles_nothing_bad_input_compiles_nothing_and_the_model_owns_its_arrays(name):
    make, data, spoil = CASES[name]
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        make(0).fit(*data(rng))
        with count_compilations() as bad:
            with pytest.raises(ValueError):
                make(1).fit(*spoil(data(rng)))
        args = data(rng)
        with count_compilations() as second:
            est = make(1).fit(*args)
    assert bad == {"traces": 0, "compiles": 0, "compiled": []}
    assert second == {"traces": 0, "compiles": 0, "compiled": []}
    # and the fitted model owns its arrays: overwriting the caller's changes nothing it holds
    before = copy.deepcopy(est)
    for a in args:
        a[...] = a[::-1].copy()  # reversed rows: new values everywhere but a symmetric middle
    assert_identical(before, est)


# name: the method that uses a fitted estimator, on new rows (link predictors: on the fit's pairs)
USES = dict.fromkeys(("BSMLClassifier", "ProbitClassifier", "LFRMLinkPredictor", "IRMLinkPredictor", "MMSBLinkPredictor"),
                     "predict_proba")
USES |= dict.fromkeys(("SBMoERegressor", "RVMRegressor", "BLSRegressor", "FLAPRegressor", "BayesianLassoRegressor"), "predict")
USES |= dict.fromkeys(("ROBPCA", "RCA", "SparsePCA"), "transform")
USES |= {"GraphicalLasso": "score", "EMRCA": "score", "MinCovDet": "mahalanobis"}
MAX_PROGRAMS_PER_USE = 3


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_prediction_is_a_few_compiled_programs_not_a_stream_of_eager_operations(name):
    """A first prediction compiles its own program or two (each kept by the persistent
    cache), not one small program per array operation, which a new process would compile
    again each time (dozens of them took up to a second)."""
    assert set(USES) == set(CASES)
    make, data, _ = CASES[name]
    args = data(np.random.default_rng(1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make(0).fit(*args)
        jax.clear_caches()  # count every program the use needs, not only those no earlier test compiled
        with count_compilations() as seen:
            use = getattr(est, USES[name])
            jax.block_until_ready(use() if name.endswith("LinkPredictor") else use(args[0][:7]))  # 7 rows: a new shape
    assert seen["compiles"] <= MAX_PROGRAMS_PER_USE, seen["compiled"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_second_prediction_compiles_nothing_in_one_piece_or_in_chunks(name):
    """Using a fitted estimator again on new rows of the same shape compiles nothing, also
    with ``chunk_size`` where the method takes it (blocks of 3 of 7 rows: two full blocks
    and a partial one)."""
    make, data, _ = CASES[name]
    args = data(np.random.default_rng(2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        use = getattr(make(0).fit(*args), USES[name])
        chunked = "chunk_size" in inspect.signature(use).parameters
        for options in ({}, {"chunk_size": 3}) if chunked else ({},):
            call = (lambda rows: use(**options)) if name.endswith("LinkPredictor") else (lambda rows: use(args[0][rows], **options))
            jax.block_until_ready(call(slice(0, 7)))
            with count_compilations() as seen:
                jax.block_until_ready(call(slice(7, 14)))
            assert seen["compiles"] == 0, (options, seen["compiled"])


def test_the_counter_sees_a_compilation():
    with count_compilations() as seen:
        jax.jit(lambda x: x * 3.0 + 1.0)(np.arange(7.0)).block_until_ready()
    assert seen["traces"] >= 1 and seen["compiles"] >= 1


# name: a fit of (key, rng-drawn data) whose result is a pytree of arrays
RANDOM_FITS = {
    "bsml": lambda key, d: bsml.fit(key, d[0], d[1], bsml.Hyperparams(n_components=2), max_iter=5, throw=False),
    "probit": lambda key, d: probit.fit(key, d[0], d[1], max_iter=5, throw=False),
    "sbmoe": lambda key, d: sbmoe.fit(key, d[0], d[1][:, :1].astype(float), sbmoe.Hyperparams(n_experts=2, gate_steps=2),
                                      max_iter=2, throw=False),
    "mmsb": lambda key, d: mmsb.fit(key, d[2], None, mmsb.Hyperparams(n_blocks=2), max_iter=5, throw=False),
    # the MCD's exchanges reach the same subset from any start on these data: one start, one step
    "mcd": lambda key, d: mcd.fit(key, d[0], n_starts=1, max_steps=1),
    "robpca": lambda key, d: robpca.fit(key, d[0], 2, n_directions=20, n_starts=6, use_mcd=False),
}


def _plain(tree):
    """Typed PRNG keys (kept in some states) as their raw bits, so they compare too."""
    key = lambda a: jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key)
    return jax.tree.map(lambda a: jax.random.key_data(a) if key(a) else a, tree)


@pytest.mark.parametrize("name", sorted(RANDOM_FITS))
def test_vmap_over_keys_equals_separate_fits(name):
    rng = np.random.default_rng(1)
    X, Y = multilabel(rng)
    data = (X, Y, relations(rng)[0])
    fit = RANDOM_FITS[name]
    keys = jax.random.split(jax.random.key(3), 3)
    assert isinstance(fit(keys[0], data), FitResult)
    batched = _plain(jax.vmap(lambda k: fit(k, data))(keys))
    for i in range(3):
        alone = _plain(fit(keys[i], data))
        assert jax.tree.structure(alone) == jax.tree.structure(batched)
        for a, b in zip(jax.tree.leaves(alone), jax.tree.leaves(batched), strict=True):
            np.testing.assert_allclose(np.asarray(b)[i], np.asarray(a), rtol=1e-9, atol=1e-9, equal_nan=True)
    # the keys matter: two restarts differ somewhere
    differ = any(not np.allclose(np.asarray(leaf)[0], np.asarray(leaf)[1], equal_nan=True) for leaf in jax.tree.leaves(batched)
                 if np.issubdtype(np.asarray(leaf).dtype, np.floating))
    assert differ


# name: a fit of (hyperparameter value, data) that vmaps over the value with the data concrete
VALUE_FITS = {
    "bsml sigma_z": lambda v, d: bsml.fit(jax.random.key(0), d[0], d[1], bsml.Hyperparams(n_components=2, sigma_z=v),
                                          max_iter=4, throw=False),
    "probit alpha_lambda": lambda v, d: probit.fit(jax.random.key(0), d[0], d[1], probit.Hyperparams(alpha_lambda=v),
                                                   max_iter=4, throw=False),
    "sparse_bayes noise_init": lambda v, d: sparse_bayes.fit(d[0], d[0][:, 0], sparse_bayes.Hyperparams(prior="flap", noise_init=v),
                                                            max_iter=4, throw=False),
    "mmsb alpha": lambda v, d: mmsb.fit(jax.random.key(0), d[2], None, mmsb.Hyperparams(n_blocks=2, alpha=v), max_iter=4,
                                        throw=False),
    "sbmoe kappa0": lambda v, d: sbmoe.fit(jax.random.key(0), d[0], d[1][:, :1].astype(float),
                                           sbmoe.Hyperparams(n_experts=2, gate_steps=2, init="kmeans++", kappa0=v),
                                           max_iter=2, throw=False),
}


@pytest.mark.parametrize("name", sorted(VALUE_FITS))
def test_vmap_over_a_hyperparameter_equals_separate_fits(name):
    """DESIGN.md's fits vmap over hyperparameters too: with concrete data and a traced
    value, the data are checked on the host and the value is left to the caller (checking
    it converted the tracer and failed)."""
    rng = np.random.default_rng(2)
    X, Y = multilabel(rng)
    data, fit = (X, Y, relations(rng)[0]), VALUE_FITS[name]
    values = np.array([0.05, 0.5])
    batched = jax.vmap(lambda v: fit(v, data))(values)
    for i, v in enumerate(values):
        for a, b in zip(jax.tree.leaves(_plain(fit(float(v), data))), jax.tree.leaves(_plain(batched)), strict=True):
            np.testing.assert_allclose(np.asarray(b)[i], np.asarray(a), rtol=1e-9, atol=1e-9, equal_nan=True)
    assert not np.allclose(np.asarray(batched.objective)[0], np.asarray(batched.objective)[1])
    spoiled = X.copy()
    spoiled[0, 0] = np.nan
    if not name.startswith("mmsb"):  # its data are the relation, checked the same way
        with pytest.raises(ValueError, match="non-finite|NaN|finite"):
            jax.vmap(lambda v: fit(v, (spoiled, Y, data[2])))(values)


def test_max_iter_may_be_a_numpy_integer():
    """A NumPy integer (a grid from ``np.arange``) is a number of sweeps like a Python int;
    ``filter_jit`` traced it, and the trace length could not be set from it."""
    rng = np.random.default_rng(0)
    X, Y = multilabel(rng)
    key = jax.random.key(0)
    for fit in (lambda m: bsml.fit(key, X, Y, bsml.Hyperparams(n_components=2), max_iter=m),
                lambda m: probit.fit(key, X, Y, max_iter=m),
                lambda m: sparse_bayes.fit(X, X[:, 0], max_iter=m)):
        assert_identical(fit(np.int64(3)), fit(3))
    est = E.RVMRegressor(max_iter=np.int64(3)).fit(X, X[:, 0])
    np.testing.assert_array_equal(est.predict(X), E.RVMRegressor(max_iter=3).fit(X, X[:, 0]).predict(X))


def _public_fits():
    """(module, name, function) of every public ``fit``, ``fit_*`` and ``*_fit`` of the families."""
    for family in ("multilabel", "density", "relational", "sparse", "covariance", "robust"):
        package = importlib.import_module(f"bayeskit.{family}")
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            module = importlib.import_module(info.name)
            for name, fn in vars(module).items():
                fit_like = name == "fit" or name.startswith("fit_") or name.endswith("_fit")
                if fit_like and inspect.isfunction(fn) and fn.__module__ == module.__name__:
                    yield info.name, name, fn


def test_every_public_fit_is_declared_to_return_a_fit_result():
    """One shape for a fit, closed forms included (``n_iter`` 0, the objective at the
    solution); the modules' own tests check what each returns."""
    fits = list(_public_fits())
    assert len(fits) >= 16
    other = [f"{module}.{name} -> {inspect.signature(fn).return_annotation}" for module, name, fn in fits
             if inspect.signature(fn).return_annotation not in ("FitResult", FitResult)]
    assert not other


def _bad_hyperparameter_calls():
    from bayeskit.covariance import glasso

    rng = np.random.default_rng(0)
    X, Y = multilabel(rng)
    S = np.cov(X.T)
    links = relations(rng)[0]
    key = jax.random.key(0)
    for tol in (-1.0, np.nan, "1e-3"):
        yield f"bsml tol={tol!r}", "tol", lambda t=tol: bsml.fit(key, X, Y, bsml.Hyperparams(n_components=2), tol=t)
        yield f"probit tol={tol!r}", "tol", lambda t=tol: probit.fit(key, X, Y, tol=t)
        yield f"mmsb tol={tol!r}", "tol", lambda t=tol: mmsb.fit(key, links, None, mmsb.Hyperparams(n_blocks=2), tol=t)
        yield f"glasso tol={tol!r}", "tol", lambda t=tol: glasso.fit(S, glasso.Hyperparams(0.1), tol=t)
    for random_state in (1.5, "abc", -1, True):
        yield f"random_state={random_state!r}", "random_state", lambda r=random_state: E.ProbitClassifier(random_state=r).fit(X, Y)
    for threshold in (-1.0, np.nan, 2.0):
        yield f"threshold={threshold!r}", "threshold", lambda t=threshold: E.SparsePCA(cardinality=2, threshold=t).fit(X)
    yield "SparsePCA max_iter=1.5", "max_iter", lambda: E.SparsePCA(cardinality=2, max_iter=1.5).fit(X)
    Phi, y = sparse_bayes.design(X[:, :2]), X[:, 0]
    for field, value in (("align_tol", np.nan), ("moves", 0), ("max_precision", -1.0), ("lambda_prior", (0.1,))):
        hp = sparse_bayes.Hyperparams(**{field: value})
        yield f"sparse_bayes {field}={value!r}", field, lambda h=hp: sparse_bayes.fit(Phi, y, h)
    yield "design gamma=nan", "gamma", lambda: sparse_bayes.design(X, gamma=np.nan)


@pytest.mark.parametrize("case", list(_bad_hyperparameter_calls()), ids=lambda c: c[0])
def test_bad_hyperparameters_are_refused_by_name_before_anything_compiles(case):
    _, name, call = case
    with count_compilations() as seen, pytest.raises(ValueError, match=name):
        call()
    assert seen == {"traces": 0, "compiles": 0, "compiled": []}


def _bad_shape_cases():
    from bayeskit.covariance import glasso, rca, sparse_pca

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    Y = (X[:, :2] > 0).astype(np.int8)
    S = np.cov(X, rowvar=False)
    A = (rng.uniform(size=(8, 8)) < 0.3).astype(np.int8)
    key = jax.random.key(0)
    return {
        "bsml.fit": (lambda X, Y: bsml.fit(key, X, Y, bsml.Hyperparams(n_components=2), throw=False), (X, Y[:20]), "same number of rows"),
        "sparse_bayes.fit": (lambda P, t: sparse_bayes.fit(P, t, throw=False), (X, X[:20, 0]), "Phi must be"),
        "sbmoe.fit": (lambda X, Y: sbmoe.fit(key, X, Y, sbmoe.Hyperparams(n_experts=2, init="kmeans++"), max_iter=1), (X, X[:20, 0]),
                      "same number of rows"),
        "glasso.fit": (lambda S: glasso.fit(S, glasso.Hyperparams(0.1), throw=False), (S[:, :3],), "square"),
        "rca.fit": (lambda C, Sigma: rca.fit(C, Sigma), (S, S[:3, :3]), "must match"),
        "rca.em_fit": (lambda C: rca.em_fit(C, rca.EMHyperparams(alpha=0.1, n_components=1)), (S[:, :3],), "square"),
        "sparse_pca.fit": (lambda Sigma: sparse_pca.fit(Sigma, sparse_pca.Hyperparams(lam=0.1)), (S[:, :3],), "square"),
        "mmsb.fit": (lambda A: mmsb.fit(key, A, hparams=mmsb.Hyperparams(n_blocks=2), throw=False), (A[:, :6],), r"\(N, N\)"),
    }


@pytest.mark.parametrize("name", sorted(_bad_shape_cases()))
def test_shapes_are_checked_inside_jit(name):
    """Inside the caller's jit the values are not checked, but the shapes are static: a
    mismatch is the ValueError naming the arguments, not XLA's error from deep inside the fit."""
    fit, args, match = _bad_shape_cases()[name]
    with pytest.raises(ValueError, match=match):
        jax.jit(fit)(*args)

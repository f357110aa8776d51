"""Properties over generated inputs (hypothesis), for every estimator:

1. in float32, a model that is equivariant in exact arithmetic stays so from 1e-20 to 1e20:
   the fit on ``a X + b`` (``c y + d`` for a regressor, with the hyperparameters that carry
   units scaled alike) gives the answer on ``X`` mapped back; a model whose priors set a
   scale (BSML, PROBIT) gives finite probabilities, or warns or refuses with the scale;
2. bad input (non-finite, wrong dimensions, empty, strings, objects, complex numbers,
   sparse matrices) is refused with a ``ValueError`` or ``TypeError`` that names the
   argument, before anything is traced or compiled;
3. a fit whose state holds a NaN or inf never reports success.

The examples are derandomised (the same in every run) and few per property: each runs a
fit, and the compiled programs are shared across them.
"""

from __future__ import annotations

import re
import warnings
from functools import cache

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import sparse
from test_contract import CASES, count_compilations

from bayeskit import estimators as E
from bayeskit.core import loop
from bayeskit.core.status import Status, all_finite, solved
from bayeskit.covariance import hsic

SETTINGS = settings(max_examples=5, deadline=None, database=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
SCALES = st.floats(-20.0, 20.0).map(lambda e: float(10.0**e))  # log-uniform over 1e-20 ... 1e20
OFFSETS = st.floats(-3.0, 3.0)
F32 = np.float32


def _quiet(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit()


# ----------------------------------------------------------------------------- 1. scale


@cache
def _gaussian():
    rng = np.random.default_rng(0)
    return (rng.normal(size=(60, 4)) @ (np.eye(4) + 0.4 * rng.normal(size=(4, 4)))).astype(F32)


@cache
def _regression():
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(40, 2)).astype(F32)
    return X, (np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=40)).astype(F32)


def _close(got, want, rtol, scale_of=None):
    """|got - want| <= rtol * max|want| (entries near zero are judged on the array's scale)."""
    want = np.asarray(want, np.float64)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=0, atol=rtol * np.max(np.abs(want)))


def _min_cov_det(a, b, _c, _d):
    X = _gaussian()
    make = lambda: E.MinCovDet(n_starts=50, random_state=0)
    ref, got = make().fit(X), make().fit(X * F32(a) + F32(b * a))
    _close(got.covariance_ / a / a, ref.covariance_, 1e-3)
    _close(got.location_ / a - b, ref.location_, 1e-3)


def _robpca(a, b, _c, _d):
    X = _gaussian()
    make = lambda: E.ROBPCA(n_components=2, n_starts=50, random_state=0)
    ref, got = make().fit(X), make().fit(X * F32(a) + F32(b * a))
    _close(got.eigenvalues_ / a / a, ref.eigenvalues_, 1e-3)
    _close(np.abs(got.components_), np.abs(ref.components_), 1e-3)


def _graphical_lasso(a, b, _c, _d):
    X = _gaussian()
    ref, got = E.GraphicalLasso(alpha=0.1).fit(X), E.GraphicalLasso(alpha=0.1 * a * a).fit(X * F32(a) + F32(b * a))
    _close(got.precision_ * a * a, ref.precision_, 1e-3)


def _rca(a, b, _c, _d):
    X = _gaussian()
    Sigma = np.eye(4) * 0.5
    ref, got = E.RCA(2).fit(X, Sigma), E.RCA(2).fit(X * F32(a) + F32(b * a), Sigma * a * a)
    _close(got.eigenvalues_, ref.eigenvalues_, 1e-3)
    _close(np.abs(got.components_ / a), np.abs(ref.components_), 1e-3)


def _emrca(a, b, _c, _d):
    X = _gaussian()
    make = lambda v: E.EMRCA(alpha=0.1 * v, noise_variance=0.3 * v, n_components=1, max_iter=15, tol=1e-30)
    ref, got = _quiet(lambda: make(1.0).fit(X)), _quiet(lambda: make(a * a).fit(X * F32(a) + F32(b * a)))
    _close(got.precision_ * a * a, ref.precision_, 1e-3)


def _sparse_pca(a, b, _c, _d):
    X = _gaussian()
    ref, got = E.SparsePCA(cardinality=2).fit(X), E.SparsePCA(cardinality=2).fit(X * F32(a) + F32(b * a))
    _close(np.abs(got.components_), np.abs(ref.components_), 1e-4)


def _regressor(cls):
    """The kernel model has no intercept: equivariant under c y, not y + d; the RBF kernel
    with gamma / a^2 is invariant under a X + b. The fits run on X / s and y / s (exact
    scales), so they see the unit-scale data up to one rounding of X and y: the tolerance
    is that of float32 fits on data a few ulps apart."""

    def check(a, b, c, _d):
        X, y = _regression()
        make = lambda gamma: cls(gamma=gamma, max_iter=50)
        ref = _quiet(lambda: make(1.0).fit(X, y))
        got = _quiet(lambda: make(1.0 / a / a).fit(X * F32(a) + F32(b * a), y * F32(c)))
        _close(got.predict(X * F32(a) + F32(b * a)) / c, ref.predict(X), 1e-2)

    return check


def _bayesian_lasso(_a, _b, c, d):
    X, y = _regression()
    make = lambda: E.BayesianLassoRegressor(num_samples=200, num_warmup=50, random_state=0)
    ref, got = make().fit(X, y), make().fit(X, y * F32(c) + F32(d * c))
    _close(got.coef_ / c, ref.coef_, 1e-3)


def _sbmoe(a, b, c, d):
    X, y = _regression()
    make = lambda: E.SBMoERegressor(n_experts=3, max_iter=3, gate_steps=3, n_gate=8, n_draws=8, random_state=0)
    ref, got = make().fit(X, y), make().fit(X * F32(a) + F32(b * a), y * F32(c) + F32(d * c))
    _close((got.predict(X * F32(a) + F32(b * a)) - d * c) / c, ref.predict(X), 1e-3)


def _hsic(a, b, c, d):
    x, y = _regression()[0][:, 0], _regression()[1]
    key = jax.random.key(0)
    ref, got = hsic.test(key, x, y), hsic.test(key, x * F32(a) + F32(b * a), y * F32(c) + F32(d * c))
    assert float(got.statistic) == pytest.approx(float(ref.statistic), rel=1e-3)
    assert float(got.p_value) == pytest.approx(float(ref.p_value), rel=1e-3, abs=1e-12)


def _prior_scaled(cls):
    """No equivariance (the priors set a scale): finite probabilities, or the scale named."""

    def check(a, b, _c, _d):
        X = _gaussian() * F32(a) + F32(b * a)
        Y = (_gaussian()[:, :3] > 0).astype(int)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                P = cls(max_iter=5, tol=0).fit(X, Y).predict_proba(X)
            except ValueError as error:
                assert "X is at scale" in str(error) and not 1e-14 < a < 1e14
                return
        assert np.all(np.isfinite(P)) and np.all((P >= 0) & (P <= 1))
        far = not 2.0**-20 <= a <= 2.0**20
        assert any("X is at scale" in str(w.message) for w in caught) or not far

    return check


EQUIVARIANT = {
    "MinCovDet": _min_cov_det, "ROBPCA": _robpca, "GraphicalLasso": _graphical_lasso, "RCA": _rca, "EMRCA": _emrca,
    "SparsePCA": _sparse_pca, "RVMRegressor": _regressor(E.RVMRegressor), "BLSRegressor": _regressor(E.BLSRegressor),
    "FLAPRegressor": _regressor(E.FLAPRegressor), "BayesianLassoRegressor": _bayesian_lasso, "SBMoERegressor": _sbmoe,
    "BSMLClassifier": _prior_scaled(E.BSMLClassifier), "ProbitClassifier": _prior_scaled(E.ProbitClassifier),
    "hsic.test": _hsic,
}
# binary relations: there is no scale to change
NO_SCALE = {"LFRMLinkPredictor", "IRMLinkPredictor", "MMSBLinkPredictor"}


def test_every_estimator_is_covered():
    assert set(EQUIVARIANT) | NO_SCALE == set(E.__all__) | {"hsic.test"}


@pytest.mark.parametrize("name", sorted(EQUIVARIANT))
def test_equivariant_from_1e_minus_20_to_1e20_in_float32(name):
    check = EQUIVARIANT[name]

    @SETTINGS
    @given(a=SCALES, b=OFFSETS, c=SCALES, d=OFFSETS)
    def holds(a, b, c, d):
        check(a, b, c, d)

    holds()


# ----------------------------------------------------------------------------- 2. bad input

BAD_KINDS = ("nan", "inf", "one_dimensional", "three_dimensional", "empty", "strings", "objects", "complex", "sparse")


def _with_a_word(x: np.ndarray) -> np.ndarray:
    """An object array with one entry that is not a number (an object array of numbers is
    valid input: it is read as float64, as scikit-learn reads it)."""
    x.flat[min(3, x.size - 1)] = "a"
    return x


def _spoil(x: np.ndarray, kind: str):
    x = np.asarray(x)
    if kind in ("nan", "inf"):
        x = x.astype(float)
        x.flat[3] = np.nan if kind == "nan" else -np.inf
        return x
    return {"one_dimensional": lambda: x.ravel(), "three_dimensional": lambda: x[None], "empty": lambda: x[:0],
            "strings": lambda: x.astype(str), "objects": lambda: _with_a_word(x.astype(object)), "complex": lambda: x + 1j,
            "sparse": lambda: sparse.csr_matrix(x)}[kind]()


ARGUMENT = {"LFRMLinkPredictor": "Y", "IRMLinkPredictor": "Y", "MMSBLinkPredictor": "Y", "RCA": "Y"}
LINKS = {"LFRMLinkPredictor", "IRMLinkPredictor", "MMSBLinkPredictor"}


def _valid(name: str, kind: str, position: int) -> bool:
    """The spoilings that are valid input: a stack of relations (1, N, N), a regressor's
    target as a vector, a sparse label matrix, a sparse X for SparsePCA and the classifiers."""
    return ((name in LINKS and position == 0 and kind == "three_dimensional")
            or (name.endswith("Regressor") and position == 1 and kind == "one_dimensional")
            or (name.endswith("Classifier") and kind == "sparse")
            or (name == "SparsePCA" and kind == "sparse"))


def _argument(name: str, position: int) -> str:
    if position == 0:
        return ARGUMENT.get(name, "X")
    return "Sigma" if name == "RCA" else "Y" if name.endswith("Classifier") or name == "SBMoERegressor" else "y"


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_input_is_refused_by_name_before_compiling(name):
    make, data, _ = CASES[name]
    args = data(np.random.default_rng(0))
    _quiet(lambda: make(0).fit(*args))  # compiled once for the good shapes

    @settings(SETTINGS, max_examples=40)  # cheap: every example is refused before anything compiles
    @given(kind=st.sampled_from(BAD_KINDS), position=st.integers(0, len(args) - 1))
    def refused(kind, position):
        assume(not _valid(name, kind, position))
        spoiled = list(args)
        spoiled[position] = _spoil(args[position], kind)
        with count_compilations() as seen, pytest.raises((ValueError, TypeError)) as caught:
            _quiet(lambda: make(0).fit(*spoiled))
        assert seen == {"traces": 0, "compiles": 0, "compiled": []}
        named = _argument(name, position)  # as a word, in either case (scikit-learn writes "Input y contains NaN")
        assert re.search(rf"\b{named}\b", str(caught.value), re.IGNORECASE), f"{kind} in {named}: {str(caught.value)[:200]}"

    refused()


# ----------------------------------------------------------------------------- 3. no false success


def _step(state):
    x, i, nan_at, leaf = state
    i = i + 1
    spoiled = jnp.where(i == nan_at, jnp.nan, 0.5 * x + 1.0)
    x = jnp.where(jnp.arange(x.shape[0]) == leaf, spoiled, 0.5 * x + 1.0)
    return x, i, nan_at, leaf


@SETTINGS
@given(nan_at=st.integers(1, 12), leaf=st.integers(0, 2), objective_sees_it=st.booleans(), max_iter=st.integers(1, 12))
def test_a_state_with_a_nan_never_reports_success(nan_at, leaf, objective_sees_it, max_iter):
    """The NaN enters one entry of the state at sweep ``nan_at``, seen by the objective or not:
    if it happens within max_iter, the status is nonfinite and the state kept is finite."""
    objective = (lambda s: -jnp.sum((s[0] - 2.0) ** 2)) if objective_sees_it else (lambda s: -((s[0][leaf - 1] - 2.0) ** 2))
    state = (jnp.zeros(3), jnp.asarray(0), jnp.asarray(nan_at), jnp.asarray(leaf))
    result = loop.run(_step, objective, state, max_iter=max_iter, tol=0.0, throw=False)
    if nan_at <= max_iter:
        assert bool(result.status == Status.nonfinite)
        assert np.all(np.isfinite(np.asarray(result.state[0])))
    else:
        assert bool(result.status == Status.max_iter_reached)


@SETTINGS
@given(entry=st.integers(0, 5), value=st.sampled_from([np.nan, np.inf, -np.inf]))
def test_a_closed_form_with_a_non_finite_estimate_is_nonfinite(entry, value):
    estimate = np.arange(6.0)
    estimate[entry] = value
    result = solved(jnp.asarray(estimate), 1.0, all_finite(jnp.asarray(estimate)))
    assert bool(result.status == Status.nonfinite) and not bool(result.converged)

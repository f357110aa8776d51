"""The SBMoE regressor: scikit-learn checks, the public methods, restarts."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.utils import estimator_checks as checks

from bayeskit.density import sbmoe
from bayeskit.estimators import SBMoERegressor

SMALL = dict(n_experts=2, max_iter=2, gate_steps=2, n_gate=4, n_draws=4, random_state=0)


# A selection of scikit-learn's estimator checks: every fit on a new data shape compiles
# anew (about 10 s each), so the whole battery would dominate the test suite. Those
# calling score_samples(X) do not apply: a conditional density needs (X, Y).
SELECTED_CHECKS = [
    checks.check_estimators_dtypes,
    checks.check_fit2d_predict1d,
    checks.check_estimators_nan_inf,
    checks.check_dont_overwrite_parameters,
]


@pytest.mark.parametrize("check", SELECTED_CHECKS, ids=lambda c: c.__name__)
def test_sklearn_estimator_checks(check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check("SBMoERegressor", clone(SBMoERegressor(**SMALL)))


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(120, 2))
    Y = np.column_stack([np.sin(2 * X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.normal(size=(120, 2))
    model = SBMoERegressor(n_experts=6, max_iter=4, gate_steps=10, n_gate=20, n_draws=20, random_state=1).fit(X, Y)
    return X, Y, model


def test_methods_agree_with_the_functional_core(fitted):
    X, Y, model = fitted
    mix = sbmoe.predictive(model._predict_key, model.state_, X[:5], model.hyperparams_, n_gate=20, n_draws=20)
    np.testing.assert_allclose(model.predict(X[:5]), mix.mean, rtol=1e-10)
    np.testing.assert_allclose(model.score_samples(X[:5], Y[:5]), mix.log_prob(Y[:5]), rtol=1e-10)
    draws = model.sample(X[:3], n_samples=7, random_state=2)
    assert draws.shape == (7, 3, 2) and np.all(np.isfinite(draws))
    np.testing.assert_allclose(model.predict(X[:5]), model.predict(X)[:5], rtol=1e-12)  # subset invariance
    assert model.metric_.shape == (2, 2) and np.all(np.linalg.eigvalsh(model.metric_) > 0)
    assert model.score(X, Y) > 0.5  # R^2 of the predictive mean on a smooth regression


def test_restarts_keep_the_best_elbo(fitted):
    X, Y, _ = fitted
    many = SBMoERegressor(n_experts=6, max_iter=4, gate_steps=10, n_init=2, random_state=1).fit(X, Y)
    key, _ = jax.random.split(jax.random.key(1))
    hp = many.hyperparams_
    labels = sbmoe.agglomerative_labels(Y, 6)
    finals = [float(sbmoe.fit(k, X, Y, hp, max_iter=4, init_labels=labels).objective) for k in jax.random.split(key, 2)]
    assert many.elbo_trace_[-1] == pytest.approx(max(finals), rel=1e-9)


def test_bad_score_samples_input(fitted):
    X, Y, model = fitted
    with pytest.raises(ValueError, match="shape"):
        model.score_samples(X[:3], Y[:2])


@pytest.mark.parametrize("a, c", [(1e-20, 1e20), (1e20, 1e-20), (2.0**-40, 2.0**40)])
def test_equivariant_far_from_unit_scale_in_float32(a, c):
    """The fit standardises X and Y inside, so (a X, c y) predicts c times what (X, y) does and
    its log-densities are lower by log c; in float32, where the variance of a column at 1e20
    (1e40) overflows and at 1e-20 (1e-40) underflows to a 'constant' column."""
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(60, 2)).astype(np.float32)
    y = (np.sin(3 * X[:, 0]) + 0.1 * rng.normal(size=60)).astype(np.float32)
    ref = SBMoERegressor(**SMALL).fit(X, y)
    Xa, yc = X * np.float32(a), y * np.float32(c)
    got = SBMoERegressor(**SMALL).fit(Xa, yc)
    np.testing.assert_allclose(got.predict(Xa) / c, ref.predict(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.score_samples(Xa, yc) + np.log(c), ref.score_samples(X, y), rtol=1e-4, atol=1e-3)

"""The scikit-learn wrappers: estimator checks, restarts, semi-supervised use, dtypes."""

from __future__ import annotations

import copy
import warnings

import jax
import numpy as np
import pytest
from sklearn.utils import estimator_checks as checks

from bayeskit.estimators import BSMLClassifier, ProbitClassifier
from bayeskit.multilabel import bsml

# The scikit-learn checks that exercise the wrapper's own code: input validation, dtypes,
# multilabel output, cloning and parameters, fitted state, pickling.
BSML_CHECKS = [checks.check_estimators_dtypes, checks.check_fit2d_predict1d, checks.check_estimators_nan_inf,
               checks.check_classifier_multioutput, checks.check_dont_overwrite_parameters, checks.check_fit_score_takes_y,
               checks.check_estimators_unfitted, checks.check_n_features_in, checks.check_estimators_pickle,
               checks.check_fit_check_is_fitted, checks.check_get_params_invariance, checks.check_set_params,
               checks.check_classifiers_train, checks.check_fit2d_1sample, checks.check_estimators_empty_data_messages]


@pytest.mark.parametrize("check", BSML_CHECKS, ids=lambda c: c.__name__)
def test_sklearn_estimator_checks(check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check("BSMLClassifier", BSMLClassifier(n_components=1, max_iter=5, random_state=0))


# PROBIT shares BSML's input handling, prediction and scoring (_MultilabelMixin), which the
# checks above cover; these checks exercise what is its own.
PROBIT_CHECKS = [checks.check_classifiers_train, checks.check_estimators_dtypes, checks.check_fit2d_predict1d,
                 checks.check_classifier_multioutput, checks.check_dont_overwrite_parameters]


@pytest.mark.parametrize("check", PROBIT_CHECKS, ids=lambda c: c.__name__)
def test_probit_sklearn_checks(check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check("ProbitClassifier", ProbitClassifier(max_iter=5, random_state=0))


def _data(rng, n=60, d=5, n_labels=3):
    X = rng.normal(size=(n, d))
    Y = (X[:, :n_labels] + 0.3 * rng.normal(size=(n, n_labels)) > 0).astype(int)
    return X, Y


def test_restarts_keep_the_best_bound(rng):
    X, Y = _data(rng)
    many = BSMLClassifier(n_components=2, n_init=4, max_iter=40, tol=0, random_state=3).fit(X, Y)
    keys = jax.random.split(jax.random.key(3), 4)  # the wrapper's restart keys
    hp = bsml.Hyperparams(n_components=2)
    bounds = [float(bsml.fit(k, X, Y, hp, max_iter=40, tol=0.0).objective) for k in keys]
    np.testing.assert_allclose(many.lower_bound_, max(bounds), rtol=1e-10)
    assert many.n_iter_ == 40 and len(many.lower_bound_trace_) == 40


def test_semisupervised_is_chosen_by_missing_labels(rng):
    X, Y = _data(rng)
    Y = Y.copy()
    Y[::5] = -1
    model = BSMLClassifier(n_components=2, max_iter=20, tol=0, random_state=0).fit(X, Y)
    assert model.hyperparams_.semisupervised
    assert model.predict(X).shape == Y.shape and set(np.unique(model.predict(X))) <= {0, 1}
    with pytest.raises(ValueError, match="values in"):
        BSMLClassifier(n_components=2, semisupervised=False).fit(X, Y)


def test_wrapper_matches_functional_core(rng):
    X, Y = _data(rng)
    model = BSMLClassifier(n_components=2, max_iter=30, tol=0, random_state=7).fit(X, Y)
    hp = bsml.Hyperparams(n_components=2)
    result = bsml.fit(jax.random.key(7), X, Y, hp, max_iter=30, tol=0.0)
    np.testing.assert_allclose(model.predict_proba(X), bsml.predict_proba(result.state, X, hp), rtol=1e-12)
    np.testing.assert_allclose(model.transform(X), X @ np.asarray(result.state.q_mean), rtol=1e-10)
    assert model.components_.shape == (2, X.shape[1])


def test_float32_input_stays_float32(rng):
    X, Y = _data(rng)
    model = ProbitClassifier(max_iter=10, tol=0).fit(X.astype(np.float32), Y)
    assert model.predict_proba(X.astype(np.float32)).dtype == np.float32


def test_one_dimensional_binary_target_with_named_classes(rng):
    X, Y = _data(rng)
    y = np.where(Y[:, 0] == 1, "yes", "no")
    model = ProbitClassifier(max_iter=30, tol=0).fit(X, y)
    assert list(model.classes_) == ["no", "yes"]
    assert model.predict_proba(X).shape == (len(X), 2)
    assert model.score(X, y) > 0.8


def test_probit_save_and_load_roundtrip(rng, tmp_path):
    import bayeskit
    from bayeskit.multilabel import probit

    X, Y = _data(rng)
    result = probit.fit(jax.random.key(0), X, Y, max_iter=10)
    bayeskit.save(tmp_path / "probit", result, probit.Hyperparams())
    loaded, priors = bayeskit.load(tmp_path / "probit")
    np.testing.assert_array_equal(probit.predict_proba(loaded.state, X), probit.predict_proba(result.state, X))


@pytest.mark.parametrize("random_state", [0, 7, 2**31, 2**32 - 1, 2**40, np.random.RandomState(3)])
def test_keys_from_random_state_are_jax_own_seeding_and_splitting(random_state):
    """The estimators' keys come from one compiled program; they are the keys that
    jax.random.key and jax.random.split give for the same seed."""
    from bayeskit.estimators._common import _key

    seed = random_state if isinstance(random_state, int) else np.random.RandomState(3).randint(np.iinfo(np.int32).max)
    data = jax.random.key_data
    np.testing.assert_array_equal(data(_key(copy.deepcopy(random_state))), data(jax.random.key(seed)))
    got, want = _key(copy.deepcopy(random_state), 3), jax.random.split(jax.random.key(seed), 3)
    assert len(got) == 3
    for g, w in zip(got, want):
        np.testing.assert_array_equal(data(g), data(w))


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_keys_from_random_state_follow_jax_default_prng_impl(impl):
    from bayeskit.estimators._common import _key

    default = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", impl)
    try:
        key, keys = _key(5), _key(5, 2)
        want = jax.random.key(5)
    finally:
        jax.config.update("jax_default_prng_impl", default)
    assert jax.random.key_impl(key) == jax.random.key_impl(keys[1]) == jax.random.key_impl(want)
    np.testing.assert_array_equal(jax.random.key_data(key), jax.random.key_data(want))
    np.testing.assert_array_equal(jax.random.key_data(keys[1]), jax.random.key_data(jax.random.split(want, 2)[1]))

"""What users pass and see at the estimators' boundary: DataFrame column names kept and
checked, pandas' nullable and object columns of numbers read as numbers, a missing target
named, seeds of any size distinct, warnings attributed to the caller's line, and data whose
covariance float64 cannot hold refused by name."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pandas as pd
import pytest
from sklearn.exceptions import ConvergenceWarning

from bayeskit import estimators as E
from bayeskit.estimators._common import _key


@pytest.fixture(scope="module")
def frame():
    X = np.random.default_rng(0).standard_normal((40, 3))
    X[:, 1] += 0.5 * X[:, 0]
    return pd.DataFrame(X, columns=["a", "b", "c"])


@pytest.mark.parametrize("make, use", [
    (lambda: E.MinCovDet(n_starts=5, random_state=0), "mahalanobis"),
    (lambda: E.ROBPCA(n_components=2, n_starts=5, n_directions=20, random_state=0), "transform"),
    (lambda: E.SparsePCA(cardinality=2), "transform"),
])
def test_column_names_are_kept_and_checked(frame, make, use):
    """Fitted on a DataFrame, the estimator records its columns, and data whose columns come
    in another order are refused (they were read by position, silently giving other
    numbers); the same columns in the same order give the array's result."""
    est = make().fit(frame)
    assert list(est.feature_names_in_) == ["a", "b", "c"]
    np.testing.assert_allclose(getattr(est, use)(frame), getattr(make().fit(frame.to_numpy()), use)(frame.to_numpy()))
    with pytest.raises(ValueError, match="feature names"):
        getattr(est, use)(frame[["c", "b", "a"]])


def test_nullable_and_object_numbers_are_numbers(frame):
    """pandas' nullable Float64 columns and an object array of numbers fit as the float64
    data they hold; a missing value (pd.NA) is refused with its place."""
    want = E.GraphicalLasso(alpha=0.1).fit(frame.to_numpy()).precision_
    np.testing.assert_allclose(E.GraphicalLasso(alpha=0.1).fit(frame.astype("Float64")).precision_, want)
    np.testing.assert_allclose(E.GraphicalLasso(alpha=0.1).fit(frame.to_numpy().astype(object)).precision_, want)
    missing = frame.astype("Float64")
    missing.iloc[3, 1] = pd.NA
    with pytest.raises(ValueError, match=r"non-finite value\(s\) at index \(3, 1\)"):
        E.GraphicalLasso(alpha=0.1).fit(missing)
    with pytest.raises(ValueError, match="not real numbers"):
        E.GraphicalLasso(alpha=0.1).fit(np.array([["x", 1.0], [2.0, 3.0], [1.0, 0.0]], dtype=object))


def test_a_missing_target_is_named(frame):
    with pytest.raises(ValueError, match="RVMRegressor requires y to be passed, but the target y is None"):
        E.RVMRegressor().fit(frame, None)


def test_seeds_of_any_size_give_distinct_keys():
    """Seeds from 2**32 up keep all their bits (jax.random.key keeps only the lowest 32
    without x64, so 2**32 gave the key of 0, and refuses 2**64 with it); below 2**64 the
    key is the one jax.random.key makes under x64."""
    seeds = [0, 1, 2**32, 2**32 + 1, 2**40, 2**64 + 3]
    with jax.enable_x64(False):
        data = [tuple(np.asarray(jax.random.key_data(_key(s))).tolist()) for s in seeds]
    with jax.enable_x64(True):
        assert data[2] == tuple(np.asarray(jax.random.key_data(jax.random.key(2**32))).tolist())  # JAX's own 64-bit seeding
    assert len(set(data)) == len(seeds)


def test_warnings_point_at_the_callers_line(frame):
    """A warning raised inside a fit names this file (the caller), not the library's lock
    or helper frames, so filterwarnings(module=...) and the printed location work."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        E.GraphicalLasso(alpha=0.01, max_iter=1).fit(frame)
    mine = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert mine and all(w.filename == __file__ for w in mine), [(w.filename, w.lineno) for w in caught]


def test_emrca_in_float32_does_not_warn_of_rounding():
    """The EM/RCA bound's monotonicity is checked to the fit's precision: a float32 fit
    whose bound moved by float32 rounding (9.5e-7 at a bound near 8) is not a decrease."""
    X = np.random.default_rng(3).standard_normal((100, 6))
    with warnings.catch_warnings(), jax.enable_x64(False):
        warnings.simplefilter("error", RuntimeWarning)
        E.EMRCA().fit(X)


@pytest.mark.parametrize("factor", [1e-200, 1e-157, 1e160])
@pytest.mark.parametrize("make", [lambda: E.GraphicalLasso(alpha=0.0), lambda: E.EMRCA(alpha=0.0)])
def test_covariances_beyond_float64_are_refused(frame, make, factor):
    """Data at 1e-200 (covariance 1e-400, 0 in float64) raised ZeroDivisionError; at 1e-157
    (covariance 1e-314, subnormal) the fit returned an infinite precision, at 1e160
    (covariance 1e320, inf) a zero precision, silently. (alpha = 0: a penalty this far from
    the data's scale is refused for its own reason.)"""
    with pytest.raises(ValueError, match="beyond the range of float64"):
        make().fit(frame.to_numpy() * factor)


def test_sparse_pca_fits_with_its_defaults():
    """With neither a cardinality nor a penalty, SparsePCA aims at the paper's five
    non-zero loadings (all of them when there are fewer features): a spike on five of
    twelve features is found, as with ``cardinality=5``."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((200, 12))
    X[:, 2:7] += 2 * rng.standard_normal((200, 1))
    est = E.SparsePCA().fit(X)
    np.testing.assert_array_equal(np.flatnonzero(est.components_[0]), np.arange(2, 7))
    np.testing.assert_allclose(est.components_, E.SparsePCA(cardinality=5).fit(X).components_)
    assert np.count_nonzero(E.SparsePCA().fit(X[:, :3]).components_) == 3


def test_bayesian_lasso_refuses_a_constant_target(frame):
    """A constant y leaves the noise variance without scale (the posterior under the
    prior 1/sigma^2 is improper): refused by name before sampling, not reported as a
    numerical failure."""
    with pytest.raises(ValueError, match="y is constant"):
        E.BayesianLassoRegressor(num_samples=10, num_warmup=10).fit(frame, np.full(len(frame), 3.0))


def test_labels_coded_minus_one_plus_one_and_a_single_class_are_refused():
    """A multilabel Y in {-1, 1} would be read as positives with unobserved entries (every
    prediction 1): refused under semisupervised="auto", with the recoding named; a 1-D y of
    one class gave a second probability column with no class: refused as scikit-learn's
    classifiers refuse it."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3))
    Y = (X[:, :2] > 0).astype(int)
    with pytest.raises(ValueError, match=r"\(Y \+ 1\) // 2"):
        E.BSMLClassifier(n_components=2, max_iter=5).fit(X, 2 * Y - 1)
    for make in (lambda: E.BSMLClassifier(n_components=2, max_iter=5), lambda: E.ProbitClassifier(max_iter=5)):
        with pytest.raises(ValueError, match="one class"):
            make().fit(X, np.ones(30, int))


def test_multilabel_estimators_take_a_sparse_x():
    """A scipy.sparse X (a vectorizer's bag of words) fits and predicts as the dense array."""
    import scipy.sparse

    rng = np.random.default_rng(0)
    X = (rng.random((40, 12)) < 0.2).astype(float)
    Y = np.c_[X[:, 0] + X[:, 1] > 0, X[:, 2] > 0].astype(int)
    for make in (lambda: E.BSMLClassifier(n_components=2, max_iter=5, tol=0, random_state=0),
                 lambda: E.ProbitClassifier(max_iter=5, tol=0, random_state=0)):
        sparse = make().fit(scipy.sparse.csr_matrix(X), Y)
        np.testing.assert_array_equal(sparse.predict_proba(scipy.sparse.csr_matrix(X)), make().fit(X, Y).predict_proba(X))


def test_multilabel_score_weights_its_rows():
    """score(X, Y, sample_weight) of the multilabel classifiers returned the unweighted
    1 - Hamming loss; each row now counts by its weight (scikit-learn's weighted loss)."""
    from sklearn.metrics import hamming_loss

    from bayeskit.estimators import BSMLClassifier, ProbitClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    Y = (X[:, :2] + 0.8 * rng.normal(size=(40, 2)) > 0).astype(int)
    for model in (BSMLClassifier(n_components=2, max_iter=20, random_state=0), ProbitClassifier(max_iter=20)):
        model.fit(X, Y)
        right = np.all(model.predict(X) == Y, axis=1)
        assert right.any() and not right.all()
        assert model.score(X, Y, sample_weight=right.astype(float)) == 1.0
        w = rng.uniform(size=40)
        assert model.score(X, Y, sample_weight=w) == pytest.approx(1 - hamming_loss(Y, model.predict(X), sample_weight=w))


def test_sparse_input_is_declared_where_it_is_taken_and_sparse_pca_transforms_one_row():
    """BSML, the probit classifier and SparsePCA fit scipy.sparse X but their tags said they
    did not (scikit-learn's check_estimator_sparse_tag failed); SparsePCA.transform refused a
    single row, which every other transform takes."""
    import scipy.sparse as sp
    from sklearn.utils.estimator_checks import check_estimator_sparse_tag

    from bayeskit.estimators import BSMLClassifier, ProbitClassifier, SparsePCA

    for model in (BSMLClassifier(n_components=2, max_iter=5, random_state=0), ProbitClassifier(max_iter=5),
                  SparsePCA(cardinality=2)):
        check_estimator_sparse_tag(type(model).__name__, model)
    X = np.random.default_rng(0).normal(size=(30, 4))
    model = SparsePCA(cardinality=2).fit(X)
    np.testing.assert_allclose(model.transform(X[:1]), model.transform(X)[:1], rtol=1e-12)
    np.testing.assert_allclose(model.transform(sp.csr_matrix(X[:1])), model.transform(X)[:1], rtol=1e-12)


def test_sbmoe_fits_its_fixed_sweeps_without_a_convergence_warning():
    """SBMoE runs the paper's fixed number of sweeps (no tolerance to raise): every fit warned
    "raise max_iter or tol", which the estimator has no tol to follow."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    from bayeskit.datasets import sbmoe_synthetic_1d
    from bayeskit.estimators import SBMoERegressor

    X, Y = sbmoe_synthetic_1d(jax.random.key(0), 100)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = SBMoERegressor(n_experts=3, max_iter=3, gate_steps=2, n_gate=4, n_draws=4, random_state=0).fit(X, Y)
    assert model.n_iter_ == 3

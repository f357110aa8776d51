"""scikit-learn workflows around the estimators: output feature names for pandas output and
ColumnTransformer, a failed refit that leaves the earlier fit whole, attributes of an
earlier fit that no longer apply, NotFittedError before a fit, and a score for model
selection of the MCD."""

from __future__ import annotations

import inspect

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bayeskit import estimators as E


@pytest.fixture(scope="module")
def frame():
    X = np.random.default_rng(0).standard_normal((60, 4))
    X[:, 1] += 0.8 * X[:, 0]
    return pd.DataFrame(X, columns=["a", "b", "c", "d"])


@pytest.mark.parametrize("make, prefix", [
    (lambda: E.ROBPCA(n_components=2, n_starts=5, n_directions=20, random_state=0), "robpca"),
    (lambda: E.SparsePCA(n_components=2, cardinality=2), "sparsepca"),
    (lambda: E.BSMLClassifier(n_components=2, max_iter=5, tol=0), "bsmlclassifier"),
])
def test_transformers_name_their_outputs(frame, make, prefix):
    """``get_feature_names_out`` (so ``set_output(transform="pandas")`` and
    ColumnTransformer's names work): one name per output column, the values those of
    ``transform``."""
    Y = (frame.to_numpy()[:, :2] > 0).astype(int)
    est = make()
    with pytest.raises(NotFittedError):
        est.get_feature_names_out()
    pipe = make_pipeline(StandardScaler(), est).set_output(transform="pandas").fit(frame, Y)
    out = pipe.transform(frame)
    assert list(out.columns) == [f"{prefix}0", f"{prefix}1"]
    np.testing.assert_allclose(out.to_numpy(), pipe[-1].set_output(transform="default").transform(
        pipe[0].transform(frame)))
    if prefix == "robpca":
        ct = ColumnTransformer([("r", make(), ["a", "b", "c"])]).fit(frame)
        assert list(ct.get_feature_names_out()) == ["r__robpca0", "r__robpca1"]


def test_a_refused_refit_leaves_the_earlier_fit_whole(frame):
    """A refit refused for a bad parameter or bad data left the new data's feature count
    beside the earlier fit's arrays (score then refused data of the fitted shape)."""
    X = frame.to_numpy()
    est = E.GraphicalLasso(alpha=0.1).fit(frame)
    before = {k: np.copy(v) if isinstance(v, np.ndarray) else v for k, v in vars(est).items()}
    with pytest.raises(ValueError, match="tol"):
        est.set_params(tol=-1.0).fit(X[:, :3])
    est.set_params(tol=1e-4)
    constant = X[:, :3].copy()
    constant[:, 2] = 1.0
    with pytest.raises(ValueError, match="constant"):
        est.fit(constant)
    assert vars(est).keys() == before.keys()
    for k, v in before.items():
        np.testing.assert_array_equal(getattr(est, k), v)
    assert np.isfinite(est.score(frame))
    with pytest.raises(ValueError, match="tol"):  # a refused first fit leaves the estimator unfitted
        _unfitted_after(E.EMRCA(tol=-1.0), X)


def _unfitted_after(est, X):
    """Fit, and whatever happens, check that no fitted attribute is left."""
    try:
        est.fit(X)
    finally:
        assert not [k for k in vars(est) if k.endswith("_") and not k.startswith("_")]


def test_attributes_of_an_earlier_fit_that_no_longer_apply_are_dropped(frame):
    X = frame.to_numpy()
    gl = E.GraphicalLasso(alpha=0.1).fit(frame).fit_covariance(np.cov(X[:, :3].T))
    assert gl.n_features_in_ == 3 and not hasattr(gl, "feature_names_in_")
    rvm = E.RVMRegressor(kernel="rbf").fit(X, X[:, 0])
    assert hasattr(rvm, "relevance_vectors_")
    assert not hasattr(rvm.set_params(kernel="linear").fit(X, X[:, 0]), "relevance_vectors_")


METHODS = ("predict", "predict_proba", "predict_quantiles", "transform", "inverse_transform", "score", "score_samples",
           "decision_function", "mahalanobis", "sample", "predictive", "residual_scores", "get_feature_names_out")


@pytest.mark.parametrize("name", E.__all__)
def test_every_method_before_fit_is_not_fitted(frame, name):
    """Each reading method of an unfitted estimator raises NotFittedError (BSMLClassifier's
    transform and SBMoERegressor's score_samples read the state first)."""
    est = getattr(E, name)()
    X = frame.to_numpy()
    called = 0
    for method in (m for m in METHODS if callable(getattr(est, m, None))):  # BSML has a parameter "predictive"
        fn = getattr(est, method)
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        args = [X, np.zeros(len(X))][: len(required)]
        with pytest.raises(NotFittedError):
            fn(*args)
        called += 1
    assert called >= 1


def test_mcd_scores_the_gaussian_log_likelihood_for_model_selection(frame):
    """score is the mean log-density under N(location_, covariance_) (scipy), so
    GridSearchCV and cross_val_score take the MCD as they take scikit-learn's."""
    X = frame.to_numpy()
    est = E.MinCovDet(n_starts=20, random_state=0).fit(X)
    want = np.mean(stats.multivariate_normal(est.location_, est.covariance_).logpdf(X))
    np.testing.assert_allclose(est.score(X), want, rtol=1e-12)
    search = GridSearchCV(E.MinCovDet(n_starts=20, random_state=0), {"support_fraction": [0.6, 0.9]}, cv=2).fit(X)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))

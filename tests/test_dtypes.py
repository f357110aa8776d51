"""The dtype policy: every estimator, on the bundled data (or scikit-learn's), gives the
same selected variables, components, flagged rows and status whether JAX's default is
float32 (its out-of-the-box setting, with float32 input) or float64. The test process runs
with float64 on; each float32 fit runs inside ``jax.enable_x64(False)``.

Where a fit starts from random draws, the float32 and float64 draws differ (JAX turns
the same random bits into different numbers in each width), so for samplers and
randomly started variational fits the two runs are compared as two fits of the same
model: the same status and discrete structure, and predictive quality within a stated
margin."""

from __future__ import annotations

import warnings

import jax
import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score

from bayeskit import datasets
from bayeskit.datasets import zipf_corpus
from bayeskit.estimators import (
    EMRCA,
    RCA,
    ROBPCA,
    BayesianLassoRegressor,
    BLSRegressor,
    BSMLClassifier,
    FLAPRegressor,
    GraphicalLasso,
    IRMLinkPredictor,
    LFRMLinkPredictor,
    MinCovDet,
    MMSBLinkPredictor,
    ProbitClassifier,
    RVMRegressor,
    SBMoERegressor,
    SparsePCA,
)


def in_both(fit, *arrays):
    """``fit(*arrays)`` under float32 defaults with float32 copies, then under float64."""
    out = []
    for x64, dtype in ((False, np.float32), (True, np.float64)):
        with jax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            out.append(fit(*(np.asarray(a, dtype) for a in arrays)))
    return out


def test_sparse_pca_finds_the_same_supports_under_float32_defaults():
    X, _ = zipf_corpus(300, 1500, topic_size=5)
    with jax.enable_x64(False):
        low = SparsePCA(n_components=3, cardinality=5).fit(X)
    high = SparsePCA(n_components=3, cardinality=5).fit(X)
    assert low.components_.dtype == np.float64
    np.testing.assert_array_equal(low.components_ != 0, high.components_ != 0)
    np.testing.assert_allclose(low.explained_variance_, high.explained_variance_, rtol=1e-10)
    assert np.all(np.count_nonzero(high.components_, axis=1) == 5)


@pytest.mark.parametrize("cls", [BLSRegressor, RVMRegressor, FLAPRegressor])
def test_sparse_regressors_keep_the_same_variables_of_the_diabetes_data(cls):
    X, y = load_diabetes(return_X_y=True)
    low, high = in_both(lambda X, y: cls(kernel="linear").fit(X, y), X, y)
    np.testing.assert_array_equal(low.relevance_indices_, high.relevance_indices_)
    assert 2 <= len(high.relevance_indices_)
    np.testing.assert_allclose(low.predict(X), high.predict(X), rtol=1e-2, atol=1e-2 * np.std(y))


def test_bayesian_lasso_samples_the_same_posterior_of_the_diabetes_data():
    X, y = load_diabetes(return_X_y=True)
    low, high = in_both(lambda X, y: BayesianLassoRegressor(num_samples=1500, num_warmup=300, random_state=0).fit(X, y), X, y)
    width = high.coef_interval_[:, 1] - high.coef_interval_[:, 0]
    assert np.all(np.abs(low.coef_ - high.coef_) < 0.25 * width)  # Monte Carlo error, not a different posterior


@pytest.mark.parametrize("name", ["cars", "octane"])
def test_robpca_chooses_the_same_k_and_flags_the_same_rows(name):
    X = datasets.load_robpca(name)["X"]
    low, high = in_both(lambda X: ROBPCA(random_state=0).fit(X), X)
    assert low.n_components_ == high.n_components_
    np.testing.assert_array_equal(low.labels_, high.labels_)


def test_mcd_keeps_the_same_support_of_the_cars_data():
    X = datasets.load_robpca("cars")["X"]
    low, high = in_both(lambda X: MinCovDet(random_state=0).fit(X), X)
    np.testing.assert_array_equal(low.support_, high.support_)
    np.testing.assert_array_equal(low.raw_support_, high.raw_support_)


def test_graphical_lasso_and_em_rca_find_the_same_edges_of_the_sachs_data():
    X = np.log(datasets.load_sachs())
    low, high = in_both(lambda X: GraphicalLasso(alpha=0.05).fit(X), X)
    edges = lambda m: np.abs(m.precision_) > 1e-6 * np.abs(np.diag(m.precision_)).max()
    np.testing.assert_array_equal(edges(low), edges(high))
    assert 0 < np.count_nonzero(np.triu(edges(high), 1)) < 55
    low, high = in_both(lambda X: EMRCA(alpha=0.1, n_components=2).fit(X), X[:400])
    np.testing.assert_array_equal(edges(low), edges(high))
    assert low.components_.shape == high.components_.shape


def test_rca_finds_the_same_residual_components_of_the_simulation():
    sim = datasets.load_rca_simulation()
    low, high = in_both(lambda Y, S: RCA().fit(Y, S), sim["Y"], sim["Sigma"])
    assert np.count_nonzero(low.eigenvalues_ > 1) == np.count_nonzero(high.eigenvalues_ > 1)
    np.testing.assert_allclose(low.eigenvalues_, high.eigenvalues_, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("prior", ["entrywise", "ard"])
def test_bsml_fits_raw_emotions_features_in_both_dtypes(emotions, prior):
    """The raw Emotions features span 0.0016 to 30 in scale: the ARD fit's eigenvalues of
    X'X must survive float32 (they came out as rounding noise, and the fit diverged)."""
    Xtr, Ytr, Xte, Yte = emotions
    low, high = in_both(lambda X: BSMLClassifier(n_components=4, prior=prior, max_iter=60, random_state=0).fit(X, Ytr), Xtr)
    np.testing.assert_array_equal(low.active_components_, high.active_components_)
    accuracy = [np.mean(m.predict(Xte.astype(m.dtype_)) == Yte) for m in (low, high)]
    assert accuracy[1] > 0.7 and abs(accuracy[0] - accuracy[1]) < 0.02


def test_probit_classifier_predicts_the_same_labels(emotions):
    Xtr, Ytr, Xte, _ = emotions
    mu, sd = Xtr.mean(0), Xtr.std(0)
    low, high = in_both(lambda X: ProbitClassifier(max_iter=60, random_state=0).fit(X, Ytr), (Xtr - mu) / sd)
    agree = np.mean(low.predict(((Xte - mu) / sd).astype(np.float32)) == high.predict((Xte - mu) / sd))
    assert agree > 0.99


def test_sbmoe_fits_the_same_conditional_density_in_both_dtypes():
    X, Y = (np.asarray(a) for a in datasets.sbmoe_synthetic_1d(jax.random.key(0), 200))
    Xt, Yt = (np.asarray(a) for a in datasets.sbmoe_synthetic_1d(jax.random.key(1), 200))
    low, high = in_both(lambda X, Y: SBMoERegressor(n_experts=8, max_iter=25, random_state=0).fit(X, Y), X, Y)
    density = [float(np.mean(m.score_samples(Xt.astype(m.dtype_), Yt.astype(m.dtype_)))) for m in (low, high)]
    assert np.isfinite(density).all() and abs(density[0] - density[1]) < 0.15


@pytest.mark.parametrize("make", [
    lambda: LFRMLinkPredictor(n_features_max=8, num_warmup=50, num_samples=50, random_state=0),
    lambda: IRMLinkPredictor(num_warmup=50, num_samples=50, random_state=0),
    lambda: MMSBLinkPredictor(n_blocks=4, n_init=2, max_iter=100, random_state=0),
], ids=["lfrm", "irm", "mmsb"])
def test_link_predictors_rank_held_out_nations_links_alike(make):
    nations = datasets.load_relational("nations")
    Y, mask = nations["Y"], nations["mask"]
    train, test = datasets.holdout_split(Y, mask, symmetric=False)
    auc = []
    for x64 in (False, True):
        with jax.enable_x64(x64), warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            p = make().fit(Y, mask=train).predict_proba()
        assert p.dtype == (np.float64 if x64 else np.float32)
        auc.append(roc_auc_score(Y[test], p[test]))
    assert min(auc) > 0.8 and abs(auc[0] - auc[1]) < 0.05

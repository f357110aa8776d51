"""The link-prediction estimators: shapes, the IRM start, held-out accuracy on a planted
network, and their errors."""

import numpy as np
import pytest
from scipy.special import expit
from sklearn.metrics import roc_auc_score

from bayeskit.estimators import IRMLinkPredictor, LFRMLinkPredictor


def _network(seed=0, n=24):
    rng = np.random.default_rng(seed)
    Z = np.eye(3)[rng.integers(0, 3, n)]  # three planted classes
    W = np.array([[3.0, -3, -3], [-3, 3, -3], [-3, -3, 3]])
    P = expit(Z @ W @ Z.T - 0.5)
    Y = (rng.random((n, n)) < P).astype(np.int8)
    off = ~np.eye(n, dtype=bool)
    test = (rng.random((n, n)) < 0.2) & off
    return Y, P, off & ~test, test


def test_lfrm_with_irm_start_and_two_chains():
    Y, P, train, test = _network()
    est = LFRMLinkPredictor(n_features_max=8, init="irm", num_warmup=25, num_samples=25, num_chains=2, random_state=0)
    prob = est.fit(Y, train).predict_proba()
    assert prob.shape == Y.shape and est.samples_["Z"].shape[:2] == (2, 25)
    assert roc_auc_score(Y[test], prob[test]) > roc_auc_score(Y[test], P[test]) - 0.05
    assert 1 <= est.n_features_ <= 8


def test_irm_predictor():
    Y, P, train, test = _network(1)
    est = IRMLinkPredictor(n_clusters_max=8, num_warmup=20, num_samples=20, random_state=0)
    prob = est.fit(Y[None], train[None]).predict_proba()
    assert prob.shape == (1,) + Y.shape
    assert roc_auc_score(Y[test], prob[0][test]) > roc_auc_score(Y[test], P[test]) - 0.05


def test_errors():
    Y, _, train, _ = _network()
    with pytest.raises(ValueError, match="init"):
        LFRMLinkPredictor(init="kmeans").fit(Y)
    with pytest.raises(NotImplementedError, match="covariates"):
        LFRMLinkPredictor().fit(Y, covariates=np.ones((24, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        IRMLinkPredictor(symmetric=True).fit(Y)
    with pytest.raises(ValueError, match="num_samples"):
        IRMLinkPredictor(num_samples=0).fit(Y)

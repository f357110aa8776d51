"""The link-prediction estimators: shapes, the IRM start, held-out accuracy on a planted
network, their errors, and the warning when the chains have not mixed."""

import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import roc_auc_score

from bayeskit.core.mcmc import diagnostics
from bayeskit.estimators import IRMLinkPredictor, LFRMLinkPredictor
from bayeskit.estimators._common import ESS_MIN, R_HAT_MAX, warn_unmixed


def _network(seed=0, n=24):
    rng = np.random.default_rng(seed)
    Z = np.eye(3)[rng.integers(0, 3, n)]  # three planted classes
    W = np.array([[3.0, -3, -3], [-3, 3, -3], [-3, -3, 3]])
    P = expit(Z @ W @ Z.T - 0.5)
    Y = (rng.random((n, n)) < P).astype(np.int8)
    off = ~np.eye(n, dtype=bool)
    test = (rng.random((n, n)) < 0.2) & off
    return Y, P, off & ~test, test


@pytest.mark.parametrize("births", ["prior", "fitted"])
def test_lfrm_with_irm_start_and_two_chains(births):
    Y, P, train, test = _network()
    est = LFRMLinkPredictor(n_features_max=8, init="irm", births=births, num_warmup=25, num_samples=25, num_chains=2, random_state=0)
    prob = est.fit(Y, train).predict_proba()
    assert prob.shape == Y.shape and est.samples_["Z"].shape[:2] == (2, 25) and est.hyperparams_.births == births
    assert roc_auc_score(Y[test], prob[test]) > roc_auc_score(Y[test], P[test]) - 0.05
    assert 1 <= est.n_features_ <= 8
    assert set(est.diagnostics_) == {"log_joint", "n_features"} and est.diagnostics_["log_joint"]["ess"] > 0


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
    with pytest.raises(ValueError, match="births"):
        LFRMLinkPredictor(births="data").fit(Y)
    with pytest.raises(ValueError, match="covariates must be a dict"):
        LFRMLinkPredictor().fit(Y, covariates=np.ones((24, 2)))
    with pytest.raises(ValueError, match="symmetric"):
        IRMLinkPredictor(symmetric=True).fit(Y)
    with pytest.raises(ValueError, match="num_samples"):
        IRMLinkPredictor(num_samples=0).fit(Y)


def test_covariate_errors():
    Y = np.zeros((5, 5), np.int8)
    est = LFRMLinkPredictor(num_warmup=1, num_samples=1)
    with pytest.raises(ValueError, match="pair covariates"):
        est.fit(Y, covariates={"pair": np.zeros((5, 4))})
    with pytest.raises(ValueError, match="sender covariates"):
        est.fit(Y, covariates={"sender": np.zeros((4, 2))})
    with pytest.raises(ValueError, match="non-finite"):
        est.fit(Y, covariates={"receiver": np.full((5, 1), np.nan)})
    with pytest.raises(ValueError, match="keys among"):
        est.fit(Y, covariates={"distance": np.zeros((5, 5))})
    with pytest.raises(ValueError, match="no receiver"):
        LFRMLinkPredictor(symmetric=True).fit(Y, covariates={"receiver": np.zeros((5, 1))})
    with pytest.raises(ValueError, match="without covariates"):
        IRMLinkPredictor().fit(Y, covariates={"sender": np.zeros((5, 1))})


def test_lfrm_with_covariates_and_offsets():
    """The full model through the estimator: a sender covariate that explains the links
    out of each object, and per-object offsets; the draws carry every term."""
    Y, P, train, test = _network(2)
    x = np.random.default_rng(3).normal(size=(24, 1))
    Y = np.where(x > 1.0, 1, Y).astype(np.int8)  # objects with large x link to everyone
    est = LFRMLinkPredictor(n_features_max=8, offsets=True, num_warmup=20, num_samples=20, random_state=0)
    prob = est.fit(Y, train, covariates={"sender": x}).predict_proba()
    assert prob.shape == Y.shape
    assert est.samples_["beta_p"].shape == (1, 20, 1, 1) and est.samples_["a"].shape == (1, 20, 1, 24)
    assert est.samples_["beta_c"].shape == (1, 20, 1, 0)
    assert float(np.mean(est.samples_["beta_p"])) > 0
    assert roc_auc_score(Y[test], prob[test]) > 0.9


def test_a_short_unmixed_run_warns_with_its_r_hat():
    Y, _, train, _ = _network()
    with pytest.warns(ConvergenceWarning, match=r"have not mixed: log_joint \(R-hat [0-9.]+, ESS"):
        est = LFRMLinkPredictor(n_features_max=8, num_warmup=0, num_samples=8, num_chains=2, random_state=0).fit(Y, train)
    bad = est.diagnostics_["log_joint"]
    assert bad["r_hat"] > R_HAT_MAX or bad["ess"] < ESS_MIN


def test_mixed_draws_pass_silently_and_unmixed_ones_are_named():
    rng = np.random.default_rng(0)
    iid = diagnostics({"x": rng.normal(size=(4, 500)), "constant": np.ones((4, 500)), "Z": np.ones((4, 500, 3))})
    assert set(iid) == {"x", "constant"}  # by default every scalar draw (chain, draw), not Z
    assert iid["x"]["r_hat"] < 1.01 and iid["x"]["ess"] > 1000 and np.isnan(iid["constant"]["r_hat"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_unmixed(iid, "M")  # mixed draws and NaN diagnostics: no warning
    apart = diagnostics({"x": rng.normal(size=(2, 500)) + np.array([[0.0], [3.0]])}, ("x",))
    with pytest.warns(ConvergenceWarning, match=r"M: the chains have not mixed: x \(R-hat [2-9]"):
        warn_unmixed(apart, "M")

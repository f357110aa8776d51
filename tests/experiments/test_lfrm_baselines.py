"""The LFRM experiment's model-free rows on a network with planted structure."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from bayeskit.datasets import holdout_split
from bayeskit.experiments.lfrm_link_prediction import baseline_aucs, roc_auc


def test_baselines_come_near_the_oracle_on_two_planted_communities():
    """Two communities, links inside with probability 0.6 and across with 0.05. The oracle
    scores a pair by whether its ends share a community; the best AUC any score can expect
    is about its own. Both baselines see only the training links and must come within 0.08
    of it, far above chance."""
    rng = np.random.default_rng(0)
    z = np.repeat([0, 1], 30)
    same = z[:, None] == z[None]
    upper = np.triu(rng.random((60, 60)) < np.where(same, 0.6, 0.05), 1)
    Y = (upper | upper.T).astype(np.int8)[None]
    mask = ~np.eye(60, dtype=bool)[None]
    train, test = holdout_split(Y, mask, symmetric=True, seed=1)
    pairs = test[0] & np.triu(np.ones((60, 60), bool), 1)
    oracle = roc_auc_score(Y[0][pairs], same[pairs])
    aucs = baseline_aucs(Y, train, test, symmetric=True, single=False)
    assert set(aucs) == {"Katz", "common neighbours"}
    for result in aucs.values():
        assert oracle - 0.08 < result["auc_mean"] and result["auc_mean"] > 0.65 and result["paper"] is None


def test_the_rank_auc_is_scikit_learns():
    """Continuous scores, scores with many ties (a coarse probability, as a model's on
    few cells) and perfectly separating ones give scikit-learn's AUC; one class alone,
    labels other than 0/1 and a NaN score are refused."""
    rng = np.random.default_rng(3)
    for n in (2, 7, 40, 500):
        y = rng.random(n) < 0.3
        y[:2] = [True, False]
        for score in (rng.normal(size=n) + y, np.round(rng.random(n) + 0.3 * y, 1), y.astype(float)):
            np.testing.assert_allclose(roc_auc(y.astype(np.int8), score), roc_auc_score(y, score), rtol=1e-12)
    with pytest.raises(ValueError, match="both classes"):
        roc_auc(np.ones(5), np.arange(5.0))
    with pytest.raises(ValueError, match="labels 0 and 1"):
        roc_auc(np.array([-1, 1, 1]), np.arange(3.0))
    with pytest.raises(ValueError, match="finite scores; 1 are not"):
        roc_auc(np.array([0, 1, 1]), np.array([0.1, np.nan, 0.3]))

"""The LFRM experiment's model-free rows on a network with planted structure."""

import numpy as np
from sklearn.metrics import roc_auc_score

from bayeskit.datasets import holdout_split
from bayeskit.experiments.lfrm_link_prediction import baseline_aucs


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

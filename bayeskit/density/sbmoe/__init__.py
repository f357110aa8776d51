"""SBMoE: the similarity-based Bayesian mixture of experts.

Zhang, Bokrantz & Olsson, "A similarity-based Bayesian mixture-of-experts model"
(arXiv 2012.02130). C Gaussian experts with normal-inverse-Wishart priors; a gate that
first picks a training point by a softmax of Mahalanobis distances (precision
Lambda ~ Wishart) and then an expert by that point's responsibilities. Mean-field VB
(Algorithm 1): E-step (Proposition 1) factorised into matrix products, M-step I
(Proposition 2), M-step II by optax sub-steps (Proposition 4) or projection
(Proposition 3), linearisation points s = softmax(A) or by the LP (8) solved by sort and
fill. The defaults depart from the paper where its gate would not localise (see
:class:`Hyperparams`; ``Hyperparams.paper`` gives the paper's method).

    from bayeskit.density import sbmoe
    result = sbmoe.fit(key, X, Y, sbmoe.Hyperparams(n_experts=32))
    mix = sbmoe.predictive(key, result.state, X_new, hparams)
    mix.log_prob(Y_new), mix.mean, mix.sample(key, 100), mix.quantile(0.9)
"""

from bayeskit.core.linalg import pairwise_sqdist
from bayeskit.density.sbmoe.estep import EStep, estep, gate_logits, scatter
from bayeskit.density.sbmoe.gate import GateParams, bartlett, gate_loss
from bayeskit.density.sbmoe.inference import (
    DEFAULT_OPTIMIZER,
    State,
    agglomerative_labels,
    elbo_terms,
    fit,
    init,
    kmeans_pp_labels,
    mean_precision,
    objective,
    resolved_priors,
    update,
)
from bayeskit.density.sbmoe.model import (
    Data,
    Experts,
    Hyperparams,
    Priors,
    expected_loglik,
    kl_experts,
    kl_gate,
    kl_wishart,
    linearised_b,
    niw_update,
    prepare,
    solve_lp,
)
from bayeskit.density.sbmoe.predictive import Mixture, predictive

__all__ = [
    "DEFAULT_OPTIMIZER", "Data", "EStep", "Experts", "GateParams", "Hyperparams", "Mixture", "Priors", "State",
    "agglomerative_labels", "bartlett", "elbo_terms", "estep", "expected_loglik", "fit", "gate_logits", "gate_loss",
    "init", "kl_experts", "kl_gate", "kl_wishart", "kmeans_pp_labels", "linearised_b", "mean_precision", "niw_update", "objective",
    "pairwise_sqdist", "predictive", "prepare", "resolved_priors", "scatter", "solve_lp", "update",
]

"""The Indian buffet process: prior samplers and probabilities (``prior``) and the
linear-Gaussian latent feature model with its collapsed Gibbs sampler
(``linear_gaussian``)."""

from bayeskit.relational.ibp import linear_gaussian, prior
from bayeskit.relational.ibp.linear_gaussian import (
    CollapsedGibbs,
    Hyperparams,
    feature_means,
    log_likelihood,
    sample_posterior,
    to_inference_data,
)
from bayeskit.relational.ibp.prior import (
    harmonic,
    left_ordered,
    log_prob,
    log_prob_matrix,
    sample_buffet,
    sample_finite,
    sample_stick_breaking,
)

__all__ = [
    "CollapsedGibbs", "Hyperparams", "feature_means", "harmonic", "left_ordered", "linear_gaussian", "log_likelihood",
    "log_prob", "log_prob_matrix", "prior", "sample_buffet", "sample_finite", "sample_posterior", "sample_stick_breaking", "to_inference_data",
]

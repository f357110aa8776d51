"""Reading a BSML / BSML+ARD / BSSML fit (:mod:`bayeskit.multilabel.bsml`, whose docstring
holds the notation): embeddings of new inputs, the predictive scores and label
probabilities of Section 2.4 (Section 3.2's normalisation for BSSML), and which of the R
dimensions ARD kept.

``state`` and ``hparams`` are a fit's :class:`~bayeskit.multilabel.bsml.State` and
:class:`~bayeskit.multilabel.bsml.Hyperparams`.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from bayeskit.core import validation
from bayeskit.core.chunks import map_blocks
from bayeskit.core.device import as_array, program_input
from bayeskit.multilabel import probit

PREDICTIVES = ("consistent", "author")


def transform(state, X: Float[Array, "m d"], *, chunk_size: int | None = None) -> Array:
    """Embeddings ``E[z*] = <Q>' x*`` of new inputs, shape (m, R), ``chunk_size`` rows at a time."""
    validation.check_new_inputs(X, state.q_mean.shape[-2])
    return map_blocks(lambda x: x @ state.q_mean, as_array(X, state.q_mean.dtype), chunk_size)


def predict_scores(state, X: Float[Array, "m d"], *, chunk_size: int | None = None) -> tuple[Array, Array]:
    """Mean and variance of the predictive scores ``t*`` (Section 2.4), each (m, L),
    ``chunk_size`` rows at a time."""
    validation.check_new_inputs(X, state.q_mean.shape[-2])
    rows = lambda x: probit.predictive_scores(state.classifier, x @ state.q_mean)  # noqa: E731
    return map_blocks(rows, as_array(X, state.q_mean.dtype), chunk_size)


def predict_proba(
    state,
    X: Float[Array, "m d"],
    hparams,
    *,
    predictive: str = "consistent",
    chunk_size: int | None = None,
) -> Array:
    """``P(y* = 1 | x*)`` for every label, shape (m, L), one compiled program.

    ``predictive="consistent"`` divides the mean score by its standard deviation (a
    proper probit predictive); ``"author"`` divides by the variance as the author's code
    does (same 0.5-threshold decisions). BSSML normalises over the two sides of the
    low-density region (Section 3.2). ``chunk_size`` bounds the rows processed at once.
    ``X`` may be anything array-like (e.g. a pandas DataFrame), as in :func:`bayeskit.multilabel.bsml.fit`.
    """
    validation.check_choice("predictive", predictive, PREDICTIVES)
    validation.check_new_inputs(X, state.q_mean.shape[-2])
    return _predict_proba(state, program_input(X, state.q_mean.dtype), hparams, predictive=predictive, chunk_size=chunk_size)


@partial(jax.jit, static_argnames=("predictive", "chunk_size"))
def _predict_proba(state, X, hparams, *, predictive: str, chunk_size: int | None) -> Array:
    priors = hparams.classifier_priors()

    def rows(x):
        mean, var = predict_scores(state, x)
        return probit.predictive_probability(mean, var, priors, hparams.semisupervised, predictive)

    return map_blocks(rows, X.astype(state.q_mean.dtype), chunk_size)


def component_relevance(state) -> Array:
    """``E[q_s' q_s]`` per column of Q: near zero for a dimension that ARD switched off."""
    return jnp.sum(state.q_mean**2 + state.q_var, axis=0)


@jax.jit
def active_components(state, threshold: float = 1e-3) -> Array:
    """Boolean mask of the dimensions that survive: relevance above ``threshold`` times
    the largest relevance."""
    rel = component_relevance(state)
    return rel > threshold * jnp.max(rel)


__all__ = ["PREDICTIVES", "transform", "predict_scores", "predict_proba", "component_relevance", "active_components"]

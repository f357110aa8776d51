"""Multilabel metrics used by the papers: hamming loss, average AUC, macro and micro F1.

All take ``Y_true`` of shape (n_samples, n_labels) in {0, 1}; decisions threshold
probabilities at 0.5 unless given as {0, 1}. They are pure JAX (jit/vmap friendly).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, ArrayLike


def _as_decisions(Y_pred: ArrayLike) -> Array:
    Y_pred = jnp.asarray(Y_pred)
    if jnp.issubdtype(Y_pred.dtype, jnp.floating):
        return Y_pred > 0.5
    return Y_pred > 0


def hamming_loss(Y_true: ArrayLike, Y_pred: ArrayLike) -> Array:
    """Fraction of (instance, label) entries predicted wrongly."""
    wrong = jnp.asarray(Y_true).astype(bool) != _as_decisions(Y_pred)
    return jnp.mean(wrong.astype(jnp.result_type(float)))


def _auc_one(y: Array, score: Array) -> Array:
    """ROC AUC of one label by the rank-sum (Mann-Whitney) formula with mid-ranks for ties."""
    sorted_scores = jnp.sort(score)
    lo = jnp.searchsorted(sorted_scores, score, side="left")
    hi = jnp.searchsorted(sorted_scores, score, side="right")
    ranks = (lo + hi + 1) / 2.0
    pos = y.astype(bool)
    n_pos = jnp.sum(pos)
    n_neg = y.shape[0] - n_pos
    rank_sum = jnp.sum(jnp.where(pos, ranks, 0.0))
    auc = (rank_sum - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)
    return jnp.where((n_pos > 0) & (n_neg > 0), auc, jnp.nan)


def auc_per_label(Y_true: ArrayLike, scores: ArrayLike) -> Array:
    """ROC AUC of each label (NaN for a label with a single class in ``Y_true``)."""
    return jax.vmap(_auc_one, in_axes=1)(jnp.asarray(Y_true), jnp.asarray(scores))


def average_auc(Y_true: ArrayLike, scores: ArrayLike) -> Array:
    """Mean ROC AUC over the labels that have both classes in ``Y_true``."""
    return jnp.nanmean(auc_per_label(Y_true, scores))


def _counts(Y_true: ArrayLike, Y_pred: ArrayLike, axis):
    y = jnp.asarray(Y_true).astype(bool)
    p = _as_decisions(Y_pred)
    tp = jnp.sum(y & p, axis=axis)
    fp = jnp.sum(~y & p, axis=axis)
    fn = jnp.sum(y & ~p, axis=axis)
    return tp, fp, fn


def _f1(tp, fp, fn):
    denom = 2 * tp + fp + fn
    return jnp.where(denom > 0, 2 * tp / jnp.maximum(denom, 1), 0.0)


def macro_f1(Y_true: ArrayLike, Y_pred: ArrayLike) -> Array:
    """Mean over labels of the F1 score (0 for a label never present nor predicted)."""
    return jnp.mean(_f1(*_counts(Y_true, Y_pred, axis=0)))


def micro_f1(Y_true: ArrayLike, Y_pred: ArrayLike) -> Array:
    """F1 score of all (instance, label) entries pooled."""
    return _f1(*_counts(Y_true, Y_pred, axis=None))


REPORT = {"hamming_loss": hamming_loss, "average_auc": average_auc, "macro_f1": macro_f1, "micro_f1": micro_f1}


@jax.jit
def _report(Y_true: Array, proba: Array) -> dict[str, Array]:
    return {name: metric(Y_true, proba) for name, metric in REPORT.items()}


def multilabel_report(Y_true: ArrayLike, proba: ArrayLike) -> dict[str, float]:
    """The four metrics of the paper from predicted probabilities, as Python floats (one
    compiled program for all four)."""
    return {name: float(v) for name, v in _report(jnp.asarray(Y_true), jnp.asarray(proba)).items()}

"""Multilabel metrics of ``bayeskit.multilabel.metrics`` against scikit-learn.

The metrics are evaluated through one jitted function (compiled once per input
shape/dtype); ``multilabel_report`` (its own program of all four) is checked the same way.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn import metrics as skm

from bayeskit.multilabel import metrics as bm

# hamming_loss is jnp.mean of a bool array, which JAX computes in float32 even with x64
# enabled (the other metrics come out in float64): compare it at float32 resolution.
HL_RTOL = 1e-6
N, L = 200, 5


@jax.jit
def _decision_metrics(Y, P):
    return {"hamming_loss": bm.hamming_loss(Y, P), "macro_f1": bm.macro_f1(Y, P), "micro_f1": bm.micro_f1(Y, P)}


@jax.jit
def _auc_metrics(Y, S):
    return {"auc_per_label": bm.auc_per_label(Y, S), "average_auc": bm.average_auc(Y, S)}


def _ours(Y, P, *, auc=True):
    Y, P = jnp.asarray(Y), jnp.asarray(P)
    out = dict(_decision_metrics(Y, P))
    if auc:
        out.update(_auc_metrics(Y, P))
    return {k: np.asarray(v) for k, v in out.items()}


def _data(seed, *, ties=False):
    rng = np.random.default_rng(seed)
    latent = rng.standard_normal((N, L))
    Y = (latent + 0.8 * rng.standard_normal((N, L)) > 0.3).astype(np.int8)
    proba = 1 / (1 + np.exp(-1.5 * latent))
    if ties:  # coarse scores: many ties within each label, across both classes
        proba = np.round(proba * 4) / 4
    return Y, proba


def _sk_auc_per_label(Y, S):
    return np.array([skm.roc_auc_score(Y[:, j], S[:, j]) for j in range(Y.shape[1])])


def _check_decisions(ours, Y, D):
    np.testing.assert_allclose(float(ours["hamming_loss"]), skm.hamming_loss(Y, D), rtol=HL_RTOL)
    np.testing.assert_allclose(
        float(ours["macro_f1"]), skm.f1_score(Y, D, average="macro", zero_division=0), rtol=1e-12
    )
    np.testing.assert_allclose(
        float(ours["micro_f1"]), skm.f1_score(Y, D, average="micro", zero_division=0), rtol=1e-12
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_probability_input_against_sklearn(seed):
    Y, P = _data(seed)
    D = (P > 0.5).astype(int)
    assert 0.2 < D.mean() < 0.8
    ours = _ours(Y, P)
    _check_decisions(ours, Y, D)
    want = _sk_auc_per_label(Y, P)
    np.testing.assert_allclose(ours["auc_per_label"], want, rtol=1e-12)
    np.testing.assert_allclose(float(ours["average_auc"]), want.mean(), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int8, np.int64, bool])
def test_integer_decisions_against_sklearn(dtype):
    Y, P = _data(3)
    D = (P > 0.5).astype(dtype)
    _check_decisions(_ours(Y, D, auc=False), Y, D.astype(int))


def test_auc_with_ties_against_sklearn():
    Y, S = _data(5, ties=True)
    assert all(len(np.unique(S[:, j])) <= 5 for j in range(L))
    want = _sk_auc_per_label(Y, S)
    ours = _ours(Y, S)
    np.testing.assert_allclose(ours["auc_per_label"], want, rtol=1e-12)
    np.testing.assert_allclose(float(ours["average_auc"]), want.mean(), rtol=1e-12)


def test_auc_all_tied_perfect_and_reversed():
    Y, _ = _data(6)
    tied = np.full(Y.shape, 0.3)
    np.testing.assert_allclose(_ours(Y, tied)["auc_per_label"], _sk_auc_per_label(Y, tied), rtol=1e-12)
    np.testing.assert_allclose(_ours(Y, tied)["auc_per_label"], 0.5)
    S = Y + 0.01 * np.arange(N)[:, None] / N
    np.testing.assert_allclose(_ours(Y, S)["auc_per_label"], 1.0)
    np.testing.assert_allclose(_ours(Y, -S)["auc_per_label"], 0.0)


def test_auc_one_class_label_is_nan_and_skipped_in_average():
    Y, S = _data(8)
    Y[:, 1] = 1  # only positives
    Y[:, 3] = 0  # only negatives
    ours = _ours(Y, S)
    per = ours["auc_per_label"]
    assert np.isnan(per[1]) and np.isnan(per[3])
    ok = [j for j in range(L) if j not in (1, 3)]
    want = _sk_auc_per_label(Y[:, ok], S[:, ok])
    np.testing.assert_allclose(per[ok], want, rtol=1e-12)
    np.testing.assert_allclose(float(ours["average_auc"]), want.mean(), rtol=1e-12)


def test_threshold_is_strictly_above_half():
    Y, P = _data(9)
    P[:20] = 0.5  # exactly 0.5 is a negative decision, as in P > 0.5
    P[20:40] = np.nextafter(0.5, 1.0)
    _check_decisions(_ours(Y, P), Y, (P > 0.5).astype(int))
    # Integer decisions are positive when > 0, probabilities when > 0.5.
    ones = np.ones((N, L), np.int8)
    assert float(_ours(ones, ones, auc=False)["hamming_loss"]) == 0.0
    assert float(_ours(ones, np.full((N, L), 0.5))["hamming_loss"]) == 1.0


def test_f1_when_a_label_is_never_present_nor_predicted():
    Y, P = _data(4)
    Y[:, 2] = 0
    P[:, 2] = 0.1
    D = (P > 0.5).astype(int)
    assert skm.f1_score(Y, D, average=None, zero_division=0)[2] == 0.0
    _check_decisions(_ours(Y, P), Y, D)
    # Nothing present and nothing predicted at all: both F1 scores are 0 (zero_division=0).
    Z = np.zeros((N, L), np.int8)
    ours = _ours(Z, Z, auc=False)
    assert float(ours["micro_f1"]) == skm.f1_score(Z, Z, average="micro", zero_division=0) == 0.0
    assert float(ours["macro_f1"]) == skm.f1_score(Z, Z, average="macro", zero_division=0) == 0.0


def test_float32_scores():
    Y, P = _data(11)
    P32 = P.astype(np.float32)
    ours = _ours(Y, P32)
    _check_decisions(ours, Y, (P32 > 0.5).astype(int))
    np.testing.assert_allclose(ours["auc_per_label"], _sk_auc_per_label(Y, P32), rtol=1e-6)


def test_multilabel_report():
    Y, P = _data(10)
    rep = bm.multilabel_report(Y, P)
    assert set(rep) == {"hamming_loss", "average_auc", "macro_f1", "micro_f1"}
    assert all(type(v) is float for v in rep.values())
    D = (P > 0.5).astype(int)
    np.testing.assert_allclose(rep["hamming_loss"], skm.hamming_loss(Y, D), rtol=HL_RTOL)
    np.testing.assert_allclose(rep["average_auc"], _sk_auc_per_label(Y, P).mean(), rtol=1e-12)
    np.testing.assert_allclose(rep["macro_f1"], skm.f1_score(Y, D, average="macro", zero_division=0), rtol=1e-12)
    np.testing.assert_allclose(rep["micro_f1"], skm.f1_score(Y, D, average="micro", zero_division=0), rtol=1e-12)

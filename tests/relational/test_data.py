"""relational.data: what counts as a relation array and as an observation mask."""

from __future__ import annotations

import numpy as np
import pytest

from bayeskit.relational.data import check_covariates, check_relations


def _links():
    return (np.random.default_rng(0).random((6, 6)) < 0.4).astype(int)


def test_boolean_and_zero_one_masks_are_the_same_mask():
    Y = _links()
    observed = np.random.default_rng(1).random((6, 6)) < 0.7
    a = check_relations(Y, observed)
    b = check_relations(Y, observed.astype(float))
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


@pytest.mark.parametrize("mask, found", [
    (np.full((6, 6), np.nan), "values other than 0 and 1"),  # NaN was True: every cell observed
    (np.full((6, 6), 0.5), "values other than 0 and 1"),
    (np.full((6, 6), "False"), "dtype <U5"),  # a non-empty string was True
])
def test_masks_that_are_not_boolean_are_refused(mask, found):
    with pytest.raises(ValueError, match=f"mask must be boolean.*{found}"):
        check_relations(_links(), mask)


@pytest.mark.parametrize("Y", [_links() + 0j, _links().astype(str), _links().astype(object)])
def test_relations_that_are_not_real_numbers_are_refused(Y):
    with pytest.raises(ValueError, match="Y must be a real numeric array"):
        check_relations(Y)


def test_symmetric_relations_ignore_unobserved_cells():
    """Cells outside the mask are ignored, so NaN or disagreeing orientations there do not
    make a relation asymmetric; observed cells and the mask must still be symmetric."""
    Y = _links()
    Y = np.triu(Y, 1) + np.triu(Y, 1).T
    mask = ~np.eye(6, dtype=bool)
    mask[0, 1] = mask[1, 0] = False
    Y_nan = Y.astype(float)
    Y_nan[0, 1], Y_nan[1, 0] = np.nan, 1.0
    checked, _ = check_relations(Y_nan, mask, symmetric=True)
    np.testing.assert_array_equal(checked[0], np.where(mask, Y, 0))
    Y_bad = Y.copy()
    Y_bad[2, 3] = 1 - Y_bad[3, 2]
    with pytest.raises(ValueError, match="symmetric"):
        check_relations(Y_bad, mask, symmetric=True)
    one_sided = mask.copy()
    one_sided[2, 3] = False
    with pytest.raises(ValueError, match="symmetric"):
        check_relations(Y, one_sided, symmetric=True)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # a few sweeps only
def test_a_symmetric_estimator_fits_relations_with_unobserved_nan():
    from bayeskit.estimators import MMSBLinkPredictor

    Y = _links().astype(float)
    Y = np.triu(Y, 1) + np.triu(Y, 1).T
    mask = ~np.eye(6, dtype=bool)
    mask[0, 1] = mask[1, 0] = False
    Y[0, 1] = Y[1, 0] = np.nan
    P = MMSBLinkPredictor(n_blocks=2, max_iter=3, n_init=1, symmetric=True, random_state=0).fit(Y, mask).predict_proba()
    assert P.shape == (6, 6) and np.all(np.isfinite(P))


def test_an_undirected_model_refuses_asymmetric_pair_covariates():
    """The fit reads X_ij for i < j and the prediction averages both orientations: an
    asymmetric X_ij was taken without a word and the two disagreed."""
    X = np.random.default_rng(0).normal(size=(6, 6))
    with pytest.raises(ValueError, match="symmetric pair covariates"):
        check_covariates({"pair": X}, 6, symmetric=True)
    symmetric = check_covariates({"pair": X + X.T}, 6, symmetric=True)
    np.testing.assert_array_equal(symmetric.pair[0], X + X.T)
    assert check_covariates({"pair": X}, 6, symmetric=False).pair.shape == (1, 6, 6)

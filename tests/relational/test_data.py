"""relational.data: what counts as a relation array and as an observation mask."""

from __future__ import annotations

import numpy as np
import pytest

from bayeskit.relational.data import check_relations


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

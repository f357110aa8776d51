"""The variable-selection experiment's BLS runs on designs padded with zero columns."""

import numpy as np
import pytest

from bayeskit.datasets import tibshirani_datasets
from bayeskit.experiments.sparse_bayes_selection import SIMULATED_WIDTH, bls_batch, bls_padded


def test_zero_columns_leave_the_bls_fit_unchanged():
    """Tibshirani's design (p = 8, n = 50) padded to the experiment's 60 columns, more than
    the points: the engine never adds the zero columns, so the coefficients and the test
    predictions are those of the unpadded fit, and the same variables are selected."""
    X, y, X_test, _, _ = tibshirani_datasets(3, 3.0, seed=4)
    assert X.shape[2] < X.shape[1] < SIMULATED_WIDTH  # p < n < width
    coef, pred = (np.asarray(a) for a in bls_batch(X, y, X_test))
    padded_coef, padded_pred = bls_padded(X, y, X_test, SIMULATED_WIDTH)
    assert padded_coef.shape == coef.shape and np.count_nonzero(coef) > 0
    np.testing.assert_array_equal(padded_coef != 0, coef != 0)
    np.testing.assert_allclose(padded_coef, coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(padded_pred, pred, rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="at least the 8 predictors"):
        bls_padded(X, y, X_test, 7)

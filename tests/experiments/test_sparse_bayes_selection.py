"""The variable-selection experiment's BLS runs on designs padded with zero columns."""

import numpy as np

from bayeskit.datasets import tibshirani_datasets
from bayeskit.experiments.sparse_bayes_selection import bls_batch, bls_padded


def test_zero_columns_leave_the_bls_fit_unchanged():
    """Tibshirani's design (p = 8) padded to 12 columns: the engine never adds the zero
    columns, so the coefficients and the test predictions are those of the unpadded fit, and
    the same variables are selected."""
    X, y, X_test, _, _ = tibshirani_datasets(3, 3.0, seed=4)
    coef, pred = (np.asarray(a) for a in bls_batch(X, y, X_test))
    padded_coef, padded_pred = bls_padded(X, y, X_test, 12)
    assert padded_coef.shape == coef.shape and np.count_nonzero(coef) > 0
    np.testing.assert_array_equal(padded_coef != 0, coef != 0)
    np.testing.assert_allclose(padded_coef, coef, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(padded_pred, pred, rtol=1e-9, atol=1e-12)

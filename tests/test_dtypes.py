"""The dtype policy: an estimator gives the same selected variables, components and
status whether JAX's default is float32 (its out-of-the-box setting) or float64. The test
process runs with float64 on; each float32 fit runs inside ``jax.enable_x64(False)``."""

from __future__ import annotations

import jax
import numpy as np

from bayeskit.datasets import zipf_corpus
from bayeskit.estimators import SparsePCA


def test_sparse_pca_finds_the_same_supports_under_float32_defaults():
    X, _ = zipf_corpus(300, 1500, topic_size=5)
    with jax.enable_x64(False):
        low = SparsePCA(n_components=3, cardinality=5).fit(X)
    high = SparsePCA(n_components=3, cardinality=5).fit(X)
    assert low.components_.dtype == np.float64
    np.testing.assert_array_equal(low.components_ != 0, high.components_ != 0)
    np.testing.assert_allclose(low.explained_variance_, high.explained_variance_, rtol=1e-10)
    assert np.all(np.count_nonzero(high.components_, axis=1) == 5)

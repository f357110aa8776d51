"""The column pairs of a sparse matrix against dense products: Gram matrices, quadratic
diagonals, the pair count, the padding ladder and the cost rule."""

import jax.numpy as jnp
import numpy as np
import pytest

from bayeskit.core import column_pairs as cp


@pytest.fixture
def sparse():
    rng = np.random.default_rng(3)
    A = rng.standard_normal((11, 40)) * (rng.random((11, 40)) < 0.2)
    A[:, 7] = 0.0  # an empty column
    A[:, 9] = 0.0
    A[5, 9] = 2.0  # a column with one nonzero
    return A


def test_gram_and_quadratic_diagonal_match_dense_products(sparse):
    A = sparse
    pairs = cp.column_pairs(A)
    rng = np.random.default_rng(0)
    w = rng.uniform(0.1, 5.0, (3, A.shape[1]))
    np.testing.assert_allclose(pairs.gram(jnp.asarray(w)), np.einsum("nd,rd,md->rnm", A, w, A), rtol=1e-12, atol=1e-12)
    M = rng.standard_normal((3, 11, 11))
    M = M + M.transpose(0, 2, 1)
    np.testing.assert_allclose(pairs.quadratic_diagonal(jnp.asarray(M)), np.einsum("nd,rnm,md->rd", A, M, A),
                               rtol=1e-12, atol=1e-12)
    half = pairs.scaled(0.25)  # the pairs of A / 2
    np.testing.assert_allclose(half.gram(jnp.asarray(w)), np.einsum("nd,rd,md->rnm", A / 2, w, A / 2), atol=1e-12)


def test_count_padding_and_all_zero_matrix(sparse):
    A = sparse
    brute = sum(1 for k in range(A.shape[1]) for i in range(11) for j in range(i + 1) if A[i, k] and A[j, k])
    assert cp.count(A) == brute
    pairs = cp.column_pairs(A)
    length = pairs.by_cell.row.shape[0]
    assert brute <= length <= max(16, brute * 9 // 8 + 1)
    # the segment sums are told their segments are sorted (the padding included)
    cells = np.asarray(pairs.by_cell.row) * 11 + np.asarray(pairs.by_cell.col)
    assert np.all(np.diff(cells) >= 0) and np.all(np.diff(np.asarray(pairs.by_column.column)) >= 0)
    assert np.all(np.asarray(pairs.by_cell.row) >= np.asarray(pairs.by_cell.col))
    assert all(p <= cp._padded(p) <= max(16, p * 9 // 8 + 1) for p in range(1, 5000))
    zero = cp.column_pairs(np.zeros((4, 6)))
    np.testing.assert_array_equal(zero.gram(jnp.ones((2, 6))), 0.0)


def test_pays_off_only_for_sparse_wide_data():
    rng = np.random.default_rng(0)
    assert cp.pays_off((rng.random((463, 1185)) < 0.05).astype(float))  # bag of words
    assert not cp.pays_off(rng.random((463, 1185)))  # dense
    assert not cp.pays_off((rng.random((300, 100)) < 0.05).astype(float))  # more samples than features
    assert not cp.pays_off((rng.random((463, 1185)) < 0.05).astype(np.float32))  # float32 keeps the dense form

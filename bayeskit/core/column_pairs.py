"""Gram products of a sparse matrix through the pairs of nonzeros that share a column.

For ``A`` of shape (n, d) and weights ``w_s`` (s = 1..r), the n x n matrices
``A diag(w_s) A'`` and the diagonals ``diag(A' M_s A)`` of n x n matrices ``M_s`` need only
the triples (i, j, k), i >= j, with ``A_ik A_jk != 0``: ``sum_k c_k (c_k + 1) / 2`` of them
for column counts ``c_k``, against ``n^2 d`` multiply-adds each for the dense products. For
bag-of-words or motif data (a few percent of nonzeros) that is a few hundred times fewer.

The pairs are found on the host, once per data set (:func:`column_pairs`), and padded to a
length from a coarse ladder (at most 1/8 more), so that data sets of about the same sparsity
share compiled programs. On a CPU one pair (a gather and a scatter-add) costs about as much as
:data:`PAIR_COST` multiply-adds of a dense matrix product; :func:`pays_off` weighs the two.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

PAIR_COST = 64  # dense multiply-adds per pair, measured on a 2-core CPU (float64, n = 463, d = 1185)


class _Pairs(eqx.Module):
    row: Int[Array, " p"]  # i
    col: Int[Array, " p"]  # j <= i
    column: Int[Array, " p"]  # k
    value: Float[Array, " p"]  # A_ik A_jk; 0 in the padding


class ColumnPairs(eqx.Module):
    """The pairs of nonzeros of ``A`` (n x d) that share a column, in two orders: by cell
    ``(i, j)`` for :meth:`gram` and by column ``k`` for :meth:`quadratic_diagonal` (each a
    sorted segment sum)."""

    by_cell: _Pairs
    by_column: _Pairs
    n: int = eqx.field(static=True)
    d: int = eqx.field(static=True)

    def scaled(self, factor) -> ColumnPairs:
        """The pairs of ``sqrt(factor) A``."""
        return eqx.tree_at(lambda p: (p.by_cell.value, p.by_column.value), self,
                           (self.by_cell.value * factor, self.by_column.value * factor))

    def gram(self, w: Float[Array, "r d"]) -> Float[Array, "r n n"]:
        """``A diag(w_s) A'`` for each row ``w_s`` of ``w``."""
        p = self.by_cell
        cells = jax.ops.segment_sum((w[:, p.column] * p.value).T, p.row * self.n + p.col, num_segments=self.n * self.n,
                                    indices_are_sorted=True)
        lower = cells.T.reshape(-1, self.n, self.n)  # i >= j only
        return lower + jnp.swapaxes(jnp.tril(lower, -1), -1, -2)

    def quadratic_diagonal(self, M: Float[Array, "r n n"]) -> Float[Array, "r d"]:
        """``diag(A' M_s A)`` for symmetric ``M_s``: ``sum_ij A_ik A_jk M_ij`` for every k."""
        p = self.by_column
        twice = jnp.where(p.row == p.col, 1.0, 2.0).astype(p.value.dtype)  # (i, j) stands for (j, i) too
        terms = M[:, p.row, p.col] * (p.value * twice)
        return jax.ops.segment_sum(terms.T, p.column, num_segments=self.d, indices_are_sorted=True).T


def count(A: np.ndarray) -> int:
    """The number of pairs ``(i >= j, k)`` with ``A_ik A_jk != 0``."""
    c = np.count_nonzero(A, axis=0).astype(np.int64)
    return int(np.sum(c * (c + 1) // 2))


def pays_off(A: np.ndarray) -> bool:
    """Whether the pairs beat the dense products for the n x n Woodbury form of a Gaussian
    with precision ``A'A + diag(phi)`` (:func:`bayeskit.core.linalg.sparse_low_rank_plus_diagonal`):
    ``PAIR_COST`` per pair and an n x n inverse (n^3) against the dense form's two
    ``n^2 d`` products. Only in float64: that form reads an explicit inverse, which loses
    too many of float32's digits on ill-conditioned data (repeated rows). The cells
    ``i n + j`` are int32."""
    n, d = A.shape
    return A.dtype == np.float64 and n < d and n * n < 2**31 and PAIR_COST * count(A) + n**3 < 2 * n * n * d


def if_they_pay_off(A) -> ColumnPairs | None:
    """The pairs of the concrete matrix ``A`` when :func:`pays_off`, else None (one copy
    to the host)."""
    host = np.asarray(A)
    return column_pairs(host) if pays_off(host) else None


def _padded(p: int) -> int:
    """The next length ``m 2^e`` with ``8 <= m < 16`` (at most 1/8 above ``p``)."""
    if p <= 16:
        return 16
    e = max(p.bit_length() - 4, 0)
    return -(-p // (1 << e)) * (1 << e)


def column_pairs(A) -> ColumnPairs:
    """The pairs of the concrete matrix ``A`` (host computation), in ``A``'s dtype."""
    A = np.asarray(A)
    n, d = A.shape
    nonzero = A != 0
    counts = nonzero.sum(axis=0)
    rows, cols, columns = [np.zeros(0, np.int64)] * 3
    parts = []
    for c in np.unique(counts[counts > 0]):  # columns with c nonzeros together
        ks = np.flatnonzero(counts == c)
        where = np.nonzero(nonzero[:, ks].T)[1].reshape(len(ks), c)  # ascending rows of each column
        ti, tj = np.tril_indices(c)
        parts.append((where[:, ti].ravel(), where[:, tj].ravel(), np.repeat(ks, len(ti))))
    if parts:
        rows, cols, columns = (np.concatenate(v) for v in zip(*parts))
    value = A[rows, columns] * A[cols, columns]
    pad = _padded(len(rows)) - len(rows)

    def ordered(order, pad_cell):
        i, j, k = pad_cell
        return _Pairs(
            row=jnp.asarray(np.r_[rows[order], np.full(pad, i)], jnp.int32),
            col=jnp.asarray(np.r_[cols[order], np.full(pad, j)], jnp.int32),
            column=jnp.asarray(np.r_[columns[order], np.full(pad, k)], jnp.int32),
            value=jnp.asarray(np.r_[value[order], np.zeros(pad, A.dtype)]),
        )

    by_cell = np.lexsort((columns, cols, rows))
    by_column = np.lexsort((cols, rows, columns))
    return ColumnPairs(ordered(by_cell, (n - 1, n - 1, d - 1)), ordered(by_column, (n - 1, n - 1, d - 1)), n, d)

"""A synthetic graphical-lasso problem: a sparse, well-conditioned precision matrix."""

from __future__ import annotations

import numpy as np

from bayeskit.core.validation import check_int_in


def sparse_precision(p: int, rng: np.random.Generator | int) -> np.ndarray:
    """A (p, p) precision from 2p random index pairs with weights +-[0.2, 0.4], of which the
    pairs above the diagonal are kept (about one edge per variable), made diagonally
    dominant (diagonal = row sum of |off-diagonal| + 0.5) and scaled to a unit diagonal.
    Draws from ``rng`` (a NumPy Generator, or a seed for one)."""
    p = check_int_in("p", p, 1)
    rng = np.random.default_rng(rng)
    theta = np.zeros((p, p))
    i, j = rng.integers(0, p, 2 * p), rng.integers(0, p, 2 * p)
    keep = i != j
    theta[i[keep], j[keep]] = rng.uniform(0.2, 0.4, keep.sum()) * rng.choice([-1, 1], keep.sum())
    theta = np.triu(theta, 1)
    theta = theta + theta.T
    theta += np.diag(np.abs(theta).sum(1) + 0.5)
    d = np.sqrt(np.diag(theta))
    return theta / d[:, None] / d[None]

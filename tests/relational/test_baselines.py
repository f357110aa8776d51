"""Common neighbours and Katz against brute-force counts and the truncated series."""

import numpy as np
import pytest

from bayeskit.relational import baselines


def _graph(n=12, p=0.3, seed=0):
    rng = np.random.default_rng(seed)
    upper = np.triu(rng.random((n, n)) < p, 1)
    return (upper | upper.T).astype(np.int8)


def test_common_neighbours_count_the_shared_neighbours():
    Y = _graph()
    scores = np.asarray(baselines.common_neighbours(baselines.adjacency(Y)))[0]
    n = len(Y)
    brute = np.array([[sum(Y[i, k] and Y[k, j] for k in range(n)) for j in range(n)] for i in range(n)])
    np.testing.assert_array_equal(scores, brute)


def test_katz_is_the_damped_sum_of_path_counts():
    Y = np.stack([_graph(seed=1), _graph(p=0.5, seed=2)])
    A = np.asarray(baselines.adjacency(Y), np.float64)
    scores = np.asarray(baselines.katz(baselines.adjacency(Y)))
    for r in range(2):
        beta = 0.5 / np.max(np.abs(np.linalg.eigvals(A[r])))
        series, power = np.zeros_like(A[r]), np.eye(len(A[r]))
        for _ in range(200):  # beta rho = 1/2: the tail after 200 terms is below 2^-200
            power = beta * power @ A[r]
            series += power
        np.testing.assert_allclose(scores[r], series, rtol=1e-9, atol=1e-12)


def test_katz_refuses_a_diverging_beta():
    A = baselines.adjacency(_graph())
    rho = baselines.spectral_radius(A)[0]
    with pytest.raises(ValueError, match="below 1 / rho"):
        baselines.katz(A, beta=1.0 / rho)
    assert np.all(np.isfinite(np.asarray(baselines.katz(A, beta=0.9 / rho))))


def test_held_out_cells_do_not_reach_the_scores():
    """A link in a held-out (unobserved) cell scores as if it were absent."""
    Y = _graph(seed=3)
    i, j = np.argwhere(np.triu(Y, 1))[0]
    mask = ~np.eye(len(Y), dtype=bool)
    mask[i, j] = mask[j, i] = False
    removed = Y.copy()
    removed[i, j] = removed[j, i] = 0
    for score in (baselines.common_neighbours, baselines.katz):
        np.testing.assert_allclose(np.asarray(score(baselines.adjacency(Y, mask))),
                                   np.asarray(score(baselines.adjacency(removed))), rtol=1e-12, atol=1e-14)

"""Synthetic regression problems of the sparse Bayesian papers: Tipping's sinc and
Donoho & Johnstone's bumps, as stacks of independent data sets (one vmapped fit each)."""

from __future__ import annotations

import numpy as np

# Donoho & Johnstone (1994): bump positions, heights and widths
BUMP_T = np.array([0.1, 0.13, 0.15, 0.23, 0.25, 0.40, 0.44, 0.65, 0.76, 0.78, 0.81])
BUMP_H = np.array([4, 5, 3, 4, 5, 4.2, 2.1, 4.3, 3.1, 5.1, 4.2])
BUMP_W = np.array([0.005, 0.005, 0.006, 0.01, 0.01, 0.03, 0.01, 0.01, 0.005, 0.008, 0.005])


def sinc(x):
    """sin(x) / x with sinc(0) = 1."""
    return np.sinc(np.asarray(x) / np.pi)


def sinc_datasets(n_sets: int, noise_sd: float, *, n_train: int = 100, n_test: int = 1000, seed: int = 0):
    """Tipping's protocol: x ~ U(-10, 10), y = sinc(x) + N(0, noise_sd^2); the test set is
    ``n_test`` equally spaced noise-free points. Returns (X (S, n, 1), y (S, n), X_test
    (n_test, 1), f_test (n_test,))."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-10, 10, (n_sets, n_train, 1))
    y = sinc(X[..., 0]) + noise_sd * rng.standard_normal((n_sets, n_train))
    X_test = np.linspace(-10, 10, n_test)[:, None]
    return X, y, X_test, sinc(X_test[:, 0])


def bumps(t):
    """Donoho & Johnstone's bumps f(t) = sum_j h_j (1 + |t - t_j| / w_j)^-4 on [0, 1]."""
    t = np.asarray(t)[..., None]
    return np.sum(BUMP_H * (1 + np.abs(t - BUMP_T) / BUMP_W) ** -4, axis=-1)


def bump_datasets(n_sets: int, snr: float, *, n: int = 120, seed: int = 0):
    """N equally spaced t in [0, 1], y = bumps(t) + N(0, sigma^2) with sigma = sd(f) / snr.
    Returns (X (S, n, 1), y (S, n), f (n,), sigma)."""
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    f = bumps(t)
    sigma = float(np.std(f) / snr)
    y = f + sigma * rng.standard_normal((n_sets, n))
    return np.broadcast_to(t[None, :, None], (n_sets, n, 1)).copy(), y, f, sigma

"""Synthetic regression problems of the sparse Bayesian papers: Tipping's sinc and
Donoho & Johnstone's bumps, as stacks of independent data sets (one vmapped fit each)."""

from __future__ import annotations

import numpy as np

from bayeskit.core.validation import check_int_in, check_positive

# Donoho & Johnstone (1994): bump positions, heights and widths
BUMP_T = np.array([0.1, 0.13, 0.15, 0.23, 0.25, 0.40, 0.44, 0.65, 0.76, 0.78, 0.81])
BUMP_H = np.array([4, 5, 3, 4, 5, 4.2, 2.1, 4.3, 3.1, 5.1, 4.2])
BUMP_W = np.array([0.005, 0.005, 0.006, 0.01, 0.01, 0.03, 0.01, 0.01, 0.005, 0.008, 0.005])


def _check(noise=None, **sizes) -> None:
    """Sizes are integers >= 1 and a noise scale ``noise = (name, value)`` finite and >= 0."""
    for name, value in sizes.items():
        check_int_in(name, value, 1)
    if noise is not None and not (np.isfinite(noise[1]) and noise[1] >= 0):
        raise ValueError(f"{noise[0]} must be a finite number >= 0, got {noise[1]!r}.")


def sinc(x):
    """sin(x) / x with sinc(0) = 1."""
    return np.sinc(np.asarray(x) / np.pi)


def sinc_datasets(n_sets: int, noise_sd: float, *, n_train: int = 100, n_test: int = 1000, seed: int = 0):
    """Tipping's protocol: x ~ U(-10, 10), y = sinc(x) + N(0, noise_sd^2); the test set is
    ``n_test`` equally spaced noise-free points. Returns (X (S, n, 1), y (S, n), X_test
    (n_test, 1), f_test (n_test,))."""
    _check(("noise_sd", noise_sd), n_sets=n_sets, n_train=n_train, n_test=n_test)
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
    _check(n_sets=n_sets, n=n)
    check_positive(snr=snr)
    rng = np.random.default_rng(seed)
    t = np.linspace(0, 1, n)
    f = bumps(t)
    sigma = float(np.std(f) / snr)
    y = f + sigma * rng.standard_normal((n_sets, n))
    return np.broadcast_to(t[None, :, None], (n_sets, n, 1)).copy(), y, f, sigma


TIBSHIRANI_BETA = np.array([3.0, 1.5, 0, 0, 2, 0, 0, 0])


def _regression_sets(rng, draw_X, beta, sigma: float, n_sets: int, n_train: int, n_test: int):
    """Independent training and test sets y = X beta + N(0, sigma^2); the test targets are
    the noise-free X_test beta. Returns (X (S, n, p), y (S, n), X_test (S, n_test, p),
    f_test (S, n_test))."""
    _check(("sigma", sigma), n_sets=n_sets, n_train=n_train, n_test=n_test)
    X, X_test = draw_X((n_sets, n_train)), draw_X((n_sets, n_test))
    y = X @ beta + sigma * rng.standard_normal((n_sets, n_train))
    return X, y, X_test, X_test @ beta


def tibshirani_datasets(n_sets: int, sigma: float, *, n_train: int = 50, n_test: int = 100, rho: float = 0.5,
                        seed: int = 0):
    """Tibshirani's (1996) example as in Helgoy & Li, Simulation 1: beta = (3, 1.5, 0, 0, 2,
    0, 0, 0), x ~ N(0, R) with R_ij = rho^|i - j|. Returns (X, y, X_test, f_test, beta)
    as :func:`_regression_sets`."""
    if not -1 < rho < 1:
        raise ValueError(f"rho must be in (-1, 1) (R_ij = rho^|i - j| is a correlation matrix), got {rho!r}.")
    rng = np.random.default_rng(seed)
    p = TIBSHIRANI_BETA.size
    R = rho ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))
    chol = np.linalg.cholesky(R)
    draw = lambda shape: rng.standard_normal((*shape, p)) @ chol.T
    return (*_regression_sets(rng, draw, TIBSHIRANI_BETA, sigma, n_sets, n_train, n_test), TIBSHIRANI_BETA)


def grouped_datasets(n_sets: int, n_groups: int, group_size: int, n_noise: int, *, coef: float = 3.0,
                     sigma: float = 1.0, n_train: int = 50, n_test: int = 100, seed: int = 0):
    """Grouped correlation designs of Helgoy & Li's Simulations 2 and 3 (after Zou & Hastie
    2005, Example 4): for each group g a latent Z_g ~ N(0, 1) and ``group_size`` predictors
    Z_g + N(0, 0.01), then ``n_noise`` independent N(0, 1) predictors; beta is ``coef`` on
    the grouped predictors and 0 on the noise ones. Simulation 2 is (3 groups of 5, 25
    noise), Simulation 3 (5 groups of 10, 10 noise). Returns (X, y, X_test, f_test, beta)."""
    _check(n_groups=n_groups, group_size=group_size)
    check_int_in("n_noise", n_noise, 0)
    rng = np.random.default_rng(seed)
    n_grouped = n_groups * group_size
    beta = np.concatenate([np.full(n_grouped, coef), np.zeros(n_noise)])

    def draw(shape):
        Z = np.repeat(rng.standard_normal((*shape, n_groups)), group_size, axis=-1)
        grouped = Z + 0.1 * rng.standard_normal((*shape, n_grouped))
        return np.concatenate([grouped, rng.standard_normal((*shape, n_noise))], axis=-1)

    return (*_regression_sets(rng, draw, beta, sigma, n_sets, n_train, n_test), beta)

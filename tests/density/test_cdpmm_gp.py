"""The SBMoE paper's baselines: the conditioned DP mixture and the ARD Gaussian process."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bayeskit.density import cdpmm, gp


def test_cdpmm_with_one_component_is_the_gaussian_conditional(rng):
    """Jointly Gaussian (x, y): a single component conditioned on x is the linear
    regression of y on x with the residual covariance."""
    n = 4000
    X = rng.normal(size=(n, 2))
    Y = X @ np.array([[1.0, -0.5], [0.3, 0.8]]) + 0.5 + rng.normal(size=(n, 2)) @ np.array([[0.4, 0.0], [0.1, 0.3]])
    X[:, 1] *= 100.0  # scales differ
    model = cdpmm.fit(jax.random.key(0), np.column_stack([X, np.ones(n)]), Y, 1).state
    mix = cdpmm.predictive(model, jnp.asarray(np.column_stack([X[:5], np.ones(5)])))
    A = np.column_stack([np.ones(n), X])
    coef, *_ = np.linalg.lstsq(A, Y, rcond=None)
    resid = np.cov((Y - A @ coef).T)
    np.testing.assert_allclose(mix.mean, A[:5] @ coef, atol=0.02)
    np.testing.assert_allclose(mix.covariance[0], resid, atol=0.01)
    assert np.allclose(np.exp(mix.log_weights), 1.0)


def test_gp_matches_scikit_learn_at_the_evidence_optimum(rng):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    n = 80
    X = rng.uniform(-2, 2, size=(n, 2)) * np.array([1.0, 10.0])
    y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=n)
    result = gp.fit(X, y)
    ours = result.state
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    kernel = ConstantKernel(1.0) * RBF([1.0, 1.0], (1e-3, 1e3)) + WhiteKernel(0.1, (1e-6, 10))
    ref = GaussianProcessRegressor(kernel, n_restarts_optimizer=3, random_state=0).fit(Xs, ys)
    X_new = rng.uniform(-2, 2, size=(6, 2)) * np.array([1.0, 10.0])
    mix = gp.predictive(ours, jnp.asarray(X_new))
    mean_ref, sd_ref = ref.predict((X_new - X.mean(0)) / X.std(0), return_std=True)
    np.testing.assert_allclose(mix.mean[:, 0], y.mean() + y.std() * mean_ref, atol=0.02)
    np.testing.assert_allclose(np.sqrt(mix.covariance[:, 0, 0]), y.std() * sd_ref, rtol=0.05)
    evidence = -float(gp._neg_evidence(ours.log_params[0], ours.X, jnp.asarray(ys)))
    assert evidence >= ref.log_marginal_likelihood_value_ - 1e-3
    assert float(result.objective) == pytest.approx(evidence, rel=1e-6) and bool(result.converged)


def test_baselines_refuse_bad_input():
    with pytest.raises(ValueError, match="same number of rows"):
        gp.fit(np.ones((5, 2)), np.ones(4))
    with pytest.raises(ValueError, match="non-finite"):
        cdpmm.fit(jax.random.key(0), np.array([[1.0], [np.nan], [2.0]]), np.ones(3), 2)

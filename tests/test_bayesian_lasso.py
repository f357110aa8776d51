"""The Bayesian Lasso: the Gibbs sampler against NUTS on the same hierarchy, and the
inverse Gaussian draws against scipy."""

import jax
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from scipy import stats

from bayeskit import bayesian_lasso as bl
from bayeskit.estimators import BayesianLassoRegressor


def test_inverse_gaussian_draws_follow_scipy():
    for mean, shape in ((0.3, 2.0), (4.0, 0.5)):
        x = np.asarray(bl.inverse_gaussian(jax.random.key(1), np.full(20000, mean), shape))
        assert stats.kstest(x, stats.invgauss(mean / shape, scale=shape).cdf).pvalue > 1e-3
        assert abs(x.mean() - mean) < 4 * np.sqrt(mean**3 / shape / x.size)


def _mcse(draws):
    """Monte Carlo standard error of the mean of (chain, draw, ...) draws."""
    return np.asarray(draws).std(axis=(0, 1)) / np.sqrt(np.asarray(effective_sample_size(np.asarray(draws))))


def test_gibbs_and_nuts_agree_on_diabetes():
    """Park & Casella's conditionals and NUTS on the model density give the same posterior
    means of the ten coefficients, sigma^2 and lambda^2 (within Monte Carlo error)."""
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True, scaled=False)
    X = (X - X.mean(0)) / X.std(0)
    gibbs = bl.sample_posterior(jax.random.key(0), X, y, method="gibbs", num_warmup=500, num_samples=4000, num_chains=2)
    nuts = bl.sample_posterior(jax.random.key(1), X, y, method="nuts", num_warmup=300, num_samples=800, num_chains=2)
    for name in ("beta", "sigma2", "lambda2"):
        g, n = np.asarray(gibbs[name]), np.asarray(nuts[name])
        err = np.sqrt(_mcse(g) ** 2 + _mcse(n) ** 2)
        assert np.all(np.abs(g.mean((0, 1)) - n.mean((0, 1))) < 4 * err + 1e-9), (name, g.mean((0, 1)), n.mean((0, 1)), err)


def test_estimator_medians_intervals_and_intercept():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((80, 5)) + 3.0
    y = 2.0 + X @ np.array([2.0, 0, 0, -1.0, 0]) + 0.5 * rng.standard_normal(80)
    est = BayesianLassoRegressor(num_samples=2000, num_warmup=300, random_state=0).fit(X, y)
    draws = est.samples_["beta"].reshape(-1, 5)
    np.testing.assert_allclose(est.coef_, np.median(draws, 0))
    assert est.coef_interval_.shape == (5, 2)
    lo, hi = est.coef_interval_.T
    assert np.all(lo < est.coef_) and np.all(est.coef_ < hi)
    assert lo[0] > 1.5 and hi[0] < 2.5 and lo[3] > -1.5 and hi[3] < -0.5  # the non-zeros are clear
    assert np.all((lo[[1, 2, 4]] < 0) & (hi[[1, 2, 4]] > 0))  # the zeros' intervals cover 0
    assert abs(est.intercept_ - (y.mean() - X.mean(0) @ est.coef_)) < 1e-9
    np.testing.assert_allclose(est.predict(X), X @ est.coef_ + est.intercept_)


def test_bad_input_is_refused():
    X, y = np.ones((10, 2)), np.ones(10)
    for kwargs, match in (({"method": "mh"}, "method"), ({"alpha": 1.5}, "alpha"), ({"num_samples": 0}, "num_samples"),
                          ({"lambda_prior": (0.0, 1.0)}, "lambda_prior")):
        with pytest.raises(ValueError, match=match):
            BayesianLassoRegressor(**kwargs).fit(X, y)
    with pytest.raises(ValueError, match="non-finite|NaN|infinity"):
        bl.sample_posterior(jax.random.key(0), np.where(np.eye(10, 2) > 0, np.nan, X), y)
    with pytest.raises(ValueError, match="three samples"):
        BayesianLassoRegressor().fit(X[:2], y[:2])

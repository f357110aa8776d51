"""The Bayesian Lasso: the Gibbs sampler against NUTS on the same hierarchy, and the
inverse Gaussian draws against scipy."""

import jax
import numpy as np
import pytest
from numpyro.diagnostics import effective_sample_size
from scipy import stats

from bayeskit.estimators import BayesianLassoRegressor
from bayeskit.sparse import bayesian_lasso as bl


def test_inverse_gaussian_draws_follow_scipy():
    for mean, shape in ((0.3, 2.0), (4.0, 0.5)):
        x = np.asarray(bl.inverse_gaussian(jax.random.key(1), np.full(20000, mean), shape))
        assert stats.kstest(x, stats.invgauss(mean / shape, scale=shape).cdf).pvalue > 1e-3
        assert abs(x.mean() - mean) < 4 * np.sqrt(mean**3 / shape / x.size)


def test_inverse_gaussian_stays_exact_where_the_textbook_root_cancels():
    """mean >> shape: Michael et al.'s root loses every digit in float32 (w - sqrt(w (4 shape + w))
    cancels); the rewritten root still follows scipy there, and extreme means give finite
    positive draws."""
    mean, shape = np.float32(1e4), np.float32(1e-2)
    x = np.asarray(bl.inverse_gaussian(jax.random.key(2), np.full(20000, mean, np.float32), shape), np.float64)
    assert stats.kstest(x, stats.invgauss(float(mean / shape), scale=float(shape)).cdf).pvalue > 1e-3
    for mean, shape in ((1e200, 1.0), (1e-200, 1e-3), (1.0, 1e-300), (1e150, 1e150)):
        x = np.asarray(bl.inverse_gaussian(jax.random.key(3), np.full(1000, mean), shape))
        assert np.all(np.isfinite(x) & (x > 0)), (mean, shape)


def _wide_problem(n=8, p=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    return X, X[:, :3] @ np.array([2.0, -1.0, 1.0]) + 0.1 * rng.standard_normal(n)


def test_beta_draw_has_the_conditional_mean_and_covariance():
    """draw_beta against A^-1 X'y and sigma^2 A^-1 formed directly (well conditioned, p > n)."""
    X, y = _wide_problem()
    data = bl.as_data(X, y)
    inv_tau2, sigma2 = np.linspace(0.5, 3.0, X.shape[1]), 0.7
    A = data.X.T @ data.X + np.diag(inv_tau2)
    mean, cov = np.linalg.solve(A, data.X.T @ data.y), sigma2 * np.linalg.inv(A)
    np.testing.assert_allclose(bl.draw_beta(jax.random.key(0), data, inv_tau2, 0.0), mean, rtol=1e-10, atol=1e-12)
    draws = np.asarray(jax.vmap(lambda k: bl.draw_beta(k, data, inv_tau2, sigma2))(jax.random.split(jax.random.key(1), 40000)))
    se = np.sqrt(np.diag(cov) / draws.shape[0])
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * se)
    np.testing.assert_allclose(np.cov(draws.T), cov, atol=0.05 * np.abs(cov).max())


def test_gibbs_stays_finite_in_the_interpolating_tail():
    """p > n: in the tail the chains drift into (sigma^2 ~ 1e-12, 1/tau^2 ~ 1e-15 and below,
    where X'X + D^-1 has cond > 1e17 and a float64 Cholesky of it fails), the beta draw's
    mean still equals a 60-digit solve and a hundred further scans stay finite."""
    import mpmath

    X, y = _wide_problem()
    data = bl.as_data(X, y)
    p = X.shape[1]
    inv_tau2 = np.full(p, 1e-17) * np.linspace(1.0, 4.0, p)
    with mpmath.workdps(60):
        Xm, ym = mpmath.matrix(np.asarray(data.X).tolist()), mpmath.matrix(np.asarray(data.y).tolist())
        exact = mpmath.lu_solve(Xm.T * Xm + mpmath.diag([mpmath.mpf(v) for v in inv_tau2]), Xm.T * ym)
        exact = np.array([float(v) for v in exact])
    mean = np.asarray(bl.draw_beta(jax.random.key(0), data, inv_tau2, 0.0))
    np.testing.assert_allclose(mean, exact, rtol=1e-6, atol=1e-9 * np.abs(exact).max())
    state = bl.State(jax.numpy.asarray(mean), jax.numpy.asarray(1e-12), jax.numpy.asarray(inv_tau2),
                     jax.numpy.asarray(1e-14), jax.random.key(1))
    hp = bl.Hyperparams()
    _, trace = jax.lax.scan(lambda s, _: (bl.gibbs_step(s, data, hp),) * 2, state, None, length=100)
    for name in ("beta", "sigma2", "inv_tau2", "lambda2"):
        assert np.all(np.isfinite(np.asarray(getattr(trace, name)))), name


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
                          ({"lambda_prior": (0.0, 1.0)}, "lambda_prior"), ({"lambda_prior": (0.1,)}, "a pair")):
        with pytest.raises(ValueError, match=match):
            BayesianLassoRegressor(**kwargs).fit(X, y)
    with pytest.raises(ValueError, match="non-finite|NaN|infinity"):
        bl.sample_posterior(jax.random.key(0), np.where(np.eye(10, 2) > 0, np.nan, X), y)
    with pytest.raises(ValueError, match="three samples"):
        BayesianLassoRegressor().fit(X[:2], y[:2])


def test_estimator_refuses_non_finite_draws(monkeypatch):
    """A NaN from the sampler never reaches coef_: the wrapper raises and names the draws."""
    X, y = _wide_problem(n=20, p=3)
    real = bl.sample_unit

    def with_nan(*args, **kwargs):
        draws = dict(real(*args, **kwargs))
        draws["sigma2"] = draws["sigma2"].at[0, -1].set(np.nan)
        return draws

    monkeypatch.setattr(bl, "sample_unit", with_nan)
    with pytest.raises(RuntimeError, match="non-finite draws of sigma2"):
        BayesianLassoRegressor(num_samples=20, num_warmup=5, random_state=0).fit(X, y)


@pytest.mark.parametrize("c", [1e-20, 1e20])
def test_estimator_is_equivariant_in_y_and_exact_in_x_far_from_unit_scale_in_float32(c):
    """The posterior of (X, c y) is that of (X, y) with beta and the predictions times c
    (the 1/sigma^2 prior is scale-free); and that of (a X, y) with the rate of lambda^2's
    prior divided by a^2 is that of (X, y) with beta / a, exactly so for a power of two a."""
    rng = np.random.default_rng(2)
    X = rng.standard_normal((40, 4)).astype(np.float32)
    y = (X @ np.array([1.0, 0, 2.0, 0]) + 0.5 * rng.standard_normal(40)).astype(np.float32)
    kw = {"num_samples": 300, "num_warmup": 100, "random_state": 0}
    ref = BayesianLassoRegressor(**kw).fit(X, y)
    got = BayesianLassoRegressor(**kw).fit(X, (y * c).astype(np.float32))
    np.testing.assert_allclose(got.coef_ / c, ref.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.predict(X) / c, ref.predict(X), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.samples_["sigma2"] / c**2, ref.samples_["sigma2"], rtol=1e-4)
    a = 2.0**40
    wide = BayesianLassoRegressor(lambda_prior=(0.1, 0.1 / a / a), **kw).fit(X * np.float32(a), y)
    np.testing.assert_allclose(wide.coef_ * a, ref.coef_, rtol=1e-6)
    np.testing.assert_allclose(wide.samples_["lambda2"] / a**2, ref.samples_["lambda2"], rtol=1e-6)


def test_a_prior_rate_beyond_float32_on_the_scale_of_x_is_refused():
    rng = np.random.default_rng(2)
    X, y = rng.standard_normal((20, 3)), rng.standard_normal(20)
    with pytest.raises(ValueError, match="rate of lambda_prior on data at scale .* divide X by a constant"):
        BayesianLassoRegressor(num_samples=10, num_warmup=5).fit((X * 1e20).astype(np.float32), y.astype(np.float32))


def test_the_functional_sampler_takes_integer_and_boolean_x_as_numbers():
    """Integer X gave y X's dtype (y truncated to integers), boolean X NaN draws; they are
    floats now, the same draws as X given as floats. A constant y and text are refused."""
    rng = np.random.default_rng(0)
    X = rng.integers(-3, 4, (30, 3))
    y = X @ np.array([1.0, -0.5, 0.0]) + 0.3 * rng.normal(size=30)
    draws = lambda X, y: bl.sample_posterior(jax.random.key(1), X, y, num_warmup=20, num_samples=30)["beta"]  # noqa: E731
    np.testing.assert_allclose(np.asarray(draws(X, y)), np.asarray(draws(X.astype(float), y)), rtol=1e-12)
    B = X > 0
    got = np.asarray(draws(B, y))
    assert np.isfinite(got).all() and got.dtype == np.asarray(draws(B.astype(float), y)).dtype
    with pytest.raises(ValueError, match="y is constant"):
        bl.sample_posterior(jax.random.key(0), X.astype(float), np.ones(30))
    with pytest.raises(ValueError, match="X must be numeric"):
        bl.sample_posterior(jax.random.key(0), X.astype(str), y)


def test_the_functional_sampler_checks_its_settings_and_a_constant_x():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(20, 3)), rng.normal(size=20)
    for kwargs, match in (({"hparams": bl.Hyperparams(lambda_prior=(-1.0, 0.1))}, "lambda_prior"), ({"num_samples": 0}, "num_samples"),
                          ({"num_chains": 0}, "num_chains")):
        with pytest.raises(ValueError, match=match):
            bl.sample_posterior(jax.random.key(0), X, y, **kwargs)
    with pytest.raises(ValueError, match="every column of X is constant"):  # the Gibbs sampler asked to rescale, NUTS ran
        BayesianLassoRegressor(num_warmup=5, num_samples=5).fit(np.ones((20, 3)), y)


def test_the_functional_sampler_is_equivariant_in_the_scales_of_x_and_y():
    """NUTS adapted on the data's own scale: X and y at 2^27 (with lambda^2's rate divided by
    2^54, the same posterior) gave sigma^2 1e-8 of its value. Both samplers now run on the
    unit scale: the draws are those of the unscaled problem, put back by the powers of two
    (exactly)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X @ np.array([1.5, 0.0, -1.0]) + 0.5 * rng.normal(size=40)
    run = lambda X, y, rate, method: bl.sample_posterior(  # noqa: E731
        jax.random.key(3), X, y, bl.Hyperparams(lambda_prior=(0.1, rate)), method=method, num_warmup=100, num_samples=100)
    for method in ("nuts", "gibbs"):
        ref = run(X, y, 0.1, method)
        for a, c in ((2.0**27, 2.0**27), (2.0**-27, 1.0), (1.0, 2.0**-40)):
            got = run(X * a, y * c, 0.1 / (a * a), method)
            back = {"beta": c / a, "sigma2": c * c, "tau2": 1 / (a * a), "lambda2": a * a}
            for name, v in ref.items():
                np.testing.assert_allclose(np.asarray(got[name]), np.asarray(v) * back[name], rtol=1e-12, err_msg=f"{method} {name}")


def test_draws_beyond_float32_are_refused_by_the_functional_sampler_and_kept_by_the_estimator():
    """sigma^2 of y at 1e20 is 1e40, beyond float32: the functional sampler, which returns
    draws in the data's dtype, says so; the estimator puts its draws back in float64."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 2)).astype(np.float32)
    y = (X @ np.array([1.0, -1.0], np.float32) + rng.normal(size=30).astype(np.float32)) * np.float32(1e20)
    with pytest.raises(ValueError, match="draws of sigma2 on data at scales .* leave float32"):
        bl.sample_posterior(jax.random.key(0), X, y, num_warmup=10, num_samples=10)
    est = BayesianLassoRegressor(num_warmup=10, num_samples=10, random_state=0).fit(X, y)
    assert np.all(np.isfinite(est.samples_["sigma2"])) and np.median(est.samples_["sigma2"]) > 1e39


def test_both_samplers_return_draws_in_the_data_dtype():
    """With x64 on (as in these tests) NUTS returned float64 draws for float32 data, the
    Gibbs sampler float32."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3)).astype(np.float32)
    y = (X @ np.array([1.0, 0.0, -1.0]) + 0.3 * rng.normal(size=20)).astype(np.float32)
    for method in ("gibbs", "nuts"):
        draws = bl.sample_posterior(jax.random.key(0), X, y, method=method, num_warmup=20, num_samples=20)
        assert {v.dtype for v in draws.values()} == {np.dtype(np.float32)}, method


def test_draws_within_float32_are_kept_when_the_scale_factor_alone_is_not():
    """sigma^2 of y at 2^64 with noise 0.05 is about 1e36, within float32, but the factor
    c^2 = 2^128 alone is not: it was cast first and the draws refused as leaving float32."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)).astype(np.float32)
    y = ((X @ np.array([1.0, -1.0, 0.5]) + 0.05 * rng.normal(size=60)) * 2.0**64).astype(np.float32)
    draws = bl.sample_posterior(jax.random.key(0), X, y, num_warmup=50, num_samples=50)
    sigma2 = np.asarray(draws["sigma2"])
    assert sigma2.dtype == np.float32 and np.all(np.isfinite(sigma2)) and 1e34 < np.median(sigma2) < 1e37

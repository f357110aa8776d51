"""The sparse Bayesian regressors: scikit-learn contract, kernels, units, errors."""

import contextlib
import warnings

import numpy as np
import pytest
from sklearn.utils import estimator_checks as checks

from bayeskit.estimators import BLSRegressor, FLAPRegressor, RVMRegressor
from bayeskit.sparse import sparse_bayes as sb

CHECKS = [checks.check_estimators_dtypes, checks.check_fit2d_predict1d, checks.check_estimators_nan_inf,
          checks.check_dont_overwrite_parameters, checks.check_estimators_unfitted, checks.check_n_features_in,
          checks.check_estimators_pickle, checks.check_fit_check_is_fitted, checks.check_get_params_invariance,
          checks.check_regressors_train, checks.check_fit2d_1sample, checks.check_estimators_empty_data_messages,
          checks.check_regressor_data_not_an_array]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_sklearn_estimator_checks(check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check("RVMRegressor", RVMRegressor(max_iter=200))


def _sinc(n=60, sd=0.1, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-10, 10, (n, 1))
    return x, np.sinc(x[:, 0] / np.pi) + sd * rng.standard_normal(n)


@pytest.mark.parametrize("est", [RVMRegressor(gamma=0.1, fit_intercept=False), BLSRegressor(gamma=0.1, fit_intercept=False),
                                 FLAPRegressor(gamma=0.1, fit_intercept=False),
                                 FLAPRegressor(gamma=0.1, fit_intercept=False, estimate_noise=True)],
                         ids=["rvm", "bls", "flap", "flap_sigma"])
def test_wrappers_equal_the_functional_core(est):
    X, y = _sinc()
    est.fit(X, y)
    prior = {"RVMRegressor": "rvm", "BLSRegressor": "bls"}.get(type(est).__name__) or ("flap_sigma" if est.estimate_noise else "flap")
    Phi = sb.design(X, gamma=0.1)
    r = sb.fit(Phi, y, sb.Hyperparams(prior=prior, max_basis=60))
    scale = sb.as_data(Phi, y).scale
    # the wrapper fits y / s (s the robust scale of y): the same fixed point, to the last steps' size
    np.testing.assert_allclose(est.coef_, sb.weights(r.state, scale), rtol=1e-7, atol=1e-10)
    np.testing.assert_array_equal(est.relevance_indices_, np.flatnonzero(np.asarray(r.state.gamma) > 0))
    np.testing.assert_allclose(est.relevance_vectors_, X[est.relevance_indices_])
    Xt = np.linspace(-10, 10, 7)[:, None]
    mean, std = est.predict(Xt, return_std=True)
    want_mean, want_var = sb.predict(r.state, sb.design(Xt, X, gamma=0.1), scale, noise=False)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-7, atol=1e-10)
    # the noise is the one the estimator reports: for FLAP with fixed noise its re-estimate
    # (the fixed var(y) / 100 gave intervals about six times too narrow on sinc at sd 3)
    np.testing.assert_allclose(std, np.sqrt(want_var + est.noise_std_**2), rtol=1e-7)
    if prior != "flap":
        np.testing.assert_allclose(est.noise_std_**2, 1 / float(r.state.beta), rtol=1e-7)
    # the kernel expansion itself: sum of coef_ times the kernel at the relevance vectors
    K = np.exp(-0.1 * (Xt - X[est.relevance_indices_].T) ** 2)
    np.testing.assert_allclose(mean, K @ est.coef_[est.relevance_indices_], rtol=1e-9, atol=1e-12)
    assert 0.05 < est.noise_std_ < 0.2
    assert est.n_iter_ == len(est.log_evidence_)


def test_linear_kernel_selects_variables_in_original_units():
    """Tibshirani's design with an offset and scaled columns: the truth's non-zeros are
    selected (at most one small spurious one besides), with their coefficients in the
    caller's units, and the intercept is recovered."""
    rng = np.random.default_rng(3)
    corr = 0.5 ** np.abs(np.subtract.outer(np.arange(8), np.arange(8)))
    X = rng.standard_normal((200, 8)) @ np.linalg.cholesky(corr).T * np.array([1, 10, 1, 1, 0.1, 1, 1, 1])
    beta = np.array([3, 0.15, 0, 0, 20, 0, 0, 0])
    y = 4.0 + X @ beta + 0.5 * rng.standard_normal(200)
    for est in (RVMRegressor(kernel="linear"), BLSRegressor(kernel="linear")):
        est.fit(X, y)
        assert {0, 1, 4} <= set(est.relevance_indices_.tolist()) and len(est.relevance_indices_) <= 4
        spurious = np.setdiff1d(est.relevance_indices_, [0, 1, 4])
        assert np.all(np.abs(est.coef_[spurious]) < 0.15)
        np.testing.assert_allclose(est.coef_[[0, 1, 4]], beta[[0, 1, 4]], rtol=0.05)
        assert abs(est.intercept_ - 4.0) < 0.2
        assert not hasattr(est, "relevance_vectors_")


def test_poly_kernel_fits_a_cubic():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, (50, 1))
    y = x[:, 0] ** 3 - x[:, 0] + 0.05 * rng.standard_normal(50)
    est = RVMRegressor(kernel="poly", degree=3, gamma=1.0, coef0=1.0).fit(x, y)
    xt = np.linspace(-2, 2, 20)[:, None]
    assert np.sqrt(np.mean((est.predict(xt) - (xt[:, 0] ** 3 - xt[:, 0])) ** 2)) < 0.05


def test_bad_parameters_are_refused():
    X, y = _sinc(20)
    for est, match in ((RVMRegressor(gamma=0.0), "gamma"), (RVMRegressor(gamma=-1.0), "gamma"),
                       (RVMRegressor(kernel="poly", degree=-2), "degree"), (RVMRegressor(kernel="sigmoid"), "kernel"),
                       (BLSRegressor(max_iter=0), "max_iter")):
        with pytest.raises(ValueError, match=match):
            est.fit(X, y)
    with pytest.raises(ValueError):
        RVMRegressor().fit(X, y[:-1])
    with pytest.raises(ValueError, match="two samples"):
        RVMRegressor().fit(X[:1], y[:1])


def test_a_polynomial_kernel_that_overflows_is_refused_by_name():
    X = np.random.default_rng(0).normal(size=(30, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="poly kernel of X overflows float32"):
        RVMRegressor("poly", degree=60, gamma=50.0).fit(X, X[:, 0])


def test_flap_noise_of_an_exact_fit_is_zero_not_nan():
    """||y - Phi mu||^2 of an exact linear fit rounds to about 0, possibly below: the
    re-estimated noise is then 0, not the square root of a negative number."""
    X = np.random.default_rng(0).normal(size=(30, 2)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        est = FLAPRegressor("linear").fit(X, X[:, 0])
    assert np.isfinite(est.noise_std_) and 0 <= est.noise_std_ < 1e-2


@pytest.mark.parametrize("cls", [RVMRegressor, BLSRegressor, FLAPRegressor])
@pytest.mark.parametrize("kernel", ["rbf", "linear"])
@pytest.mark.parametrize("dtype, a, c", [(np.float32, 2.0**-66, 2.0**66), (np.float32, 2.0**66, 2.0**-66),
                                         (np.float64, 2.0**-996, 2.0**996)])
def test_predictions_are_equivariant_far_from_unit_scale(cls, kernel, dtype, a, c):
    """Fitted on (a X, c y), the regressors predict c times what they predict from (X, y)
    at a X, with the same relevance set, in float32 at 1e+-20 (squared distances of 1e40
    overflow) and in float64 at 1e+-300; the default gamma follows the inputs' scale.
    (a and c are powers of two, so a X holds X's digits: the float32 engine's own
    sensitivity to rounding is not what this tests.)"""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2)).astype(dtype)
    y = (np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=60)).astype(dtype)
    X_new = rng.normal(size=(5, 2)).astype(dtype)
    ref = cls(kernel=kernel).fit(X, y)
    beyond = kernel == "linear" and dtype == np.float64  # coef_ ~ c / a = 2^1992: not a float64
    with pytest.warns(RuntimeWarning, match="lies beyond") if beyond else contextlib.nullcontext():
        got = cls(kernel=kernel).fit(X * dtype(a), y * dtype(c))
    np.testing.assert_array_equal(got.relevance_indices_, ref.relevance_indices_)
    mean, std = got.predict(X_new * dtype(a), return_std=True)
    ref_mean, ref_std = ref.predict(X_new, return_std=True)
    np.testing.assert_allclose(mean / c, ref_mean, rtol=1e-4, atol=1e-4 * np.abs(ref_mean).max())
    np.testing.assert_allclose(std / c, ref_std, rtol=1e-4)
    assert got.noise_std_ / c == pytest.approx(ref.noise_std_, rel=1e-4)

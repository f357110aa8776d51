"""Sparse Bayesian regression: the RVM, FLAP, FLAP-sigma and BLS on the fast
marginal-likelihood engine of :mod:`bayeskit.sparse.sparse_bayes`, and the Bayesian Lasso of
:mod:`bayeskit.sparse.bayesian_lasso`."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from bayeskit.core import validation
from bayeskit.core.notices import warn
from bayeskit.core.scaling import unit_scale
from bayeskit.estimators._common import OneCallAtATime, _key, finish, validate
from bayeskit.sparse import bayesian_lasso, sparse_bayes


class _SparseBayesRegressor(OneCallAtATime, RegressorMixin, BaseEstimator):
    """Shared fit and predict; subclasses fix the prior.

    The basis is the kernel between the inputs and the training inputs: ``"rbf"``
    exp(-gamma ||x - x'||^2), ``"poly"`` (gamma x'x' + coef0)^degree, or ``"linear"``,
    the features themselves (variable selection: ``coef_`` is then one weight per
    feature); ``fit_intercept`` adds a constant column. ``gamma=None`` takes
    1 / (n_features var(X)), scikit-learn's "scale".

    Attributes
    ----------
    coef_ : (n_basis,) posterior mean weight of each training point (kernels) or feature
        (linear), 0 for those pruned
    intercept_ : weight of the constant column (0 without ``fit_intercept``)
    relevance_indices_ : indices of the relevance vectors (training rows) or selected
        features
    relevance_vectors_ : the relevance vectors (kernels only)
    noise_std_ : estimated noise standard deviation
    n_iter_ : engine iterations (each ten basis moves and a noise update)
    log_evidence_ : the engine's objective after each iteration: the log evidence
        log N(y | 0, C) for the RVM; for BLS and FLAP that minus the Laplace prior's
        penalty at the iteration's lambda (rho / 2 sum gamma), which lambda's own update
        can lower, so that trace need not rise
    state_, result_ : the engine's state and FitResult, in the units of X / x_scale_ and
        y / y_scale_
    x_scale_, y_scale_ : the robust scales divided out of X and y before the fit
        (:mod:`bayeskit.core.scaling`); the attributes above are in the caller's units
    """

    _prior = "rvm"

    def __init__(self, kernel="rbf", *, gamma=None, degree=3, coef0=1.0, fit_intercept=True, max_basis=None,
                 max_iter=200):
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.fit_intercept = fit_intercept
        self.max_basis = max_basis
        self.max_iter = max_iter

    def _prior_name(self) -> str:
        return self._prior

    def _check_params(self, X):
        validation.check_choice("kernel", self.kernel, sparse_bayes.KERNELS)
        validation.check_int_in("max_iter", self.max_iter, 1)
        if self.max_basis is not None:
            validation.check_int_in("max_basis", self.max_basis, 1)
        if self.gamma is not None:
            validation.check_positive(gamma=self.gamma)
        if self.kernel == "poly":
            validation.check_int_in("degree", self.degree, 0)

    def _unit_gamma(self, X_unit) -> float:
        """The kernel width for inputs divided by x_scale_: gamma x_scale_^2, or for
        ``gamma=None`` 1 / (n_features var(X / x_scale_)); refused when it leaves the dtype's
        range (a given gamma far from the data's scale)."""
        if self.kernel == "linear":
            return 1.0  # unused
        if self.gamma is None:
            var = float(np.var(X_unit))
            return 1.0 / (X_unit.shape[1] * (var if var > 0 else 1.0))
        unit = float(self.gamma) * self.x_scale_ * self.x_scale_
        if not (np.isfinite(np.asarray(unit, X_unit.dtype)) and np.asarray(unit, X_unit.dtype) > 0):
            raise ValueError(f"gamma={self.gamma:.3g} on data at scale {self.x_scale_:.3g} gives a kernel whose exponent "
                             f"leaves {X_unit.dtype.name}'s range; choose gamma near 1 / scale^2, or gamma=None.")
        return unit

    def _design(self, X_unit):
        """Phi of inputs already divided by ``x_scale_``: against the training inputs so
        divided, with gamma times x_scale_^2, it is the kernel of the caller's units."""
        return sparse_bayes.design(X_unit, None if self.kernel == "linear" else self._centers,  # host arrays: a jitted call
                                   kernel=self.kernel, gamma=self._kernel_gamma, degree=self.degree, coef0=self.coef0,
                                   bias=self.fit_intercept)

    def fit(self, X, y):
        """Fit on X (n_samples, n_features) and y (n_samples,)."""
        X, y = validate(self, X, y, dtype=[np.float64, np.float32], y_numeric=True)
        if X.shape[0] < 2:
            raise ValueError(f"n_samples={X.shape[0]}: at least two samples are needed.")
        self._check_params(X)
        self.X_fit_ = X.copy()  # the model owns its data: the caller may overwrite X
        # the fit runs in units where X and y are O(1) (core.scaling), divided on the host
        self._centers, self.x_scale_ = unit_scale(X, exact=True)  # exact: equivariant despite fixed tolerances
        y_unit, self.y_scale_ = unit_scale(y.astype(X.dtype)[:, None], exact=True)
        self._kernel_gamma = self._unit_gamma(self._centers)
        # gamma_ in X's units is only reported (for data at 1e-300 it leaves float64)
        self.gamma_ = float(self.gamma) if self.gamma is not None else self._kernel_gamma / self.x_scale_ / self.x_scale_
        Phi = self._design(self._centers)
        if self.kernel == "poly" and not np.all(np.isfinite(np.asarray(Phi))):  # the others are bounded on finite X / x_scale_
            raise ValueError(f"the {self.kernel} kernel of X overflows {X.dtype.name}; choose a smaller degree or gamma.")
        n_basis = Phi.shape[1]
        hp = sparse_bayes.Hyperparams(prior=self._prior_name(), max_basis=min(n_basis, self.max_basis or 64))
        # Phi is a kernel of the finite X / x_scale_ (checked above): the engine's copy-and-check of Phi is skipped
        result = sparse_bayes.fit(Phi, y_unit[:, 0], hp, max_iter=self.max_iter, throw=False, check=False)
        finish(result, type(self).__name__, detail=f" (max_iter={self.max_iter})")
        if bool(result.state.saturated):
            warn(f"all {hp.max_basis} basis slots are in use and more would enter; raise max_basis.", RuntimeWarning)
        data = sparse_bayes.as_data(Phi, y_unit[:, 0], gram=False)
        self.hyperparams_, self.result_, self.state_, self._scale = hp, result, result.state, data.scale
        w = np.asarray(sparse_bayes.weights(result.state, data.scale), np.float64) * self.y_scale_
        on = np.asarray(sparse_bayes.relevance(result.state))
        if self.fit_intercept:
            w, on, self.intercept_ = w[:-1], on[:-1], float(w[-1])
        else:
            self.intercept_ = 0.0
        with np.errstate(over="ignore"):
            self.coef_ = w / self.x_scale_ if self.kernel == "linear" else w  # a linear weight is per unit of X
        if not np.all(np.isfinite(self.coef_)):
            warn(f"coef_ of y at scale {self.y_scale_:.3g} on X at scale {self.x_scale_:.3g} lies beyond "
                 f"float64's range (inf where so); predict works in the fit's own units and is unaffected.",
                 RuntimeWarning)
        self.relevance_indices_ = np.flatnonzero(on)
        if self.kernel != "linear":
            self.relevance_vectors_ = X[self.relevance_indices_]
        else:  # an earlier kernel fit's vectors
            vars(self).pop("relevance_vectors_", None)
        self.noise_std_ = self._noise_std(result.state, data) * self.y_scale_
        self.n_iter_ = int(result.n_iter)
        # the evidence of y = the evidence of y / s minus n log s
        self.log_evidence_ = np.asarray(result.trace, np.float64)[: self.n_iter_] - len(y) * np.log(self.y_scale_)
        return self


    def _noise_std(self, state, data) -> float:
        return float(1.0 / np.sqrt(state.beta))

    def predict(self, X, return_std=False, *, chunk_size=None):
        """Predictive mean, and with ``return_std`` the predictive standard deviation
        sqrt(phi' Sigma phi + noise_std_^2); the kernel rows of ``chunk_size`` inputs at a time."""
        check_is_fitted(self, "state_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32]).astype(self.X_fit_.dtype, copy=False)
        X_unit = X / self.x_scale_  # divided on the host, before the cast
        mean, var = sparse_bayes.predict_inputs(self.state_, X_unit, self._design, self._scale, noise=False,
                                                chunk_size=chunk_size)
        mean = np.asarray(mean, np.float64) * self.y_scale_
        if not return_std:
            return mean
        noise = self.noise_std_ / self.y_scale_  # in the fit's units: y at 1e300 keeps its square finite
        return mean, np.sqrt(np.asarray(var, np.float64) + noise * noise) * self.y_scale_


class RVMRegressor(_SparseBayesRegressor):
    """Relevance vector machine (Tipping 2001) fitted by the fast marginal-likelihood
    algorithm (Tipping & Faul 2003): one variance per basis under a flat hyperprior,
    noise re-estimated. See :class:`_SparseBayesRegressor` for the kernels and the
    fitted attributes."""

    _prior = "rvm"


class BLSRegressor(_SparseBayesRegressor):
    """Bayesian Lasso sparse model (Helgoy & Li 2019): the Laplace prior of the Bayesian
    Lasso conditioned on the noise, fitted by type-II maximum likelihood on the fast
    engine, with its own noise and lambda updates. Attributes as
    :class:`_SparseBayesRegressor`, plus ``lambda_``."""

    _prior = "bls"

    def fit(self, X, y):
        super().fit(X, y)
        self.lambda_ = float(self.state_.lam)  # g_m = gamma_m / sigma^2 is free of y's units, and so is lambda
        return self


class FLAPRegressor(_SparseBayesRegressor):
    """Fast Laplace (Babacan, Molina & Katsaggelos 2010): a Laplace prior through an
    exponential hyperprior on the weight variances, lambda re-estimated. With
    ``estimate_noise=False`` (their code) the noise stays at var(y) / 100 during the fit
    and ``noise_std_`` is their final re-estimate ||y - Phi mu||^2 / (N - sum_A (1 -
    Sigma_mm / gamma_m)), which the predictive standard deviation takes (the fixed noise
    made its intervals several times too narrow); with ``True`` (FLAP-sigma) it is
    re-estimated throughout."""

    def __init__(self, kernel="rbf", *, estimate_noise=False, gamma=None, degree=3, coef0=1.0, fit_intercept=True,
                 max_basis=None, max_iter=200):
        super().__init__(kernel, gamma=gamma, degree=degree, coef0=coef0, fit_intercept=fit_intercept,
                         max_basis=max_basis, max_iter=max_iter)
        self.estimate_noise = estimate_noise

    def _prior_name(self) -> str:
        return "flap_sigma" if self.estimate_noise else "flap"

    def fit(self, X, y):
        super().fit(X, y)
        self.lambda_ = float(self.state_.lam) / self.y_scale_ / self.y_scale_  # gamma_m ~ Exp(lambda / 2), in y's units^2
        return self

    def _noise_std(self, state, data) -> float:
        if self.estimate_noise:
            return super()._noise_std(state, data)
        return float(np.sqrt(sparse_bayes.noise_reestimate(state, data)))


class BayesianLassoRegressor(OneCallAtATime, RegressorMixin, BaseEstimator):
    """The Bayesian Lasso (Park & Casella 2008): Laplace prior on the coefficients given
    the noise, lambda^2 ~ Gamma(0.1, 0.1), sampled by their Gibbs sampler
    (``method="gibbs"``) or numpyro's NUTS (``"nuts"``). The intercept has a flat prior;
    the columns of X are used as given (standardise them for the paper's setting).

    The sampler runs on X / a and y / c (a, c powers of two near their scales) with the rate
    of lambda^2's prior times a^2, whose posterior is exactly that of (X, y) with beta
    divided by c / a, sigma^2 by c^2, tau^2 by 1 / a^2 and lambda^2 by a^2; the draws are put
    back, in float64. So y at any scale fits in float32; X far from unit scale moves the
    prior's rate with it, and a rate beyond float32 is refused with the scale.

    Parameters
    ----------
    num_samples, num_warmup : int, default=15000, 3000
        Kept draws and warm-up transitions per chain.
    method : {"gibbs", "nuts"}
    num_chains : int, default=1
        Chains, run vectorised.
    alpha : float, default=0.05
        The credible intervals are equal-tailed ``1 - alpha``.
    lambda_prior : (shape, rate), default=(0.1, 0.1)
        Gamma prior of lambda^2.
    random_state : int, RandomState or None
    progress : bool, default=False
        A bar over the transitions (off under the ``CI`` environment variable).

    Attributes
    ----------
    coef_ : (n_features,) posterior medians (the paper's point estimate)
    coef_interval_ : (n_features, 2) equal-tailed ``1 - alpha`` credible intervals
    intercept_ : mean(y) - mean(X) coef_
    lambda_ : posterior median of lambda
    samples_ : the draws, (chain, draw, ...)
    """

    def __init__(self, *, num_samples=15000, num_warmup=3000, method="gibbs", num_chains=1, alpha=0.05,
                 lambda_prior=(0.1, 0.1), random_state=None, progress=False):
        self.num_samples = num_samples
        self.num_warmup = num_warmup
        self.method = method
        self.num_chains = num_chains
        self.alpha = alpha
        self.lambda_prior = lambda_prior
        self.random_state = random_state
        self.progress = progress

    def fit(self, X, y):
        """Sample the posterior given X (n_samples, n_features) and y (n_samples,)."""
        validation.check_choice("method", self.method, ("gibbs", "nuts"))
        validation.check_int_in("num_samples", self.num_samples, 1)
        validation.check_int_in("num_warmup", self.num_warmup, 0)
        validation.check_int_in("num_chains", self.num_chains, 1)
        if not 0 < self.alpha < 1:
            raise ValueError(f"alpha must be in (0, 1); got {self.alpha}.")
        if np.shape(self.lambda_prior) != (2,):
            raise ValueError(f"lambda_prior must be a pair (shape r, rate delta) of positive numbers; got {self.lambda_prior!r}.")
        validation.check_positive(lambda_prior=self.lambda_prior)
        X, y = validate(self, X, y, dtype=[np.float64, np.float32], y_numeric=True)
        if X.shape[0] < 3:
            raise ValueError(f"n_samples={X.shape[0]}: at least three samples are needed.")
        bayesian_lasso.check_problem(X, y)  # a constant y, before it is scaled
        r, delta = (float(v) for v in self.lambda_prior)
        X_unit, y_unit, hparams, back = bayesian_lasso.unit_problem(X, y, bayesian_lasso.Hyperparams(lambda_prior=(r, delta)))
        draws = bayesian_lasso.sample_unit(
            _key(self.random_state), bayesian_lasso.as_data(X_unit, y_unit), hparams, method=self.method,
            num_warmup=self.num_warmup, num_samples=self.num_samples, num_chains=self.num_chains, progress=self.progress)
        nonfinite = [name for name, v in draws.items() if not np.all(np.isfinite(np.asarray(v)))]
        if nonfinite:
            raise RuntimeError(f"BayesianLassoRegressor failed: non-finite draws of {', '.join(nonfinite)}; "
                               "rescale X and y, or fit in float64 (jax_enable_x64).")
        self.samples_ = {k: np.asarray(v, np.float64) * back[k] for k, v in draws.items()}  # sigma^2 of y at 1e20 is 1e40
        beta = self.samples_["beta"].reshape(-1, X.shape[1])
        self.coef_ = np.median(beta, axis=0)
        self.coef_interval_ = np.quantile(beta, [self.alpha / 2, 1 - self.alpha / 2], axis=0).T
        self.intercept_ = float(np.mean(y) - np.mean(X, axis=0) @ self.coef_)
        self.lambda_ = float(np.median(np.sqrt(self.samples_["lambda2"])))
        return self

    def predict(self, X):
        """X coef_ + intercept_ (the posterior-median plug-in)."""
        check_is_fitted(self, "coef_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        return X @ self.coef_ + self.intercept_


__all__ = ["BLSRegressor", "BayesianLassoRegressor", "FLAPRegressor", "RVMRegressor"]

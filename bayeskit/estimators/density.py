"""Conditional density regression: the similarity-based mixture of experts."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from bayeskit.core import validation
from bayeskit.core.chunks import map_blocks
from bayeskit.core.device import as_array
from bayeskit.density import sbmoe
from bayeskit.estimators._common import OneCallAtATime, _best_restart, _key, validate


class SBMoERegressor(OneCallAtATime, RegressorMixin, BaseEstimator):
    """Similarity-based Bayesian mixture of experts (Zhang, Bokrantz & Olsson).

    A conditional density model: the predictive p(y | x) is a Gaussian mixture whose
    weights come from a learned Mahalanobis similarity to the training inputs
    (:mod:`bayeskit.density.sbmoe`). Inputs and outputs are standardised inside the fit;
    everything returned is in the caller's units.

    Parameters
    ----------
    n_experts : int, default=32
        C, the number of Gaussian experts.
    max_iter : int, default=20
        VB sweeps (20 in the paper).
    gate_steps : int, default=50
        Optimiser sub-steps on the gate per sweep (Proposition 4).
    optimizer : optax.GradientTransformation, optional
        The gate optimiser; default Adam with learning rate 0.05.
    random_state : int, RandomState or None
        Seeds the fit and the Monte Carlo of the predictive (fixed at fit time, so
        repeated predictions agree).
    gate_samples : int, default=2
        Bartlett draws per gate sub-step.
    gate : {"stochastic", "projection"}, default="stochastic"
    lp_sense : {"softmax", "max", "min"}, default="softmax"
    s_schedule : {"resolve", "literal"}, default="resolve"
    init : {"agglomerative", "kmeans++"}, default="agglomerative"
    kappa0, nu0, sigma0, expert_width, eta0, lambda0, eta_q : priors and the degrees of freedom
        of q(Lambda); the defaults are the library's, not the paper's (see
        :class:`bayeskit.density.sbmoe.Hyperparams`, whose ``paper()`` lists the paper's).
    n_gate, n_draws : int, default=100
        Draws of q(Lambda) (K_g) and of the experts (K_e) in the predictive mixture.
    n_init : int, default=1
        Restarts run as one vmapped fit (they differ in the gate's Monte Carlo, and in the
        initial clustering with ``init="kmeans++"``); the highest final ELBO is kept.
    progress : bool, default=False

    Attributes
    ----------
    state_ : bayeskit.density.sbmoe.State
    result_ : FitResult of the kept restart
    elbo_trace_ : ELBO per sweep
    metric_ : (n_features, n_features) the posterior mean gate precision E[Lambda],
        in standardised input units
    """

    def __init__(
        self,
        n_experts=32,
        *,
        max_iter=20,
        gate_steps=50,
        optimizer=None,
        random_state=None,
        gate_samples=2,
        gate="stochastic",
        lp_sense="softmax",
        s_schedule="resolve",
        init="agglomerative",
        kappa0=0.01,
        nu0=10.0,
        sigma0=None,
        expert_width=0.25,
        eta0=None,
        lambda0=30.0,
        eta_q=1000.0,
        n_gate=100,
        n_draws=100,
        n_init=1,
        progress=False,
    ):
        self.n_experts = n_experts
        self.max_iter = max_iter
        self.gate_steps = gate_steps
        self.optimizer = optimizer
        self.random_state = random_state
        self.gate_samples = gate_samples
        self.gate = gate
        self.lp_sense = lp_sense
        self.s_schedule = s_schedule
        self.init = init
        self.kappa0 = kappa0
        self.nu0 = nu0
        self.sigma0 = sigma0
        self.expert_width = expert_width
        self.eta0 = eta0
        self.lambda0 = lambda0
        self.eta_q = eta_q
        self.n_gate = n_gate
        self.n_draws = n_draws
        self.n_init = n_init
        self.progress = progress

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # the experts do not depend on x, so the predictive mean of a few experts is a
        # coarse regressor: scikit-learn's R^2 > 0.5 check does not apply
        tags.regressor_tags.poor_score = True
        return tags

    def _hyperparams(self) -> sbmoe.Hyperparams:
        return sbmoe.Hyperparams(
            n_experts=self.n_experts,
            lp_sense=self.lp_sense,
            s_schedule=self.s_schedule,
            gate=self.gate,
            gate_steps=self.gate_steps,
            gate_samples=self.gate_samples,
            init=self.init,
            kappa0=self.kappa0,
            nu0=self.nu0,
            sigma0=self.sigma0,
            expert_width=self.expert_width,
            eta0=self.eta0,
            lambda0=self.lambda0,
            eta_q=self.eta_q,
        )

    def fit(self, X, Y):
        """Fit on X (n_samples, n_inputs) and Y (n_samples,) or (n_samples, n_outputs)."""
        for name in ("max_iter", "n_gate", "n_draws", "n_init"):
            validation.check_int_in(name, getattr(self, name), 1)
        X, Y = validate(self, X, Y, y_name="Y", dtype=[np.float64, np.float32], multi_output=True, y_numeric=True)
        self._one_d = np.ndim(Y) == 1
        hp = self._hyperparams()
        X, Y2 = sbmoe.inference.check_inputs(X, Y, hp)
        key, self._predict_key = _key(self.random_state, 2)
        labels = sbmoe.agglomerative_labels(Y2, self.n_experts) if self.init == "agglomerative" else None
        X_j, Y_j = as_array(X), as_array(Y2)
        run = lambda k: sbmoe.fit(k, X_j, Y_j, hp, max_iter=self.max_iter, optimizer=self.optimizer, init_labels=labels,
                                  progress=self.progress, throw=False)
        result = jax.vmap(run)(jax.random.split(key, self.n_init)) if self.n_init > 1 else run(key)
        # the paper's fixed number of sweeps (no tolerance): reaching max_iter is the plan, not a warning
        best = _best_restart(result, self.n_init, type(self).__name__, warn_max_iter=False)
        self.hyperparams_ = hp
        self.result_ = best
        self.state_ = best.state
        self.dtype_ = np.dtype(X_j.dtype)
        self.n_outputs_ = Y2.shape[1]
        self.n_iter_ = int(best.n_iter)
        self.elbo_trace_ = np.asarray(best.trace)[: self.n_iter_]
        self.metric_ = np.asarray(sbmoe.mean_precision(best.state, hp))
        return self

    def _check_X(self, X):
        check_is_fitted(self, "state_")
        return validate(self, X, reset=False, dtype=[np.float64, np.float32]).astype(self.dtype_, copy=False)

    def predictive(self, X, *, chunk_size=None) -> sbmoe.Mixture:
        """The predictive mixture p(y | x) for every row of X (Section 3.3); the gate of
        ``chunk_size`` rows at a time."""
        return self._mixture(as_array(self._check_X(X)), chunk_size)

    def _mixture(self, X, chunk_size=None) -> sbmoe.Mixture:
        return sbmoe.predictive(self._predict_key, self.state_, X, self.hyperparams_, n_gate=self.n_gate, n_draws=self.n_draws,
                                chunk_size=chunk_size)

    def _rows(self, f, X, chunk_size, *more):
        """``f(predictive mixture of a block of X, matching rows of more)`` over blocks of rows."""
        X = as_array(self._check_X(X))
        return np.asarray(map_blocks(lambda b: f(self._mixture(b[0]), *b[1:]), (X, *more), chunk_size))

    def predict(self, X, *, chunk_size=None):
        """The predictive mean E[y | x], shape (n_samples,) or (n_samples, n_outputs),
        ``chunk_size`` rows at a time."""
        mean = self._rows(lambda mix: mix.mean, X, chunk_size)
        return mean[:, 0] if self._one_d else mean

    def score_samples(self, X, Y, *, chunk_size=None):
        """``log p(y_i | x_i)`` under the predictive, one value per row, ``chunk_size`` rows at a time."""
        check_is_fitted(self, "state_")
        Y = np.asarray(Y, self.dtype_)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.shape != (np.shape(X)[0], self.n_outputs_) or not np.all(np.isfinite(Y)):
            raise ValueError(f"Y must be finite with shape ({np.shape(X)[0]}, {self.n_outputs_}), got {Y.shape}.")
        return self._rows(lambda mix, y: mix.log_prob(y), X, chunk_size, as_array(Y))

    def sample(self, X, n_samples=1, random_state=None):
        """Draws from p(y | x): shape (n_samples, n_rows) or (n_samples, n_rows, n_outputs)."""
        validation.check_int_in("n_samples", n_samples, 1)
        draws = np.asarray(self.predictive(X).sample(_key(random_state), n_samples))
        return draws[..., 0] if self._one_d else draws


# ----------------------------------------------------------------------- link prediction

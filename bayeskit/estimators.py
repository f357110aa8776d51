"""scikit-learn style wrappers over the functional core.

``__init__`` stores hyperparameters only; ``fit`` validates on the host, runs the
jitted core (restarts as one ``vmap``), and sets trailing-underscore attributes.
"""

from __future__ import annotations

import warnings

import jax
import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from . import bsml, irm, lfrm, probit, sbmoe
from .core import validation
from .core.metrics import hamming_loss
from .core.status import Status


def _key(random_state) -> jax.Array:
    if random_state is None:
        random_state = int(np.random.SeedSequence().generate_state(1)[0])
    if isinstance(random_state, np.random.RandomState):
        random_state = int(random_state.randint(np.iinfo(np.int32).max))
    return jax.random.key(int(random_state))


def _best_restart(result, n_restarts: int, name: str):
    """The fit itself, or of a vmapped batch of restarts the one with the highest final
    bound among those that did not fail; a ``RuntimeError`` when all failed."""
    failed = lambda status: (status == Status.nonfinite) | (status == Status.not_positive_definite)
    if n_restarts > 1:
        score = jnp.where(failed(result.status), -jnp.inf, result.objective)
        result = jax.tree.map(lambda a: a[int(jnp.argmax(score))], result)
    if bool(failed(result.status)):
        raise RuntimeError(f"{name} failed: {Status[result.status]}")
    return result


class _MultilabelMixin(ClassifierMixin):
    """predict / score / tags shared by the multilabel classifiers."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.multi_label = True
        return tags

    def _validate_fit_input(self, X, Y, *, allow_missing: bool):
        """X as a float array and Y as (n, L) int8 in {0, 1} (-1 = missing when allowed).

        A 1-D ``Y`` is one binary label with any two classes (``classes_``); a 2-D ``Y``
        is multilabel in {0, 1}, with -1 for an unobserved entry.
        """
        X, Y = validate_data(self, X, Y, dtype=[np.float64, np.float32], multi_output=True, y_numeric=False)
        Y = np.asarray(Y)
        if Y.ndim == 1:
            kind = type_of_target(Y)
            if kind not in ("binary", "multiclass"):
                raise ValueError(f"Unknown label type: {kind}. {type(self).__name__} takes binary or multilabel targets.")
            classes = np.unique(Y)
            if classes.size > 2:
                raise ValueError(
                    f"Only binary classification is supported for a 1-D target ({classes.size} classes found); "
                    "give multilabel targets as a (n_samples, n_labels) matrix in {0, 1}."
                )
            self._one_d, self.classes_ = True, classes
            return X, (Y == classes[-1]).astype(np.int8)[:, None] if classes.size == 2 else np.zeros((len(Y), 1), np.int8)
        self._one_d = False
        Y = validation.check_labels(Y, X.shape[0], "Y", allow_missing=allow_missing)
        self.classes_ = [np.array([0, 1])] * Y.shape[1]
        return X, Y

    def _check_X(self, X):
        check_is_fitted(self, "state_")
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        return X.astype(self.dtype_, copy=False)

    def _finish_fit(self, Y, result, n_restarts):
        best = _best_restart(result, n_restarts, type(self).__name__)
        if bool(best.status == Status.max_iter_reached) and self.tol > 0:
            warnings.warn(f"{type(self).__name__}: {Status[best.status]}", ConvergenceWarning, stacklevel=3)
        self.result_ = best
        self.state_ = best.state
        self.n_iter_ = int(best.n_iter)
        self.lower_bound_ = float(best.objective)
        self.converged_ = bool(best.converged)
        self.n_labels_ = Y.shape[1]
        return self

    def _format_proba(self, P):
        P = np.asarray(P)
        return np.column_stack([1 - P[:, 0], P[:, 0]]) if self._one_d else P

    def predict(self, X):
        """Labels in {0, 1}: ``predict_proba > 0.5``; shape (n_samples, n_labels)."""
        P = self.predict_proba(X)
        if self._one_d:
            return self.classes_[(P[:, 1] > 0.5).astype(int)] if self.classes_.size == 2 else np.full(len(P), self.classes_[0])
        return (P > 0.5).astype(int)

    def score(self, X, y, sample_weight=None):
        """``1 - hamming loss`` of ``predict(X)`` (the paper's main metric); accuracy for 1-D Y."""
        pred = self.predict(X)
        y = np.asarray(y).reshape(pred.shape)
        if self._one_d:
            return float(np.average(pred == y, weights=sample_weight))
        return 1.0 - float(hamming_loss(y, pred))


class BSMLClassifier(_MultilabelMixin, TransformerMixin, BaseEstimator):
    """Bayesian supervised (and semi-supervised) multilabel learning (Gönen 2014).

    Couples a linear projection to ``n_components`` dimensions with one probit
    classifier per label, fitted by variational Bayes (:mod:`bayeskit.bsml`). Labels
    given as -1 are unobserved: the model then is BSSML (Section 3.2), which also uses
    the inputs of unlabelled rows (transductive use: fit on train + test rows with the
    test labels set to -1).

    Parameters
    ----------
    n_components : int, default=2
        R, the dimension of the shared subspace.
    prior : {"entrywise", "ard"}, default="entrywise"
        "ard" gives BSML+ARD, which switches off dimensions it does not need.
    max_iter : int, default=500
    tol : float, default=1e-6
        Relative tolerance on the lower bound; 0 runs all ``max_iter`` sweeps.
    random_state : int, RandomState or None
    n_init : int, default=1
        Random restarts, run together as one vmapped fit; the best bound is kept.
    sigma_z : float, default=0.1
    alpha_phi, beta_phi, alpha_lambda, beta_lambda, alpha_psi, beta_psi : float, default=1
        Gamma hyperparameters (shape, scale).
    semisupervised : {"auto", True, False}, default="auto"
        BSSML; "auto" uses it when Y contains -1.
    predictive : {"consistent", "author"}, default="consistent"
    progress : bool, default=False

    Attributes
    ----------
    state_ : bayeskit.bsml.State
    result_ : FitResult of the kept restart
    n_iter_, lower_bound_, converged_
    components_ : array (n_components, n_features), the mean projection ``<Q>'``
    active_components_ : bool array (n_components,), dimensions that survive
    lower_bound_trace_ : array of the bound per sweep
    """

    def __init__(
        self,
        n_components=2,
        *,
        prior="entrywise",
        max_iter=500,
        tol=1e-6,
        random_state=None,
        n_init=1,
        sigma_z=0.1,
        alpha_phi=1.0,
        beta_phi=1.0,
        alpha_lambda=1.0,
        beta_lambda=1.0,
        alpha_psi=1.0,
        beta_psi=1.0,
        semisupervised="auto",
        predictive="consistent",
        progress=False,
    ):
        self.n_components = n_components
        self.prior = prior
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.n_init = n_init
        self.sigma_z = sigma_z
        self.alpha_phi = alpha_phi
        self.beta_phi = beta_phi
        self.alpha_lambda = alpha_lambda
        self.beta_lambda = beta_lambda
        self.alpha_psi = alpha_psi
        self.beta_psi = beta_psi
        self.semisupervised = semisupervised
        self.predictive = predictive
        self.progress = progress

    def _hyperparams(self, semisupervised: bool) -> bsml.Hyperparams:
        return bsml.Hyperparams(
            n_components=self.n_components,
            prior=self.prior,
            semisupervised=semisupervised,
            alpha_phi=self.alpha_phi,
            beta_phi=self.beta_phi,
            alpha_lambda=self.alpha_lambda,
            beta_lambda=self.beta_lambda,
            alpha_psi=self.alpha_psi,
            beta_psi=self.beta_psi,
            sigma_z=self.sigma_z,
        )

    def fit(self, X, Y):
        """Fit on X (n_samples, n_features) and Y (n_samples, n_labels) in {0, 1, -1}."""
        validation.check_choice("semisupervised", self.semisupervised, ("auto", True, False))
        validation.check_choice("predictive", self.predictive, bsml.PREDICTIVES)
        validation.check_int_in("n_init", self.n_init, 1)
        validation.check_int_in("max_iter", self.max_iter, 1)
        X, Y = self._validate_fit_input(X, Y, allow_missing=self.semisupervised is not False)
        semi = bool(np.any(Y < 0)) if self.semisupervised == "auto" else bool(self.semisupervised)
        hp = self._hyperparams(semi)
        bsml._check_inputs(X, Y, hp)
        X_j = jnp.asarray(X)
        self.dtype_ = np.dtype(X_j.dtype)
        key = _key(self.random_state)
        run = lambda k: bsml.fit(k, X_j, Y, hp, max_iter=self.max_iter, tol=self.tol, progress=self.progress, throw=False)
        result = jax.vmap(run)(jax.random.split(key, self.n_init)) if self.n_init > 1 else run(key)
        self.hyperparams_ = hp
        self._finish_fit(Y, result, self.n_init)
        self.components_ = np.asarray(self.state_.q_mean.T)
        self.active_components_ = np.asarray(bsml.active_components(self.state_))
        self.lower_bound_trace_ = np.asarray(self.result_.trace[: self.n_iter_])
        return self

    def predict_proba(self, X):
        """``P(y = 1)`` per label, shape (n_samples, n_labels) ((n_samples, 2) for 1-D Y)."""
        X = self._check_X(X)
        return self._format_proba(bsml.predict_proba(self.state_, X, self.hyperparams_, predictive=self.predictive))

    def transform(self, X):
        """The embeddings ``<Q>' x``, shape (n_samples, n_components)."""
        return np.asarray(bsml.transform(self.state_, self._check_X(X)))


class ProbitClassifier(_MultilabelMixin, BaseEstimator):
    """One variational Bayesian probit classifier per label (the paper's PROBIT).

    Parameters
    ----------
    max_iter, tol, random_state : as in :class:`BSMLClassifier`.
    alpha_lambda, beta_lambda, alpha_psi, beta_psi : float, default=1
    predictive : {"consistent", "author"}
    """

    def __init__(self, *, max_iter=500, tol=1e-6, random_state=None, alpha_lambda=1.0, beta_lambda=1.0, alpha_psi=1.0, beta_psi=1.0, predictive="consistent", progress=False):
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.alpha_lambda = alpha_lambda
        self.beta_lambda = beta_lambda
        self.alpha_psi = alpha_psi
        self.beta_psi = beta_psi
        self.predictive = predictive
        self.progress = progress

    def fit(self, X, Y):
        validation.check_choice("predictive", self.predictive, bsml.PREDICTIVES)
        validation.check_int_in("max_iter", self.max_iter, 1)
        X, Y = self._validate_fit_input(X, Y, allow_missing=False)
        priors = probit.ClassifierPriors(self.alpha_lambda, self.beta_lambda, self.alpha_psi, self.beta_psi)
        result = probit.fit(_key(self.random_state), X, Y, priors, max_iter=self.max_iter, tol=self.tol, progress=self.progress, throw=False)
        self.dtype_ = np.dtype(jnp.asarray(X).dtype)
        return self._finish_fit(Y, result, 1)

    def predict_proba(self, X):
        X = self._check_X(X)
        return self._format_proba(probit.predict_proba(self.state_, X, predictive=self.predictive))


class SBMoERegressor(RegressorMixin, BaseEstimator):
    """Similarity-based Bayesian mixture of experts (Zhang, Bokrantz & Olsson).

    A conditional density model: the predictive p(y | x) is a Gaussian mixture whose
    weights come from a learned Mahalanobis similarity to the training inputs
    (:mod:`bayeskit.sbmoe`). Inputs and outputs are standardised inside the fit;
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
    lp_sense : {"max", "min", "softmax"}, default="max"
    s_schedule : {"resolve", "literal"}, default="resolve"
    init : {"agglomerative", "kmeans++"}, default="agglomerative"
    kappa0, nu0, sigma0, eta0, lambda0 : priors (see :class:`bayeskit.sbmoe.Hyperparams`).
    n_gate, n_draws : int, default=100
        Draws of q(Lambda) (K_g) and of the experts (K_e) in the predictive mixture.
    n_init : int, default=1
        Restarts run as one vmapped fit (they differ in the gate's Monte Carlo, and in the
        initial clustering with ``init="kmeans++"``); the highest final ELBO is kept.
    progress : bool, default=False

    Attributes
    ----------
    state_ : bayeskit.sbmoe.State
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
        lp_sense="max",
        s_schedule="resolve",
        init="agglomerative",
        kappa0=0.01,
        nu0=None,
        sigma0=None,
        eta0=None,
        lambda0=None,
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
        self.eta0 = eta0
        self.lambda0 = lambda0
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
            eta0=self.eta0,
            lambda0=self.lambda0,
        )

    def fit(self, X, Y):
        """Fit on X (n_samples, n_inputs) and Y (n_samples,) or (n_samples, n_outputs)."""
        for name in ("max_iter", "n_gate", "n_draws", "n_init"):
            validation.check_int_in(name, getattr(self, name), 1)
        X, Y = validate_data(self, X, Y, dtype=[np.float64, np.float32], multi_output=True, y_numeric=True)
        self._one_d = np.ndim(Y) == 1
        hp = self._hyperparams()
        X, Y2 = sbmoe.inference._check_inputs(X, Y, hp)
        key, self._predict_key = jax.random.split(_key(self.random_state))
        labels = sbmoe.agglomerative_labels(Y2, self.n_experts) if self.init == "agglomerative" else None
        X_j, Y_j = jnp.asarray(X), jnp.asarray(Y2)
        run = lambda k: sbmoe.fit(k, X_j, Y_j, hp, max_iter=self.max_iter, optimizer=self.optimizer, init_labels=labels, progress=self.progress, throw=False)
        result = jax.vmap(run)(jax.random.split(key, self.n_init)) if self.n_init > 1 else run(key)
        best = _best_restart(result, self.n_init, type(self).__name__)
        self.hyperparams_ = hp
        self.result_ = best
        self.state_ = best.state
        self.dtype_ = np.dtype(X_j.dtype)
        self.n_outputs_ = Y2.shape[1]
        self.n_iter_ = int(best.n_iter)
        self.elbo_trace_ = np.asarray(best.trace[: self.n_iter_])
        L = np.asarray(best.state.gate.L)
        self.metric_ = float(hp.priors(X.shape[1], Y2.shape[1], X_j.dtype).eta0) * L @ L.T
        return self

    def _check_X(self, X):
        check_is_fitted(self, "state_")
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32]).astype(self.dtype_, copy=False)

    def predictive(self, X) -> sbmoe.Mixture:
        """The predictive mixture p(y | x) for every row of X (Section 3.3)."""
        X = self._check_X(X)
        return sbmoe.predictive(self._predict_key, self.state_, X, self.hyperparams_, n_gate=self.n_gate, n_draws=self.n_draws)

    def predict(self, X):
        """The predictive mean E[y | x], shape (n_samples,) or (n_samples, n_outputs)."""
        mean = np.asarray(self.predictive(X).mean)
        return mean[:, 0] if self._one_d else mean

    def score_samples(self, X, Y):
        """``log p(y_i | x_i)`` under the predictive, one value per row."""
        Y = np.asarray(Y, self.dtype_)
        Y = Y[:, None] if Y.ndim == 1 else Y
        if Y.shape != (np.shape(X)[0], self.n_outputs_) or not np.all(np.isfinite(Y)):
            raise ValueError(f"Y must be finite with shape ({np.shape(X)[0]}, {self.n_outputs_}), got {Y.shape}.")
        return np.asarray(self.predictive(X).log_prob(jnp.asarray(Y)))

    def sample(self, X, n_samples=1, random_state=None):
        """Draws from p(y | x): shape (n_samples, n_rows) or (n_samples, n_rows, n_outputs)."""
        validation.check_int_in("n_samples", n_samples, 1)
        draws = np.asarray(self.predictive(X).sample(_key(random_state), n_samples))
        return draws[..., 0] if self._one_d else draws


# ----------------------------------------------------------------------- link prediction


class _LinkPredictor(BaseEstimator):
    """Shared ``fit(Y, mask=None, covariates=None)`` / ``predict_proba()`` of the relational
    models. Y is (N, N) or (n_relations, N, N); ``mask`` (same shape, or (N, N) for all
    relations) marks the observed training cells, default every off-diagonal cell."""

    def _prepare(self, Y, mask, covariates):
        if covariates is not None:
            raise NotImplementedError(f"{type(self).__name__} does not take covariates yet; fit without them.")
        for name in ("num_warmup", "num_samples", "num_chains"):
            validation.check_int_in(name, getattr(self, name), 0 if name == "num_warmup" else 1)
        self._two_d = np.ndim(Y) == 2
        Y, mask = lfrm.check_relations(Y, mask)
        if self.symmetric and not (np.array_equal(Y, np.swapaxes(Y, 1, 2)) and np.array_equal(mask, np.swapaxes(mask, 1, 2))):
            raise ValueError("symmetric=True needs a symmetric Y and mask.")
        self.Y_, self.mask_ = Y, mask
        return Y, mask

    def predict_proba(self):
        """Posterior predictive link probabilities, the shape of the fitted Y."""
        check_is_fitted(self, "samples_")
        P = np.asarray(self._predict())
        return P[0] if self._two_d else P


class LFRMLinkPredictor(_LinkPredictor):
    """The latent feature relational model (Miller, Griffiths & Jordan 2009) by MCMC.

    Parameters
    ----------
    n_features_max : int, default=16
        K_max, the most latent features a draw can hold.
    link : {"logistic", "probit"}
    symmetric : bool
        Undirected relations (symmetric W, unordered pairs counted once).
    init : {"random", "irm"}
        Random features, or the clusters of 15 IRM Gibbs sweeps (the paper's "LFRM w/IRM").
    num_warmup, num_samples, num_chains : MCMC sizes (chains vectorised).
    random_state : int, RandomState or None

    Attributes
    ----------
    samples_ : dict of draws (chain, draw, ...), see ``bayeskit.lfrm.sample_posterior``.
    n_features_ : posterior mean number of features K+.
    """

    def __init__(self, n_features_max=16, link="logistic", symmetric=False, init="random", num_warmup=200,
                 num_samples=800, num_chains=1, random_state=None):
        self.n_features_max = n_features_max
        self.link = link
        self.symmetric = symmetric
        self.init = init
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.random_state = random_state

    def fit(self, Y, mask=None, covariates=None):
        validation.check_choice("init", self.init, ("random", "irm"))
        Y, mask = self._prepare(Y, mask, covariates)
        self.hyperparams_ = lfrm.Hyperparams(k_max=self.n_features_max, link=self.link, symmetric=self.symmetric)
        k_init, k_mcmc = jax.random.split(_key(self.random_state))
        start = None
        if self.init == "irm":
            start = lfrm.irm_start(k_init, Y, mask, k_max=self.n_features_max, symmetric=self.symmetric, num_chains=self.num_chains)
        self.samples_ = lfrm.sample_posterior(k_mcmc, Y, mask, self.hyperparams_, num_warmup=self.num_warmup,
                                              num_samples=self.num_samples, num_chains=self.num_chains, init_Z=start)
        self.n_features_ = float(np.mean(self.samples_["n_features"]))
        return self

    def _predict(self):
        return lfrm.predict_proba(self.samples_, self.hyperparams_)


class IRMLinkPredictor(_LinkPredictor):
    """The infinite relational model (Kemp et al. 2006) by collapsed Gibbs sampling.

    Parameters
    ----------
    n_clusters_max : int, default=24
    symmetric : bool
    gamma, beta : CRP concentration and Beta prior of the block probabilities.
    num_warmup, num_samples, num_chains, random_state : as ``LFRMLinkPredictor``.
    """

    def __init__(self, n_clusters_max=24, symmetric=False, gamma=1.0, beta=1.0, num_warmup=200, num_samples=800,
                 num_chains=1, random_state=None):
        self.n_clusters_max = n_clusters_max
        self.symmetric = symmetric
        self.gamma = gamma
        self.beta = beta
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.random_state = random_state

    def fit(self, Y, mask=None, covariates=None):
        Y, mask = self._prepare(Y, mask, covariates)
        self.hyperparams_ = irm.Hyperparams(c_max=self.n_clusters_max, symmetric=self.symmetric, gamma=self.gamma, beta=self.beta)
        self.samples_ = irm.sample_posterior(_key(self.random_state), Y, mask, self.hyperparams_, num_warmup=self.num_warmup,
                                             num_samples=self.num_samples, num_chains=self.num_chains)
        self.n_clusters_ = float(np.mean(self.samples_["n_clusters"]))
        return self

    def _predict(self):
        return irm.predict_proba(self.samples_, self.Y_, self.mask_, self.hyperparams_)

"""Multilabel classifiers: BSML (Gönen) and the PROBIT baseline."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted

from bayeskit.core import validation
from bayeskit.core.device import as_array
from bayeskit.core.notices import warn
from bayeskit.core.scaling import check_products_in_range
from bayeskit.core.status import Status
from bayeskit.core.status import message as status_message
from bayeskit.estimators._common import OneCallAtATime, _best_restart, _key, validate
from bayeskit.multilabel import bsml, probit


class _MultilabelMixin(OneCallAtATime, ClassifierMixin):
    """predict / score / tags shared by the multilabel classifiers."""

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        tags.target_tags.single_output = True
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.multi_label = True
        tags.input_tags.sparse = True  # a scipy.sparse X (a vectorizer's bag of words) is densified
        return tags

    def _validate_fit_input(self, X, Y, *, allow_missing: bool):
        """X as a float array and Y as (n, L) int8 in {0, 1} (-1 = missing when allowed).

        A 1-D ``Y`` is one binary label with any two classes (``classes_``); a 2-D ``Y``
        is multilabel in {0, 1}, with -1 for an unobserved entry. A scipy.sparse X is made dense.
        """
        X, Y = validate(self, _dense(X), Y, y_name="Y", dtype=[np.float64, np.float32], multi_output=True, y_numeric=False, numeric_y=False)
        _check_scale(X, X.dtype, warn_scale=True)
        Y = Y.toarray() if validation.is_sparse(Y) else np.asarray(Y)  # e.g. from MultiLabelBinarizer(sparse_output=True)
        if Y.ndim == 1:
            kind = type_of_target(Y)
            if kind not in ("binary", "multiclass"):
                raise ValueError(f"Unknown label type: {kind}. {type(self).__name__} takes binary or multilabel targets.")
            classes = np.unique(Y)
            if classes.size < 2:
                raise ValueError(f"y has one class ({classes[0]}): a classifier needs samples of at least two classes.")
            if classes.size > 2:
                raise ValueError(
                    f"Only binary classification is supported for a 1-D target ({classes.size} classes found); "
                    "give multilabel targets as a (n_samples, n_labels) matrix in {0, 1}."
                )
            self._one_d, self.classes_ = True, classes
            return X, (Y == classes[-1]).astype(np.int8)[:, None]
        self._one_d = False
        Y = validation.check_labels(Y, X.shape[0], "Y", allow_missing=allow_missing)
        self.classes_ = [np.array([0, 1])] * Y.shape[1]
        return X, Y

    def _check_X(self, X):
        check_is_fitted(self, "state_")
        X = validate(self, _dense(X), reset=False, dtype=[np.float64, np.float32])
        _check_scale(X, self.dtype_, warn_scale=False)
        return X.astype(self.dtype_, copy=False)

    def _finish_fit(self, Y, result, n_restarts):
        best = _best_restart(result, n_restarts, type(self).__name__, warn_max_iter=self.tol > 0)
        self.result_ = best
        self.state_ = best.state
        self.n_iter_ = int(best.n_iter)
        self.lower_bound_ = float(best.objective)
        self.converged_ = status_message(best.status) == Status[Status.successful]  # read on the host, no eager comparison
        self.n_labels_ = Y.shape[1]
        return self

    def _format_proba(self, P):
        P = np.asarray(P)
        return np.column_stack([1 - P[:, 0], P[:, 0]]) if self._one_d else P

    def predict(self, X, *, chunk_size=None):
        """Labels in {0, 1}: ``predict_proba > 0.5``; shape (n_samples, n_labels).
        ``chunk_size`` bounds the rows predicted at once."""
        P = self.predict_proba(X, chunk_size=chunk_size)
        if self._one_d:
            return self.classes_[(P[:, 1] > 0.5).astype(int)]
        return (P > 0.5).astype(int)

    def score(self, X, y, sample_weight=None):
        """``1 - hamming loss`` of ``predict(X)`` (the paper's main metric); accuracy for 1-D Y;
        each row weighted by ``sample_weight`` when given."""
        pred = self.predict(X)
        y = np.asarray(y).reshape(pred.shape)
        if self._one_d:
            return float(np.average(pred == y, weights=sample_weight))
        return 1.0 - float(np.average(np.mean(pred != y, axis=1), weights=sample_weight))  # hamming loss, rows weighted


def _dense(X):
    """A scipy.sparse X (a vectorizer's bag of words) as a dense array; other X as given."""
    return X.toarray() if validation.is_sparse(X) else X


def _check_scale(X, dtype, *, warn_scale: bool) -> None:
    """The Gamma priors on the weights' precisions set a scale near 1, so X is not rescaled
    inside: data beyond float32's range for X'X are refused, and data far from unit scale
    (beyond 2^+-20, where the priors outweigh the data) are fitted with a warning."""
    fix = "standardise X (e.g. scikit-learn's StandardScaler): the priors on the weights set a scale near 1"
    s = check_products_in_range("X", X, dtype, fix)
    if warn_scale and not 2.0**-20 <= s <= 2.0**20:
        warn(f"X is at scale {s:.3g}; the priors on the weights set a scale near 1 and outweigh data this far "
             f"from it: {fix}.", RuntimeWarning)


class BSMLClassifier(_MultilabelMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Bayesian supervised (and semi-supervised) multilabel learning (Gönen 2014).

    Couples a linear projection to ``n_components`` dimensions with one probit
    classifier per label, fitted by variational Bayes (:mod:`bayeskit.multilabel.bsml`). Labels
    given as -1 are unobserved: the model then is BSSML (Section 3.2), which also uses
    the inputs of unlabelled rows (transductive use: fit on train + test rows with the
    test labels set to -1). X may be a scipy.sparse matrix (a vectorizer's bag of words): it
    is made dense, and where features outnumber samples the fit's Q update works in the
    N x N form (:func:`bayeskit.multilabel.bsml.fit`).

    Parameters
    ----------
    n_components : int, default=2
        R, the dimension of the shared subspace.
    prior : {"entrywise", "ard"}, default="entrywise"
        "ard" gives BSML+ARD, one precision per dimension of the subspace, which switches
        off the dimensions it does not need under the paper's sparse Gamma prior
        (``alpha_phi=1e-10, beta_phi=1e10``); with the defaults of 1 it keeps them all.
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
        BSSML; "auto" uses it when Y contains -1 (and refuses a 2-D Y of -1 and 1 without a 0,
        a coding of negatives as -1 that would leave every observed label positive; a 1-D y
        in {-1, 1} is two classes).
    predictive : {"consistent", "author"}, default="consistent"
    progress : bool, default=False

    Attributes
    ----------
    state_ : bayeskit.multilabel.bsml.State
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
        if self.semisupervised == "auto" and np.any(Y < 0) and np.any(Y == 1) and not np.any(Y == 0):
            raise ValueError("Y holds -1 and 1 but no 0: labels are 1 and 0, and -1 marks an unobserved entry, so every "
                             "observed label would be positive. For -1 meaning negative pass (Y + 1) // 2; to fit "
                             "with every -1 unobserved, set semisupervised=True.")
        semi = bool(np.any(Y < 0)) if self.semisupervised == "auto" else bool(self.semisupervised)
        hp = self._hyperparams(semi)
        bsml.check_inputs(X, Y, hp)
        X_j = as_array(X)
        self.dtype_ = np.dtype(X_j.dtype)
        key = _key(self.random_state)
        run = lambda k: bsml.fit(k, X_j, Y, hp, max_iter=self.max_iter, tol=self.tol, progress=self.progress, throw=False)
        result = jax.vmap(run)(jax.random.split(key, self.n_init)) if self.n_init > 1 else run(key)
        self.hyperparams_ = hp
        self._finish_fit(Y, result, self.n_init)
        self.components_ = np.asarray(self.state_.q_mean).T
        self.active_components_ = np.asarray(bsml.active_components(self.state_))
        self.lower_bound_trace_ = np.asarray(self.result_.trace)[: self.n_iter_]
        return self

    def predict_proba(self, X, *, chunk_size=None):
        """``P(y = 1)`` per label, shape (n_samples, n_labels) ((n_samples, 2) for 1-D Y),
        ``chunk_size`` rows at a time."""
        X = self._check_X(X)
        return self._format_proba(bsml.predict_proba(self.state_, X, self.hyperparams_, predictive=self.predictive,
                                                     chunk_size=chunk_size))

    @property
    def _n_features_out(self):
        """The columns of ``transform``'s output (``get_feature_names_out``: bsmlclassifier0, ...)."""
        return self.components_.shape[0]

    def transform(self, X, *, chunk_size=None):
        """The embeddings ``<Q>' x``, shape (n_samples, n_components), ``chunk_size`` rows at a time."""
        X = self._check_X(X)  # NotFittedError before state_ is read
        return np.asarray(bsml.transform(self.state_, X, chunk_size=chunk_size))


class ProbitClassifier(_MultilabelMixin, BaseEstimator):
    """One variational Bayesian probit classifier per label (the paper's PROBIT).

    Parameters
    ----------
    max_iter, tol, random_state : as in :class:`BSMLClassifier`.
    alpha_lambda, beta_lambda, alpha_psi, beta_psi : float, default=1
    predictive : {"consistent", "author"}
    """

    def __init__(self, *, max_iter=500, tol=1e-6, random_state=None, alpha_lambda=1.0, beta_lambda=1.0, alpha_psi=1.0, beta_psi=1.0,
                 predictive="consistent", progress=False):
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
        hp = probit.Hyperparams(self.alpha_lambda, self.beta_lambda, self.alpha_psi, self.beta_psi)
        result = probit.fit(_key(self.random_state), X, Y, hp, max_iter=self.max_iter, tol=self.tol, progress=self.progress, throw=False)
        self.dtype_ = np.dtype(jax.dtypes.canonicalize_dtype(X.dtype))
        return self._finish_fit(Y, result, 1)

    def predict_proba(self, X, *, chunk_size=None):
        """``P(y = 1)`` per label, ``chunk_size`` rows at a time."""
        X = self._check_X(X)
        return self._format_proba(probit.predict_proba(self.state_, X, predictive=self.predictive, chunk_size=chunk_size))

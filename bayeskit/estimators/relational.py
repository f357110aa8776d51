"""Link prediction on relational data: LFRM, IRM and MMSB."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from bayeskit.core import validation
from bayeskit.core.mcmc import diagnostics
from bayeskit.estimators._common import OneCallAtATime, _best_restart, _key, warn_unmixed
from bayeskit.relational import data as relational_data
from bayeskit.relational import irm, lfrm, mmsb


class _LinkPredictor(OneCallAtATime, BaseEstimator):
    """Shared ``fit(Y, mask=None, covariates=None)`` / ``predict_proba()`` of the relational
    models. Y is (N, N) or (n_relations, N, N); ``mask`` (same shape, or (N, N) for all
    relations) marks the observed training cells, default every off-diagonal cell."""

    _counts = ("num_warmup", "num_samples", "num_chains")  # integer settings checked by fit
    _takes_covariates = False

    def _prepare(self, Y, mask, covariates):
        if covariates is not None and not self._takes_covariates:
            raise ValueError(f"{type(self).__name__} is a model without covariates; fit it with covariates=None.")
        for name in self._counts:
            validation.check_int_in(name, getattr(self, name), 0 if name == "num_warmup" else 1)
        self._two_d = np.ndim(Y) == 2
        Y, mask = relational_data.check_relations(Y, mask, self.symmetric)
        self.Y_, self.mask_ = Y, mask
        return Y, mask

    def predict_proba(self):
        """Posterior predictive link probabilities, the shape of the fitted Y."""
        check_is_fitted(self, "hyperparams_")
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
    offsets : bool, default=False
        Per-object sender and receiver offsets a_i, b_j (the paper's full model).
    births : {"prior", "fitted"}, default="prior"
        A new feature's weights proposed from the prior (the paper's move) or from a
        Gaussian fitted to its object's cells; "fitted" lets features be born where many
        relations make a prior draw hopeless (``bayeskit.relational.lfrm.Hyperparams``).
    num_warmup, num_samples, num_chains : MCMC sizes (chains vectorised).
    random_state : int, RandomState or None
    progress : bool, default=False
        A bar over the sweeps (off under the ``CI`` environment variable).

    ``fit(Y, mask=None, covariates=None)``: ``covariates`` is a dict with any of
    ``pair`` ((N, N) or (P, N, N)), ``sender`` ((N, Dp)) and ``receiver`` ((N, Dc)); each
    relation gets its own coefficients.

    Attributes
    ----------
    samples_ : dict of draws (chain, draw, ...), see ``bayeskit.relational.lfrm.sample_posterior``.
    n_features_ : posterior mean number of features K+.
    diagnostics_ : R-hat (several chains) and effective sample size of the log joint and K+;
        ``fit`` warns ``ConvergenceWarning`` when an R-hat exceeds 1.05 or an ESS is below 100.
    """

    _takes_covariates = True

    def __init__(self, n_features_max=16, link="logistic", symmetric=False, init="random", offsets=False, births="prior",
                 num_warmup=200, num_samples=800, num_chains=1, random_state=None, progress=False):
        self.n_features_max = n_features_max
        self.link = link
        self.symmetric = symmetric
        self.init = init
        self.offsets = offsets
        self.births = births
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.random_state = random_state
        self.progress = progress

    def fit(self, Y, mask=None, covariates=None):
        validation.check_choice("init", self.init, ("random", "irm"))
        validation.check_choice("births", self.births, lfrm.BIRTHS)
        Y, mask = self._prepare(Y, mask, covariates)
        self.hyperparams_ = lfrm.Hyperparams(k_max=self.n_features_max, link=self.link, symmetric=self.symmetric,
                                             offsets=self.offsets, births=self.births)
        self.covariates_ = relational_data.check_covariates(covariates, Y.shape[1], self.symmetric)
        k_init, k_mcmc = _key(self.random_state, 2)
        start = None
        if self.init == "irm":
            start = lfrm.irm_start(k_init, Y, mask, k_max=self.n_features_max, symmetric=self.symmetric, num_chains=self.num_chains)
        self.samples_ = lfrm.sample_posterior(k_mcmc, Y, mask, self.hyperparams_, num_warmup=self.num_warmup,
                                              num_samples=self.num_samples, num_chains=self.num_chains, init_Z=start,
                                              covariates=self.covariates_, progress=self.progress)
        self.n_features_ = float(np.mean(np.asarray(self.samples_["n_features"])))
        self.diagnostics_ = diagnostics(self.samples_, ("log_joint", "n_features"))
        warn_unmixed(self.diagnostics_, type(self).__name__)
        return self

    def _predict(self):
        return lfrm.predict_proba(self.samples_, self.hyperparams_, self.covariates_)


class IRMLinkPredictor(_LinkPredictor):
    """The infinite relational model (Kemp et al. 2006) by collapsed Gibbs sampling with
    split-merge moves.

    Parameters
    ----------
    n_clusters_max : int, default=24
    symmetric : bool
    gamma, beta : CRP concentration and Beta prior of the block probabilities.
    split_merge : int, default=1
        Split-merge moves after each Gibbs sweep (0: Gibbs only); see :mod:`bayeskit.relational.irm`.
    num_warmup, num_samples, num_chains, random_state, progress : as ``LFRMLinkPredictor``.

    Attributes
    ----------
    samples_ : dict of draws (chain, draw, ...): z, n_clusters, log_joint.
    n_clusters_ : posterior mean number of clusters.
    diagnostics_ : R-hat (several chains) and effective sample size of the log joint and
        the number of clusters; ``fit`` warns as ``LFRMLinkPredictor``'s.
    """

    def __init__(self, n_clusters_max=24, symmetric=False, gamma=1.0, beta=1.0, split_merge=1, num_warmup=200,
                 num_samples=800, num_chains=1, random_state=None, progress=False):
        self.n_clusters_max = n_clusters_max
        self.symmetric = symmetric
        self.gamma = gamma
        self.beta = beta
        self.split_merge = split_merge
        self.num_warmup = num_warmup
        self.num_samples = num_samples
        self.num_chains = num_chains
        self.random_state = random_state
        self.progress = progress

    def fit(self, Y, mask=None, covariates=None):
        Y, mask = self._prepare(Y, mask, covariates)
        self.hyperparams_ = irm.Hyperparams(c_max=self.n_clusters_max, symmetric=self.symmetric, gamma=self.gamma, beta=self.beta,
                                            split_merge=self.split_merge)
        self.samples_ = irm.sample_posterior(_key(self.random_state), Y, mask, self.hyperparams_, num_warmup=self.num_warmup,
                                             num_samples=self.num_samples, num_chains=self.num_chains, progress=self.progress)
        self.n_clusters_ = float(np.mean(np.asarray(self.samples_["n_clusters"])))
        self.diagnostics_ = diagnostics(self.samples_, ("log_joint", "n_clusters"))
        warn_unmixed(self.diagnostics_, type(self).__name__)
        return self

    def _predict(self):
        return irm.predict_proba(self.samples_, self.Y_, self.mask_, self.hyperparams_)


class MMSBLinkPredictor(_LinkPredictor):
    """The mixed membership stochastic blockmodel (Airoldi et al. 2008) by variational EM.

    Parameters
    ----------
    n_blocks : int, default=8
        K, the number of blocks.
    symmetric : bool
    alpha : float, default=0.1
        Dirichlet concentration of the memberships (the starting value when
        ``estimate_alpha``).
    estimate_alpha : bool, default=True
        Re-estimate alpha in the M-step (empirical Bayes).
    max_iter, tol : variational EM sweeps and the relative tolerance on the bound.
    n_init : int, default=5
        Random starts run as one vmapped call; the one with the highest bound is kept.
    random_state : int, RandomState or None

    Attributes
    ----------
    state_ : the fitted :class:`bayeskit.relational.mmsb.State` (gamma, B, alpha, ...).
    memberships_ : (N, K) posterior mean memberships E[pi].
    elbo_, n_iter_ : the bound and the sweeps of the kept restart.
    """

    _counts = ("max_iter", "n_init")

    def __init__(self, n_blocks=8, symmetric=False, alpha=0.1, estimate_alpha=True, max_iter=500, tol=1e-6, n_init=5,
                 random_state=None):
        self.n_blocks = n_blocks
        self.symmetric = symmetric
        self.alpha = alpha
        self.estimate_alpha = estimate_alpha
        self.max_iter = max_iter
        self.tol = tol
        self.n_init = n_init
        self.random_state = random_state

    def fit(self, Y, mask=None, covariates=None):
        Y, mask = self._prepare(Y, mask, covariates)
        validation.check_int_in("n_blocks", self.n_blocks, 1)
        hp = mmsb.Hyperparams(n_blocks=self.n_blocks, symmetric=self.symmetric, estimate_alpha=self.estimate_alpha, alpha=self.alpha)
        mmsb.check_hparams(hp)
        keys = jax.random.split(_key(self.random_state), self.n_init)
        result = (mmsb.fit_restarts(keys, Y, mask, hp, max_iter=self.max_iter, tol=self.tol) if self.n_init > 1
                  else mmsb.fit(keys[0], Y, mask, hp, max_iter=self.max_iter, tol=self.tol, throw=False))
        result = _best_restart(result, self.n_init, "MMSB")
        self.hyperparams_, self.state_ = hp, result.state
        gamma = np.asarray(result.state.gamma)
        self.memberships_ = gamma / gamma.sum(-1, keepdims=True)
        self.elbo_, self.n_iter_ = float(result.objective), int(result.n_iter)
        return self

    def _predict(self):
        return mmsb.predict_proba(self.state_)

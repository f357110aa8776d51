"""The latent feature relational model (Miller, Griffiths & Jordan, NIPS 2009): the model
(``model``) and its MCMC (``gibbs``). ``sample_posterior`` validates the input, runs
vectorised chains and returns the draws; ``predict_proba`` averages the link
probabilities over them; ``diagnostics`` gives R-hat and ESS of the log joint and K+, and
``to_inference_data`` converts the draws for ArviZ."""

from __future__ import annotations

import warnings

import numpy as np

from ..core import validation
from ..core.mcmc import diagnostics, run_chains, to_inference_data
from . import gibbs, model
from .gibbs import LFRMGibbs
from .model import LINKS, Covariates, Data, Hyperparams, State, as_data


def check_relations(Y, mask=None, symmetric: bool = False):
    """Y as (R, N, N) with values in {0, 1} on the observed cells, and the mask (default:
    every cell except the diagonal), both symmetric for an undirected model; a
    ``ValueError`` names what is wrong."""
    Y = np.asarray(Y)
    if Y.ndim == 2:
        Y = Y[None]
    if Y.ndim != 3 or Y.shape[1] != Y.shape[2] or Y.shape[1] < 2:
        raise ValueError(f"Y must be (N, N) or (n_relations, N, N) with N >= 2; got shape {Y.shape}.")
    if mask is None:
        mask = np.broadcast_to(~np.eye(Y.shape[1], dtype=bool), Y.shape)
    mask = np.asarray(mask, bool)
    if mask.ndim == 2:
        mask = np.broadcast_to(mask, Y.shape)
    if mask.shape != Y.shape:
        raise ValueError(f"mask has shape {mask.shape}, Y has shape {Y.shape}.")
    if not mask.any():
        raise ValueError("mask marks no observed cell.")
    bad = mask & ~np.isin(Y, (0, 1))
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"Y must be 0 or 1 on observed cells; found {Y[where]!r} at (relation, row, col) {where}.")
    if symmetric and not (np.array_equal(Y, np.swapaxes(Y, 1, 2)) and np.array_equal(mask, np.swapaxes(mask, 1, 2))):
        raise ValueError("symmetric=True needs a symmetric Y and mask.")
    return np.where(mask, Y, 0).astype(np.int8), mask


COVARIATE_KINDS = ("pair", "sender", "receiver")


def check_covariates(covariates, n: int, symmetric: bool = False) -> Covariates:
    """Covariates from a dict with any of ``pair`` ((N, N) or (P, N, N), the X_ij),
    ``sender`` ((N,) or (N, Dp), the X^p_i) and ``receiver`` ((N,) or (N, Dc), the X^c_j),
    or a :class:`Covariates`; finite values and N matching Y, else a ``ValueError``. An
    undirected model takes no ``receiver`` (its sender terms serve both ends)."""
    if covariates is None:
        return model.no_covariates(n, np.float64)
    if isinstance(covariates, Covariates):
        covariates = {k: getattr(covariates, k) for k in COVARIATE_KINDS}
    if not isinstance(covariates, dict) or set(covariates) - set(COVARIATE_KINDS):
        raise ValueError(f"covariates must be a dict with keys among {COVARIATE_KINDS}; got {covariates!r:.80}.")
    if symmetric and np.size(covariates.get("receiver", np.zeros(0))):
        raise ValueError("an undirected (symmetric) model uses the sender covariates at both ends; pass no receiver covariates.")
    out = {}
    for kind in COVARIATE_KINDS:
        a = covariates.get(kind)
        if a is None:
            out[kind] = np.zeros((0, n, n) if kind == "pair" else (n, 0))
            continue
        a = np.asarray(a, dtype=np.float64)
        if kind == "pair":
            a = a[None] if a.ndim == 2 else a
            if a.ndim != 3 or a.shape[1:] != (n, n):
                raise ValueError(f"pair covariates must be (N, N) or (P, N, N) with N = {n}; got shape {a.shape}.")
        else:
            a = a[:, None] if a.ndim == 1 else a
            if a.ndim != 2 or a.shape[0] != n:
                raise ValueError(f"{kind} covariates must be (N,) or (N, D) with N = {n}; got shape {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{kind} covariates contain {validation._where_nonfinite(a)}.")
        out[kind] = a
    return Covariates(**out)


def _check_hparams(hparams: Hyperparams):
    validation.check_choice("link", hparams.link, LINKS)
    if hparams.k_max < 1:
        raise ValueError(f"k_max must be at least 1; got {hparams.k_max}.")
    if hparams.hmc_steps < 1:
        raise ValueError(f"hmc_steps must be at least 1; got {hparams.hmc_steps}.")
    for name in ("alpha_prior", "sigma_w_prior"):
        if not all(float(v) > 0 for v in getattr(hparams, name)):
            raise ValueError(f"{name} must be two positive numbers; got {getattr(hparams, name)}.")
    if not float(hparams.bias_scale) > 0 or not 0 < float(hparams.target_accept) < 1:
        raise ValueError("bias_scale must be positive and target_accept in (0, 1).")
    if not float(hparams.coefficient_scale) > 0 or not float(hparams.offset_scale) > 0:
        raise ValueError("coefficient_scale and offset_scale must be positive.")


def features_from_clusters(z, k_max: int):
    """One-hot features (N, n_clusters) from cluster labels (the paper's IRM start);
    a ``ValueError`` if there are more clusters than ``k_max``."""
    z = np.asarray(z)
    labels, z = np.unique(z, return_inverse=True)
    if len(labels) > k_max:
        raise ValueError(f"{len(labels)} clusters do not fit in k_max = {k_max} feature columns.")
    return np.eye(len(labels))[z.reshape(-1)]


def irm_start(key, Y, mask=None, *, k_max: int, symmetric: bool = False, n_sweeps: int = 15, num_chains: int = 1,
              separate_relations: bool = False):
    """Starting Z for each chain from ``n_sweeps`` IRM Gibbs sweeps (paper: 15): the
    clusters of the last sweep, one-hot; shape (num_chains, N, k_max), or (R, num_chains,
    N, k_max) with ``separate_relations``. The IRM may use at most three quarters of the
    columns, so that features can still be born."""
    from .. import irm

    hp = irm.Hyperparams(c_max=max(1, (3 * k_max) // 4), symmetric=symmetric)  # a quarter left for births
    z = np.asarray(irm.sample_posterior(key, Y, mask, hp, num_warmup=n_sweeps - 1, num_samples=1, num_chains=num_chains,
                                        separate_relations=separate_relations)["z"])[..., -1, :]
    one_hot = lambda zc: np.pad(features_from_clusters(zc, k_max), ((0, 0), (0, k_max - len(np.unique(zc)))))
    return np.stack([one_hot(zc) for zc in z.reshape(-1, z.shape[-1])]).reshape(z.shape + (k_max,))


def sample_posterior(key, Y, mask=None, hparams: Hyperparams | None = None, *, num_warmup: int = 200,
                     num_samples: int = 800, num_chains: int = 1, thinning: int = 1, init_Z=None,
                     covariates=None, separate_relations: bool = False, progress: bool = False) -> dict:
    """Run ``num_chains`` vectorised LFRM chains on Y (R, N, N) or (N, N).

    ``mask`` (same shape, or (N, N) for all relations) marks the cells used for training:
    held-out and missing cells are False and never treated as zeros. Returns the draws
    (chain, draw, ...): Z (int8), W, c, alpha, sigma_w, n_features (K+), log_joint,
    accept (HMC), births and saturated (all ``k_max`` columns in use: a warning says so),
    and the regression terms c, beta, beta_p, beta_c, a, b (see :mod:`bayeskit.lfrm.model`).
    ``covariates``: see :func:`check_covariates`; pass the same to ``predict_proba``.

    With ``separate_relations`` each relation gets its own model (the paper's "single"
    setting), all in one vectorised call: the draws are then (relation, chain, draw, ...)
    and ``init_Z`` is (R, num_chains, N, k) or None.
    """
    hparams = hparams or Hyperparams()
    _check_hparams(hparams)
    Y, mask = check_relations(Y, mask, hparams.symmetric)
    data = as_data(Y, mask, hparams.symmetric, check_covariates(covariates, Y.shape[1], hparams.symmetric))
    n_runs = num_chains
    if separate_relations:
        data, n_runs = model.per_relation(data, num_chains), num_chains * Y.shape[0]
        init_Z = None if init_Z is None else np.reshape(init_Z, (n_runs,) + np.shape(init_Z)[-2:])
    if init_Z is not None and np.ndim(init_Z) == 3 and n_runs == 1:
        init_Z = init_Z[0]
    samples = run_chains(LFRMGibbs(hparams, separate_relations), key, data, num_warmup=num_warmup, num_samples=num_samples,
                         num_chains=n_runs, thinning=thinning, init_params=init_Z, progress=progress)
    if separate_relations:
        samples = model.by_relation(samples, Y.shape[0])
    if bool(np.any(samples["saturated"])):
        warnings.warn(f"some draws use all k_max = {hparams.k_max} feature columns, so no feature could be born "
                      "there; raise k_max.", RuntimeWarning, stacklevel=2)
    return samples


def predict_proba(samples: dict, hparams: Hyperparams, covariates=None, chunk_size: int = 16):
    """Posterior predictive Pr(y_rij = 1) averaged over the draws of ``sample_posterior``
    ((chain, draw, ...) or, for separate relations, (relation, chain, draw, ...)), with
    the covariates of the fit (a dict as there, or ``Covariates``)."""
    n = np.shape(samples["Z"])[-2]
    return gibbs.predict_proba(samples, hparams, check_covariates(covariates, n, hparams.symmetric), chunk_size)


__all__ = ["COVARIATE_KINDS", "Covariates", "Data", "Hyperparams", "LFRMGibbs", "LINKS", "State", "as_data", "check_covariates", "check_relations", "diagnostics", "features_from_clusters",
           "gibbs", "irm_start", "model", "predict_proba", "sample_posterior",
           "to_inference_data"]

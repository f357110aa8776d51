"""The latent feature relational model (Miller, Griffiths & Jordan, NIPS 2009): the model
(``model``) and its MCMC (``gibbs``). ``sample_posterior`` validates the input, runs
vectorised chains and returns the draws; ``predict_proba`` averages the link
probabilities over them; ``diagnostics`` gives R-hat and ESS of the log joint and K+, and
``to_inference_data`` converts the draws for ArviZ."""

from __future__ import annotations

import numpy as np

from bayeskit.core import mcmc, validation
from bayeskit.core.mcmc import diagnostics, run_chains
from bayeskit.core.notices import warn
from bayeskit.relational import irm
from bayeskit.relational.data import as_data, by_relation, check_covariates, check_relations, per_relation
from bayeskit.relational.lfrm import gibbs, model
from bayeskit.relational.lfrm.gibbs import LFRMGibbs
from bayeskit.relational.lfrm.model import BIRTHS, LINKS, Hyperparams, State


def _check_hparams(hparams: Hyperparams):
    validation.check_choice("link", hparams.link, LINKS)
    validation.check_choice("births", hparams.births, BIRTHS)
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
    """Starting Z for each chain from ``n_sweeps`` IRM Gibbs sweeps (paper: 15, Gibbs only,
    without the IRM's split-merge moves): the clusters of the last sweep, one-hot; shape
    (num_chains, N, k_max), or (R, num_chains, N, k_max) with ``separate_relations``. The
    IRM may use at most three quarters of the columns, so that features can still be born."""
    hp = irm.Hyperparams(c_max=max(1, (3 * k_max) // 4), symmetric=symmetric, split_merge=0)  # a quarter left for births
    z = np.asarray(irm.sample_posterior(key, Y, mask, hp, num_warmup=n_sweeps - 1, num_samples=1, num_chains=num_chains,
                                        separate_relations=separate_relations)["z"])[..., -1, :]
    one_hot = lambda zc: np.pad(features_from_clusters(zc, k_max), ((0, 0), (0, k_max - len(np.unique(zc)))))
    return np.stack([one_hot(zc) for zc in z.reshape(-1, z.shape[-1])]).reshape(z.shape + (k_max,))


FROZEN_MIN_DRAWS = 20  # fewer draws with one K+ each say little about the chains' moves


def frozen_feature_counts(n_features) -> str | None:
    """The warning for draws of K+ ((chain, draw) or (relation, chain, draw)) where every
    chain of a model kept one K+ through all of at least ``FROZEN_MIN_DRAWS`` draws and its
    chains differ in it: no feature was born or lost, so each chain's K+ is its start's
    and the draws say nothing about the number of features. None otherwise."""
    k = np.asarray(n_features)
    k = k.reshape((-1,) + k.shape[-2:])  # (model, chain, draw)
    if k.shape[1] < 2 or k.shape[2] < FROZEN_MIN_DRAWS:
        return None
    kept = np.all(k == k[..., :1], axis=-1)
    frozen = np.all(kept, axis=1) & (np.ptp(k[..., 0], axis=1) > 0)
    if not np.any(frozen):
        return None
    where = "" if k.shape[0] == 1 else f" in {int(frozen.sum())} of {k.shape[0]} relations"
    example = ", ".join(str(int(v)) for v in k[np.argmax(frozen), :, 0])
    return (f"the number of features K+ did not change in any chain over its {k.shape[2]} draws{where}, and the chains "
            f"sit at different K+ ({example}): no feature was born or lost, so each chain's K+ is its start's. Compare "
            "starts (the random start and irm_start) and report both, or run longer.")


def _full_width(init_Z, n_runs: int, n: int, k_max: int, dtype) -> np.ndarray:
    """The start as ``k_max`` columns of ``dtype`` for each of ``n_runs`` chains (the random
    start when None), so that every start of the same data runs one compiled program."""
    if init_Z is None:
        init_Z = gibbs.random_start(n, k_max)
    elif not np.all((np.asarray(init_Z) == 0) | (np.asarray(init_Z) == 1)):
        raise ValueError("init_Z must hold 0 and 1 only (feature off or on).")
    init_Z = np.asarray(init_Z, dtype)
    if init_Z.ndim not in (2, 3) or init_Z.shape[-2] != n or (init_Z.ndim == 3 and init_Z.shape[0] not in (1, n_runs)):
        raise ValueError(f"init_Z must be (N, k) or ({n_runs}, N, k) with N = {n}, got shape {init_Z.shape}.")
    if init_Z.shape[-1] > k_max:
        raise ValueError(f"init_Z has {init_Z.shape[-1]} feature columns, more than k_max = {k_max}.")
    init_Z = np.pad(init_Z, [(0, 0)] * (init_Z.ndim - 1) + [(0, k_max - init_Z.shape[-1])])
    return init_Z.reshape(n, k_max) if n_runs == 1 else np.broadcast_to(init_Z, (n_runs, n, k_max))


def sample_posterior(key, Y, mask=None, hparams: Hyperparams | None = None, *, num_warmup: int = 200,
                     num_samples: int = 800, num_chains: int = 1, thinning: int = 1, init_Z=None,
                     covariates=None, separate_relations: bool = False, progress: bool = False) -> dict:
    """Run ``num_chains`` vectorised LFRM chains on Y (R, N, N) or (N, N).

    ``mask`` (same shape, or (N, N) for all relations) marks the cells used for training:
    held-out and missing cells are False and never treated as zeros. Returns the draws
    (chain, draw, ...): Z (int8), W, c, alpha, sigma_w, n_features (K+), log_joint,
    accept (HMC), births and saturated (all ``k_max`` columns in use: a warning says so; another
    warns when every chain kept one K+ of its own throughout, :func:`frozen_feature_counts`),
    and the regression terms c, beta, beta_p, beta_c, a, b (see :mod:`bayeskit.relational.lfrm.model`).
    ``covariates``: see :func:`check_covariates`; pass the same to ``predict_proba``.
    ``progress`` shows a bar over the sweeps (off under the ``CI`` environment variable).
    ``init_Z`` (N, k) or (num_chains, N, k) of 0 and 1, k <= ``k_max``, starts the chains
    there (e.g. :func:`irm_start`); by default the random start. Both run one compiled program.

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
        data, n_runs = per_relation(data, num_chains), num_chains * Y.shape[0]
        init_Z = None if init_Z is None else np.reshape(init_Z, (n_runs,) + np.shape(init_Z)[-2:])
    init_Z = _full_width(init_Z, n_runs, Y.shape[-1], hparams.k_max, data.Y.dtype)
    samples = run_chains(LFRMGibbs(hparams, separate_relations), key, data, num_warmup=num_warmup, num_samples=num_samples,
                         num_chains=n_runs, thinning=thinning, init_params=init_Z, progress=progress)
    if separate_relations:
        samples = by_relation(samples, Y.shape[0])
    if bool(np.any(np.asarray(samples["saturated"]))):
        warn(f"some draws use all k_max = {hparams.k_max} feature columns, so no feature could be born "
             "there; raise k_max.", RuntimeWarning)
    frozen = frozen_feature_counts(samples["n_features"])
    if frozen and hparams.births == "prior":
        frozen += (" Under births='prior' (the paper's move, a new feature's weights drawn from their prior) a birth is "
                   "rarely accepted when each object has many cells (many relations); births='fitted' proposes those "
                   "weights from the object's own cells and targets the same posterior (the acceptance ratio corrects "
                   "for the proposal).")
    if frozen:
        warn(frozen, RuntimeWarning)
    return samples


def predict_proba(samples: dict, hparams: Hyperparams, covariates=None, chunk_size: int = 16):
    """Posterior predictive Pr(y_rij = 1) averaged over the draws of ``sample_posterior``
    ((chain, draw, ...) or, for separate relations, (relation, chain, draw, ...)), with
    the covariates of the fit (a dict as there, or ``Covariates``)."""
    n = np.shape(samples["Z"])[-2]
    return gibbs.predict_proba(samples, hparams, check_covariates(covariates, n, hparams.symmetric), chunk_size)


def to_inference_data(samples: dict):
    """ArviZ ``InferenceData`` of the draws of :func:`sample_posterior` (chain, draw, ...),
    with LFRMGibbs's sampler statistics apart; needs ``arviz``."""
    return mcmc.to_inference_data(samples, LFRMGibbs.sample_stats)

__all__ = ["BIRTHS", "FROZEN_MIN_DRAWS", "Hyperparams", "LFRMGibbs", "LINKS", "State", "diagnostics", "features_from_clusters",
           "frozen_feature_counts", "gibbs", "irm_start", "model", "predict_proba", "sample_posterior",
           "to_inference_data"]

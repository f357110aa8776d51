"""Table 1 of the LFRM paper (Miller, Griffiths & Jordan 2009): held-out link prediction
AUC on the countries (nations), Alyawarra kinship and NIPS-234 coauthorship data, for
LFRM from a random start, LFRM started from 15 IRM sweeps, the IRM and the MMSB, in the
"global" setting (one model for all relations) and the "single" setting (one model per
relation, the per-relation AUCs averaged; relations whose held-out cells are all of one
class have no AUC and are left out of the average). NIPS has one relation, so only global.

Protocol (the paper leaves it open; fixed here): for each data set, 20% of the observed
off-diagonal cells are held out at random (seed 0); the diagonal is never used; for the
undirected NIPS network unordered pairs are held out and each counts once. Restarts run
as vectorised chains laid over the devices (MMSB: random starts as one ``bayeskit.sweep``); each chain's predictive
probabilities are averaged over its retained draws and the AUC is reported as mean and
spread over restarts. On countries the LFRM has the paper's sender and receiver
covariates, the 111 country features (centred; a missing feature at its mean), each
relation with its own coefficients; the paper's pair covariate exp(-distance) is not in
the data, so it is left out (IRM and MMSB take no covariates). Logistic link; K_max 16
(kinship), 32 (countries global: 14 objects and 56 relations fill 24 columns from a
random start), 12 (countries single) and 48 (NIPS). MMSB: Dirichlet concentration fixed
at 0.05 (re-estimating it drives the sparse NIPS network to uniform memberships), the
number of blocks chosen by BIC (2 x bound - parameters x log(training cells), Airoldi
et al.'s criterion) over a grid, from one start each. Two model-free rows score the same
split from its training links alone (Katz, common neighbours:
:mod:`bayeskit.relational.baselines`), as a floor the models should clear.

Full: 1000 sweeps with 200 burn-in, 5 restarts (the paper), MMSB up to 500 EM sweeps.
Quick: 30 sweeps, 15 burn-in, 2 restarts, countries and kinship global and countries
single, MMSB 100 EM sweeps with a fixed number of blocks.
"""

from __future__ import annotations

import time

import jax
import numpy as np
from sklearn.metrics import roc_auc_score

from bayeskit.core.sweep import sweep
from bayeskit.datasets import holdout_split, load_relational
from bayeskit.experiments.common import print_table, write_json
from bayeskit.relational import baselines, irm, lfrm, mmsb

NAME = "lfrm_link_prediction"
METHODS = ("LFRM rand", "LFRM w/IRM", "IRM", "MMSB")
BASELINES = {"Katz": baselines.katz, "common neighbours": baselines.common_neighbours}  # deterministic: no restarts
# Table 1 (and the NIPS numbers of Section 5): LFRM rand / w/IRM / IRM / MMSB.
PAPER = {
    ("countries", "single"): (0.8529, 0.8521, 0.8423, 0.8212),
    ("countries", "global"): (0.7067, 0.8772, 0.8500, 0.8643),
    ("kinship", "single"): (0.9443, 0.9346, 0.9310, 0.9005),
    ("kinship", "global"): (0.7127, 0.9183, 0.8943, 0.9143),
    ("nips234", "global"): (0.9466, 0.9509, 0.8906, 0.8705),
}
FILES = {"countries": "nations", "kinship": "kinship", "nips234": "nips234"}
K_MAX = {("countries", "global"): 32, ("countries", "single"): 12, ("kinship", "global"): 16, ("kinship", "single"): 16,
         ("nips234", "global"): 48}
MMSB_ALPHA = 0.05
MMSB_BLOCKS = {"countries": (3, 5, 8), "kinship": (6, 10, 14), "nips234": (5, 10, 20)}  # BIC grid; quick: the middle


def _auc(prob, Y, test, symmetric: bool, single: bool):
    """AUC on the held-out cells; single: the mean of the per-relation AUCs."""
    if symmetric:
        test = test & np.triu(np.ones(test.shape[-2:], bool), 1)
    if not single:
        return float(roc_auc_score(Y[test], prob[test]))
    aucs = [roc_auc_score(Y[r][test[r]], prob[r][test[r]]) for r in range(Y.shape[0]) if len(np.unique(Y[r][test[r]])) == 2]
    return float(np.mean(aucs))


def baseline_aucs(Y, train, test, symmetric: bool, single: bool) -> dict:
    """The held-out AUC of the model-free scores (:mod:`bayeskit.relational.baselines`) from
    the training links of the same split, scored as the models are."""
    A = baselines.adjacency(Y, train)
    out = {}
    for method, score in BASELINES.items():
        t = time.perf_counter()
        auc = _auc(np.asarray(score(A)), Y, test, symmetric, single)
        out[method] = {"auc_mean": auc, "auc_sd": 0.0, "aucs": [auc], "seconds": time.perf_counter() - t, "paper": None}
    return out


def _chains(samples, single: bool):
    """Each restart's draws: chains are axis 0, or axis 1 behind the relation axis."""
    axis = 1 if single else 0
    n = next(iter(samples.values())).shape[axis]
    return [{k: np.take(v, [c], axis=axis) for k, v in samples.items()} for c in range(n)]


def country_covariates(d) -> dict:
    """Sender and receiver covariates X^p = X^c: the country features, centred over the
    observed values, missing ones at the mean (0)."""
    F, seen = d["features"].astype(float), d["features_observed"]
    mean = np.sum(np.where(seen, F, 0), 0) / np.maximum(seen.sum(0), 1)
    X = np.where(seen, F - mean, 0.0)
    return {"sender": X, "receiver": X}


def _mcmc(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates=None):
    """Per-restart probabilities and mean K+ (LFRM) or clusters (IRM) per restart."""
    if method == "IRM":
        hp = irm.Hyperparams(c_max=k_max, symmetric=symmetric)
        s = irm.sample_posterior(key, Y, train, hp, num_warmup=burn, num_samples=sweeps - burn, num_chains=chains,
                                 separate_relations=single)
        probs = [np.asarray(irm.predict_proba(sc, Y, train, hp)) for sc in _chains(s, single)]
        sizes = s["n_clusters"]
    else:
        hp = lfrm.Hyperparams(k_max=k_max, symmetric=symmetric)
        k_start, k_run = jax.random.split(key)
        start = None
        if method == "LFRM w/IRM":
            start = lfrm.irm_start(k_start, Y, train, k_max=k_max, symmetric=symmetric, num_chains=chains, separate_relations=single)
        s = lfrm.sample_posterior(k_run, Y, train, hp, num_warmup=burn, num_samples=sweeps - burn, num_chains=chains,
                                  init_Z=start, separate_relations=single, covariates=covariates)
        probs = [np.asarray(lfrm.predict_proba(sc, hp, covariates)) for sc in _chains(s, single)]
        sizes = s["n_features"]
    sizes = np.asarray(sizes, float)
    return probs, (sizes.mean((0, 2)) if single else sizes.mean(1)).tolist()


def _mmsb_fit(keys, Y, train, n_blocks, symmetric, single, max_iter):
    """MMSB fits for a batch of keys (restarts, one ``bayeskit.sweep`` over the devices),
    each relation separately when ``single``; states with leading (restart[, relation]) axes."""
    hp = mmsb.Hyperparams(n_blocks=n_blocks, symmetric=symmetric, estimate_alpha=False, alpha=MMSB_ALPHA)
    fit = lambda k, y, m: mmsb.fit(k, y, m, hp, max_iter=max_iter, throw=False)
    if single:
        one = fit
        fit = lambda k, y, m: jax.vmap(one, (None, 0, 0))(k, y[:, None], m[:, None])
    return sweep(fit, keys, (Y, train), in_axes=(None, None)).results


def _mmsb(key, Y, train, symmetric, single, restarts, max_iter, grid):
    """BIC choice of the number of blocks (one start each), then ``restarts`` starts."""
    n, n_rel, cells = Y.shape[1], Y.shape[0], train.sum()
    k_select, k_run = jax.random.split(key)
    bic = {}
    for k in grid:
        bound = float(np.sum(_mmsb_fit(jax.random.split(k_select, 1), Y, train, k, symmetric, single, max_iter).objective))
        n_params = n * (k - 1) * (n_rel if single else 1) + n_rel * (k * (k + 1) // 2 if symmetric else k * k)
        bic[k] = 2 * bound - n_params * np.log(cells)
    best = max(bic, key=bic.get)
    result = _mmsb_fit(jax.random.split(k_run, restarts), Y, train, best, symmetric, single, max_iter)
    state = result.state
    predict = (lambda s: np.asarray(jax.vmap(mmsb.predict_proba)(s))[:, 0]) if single else (lambda s: np.asarray(mmsb.predict_proba(s)))
    probs = [predict(jax.tree.map(lambda a: a[c], state)) for c in range(restarts)]
    return probs, [best] * restarts, {str(k): float(v) for k, v in bic.items()}


def run(out_dir, quick: bool = False, seed: int = 0, *, sweeps: int | None = None, burn: int | None = None,
        cases=None) -> dict:
    """The table; ``sweeps``, ``burn`` and ``cases`` ((data, setting) pairs) override the
    mode's run length and selection (for a shorter full-table run)."""
    n_sweeps, n_burn, chains, em_iter = (30, 15, 2, 100) if quick else (1000, 200, 5, 500)
    sweeps, burn = sweeps or n_sweeps, burn or n_burn
    cases = cases or ([("countries", "global"), ("kinship", "global"), ("countries", "single")] if quick else list(PAPER))
    results = {}
    for name, setting in cases:
        d = load_relational(FILES[name])
        Y, mask = d["Y"], d["mask"]
        if Y.ndim == 2:
            Y, mask = Y[None], mask[None]
        symmetric, single = name == "nips234", setting == "single"
        train, test = holdout_split(Y, mask, symmetric, seed)
        k_max = K_MAX[name, setting]
        covariates = country_covariates(d) if name == "countries" else None
        keys = jax.random.split(jax.random.fold_in(jax.random.key(seed), len(name)), len(METHODS))
        row = {}
        for method, key, paper in zip(METHODS, keys, PAPER[name, setting]):
            t = time.perf_counter()
            extra = {}
            if method == "MMSB":
                grid = MMSB_BLOCKS[name][1:2] if quick else MMSB_BLOCKS[name]
                probs, sizes, extra["bic"] = _mmsb(key, Y, train, symmetric, single, chains, em_iter, grid)
            else:
                probs, sizes = _mcmc(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates)
            aucs = [_auc(p, Y, test, symmetric, single) for p in probs]
            row[method] = {"auc_mean": float(np.mean(aucs)), "auc_sd": float(np.std(aucs)), "aucs": aucs,
                           "size_mean_per_chain": sizes, "seconds": time.perf_counter() - t, "paper": paper, **extra}
        row.update(baseline_aucs(Y, train, test, symmetric, single))
        results[f"{name} {setting}"] = row
    rows = []
    for case, r in results.items():
        rows += [[case, m, f"{r[m]['auc_mean']:.4f} ± {r[m]['auc_sd']:.4f}", f"{r[m]['paper']:.4f}",
                  " / ".join(f"{v:.1f}" for v in r[m]["size_mean_per_chain"]), f"{r[m]['seconds']:.0f}"] for m in METHODS]
        rows += [[case, f"{m} (baseline)", f"{r[m]['auc_mean']:.4f}", "-", "-", f"{r[m]['seconds']:.1f}"] for m in BASELINES]
    print_table(f"\nLFRM Table 1: held-out AUC (mean ± sd over {chains} restarts; MCMC {sweeps} sweeps, {burn} burn-in)",
                ["data", "method", "AUC", "paper", "K+ (LFRM) / clusters (IRM) / blocks (MMSB) per restart", "s"], rows)
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "sweeps": sweeps, "burn_in": burn, "chains": chains,
               "mmsb_em_sweeps": em_iter, "mmsb_alpha": MMSB_ALPHA,
               "protocol": "20% of observed off-diagonal cells held out (unordered pairs for NIPS), seed 0",
               "results": results}
    write_json(out_dir, NAME, payload)
    return payload

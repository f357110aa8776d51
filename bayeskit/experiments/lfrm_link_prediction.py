"""Table 1 of the LFRM paper (Miller, Griffiths & Jordan 2009): held-out link prediction
AUC on the countries (nations), Alyawarra kinship and NIPS-234 coauthorship data, for
LFRM from a random start, LFRM started from 15 IRM sweeps, the IRM and the MMSB, in the
"global" setting (one model for all relations) and the "single" setting (one model per
relation, the per-relation AUCs averaged; relations whose held-out cells are all of one
class have no AUC and are left out of the average). NIPS has one relation, so only global.

Protocol (the paper leaves it open; fixed here): for each of ten split seeds, 20% of the
observed off-diagonal cells are held out at random (``holdout_split``); the diagonal is
never used; for the undirected NIPS network unordered pairs are held out and each counts
once. The paper reports one split; split-to-split spread on NIPS is of the order of the
paper's gaps, so each method is reported as mean ± sd over the splits of its
restart-averaged AUC, with the per-split gap of each LFRM start to the IRM. A labelled
"entries (leaky)" row reruns NIPS with ordered cells held out and a directed model, which
sees the mirror of about 80% of the held-out cells: one reading of the paper's
protocol, and an upper bound. Restarts run as vectorised chains laid over the devices
(MMSB: random starts as one ``bayeskit.sweep``); each chain's predictive probabilities
are averaged over its retained draws; R-hat of the log joint over the restarts is
reported per split, and splits where the restarts froze in one state are counted apart;
each method's K+ (clusters, blocks) per restart is given as its mean and range over the
splits, and a note counts the splits where the LFRM's restarts each kept a K+ of their own
through every retained draw (no feature born or lost: the number of features did not mix).
IRM, MMSB and the LFRM rows take no covariates; on countries a labelled
"LFRM with covariates" row adds the paper's sender and receiver covariates, the 111
country features (centred; a missing feature at its mean), each relation with its own
coefficients (the paper's pair covariate exp(-distance) is not in the data). A labelled
countries row "LFRM with fitted births" reruns both LFRM starts with births="fitted" (a new
feature's weights proposed from a Gaussian fitted to its object's cells; the main rows use
the paper's prior draws, under which no feature is born on the 56 relations). The file's
features are one-of-n coded: 111 columns of rank 13 over 14 countries, so each relation's
222 coefficients act as free per-country effects with prior sd near 4.7 on the logit scale;
the row lost 0.01-0.02 AUC against the LFRM without them on the splits tried. Logistic link; K_max 16
(kinship), 32 (countries global: 14 objects and 56 relations fill 24 columns from a
random start), 16 (countries single: 12 filled on some relations) and 48 (NIPS). MMSB: Dirichlet concentration fixed
at 0.05 (re-estimated on NIPS it falls to 0.004-0.007, memberships as sharp and held-out
AUC about the same: 0.842 / 0.794 against 0.847 / 0.793 at 5 blocks on split seeds 0 / 1), the
number of blocks chosen by BIC (2 x bound - parameters x log(training cells), Airoldi
et al.'s criterion) over a grid, from one start each. Two model-free rows score the same
split from its training links alone (Katz, common neighbours:
:mod:`bayeskit.relational.baselines`), as a floor the models should clear.

Full: 10 split seeds, 200 sweeps with 100 burn-in, 2 restarts per split, MMSB up to 500
EM sweeps; NIPS first, then countries and kinship (the paper ran 1000 sweeps and 5
restarts on one split: ``run(..., splits=1, sweeps=1000, burn=200, chains=5)``). The
full run takes hours on two cores; it writes its JSON after every method and a rerun
with the same settings resumes it. Quick (under a minute on one core, about 40 s): one
split, 20 sweeps, 10 burn-in, 2 restarts, countries global and single, MMSB 100 EM sweeps
with a fixed number of blocks.
"""

from __future__ import annotations

import time
import warnings

import jax
import numpy as np
from scipy.stats import rankdata

from bayeskit.core.mcmc import diagnostics
from bayeskit.core.sweep import sweep
from bayeskit.core.xla import loop_program
from bayeskit.datasets import holdout_split, load_relational
from bayeskit.experiments.common import earlier_results, print_note, print_table, write_json
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
K_MAX = {("countries", "global"): 32, ("countries", "single"): 16, ("kinship", "global"): 16, ("kinship", "single"): 16,
         ("nips234", "global"): 48}
MMSB_ALPHA = 0.05
MMSB_BLOCKS = {"countries": (3, 5, 8), "kinship": (6, 10, 14), "nips234": (5, 10, 20)}  # BIC grid; quick: the middle
SPLITS = 10  # split seeds in the full run
FULL_ORDER = [("nips234", "global"), ("countries", "global"), ("countries", "single"), ("kinship", "global"), ("kinship", "single")]
# labelled extra rows of a case and the methods they rerun: "leaky" holds out ordered entries of
# the symmetric network and fits a directed model; "covariates" gives the LFRM the country features;
# "fitted births" proposes a new feature's weights from a Gaussian fitted to its object's cells
EXTRA_ROWS = {("nips234", "global"): {"leaky": ("LFRM rand",)},
              ("countries", "global"): {"covariates": ("LFRM rand", "LFRM w/IRM"), "fitted births": ("LFRM rand", "LFRM w/IRM")},
              ("countries", "single"): {"covariates": ("LFRM rand", "LFRM w/IRM")}}
PROTOCOL = ("20% of the observed off-diagonal cells held out per split seed (holdout_split: unordered pairs for the "
            "undirected NIPS network, each counted once; ordered cells for the directed relations); the leaky row holds "
            "out ordered cells of NIPS and fits a directed model, which sees the mirror of most held-out cells; no method takes "
            "covariates except the labelled countries rows 'LFRM with covariates' (sender and receiver country features)")


def roc_auc(y, score) -> float:
    """The area under the ROC curve of finite ``score`` for 0/1 labels ``y`` (ties count a
    half), by the Mann-Whitney statistic of the scores' mid-ranks: what scikit-learn's
    ``roc_auc_score`` returns, with fewer checks per call (the single setting scores every
    relation of every method and split apart). The same formula in JAX
    (``bayeskit.multilabel.metrics``) would compile a program for every number of held-out
    cells."""
    y, score = np.asarray(y), np.asarray(score)
    if not np.all((y == 0) | (y == 1)):
        raise ValueError("the AUC takes labels 0 and 1")
    if not np.all(np.isfinite(score)):
        raise ValueError(f"the AUC takes finite scores; {int(np.sum(~np.isfinite(score)))} are not")
    y = y == 1
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("the AUC needs both classes among the labels")
    return float((rankdata(score)[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _auc(prob, Y, test, symmetric: bool, single: bool):
    """AUC on the held-out cells; single: the mean of the per-relation AUCs (over the
    relations whose held-out cells hold both classes)."""
    if symmetric:
        test = test & np.triu(np.ones(test.shape[-2:], bool), 1)
    if not single:
        return roc_auc(Y[test], prob[test])
    aucs = [roc_auc(Y[r][test[r]], prob[r][test[r]]) for r in range(Y.shape[0]) if len(np.unique(Y[r][test[r]])) == 2]
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


def r_hat_log_joint(samples, single: bool) -> float:
    """Split R-hat of the log joint over the restarts; the largest over relations when
    each has its own model, NaN if any relation's is undefined (whatever their order).
    Restarts whose log joints are one and the same constant (every restart found and kept
    one partition: a posterior concentrated there) agree exactly: R-hat 1."""
    lj = np.asarray(samples["log_joint"])
    per_run = lj if single else lj[None]
    return float(np.max([1.0 if np.all(x == x.flat[0]) else diagnostics({"log_joint": x}, ("log_joint",))["log_joint"]["r_hat"]
                         for x in per_run]))


def _mcmc(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates=None, births="prior"):
    """Per-restart probabilities, mean K+ (LFRM) or clusters (IRM) per restart, the
    R-hat of the log joint over the restarts, the share of draws that use all ``k_max``
    columns (clusters) and (LFRM) whether the restarts kept different K+ throughout
    (:func:`bayeskit.relational.lfrm.frozen_feature_counts`). The table's notes report
    both, so the samplers' own warnings about them are not repeated here."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"(some draws use all k_max|a chain used all c_max|the number of features K\+ did not change)",
                                RuntimeWarning)
        probs, sizes, s = _draw(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates, births)
    frozen = method != "IRM" and lfrm.frozen_feature_counts(sizes) is not None
    sizes = np.asarray(sizes, float)
    saturated = float(np.mean(sizes >= k_max))
    return probs, (sizes.mean((0, 2)) if single else sizes.mean(1)).tolist(), r_hat_log_joint(s, single), saturated, frozen


def _draw(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates, births):
    if method == "IRM":
        hp = irm.Hyperparams(c_max=k_max, symmetric=symmetric, split_merge=IRM_SPLIT_MERGE)
        s = irm.sample_posterior(key, Y, train, hp, num_warmup=burn, num_samples=sweeps - burn, num_chains=chains,
                                 separate_relations=single, progress=True)
        probs = [np.asarray(irm.predict_proba(sc, Y, train, hp)) for sc in _chains(s, single)]
        sizes = s["n_clusters"]
    else:
        hp = lfrm.Hyperparams(k_max=k_max, symmetric=symmetric, births=births)
        k_start, k_run = jax.random.split(key)
        start = None
        if method == "LFRM w/IRM":
            start = lfrm.irm_start(k_start, Y, train, k_max=k_max, symmetric=symmetric, num_chains=chains, separate_relations=single)
        s = lfrm.sample_posterior(k_run, Y, train, hp, num_warmup=burn, num_samples=sweeps - burn, num_chains=chains,
                                  init_Z=start, separate_relations=single, covariates=covariates, progress=True)
        probs = [np.asarray(lfrm.predict_proba(sc, hp, covariates)) for sc in _chains(s, single)]
        sizes = s["n_features"]
    return probs, sizes, s


def _mmsb_fit(keys, Y, train, n_blocks, symmetric, single, max_iter):
    """MMSB fits for a batch of keys (restarts, one ``bayeskit.sweep`` over the devices),
    each relation separately when ``single``; states with leading (restart[, relation]) axes."""
    hp = mmsb.Hyperparams(n_blocks=n_blocks, symmetric=symmetric, estimate_alpha=False, alpha=MMSB_ALPHA)
    fit = lambda k, y, m: mmsb.fit(k, y, m, hp, max_iter=max_iter, throw=False)
    if single:
        one = fit
        fit = lambda k, y, m: jax.vmap(one, (None, 0, 0))(k, y[:, None], m[:, None])
    return sweep(fit, keys, (Y, train), in_axes=(None, None), compiler_options=loop_program(jax.default_backend())).results


def _mmsb(key, Y, train, symmetric, single, restarts, max_iter, grid):
    """BIC choice of the number of blocks (one start each), then ``restarts`` starts; a
    grid of one number of blocks (quick mode) is no choice, and runs no BIC fit."""
    n, n_rel, cells = Y.shape[1], Y.shape[0], train.sum()
    k_select, k_run = jax.random.split(key)
    bic = {}
    for k in grid if len(grid) > 1 else ():
        bound = float(np.sum(_mmsb_fit(jax.random.split(k_select, 1), Y, train, k, symmetric, single, max_iter).objective))
        n_params = n * (k - 1) * (n_rel if single else 1) + n_rel * (k * (k + 1) // 2 if symmetric else k * k)
        bic[k] = 2 * bound - n_params * np.log(cells)
    best = max(bic, key=bic.get) if bic else grid[0]
    result = _mmsb_fit(jax.random.split(k_run, restarts), Y, train, best, symmetric, single, max_iter)
    state = result.state
    predict = (lambda s: np.asarray(jax.vmap(mmsb.predict_proba)(s))[:, 0]) if single else (lambda s: np.asarray(mmsb.predict_proba(s)))
    probs = [predict(jax.tree.map(lambda a: a[c], state)) for c in range(restarts)]
    return probs, [best] * restarts, {str(k): float(v) for k, v in bic.items()}


IRM_SPLIT_MERGE = 1  # the IRM's split-merge moves per sweep (its default; recorded in the settings)


def _settings(quick: bool, seed: int, splits, sweeps, burn, chains) -> dict:
    """The run's settings (a rerun with the same ones resumes it)."""
    n_splits, n_sweeps, n_burn, n_chains, em_iter = (1, 20, 10, 2, 100) if quick else (SPLITS, 200, 100, 2, 500)
    return {"experiment": NAME, "quick": quick, "seed": seed, "split_seeds": list(range(seed, seed + (splits or n_splits))),
            "sweeps": sweeps or n_sweeps, "burn_in": burn or n_burn, "chains": chains or n_chains, "mmsb_em_sweeps": em_iter,
            "mmsb_alpha": MMSB_ALPHA, "lfrm_priors": _lfrm_priors(), "irm_split_merge": IRM_SPLIT_MERGE,
            "k_max": {f"{n} {s}": k for (n, s), k in K_MAX.items()},
            "extra_rows": {case_label(n, s, r): list(m) for (n, s), rows in EXTRA_ROWS.items() for r, m in rows.items()}}


def _lfrm_priors() -> dict:
    """The library's LFRM priors this run used (a rerun under other ones starts afresh)."""
    hp = lfrm.Hyperparams()
    return {"alpha_prior": list(hp.alpha_prior), "sigma_w_prior": list(hp.sigma_w_prior), "bias_scale": hp.bias_scale,
            "births": hp.births}


def _cases(quick: bool, cases) -> list:
    """(data, setting, row) in run order, each extra row right after its case; row is the
    held-out unit ("pairs" or "entries") of the main row, or an EXTRA_ROWS name."""
    if cases is None:
        cases = [("countries", "global"), ("countries", "single")] if quick else FULL_ORDER
    out = []
    for name, setting in cases:
        out.append((name, setting, "pairs" if name == "nips234" else "entries"))
        if not quick:
            out.extend((name, setting, row) for row in EXTRA_ROWS.get((name, setting), {}))
    return out


ROW_LABELS = {"leaky": ", entries (leaky)", "covariates": ", LFRM with covariates", "fitted births": ", LFRM with fitted births"}


def case_label(name: str, setting: str, row: str) -> str:
    return f"{name} {setting}" + ROW_LABELS.get(row, "")


def run_split(name, setting, row_kind, split_seed, st, quick, done=None, on_method=None) -> dict:
    """Every method of one case on the split drawn with ``split_seed``: the held-out AUC
    of each restart and its mean, K+ / clusters / blocks, R-hat of the log joint over the
    restarts, seconds; the baselines on the same split. ``done`` holds methods already
    run (kept); ``on_method(row)`` is called after each method. ``row_kind`` is the main
    row's held-out unit or an EXTRA_ROWS name, which runs only the methods listed there."""
    d = load_relational(FILES[name])
    Y, mask = d["Y"], d["mask"]
    if Y.ndim == 2:
        Y, mask = Y[None], mask[None]
    symmetric, single = name == "nips234", setting == "single"
    unit = "pairs" if row_kind == "pairs" else "entries"
    train, test = holdout_split(Y, mask, symmetric, split_seed, unit=unit)
    model_symmetric = symmetric and row_kind != "leaky"  # the leaky protocol reads each held-out cell's mirror
    k_max = st["k_max"][f"{name} {setting}"]
    covariates = country_covariates(d) if row_kind == "covariates" else None
    births = "fitted" if row_kind == "fitted births" else lfrm.Hyperparams().births
    only = EXTRA_ROWS.get((name, setting), {}).get(row_kind)
    keys = jax.random.split(jax.random.fold_in(jax.random.key(split_seed), len(name)), len(METHODS))
    row = dict(done or {})
    sweeps, burn, chains = st["sweeps"], st["burn_in"], st["chains"]
    for method, key in zip(METHODS, keys):
        if method in row or (only is not None and method not in only):
            continue
        t = time.perf_counter()
        extra = {}
        if method == "MMSB":
            grid = MMSB_BLOCKS[name][1:2] if quick else MMSB_BLOCKS[name]
            probs, sizes, extra["bic"] = _mmsb(key, Y, train, model_symmetric, single, chains, st["mmsb_em_sweeps"], grid)
        else:
            probs, sizes, extra["r_hat_log_joint"], extra["saturated_share"], extra["k_frozen"] = _mcmc(
                method, key, Y, train, k_max, model_symmetric, single, sweeps, burn, chains, covariates, births)
        aucs = [_auc(p, Y, test, model_symmetric, single) for p in probs]
        row[method] = {"auc_mean": float(np.mean(aucs)), "auc_sd": float(np.std(aucs)), "aucs": aucs,
                       "size_mean_per_chain": sizes, "seconds": time.perf_counter() - t, **extra}
        if on_method:
            on_method(row)
    if "Katz" not in row:
        row.update(baseline_aucs(Y, train, test, model_symmetric, single))
    return row


# A split's R-hat is infinite where each restart's log joint stayed at a constant of its own,
# and at or above this where the within-restart variance of the split halves is rounding
# noise against the spread between restarts: the restarts are frozen, each in its own state,
# and R-hat measures only how far apart they are. Counted apart (with undefined ones, NaN),
# not averaged in. The JSON holds both as null.
FROZEN_R_HAT = 1e6


def summarise(results: dict) -> dict:
    """Per case and method: mean and sd over splits of each split's restart-mean AUC, the
    median and largest R-hat of the log joint over the splits where it is defined and the
    restarts moved, and the number of splits where they froze (``FROZEN_R_HAT``); per
    LFRM start, its per-split gap to the IRM."""
    out = {}
    for case, entry in results.items():
        splits = list(entry["splits"].values())
        methods = [m for m in (*METHODS, *BASELINES) if any(m in s for s in splits)]
        summary = {}
        for m in methods:
            aucs = [s[m]["auc_mean"] for s in splits if m in s]
            every = [s[m]["r_hat_log_joint"] for s in splits if "r_hat_log_joint" in s.get(m, {})]
            rhats = [r for r in every if r is not None and r < FROZEN_R_HAT]  # NaN and inf compare False; a resumed run reads both as None
            summary[m] = {"auc_mean": float(np.mean(aucs)), "auc_sd": float(np.std(aucs)), "n_splits": len(aucs),
                          "r_hat_log_joint_median": float(np.median(rhats)) if rhats else None,
                          "r_hat_log_joint_max": float(np.max(rhats)) if rhats else None, "r_hat_defined_splits": len(rhats),
                          "frozen_splits": len(every) - len(rhats),
                          "seconds_per_split": float(np.mean([s[m]["seconds"] for s in splits if m in s])),
                          "saturated_share_max": max((s[m].get("saturated_share", 0.0) for s in splits if m in s), default=0.0),
                          "k_frozen_splits": _count_recorded([s[m].get("k_frozen") for s in splits if m in s]),
                          "paper": entry["paper"].get(m), **_size_range(splits, m)}
        for start in ("LFRM rand", "LFRM w/IRM"):
            gaps = [s[start]["auc_mean"] - s["IRM"]["auc_mean"] for s in splits if start in s and "IRM" in s]
            if gaps:
                summary[f"{start} - IRM"] = {"gap_mean": float(np.mean(gaps)), "gap_sd": float(np.std(gaps)), "gaps": gaps,
                                             "splits_above": int(np.sum(np.array(gaps) > 0)), "n_splits": len(gaps)}
        out[case] = summary
    return out


def _count_recorded(flags: list):
    """How many of the recorded flags are true; None when no split recorded one (a run from
    before the record), so that "not recorded" is not read as "never"."""
    recorded = [f for f in flags if f is not None]
    return sum(map(bool, recorded)) if recorded else None


def _size_range(splits: list, method: str) -> dict:
    """The mean and range over every restart of every split of its mean K+ (LFRM), number of
    clusters (IRM) or blocks (MMSB); empty for the baselines."""
    sizes = np.concatenate([np.ravel(s[method]["size_mean_per_chain"]) for s in splits if "size_mean_per_chain" in s.get(method, {})] or [[]])
    if not sizes.size:
        return {}
    return {"size_mean": float(sizes.mean()), "size_min": float(sizes.min()), "size_max": float(sizes.max())}


def _table(summary: dict, st: dict) -> None:
    """Print the summary of each case: AUC rows, then the gap rows."""
    rows = []
    for case, s in summary.items():
        for m, v in s.items():
            if "gap_mean" in v:
                rows.append([case, m, f"{v['gap_mean']:+.4f} ± {v['gap_sd']:.4f}", "-", f"above on {v['splits_above']}/{v['n_splits']}",
                             "-", "-", "-"])
                continue
            paper = "-" if v["paper"] is None else f"{v['paper']:.4f}"
            rhat = "-" if v["r_hat_log_joint_median"] is None else f"{v['r_hat_log_joint_median']:.2f} / {v['r_hat_log_joint_max']:.2f}"
            if v.get("frozen_splits"):
                rhat += f" (frozen on {v['frozen_splits']})"
            size = f"{v['size_mean']:.1f} ({v['size_min']:.3g}-{v['size_max']:.3g})" if "size_mean" in v else "-"
            rows.append([case, m + (" (baseline)" if m in BASELINES else ""), f"{v['auc_mean']:.4f} ± {v['auc_sd']:.4f}", paper,
                         str(v["n_splits"]), rhat, size, f"{v['seconds_per_split']:.0f}"])
    print_table(f"\nLFRM Table 1: held-out AUC, mean ± sd over split seeds {st['split_seeds'][0]}..{st['split_seeds'][-1]} "
                f"(each split: the mean over {st['chains']} restarts; MCMC {st['sweeps']} sweeps, {st['burn_in']} burn-in)",
                ["data", "method", "AUC (or gap to IRM)", "paper", "splits", "R-hat log joint (median / max)",
                 "K+ / clusters / blocks per restart: mean (range)", "s per split"], rows)
    for case, s in summary.items():
        unrecorded = [m for m, v in s.items() if m.startswith("LFRM") and "k_frozen_splits" in v and v["k_frozen_splits"] is None]
        if unrecorded:
            print_note(f"{case}: whether the restarts of {' and '.join(unrecorded)} kept K+ of their own was not recorded by the run "
                       "of this row (it predates the record); a K+ range of whole numbers suggests they did.")
        for m, v in s.items():
            if v.get("frozen_splits"):
                print_note(f"{case}, {m}: on {v['frozen_splits']} of {v['n_splits']} splits the restarts froze: R-hat of the "
                           f"log joint is infinite (each restart's log joint stayed at its own constant), at least {FROZEN_R_HAT:.0e} "
                           "(its variance within restarts is rounding noise against the spread between them) or undefined; "
                           "those splits are left out of the median / max; the restarts have not mixed.")
            if v.get("k_frozen_splits"):
                where = " (in at least one relation)" if case.split(",")[0].endswith("single") else ""
                print_note(f"{case}, {m}: on {v['k_frozen_splits']} of {v['n_splits']} splits each restart kept one K+ through its "
                           f"retained draws{where}, and the restarts differ in it: no feature was born or lost, so the number of "
                           "features did not mix and each restart's AUC is that of its K+.")
            if v.get("saturated_share_max", 0) > 0:
                print_note(f"{case}, {m}: {v['saturated_share_max']:.1%} of a split's draws use all k_max columns "
                           f"({'clusters' if m == 'IRM' else 'features'}), the truncation of this run: those draws could "
                           "not open another one.")


def run(out_dir, quick: bool = False, seed: int = 0, *, splits: int | None = None, sweeps: int | None = None,
        burn: int | None = None, chains: int | None = None, cases=None) -> dict:
    """The table over split seeds ``seed``, ``seed + 1``, ...; ``splits``, ``sweeps``,
    ``burn``, ``chains`` and ``cases`` ((data, setting) pairs) override the mode's. The
    JSON is written after every method; a rerun with the same settings keeps what is
    done and runs the rest."""
    st = _settings(quick, seed, splits, sweeps, burn, chains)
    results = earlier_results(out_dir, NAME, st)
    payload = {**st, "complete": False, "protocol": PROTOCOL, "results": results}
    for name, setting, row_kind in _cases(quick, cases):
        label = case_label(name, setting, row_kind)
        paper = {} if row_kind == "leaky" else dict(zip(METHODS, PAPER[name, setting]))
        entry = results.setdefault(label, {"paper": paper, "unit": "pairs" if row_kind == "pairs" else "entries", "splits": {}})
        wanted = {*EXTRA_ROWS.get((name, setting), {}).get(row_kind, METHODS), *BASELINES}
        for split in st["split_seeds"]:
            key = str(split)
            if wanted <= set(entry["splits"].get(key, {})):
                continue

            def save(row, key=key, entry=entry):
                entry["splits"][key] = row
                payload["summary"] = summarise(results)
                write_json(out_dir, NAME, payload)

            save(run_split(name, setting, row_kind, split, st, quick, entry["splits"].get(key), on_method=save))
            print(f"{label}, split {split}: " + ", ".join(f"{m} {v['auc_mean']:.4f}" for m, v in entry["splits"][key].items()),
                  flush=True)
        _table({label: summarise({label: entry})[label]}, st)
        jax.clear_caches()  # the next case has other shapes; one process holding every case's programs ran out of LLVM memory maps
    payload["complete"] = True
    payload["summary"] = summarise(results)
    write_json(out_dir, NAME, payload)
    return payload

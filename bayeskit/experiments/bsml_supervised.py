"""Figures 2-5 of Gönen (2014): BSML against PROBIT and projection + PROBIT baselines.

For each data set and each subspace dimension R, hamming loss, average AUC, macro F1,
micro F1 and training time of BSML, PCA/MDDM/MLLS/MLDA + PROBIT (MLDA up to L - 1) and
PROBIT on the raw features (no reduction), 500 iterations, all Gamma hyperparameters 1.
The paper shows these as curves only; it states in the text that BSML beats every
baseline in hamming loss and average AUC on Emotions at every R, by about two points at
R = 2. Quick mode: Emotions, R in {2, 6}, 200 iterations.

The full run takes hours on two cores (tmc2007 alone has 22 values of R on 21519 x 500
features). It writes its JSON after every R, marked ``"complete": false`` until the end,
and a rerun into the same folder with the same settings keeps the finished entries.
"""

from __future__ import annotations

from bayeskit.datasets import load_mulan
from bayeskit.experiments.common import (
    METRICS,
    PROJECTIONS,
    earlier_results,
    fit_bsml,
    fit_probit,
    fit_projection_probit,
    max_components,
    print_table,
    write_json,
)
from bayeskit.experiments.paper_values import DATASETS
from bayeskit.multilabel.bsml import Hyperparams

NAME = "bsml_supervised"
PAPER_NOTE = ("curves only (Figures 2-5), no numbers to print; its text: BSML beats every baseline in hamming loss and "
              "average AUC on Emotions at every R, by about two points at R = 2")


def _settings(quick: bool):
    if quick:
        return {"emotions": [2, 6]}, 200
    grid = {}
    for name in sorted(DATASETS, key=lambda name: name == "tmc2007"):  # the longest last
        n_labels = load_mulan(name)[1].shape[1]
        grid[name] = list(range(1, n_labels + 1))
    return grid, 500


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    grid, max_iter = _settings(quick)
    settings = {"experiment": NAME, "quick": quick, "max_iter": max_iter, "seed": seed}
    results = earlier_results(out_dir, NAME, settings)
    payload = {**settings, "complete": False, "results": results}
    for name, ranks in grid.items():
        X_train, Y_train, X_test, Y_test = load_mulan(name)
        n_labels, n_features = Y_train.shape[1], X_train.shape[1]
        done = results.setdefault(name, {"by_R": {}})
        if "PROBIT" not in done:
            done["PROBIT"] = fit_probit(X_train, Y_train, X_test, Y_test, seed=seed, max_iter=max_iter)
        for r in ranks:
            if str(r) in done["by_R"]:
                continue
            entry = {"BSML": fit_bsml(X_train, Y_train, X_test, Y_test, Hyperparams(n_components=r), seed=seed, max_iter=max_iter)[0]}
            for method in PROJECTIONS:
                if r <= max_components(method, n_labels, n_features):
                    entry[method + "+PROBIT"] = fit_projection_probit(method, X_train, Y_train, X_test, Y_test, r, seed=seed, max_iter=max_iter)
            done["by_R"][str(r)] = entry
            write_json(out_dir, NAME, payload)
            table = [[m, *(v[k] for k in METRICS), v["train_seconds"]] for m, v in entry.items()]
            table.append(["PROBIT (no reduction)", *(done["PROBIT"][k] for k in METRICS), done["PROBIT"]["train_seconds"]])
            print_table(f"\n{name}, R = {r}, {max_iter} iterations", ["method", *METRICS, "train_s"], table, paper=PAPER_NOTE)
    payload["complete"] = True
    write_json(out_dir, NAME, payload)
    plot(payload, out_dir)
    return payload


def plot(payload: dict, out_dir) -> None:
    """One PNG per data set: the four metrics and training time against R (Figs 2-5)."""
    import matplotlib

    matplotlib.use("Agg")
    from pathlib import Path

    import matplotlib.pyplot as plt

    panels = [*METRICS, "train_seconds"]
    for name, res in payload["results"].items():
        ranks = sorted(res["by_R"], key=int)
        methods = sorted({m for r in ranks for m in res["by_R"][r]})
        fig, grid = plt.subplots(2, 3, figsize=(13, 7.5))  # five panels and the legend, readable at a glance
        axes, legend_ax = grid.flat[: len(panels)], grid.flat[-1]
        for ax, metric in zip(axes, panels):
            for m in methods:
                xs = [int(r) for r in ranks if m in res["by_R"][r]]
                ys = [res["by_R"][r][m][metric] for r in ranks if m in res["by_R"][r]]
                ax.plot(xs, ys, marker="o", ms=4, label=m, lw=2.5 if m == "BSML" else 1.2)
            ax.axhline(res["PROBIT"][metric], color="k", ls="--", lw=1, label="PROBIT (no reduction)")
            ax.set_xlabel("R (subspace dimension)")
            ax.set_title(metric.replace("_", " "), fontsize=12)
            ax.grid(alpha=0.3)
            if metric == "train_seconds":
                ax.set_yscale("log")
        legend_ax.axis("off")
        legend_ax.legend(*axes[0].get_legend_handles_labels(), loc="center", fontsize=12, frameon=False)
        fig.suptitle(f"{name}: BSML against the projection + PROBIT baselines (Figures 2-5)", fontsize=14)
        fig.tight_layout()
        fig.savefig(Path(out_dir) / f"{NAME}_{name}.png", dpi=110)
        plt.close(fig)

"""The ROBPCA paper's real examples (Hubert, Rousseeuw & Vanden Branden 2005, Section 4):
outlier maps of ROBPCA on Glass (k = 3, h = 0.75 n), on the car data (k = 2, variables
divided by their MAD, as their units differ) and on Octane (k = 2), beside classical PCA's
on the car data, and the 97.5% tolerance ellipses of the two methods' car scores.

Printed per data set: the rows (1-based) in each class, the cutoffs, the eigenvalues, and
the known outlier groups of the data (Glass: rows 57-63, 74-76 and 143-180 measured with
other detector settings; cars: sports cars 25, 30, 32, 34, 36 and vans 102-111; Octane:
samples 25, 26, 36-39 with added alcohol). The paper's figures are not reproduced here as
numbers; rrcov's PcaHubert on the same data runs in ``benchmarks/bench_robpca.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import median_abs_deviation

from bayeskit.datasets import load_robpca
from bayeskit.estimators import ROBPCA
from bayeskit.experiments.common import print_note, print_table, save_figure, write_json
from bayeskit.robust import pca_baselines, robpca

NAME = "robpca_examples"
KNOWN = {
    "glass": list(range(57, 64)) + [74, 75, 76] + list(range(143, 181)),
    "cars": [25, 30, 32, 34, 36] + list(range(102, 112)),
    "octane": [25, 26, 36, 37, 38, 39],
}


def data():
    cars = load_robpca("cars")
    C = cars["X"]
    return {
        "glass": (load_robpca("glass")["X"], 3, None),
        "cars": ((C - np.median(C, 0)) / median_abs_deviation(C, 0, scale="normal"), 2, cars["rownames"]),
        "octane": (load_robpca("octane")["X"], 2, None),
    }


def classical_map(X, k: int, h: int):
    """Classical PCA's outlier map with the same distance and cutoff formulas."""
    center, components, values = pca_baselines.classical_pca(X, k)
    rank = np.linalg.matrix_rank(X - X.mean(0))
    d = robpca.diagnostics(X, center, components, values, h, rank)
    return d, np.asarray(values)


def classes(labels) -> dict:
    return {name: (np.nonzero(np.asarray(labels) == name)[0] + 1).tolist() for name in robpca.LABELS[1:]}


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bayeskit.plotting import plot_outlier_map, plot_tolerance_ellipse

    out, rows = {}, []
    fig, axes = plt.subplots(2, 3, figsize=(16, 10))
    for ax, (name, (X, k, names)) in zip(axes[0], data().items()):
        est = ROBPCA(n_components=k, random_state=seed).fit(X)
        found = classes(est.labels_)
        flagged = sorted(set().union(*found.values()))
        out[name] = {"k": k, "h": est.h_, "eigenvalues": est.eigenvalues_.tolist(), "sd_cutoff": est.sd_cutoff_,
                     "od_cutoff": est.od_cutoff_, "classes": found, "known_outliers": KNOWN[name],
                     "known_flagged": len(set(KNOWN[name]) & set(flagged)), "n_flagged": len(flagged)}
        rows.append([name, X.shape, k, est.h_, f"{est.sd_cutoff_:.4g} / {est.od_cutoff_:.4g}",
                     f"{out[name]['known_flagged']}/{len(KNOWN[name])}", len(flagged),
                     " ".join(map(str, found["bad_leverage"]))])
        plot_outlier_map(est.score_distances_, est.orthogonal_distances_, est.sd_cutoff_, est.od_cutoff_,
                         est.labels_, ax=ax, title=f"ROBPCA, {name} (k = {k})")
        if name == "cars":
            cars_est, cars_names = est, names
    X, k, _ = data()["cars"]
    d, values = classical_map(X, k, cars_est.h_)
    labels = np.asarray(robpca.LABELS)[np.asarray(d.labels)]
    out["cars_classical"] = {"eigenvalues": values.tolist(), "classes": classes(labels),
                             "sd_cutoff": float(d.sd_cutoff), "od_cutoff": float(d.od_cutoff)}
    plot_outlier_map(d.score_distances, d.orthogonal_distances, float(d.sd_cutoff), float(d.od_cutoff), labels,
                     ax=axes[1, 0], title="classical PCA, cars (k = 2)")
    plot_tolerance_ellipse(cars_est.scores_, cars_est.eigenvalues_, labels=cars_est.labels_, ax=axes[1, 1],
                           title="ROBPCA scores, cars, 97.5% ellipse")
    plot_tolerance_ellipse(d.scores, values, labels=labels, ax=axes[1, 2], title="classical scores, cars, 97.5% ellipse")
    print_table("\nROBPCA outlier maps (rows 1-based)", ["data", "shape", "k", "h", "SD / OD cutoff", "known flagged",
                                                          "flagged", "bad leverage"], rows,
                paper="outlier maps only (Section 4); its flagged rows are the 'known flagged' column")
    print_note("cars, bad leverage: " + ", ".join(cars_names[i - 1] for i in out["cars"]["classes"]["bad_leverage"]))
    print_note(f"cars, classical PCA: {dict((c, len(v)) for c, v in out['cars_classical']['classes'].items())} eigenvalues "
               f"{np.round(values, 3).tolist()} vs ROBPCA {np.round(cars_est.eigenvalues_, 3).tolist()}")
    save_figure(fig, out_dir, f"{NAME}.png", "ROBPCA outlier maps (top), classical PCA on the cars and the score "
                "ellipses (bottom)")
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "results": out}
    write_json(out_dir, NAME, payload)
    return payload


__all__ = ["run", "KNOWN"]

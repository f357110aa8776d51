"""RCA paper, Experiment 2 (Kalaitzis & Lawrence 2012, Figure 3b): recovery of the Sachs
et al. protein-signalling network by EM/RCA and the graphical lasso.

Protocol: the authors' code (``demProtSigEMRca1.m``), not the paper's text. The code uses
conditions 1-3 (2,666 cells) and a random 10% subsample, z-scores each protein, forms
C = Y'Y / n, fixes s2 = 0.5 tr(C) / d and sweeps lambda = 5^linspace(-8, 3, 50); the
truth is its 14-edge graph (``bayeskit.datasets.SACHS_EDGES``). The paper's text quotes the
7,466-cell set; the code does not use it. The authors set no seed, so we draw the
subsamples from ``seed`` and report the spread over them (full: 10 subsamples; quick: 2
subsamples and 15 penalties).

Also reported: our graphical lasso on all 2,666 cells at R glasso's penalties, beside R
glasso 1.11's edge counts measured on the same matrix, and the literature points the
authors' plot overlays (Stegle et al. 2011).
"""

from __future__ import annotations

import numpy as np

from bayeskit.datasets import load_sachs, sachs_adjacency
from bayeskit.experiments import rca_networks as nets
from bayeskit.experiments.common import print_table, write_json

NAME = "rca_sachs"
# R glasso 1.11, penalize.diagonal = TRUE, z-scored conditions 1-3, C = X'X / n: (rho, edges, recall, precision)
R_GLASSO = ((0.01, 38, 0.79, 0.29), (0.05, 14, 0.57, 0.57), (0.10, 8, 0.43, 0.75), (0.30, 6, 0.29, 0.67))
# (recall, precision) points overlaid by the authors' plot
LITERATURE = {"Kronecker-GLasso": ((1, 0.275), (0.87, 0.26), (0.27, 0.57)),
              "GLasso (lit.)": ((1, 0.275), (0.67, 0.30), (0.20, 0.50))}


def zscore(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(0)) / X.std(0)


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    X = load_sachs((1, 2, 3))
    truth = sachs_adjacency()
    n_sub, n_alpha = (2, 15) if quick else (10, 50)
    alphas = 5.0 ** np.linspace(-8, 3, n_alpha)
    rng = np.random.default_rng(seed)

    C_all = nets.second_moment(zscore(X))
    anchors = nets.glasso_sweep(C_all, [r[0] for r in R_GLASSO])
    anchor_rows = []
    for (rho, r_edges, r_recall, r_precision), P in zip(R_GLASSO, anchors):
        tp, found = nets.edge_counts(P, truth)
        anchor_rows.append([rho, found, r_edges, f"{tp / 14:.2f}", r_recall, f"{tp / max(found, 1):.2f}", r_precision])
    print_table("\nGraphical lasso on all 2,666 cells of conditions 1-3 (z-scored), ours beside R glasso 1.11",
                ["rho", "edges", "R edges", "recall", "R recall", "precision", "R precision"], anchor_rows)

    curves = {"EM/RCA": [], "GLASSO": []}
    diagnostics, seconds = [], {}
    for _ in range(n_sub):
        sub = rng.choice(len(X), int(np.ceil(0.1 * len(X))), replace=False)
        C = nets.second_moment(zscore(X[sub]))
        em, info, gl = nets.both_sweeps(C, alphas, 0.5 * np.trace(C) / C.shape[0], seconds)
        curves["EM/RCA"].append(nets.curve(em, truth))
        curves["GLASSO"].append(nets.curve(gl, truth))
        diagnostics.append(info)
    table = nets.report(f"\nSachs, conditions 1-3, {n_sub} random 10% subsamples, {n_alpha} penalties (chance precision "
                        "14/55 = 0.255)", curves, diagnostics, seconds)
    nets.pr_figure(curves, out_dir, f"{NAME}.png", "Sachs network, conditions 1-3, 10% subsamples",
                   {name: (pts, m) for (name, pts), m in zip(LITERATURE.items(), ("x", "+"))})
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "alphas": alphas.tolist(), "subsamples": n_sub,
               "recall_levels": list(nets.RECALL_LEVELS), "interpolated_precision": table, "curves": curves,
               "emrca_fits": diagnostics, "glasso_anchors_vs_R": anchor_rows, "seconds": seconds}
    write_json(out_dir, NAME, payload)
    return payload

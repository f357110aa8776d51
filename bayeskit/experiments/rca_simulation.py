"""RCA paper, Experiment 1 (Kalaitzis & Lawrence 2012, Figure 3a): recovering a sparse
precision hidden under a low-rank confounder, on the authors' simulated data
(``bayeskit.datasets.load_rca_simulation``: d = 50, rank 3, n = 100, 13 true edges).

Protocol of the authors' ``demToyEMRca1.m``: keep a random 90% of the rows, centre,
C = Y'Y / n, s2 = 0.5 tr(C) / d, lambda = 5^linspace(-8, 3, 30). Three curves:
EM/RCA on the confounded Y, the graphical lasso on Y, and the "ideal" graphical lasso
on the unconfounded Y_unc (the same draws without X W). The authors set no seed; we
draw the subsamples from ``seed`` and report the spread (full: 5 subsamples; quick: 1
subsample and every second penalty, about 40 s). EM/RCA starts at the authors' Lambda = I
at every penalty; its edges appear between lambda = 5^-6 and 5^-4, where its fits run up
to 1000 iterations each.
"""

from __future__ import annotations

import numpy as np

from bayeskit.datasets import load_rca_simulation
from bayeskit.experiments import rca_networks as nets
from bayeskit.experiments.common import print_note, write_json

NAME = "rca_simulation"


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    data = load_rca_simulation()
    truth = data["Lambda"] != 0
    n = len(data["Y"])
    alphas = 5.0 ** np.linspace(-8, 3, 30)
    n_sub = 5
    if quick:
        alphas, n_sub = alphas[::2], 1
    rng = np.random.default_rng(seed)
    curves = {"EM/RCA": [], "GLASSO": [], "ideal GLASSO (no confounder)": []}
    diagnostics, seconds = [], {}
    for _ in range(n_sub):
        rows = rng.choice(n, int(np.ceil(0.9 * n)), replace=False)
        C = nets.second_moment(data["Y"][rows])
        em, info, gl = nets.both_sweeps(C, alphas, 0.5 * np.trace(C) / C.shape[0], seconds)
        ideal = nets.glasso_sweep(nets.second_moment(data["Y_unc"][rows]), alphas)
        for name, precisions in zip(curves, (em, gl, ideal)):
            curves[name].append(nets.curve(precisions, truth))
        diagnostics.append(info)
    table = nets.report(f"\nSimulated confounded network (d = 50, 13 edges), {n_sub} random 90% subsamples, "
                        f"{len(alphas)} penalties", curves, diagnostics, seconds)
    if quick:
        print_note("Quick mode: one subsample and every second penalty; the full run (minutes) gives the spread over five.")
    nets.pr_figure(curves, out_dir, f"{NAME}.png", "Simulated confounded network (authors' data), 90% subsamples")
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "alphas": alphas.tolist(), "subsamples": n_sub,
               "recall_levels": list(nets.RECALL_LEVELS), "interpolated_precision": table, "curves": curves,
               "emrca_fits": diagnostics, "seconds": seconds}
    write_json(out_dir, NAME, payload)
    return payload

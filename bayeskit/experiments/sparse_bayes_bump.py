"""Bumps (Helgoy & Li, Table 2 and Figure 2): Donoho & Johnstone's bumps at N = 120
equally spaced t in [0, 1], y = f(t) + N(0, sigma^2) with sigma = sd(f) / SNR for SNR in
{1, 2, 3, 4, 5, 10}, 100 data sets per level; RMSE against the noise-free f at the
training inputs, number of relevance vectors (kernel columns) and estimated noise sd.

The paper does not give its kernel; we use exp(-GAMMA (t - t')^2) with GAMMA = 10^4
(width 1 / sqrt(2 GAMMA) = 0.007, between the bumps' widths 0.005 and 0.03, so that one
kernel can follow one spike) and a bias column (the paper's w_0). Every training point
may enter (``max_basis`` = N + 1). As for sinc, each level's data sets run as one vmapped
fit per method, and fastrvm runs on the same data sets when installed. The paper's table
values were not available to us; none are printed. Quick: 10 data sets at SNR 1 and 10.
"""

from __future__ import annotations

from bayeskit.datasets import bump_datasets
from bayeskit.experiments.sparse_bayes_sinc import (
    METHODS,
    batch_fitter,
    fastrvm_batch,
    fits_figure,
    report,
    run_batch,
    summarise,
    summarise_peer,
    table_row,
)

NAME = "sparse_bayes_bump"
SNR = (1, 2, 3, 4, 5, 10)
QUICK_SNR = (1, 10)
FIGURE_SNR = (1, 3, 10)
GAMMA = 1e4
N = 120


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    n_sets = 10 if quick else 100
    kernel = {"kernel": "rbf", "gamma": GAMMA, "bias": True}
    fitters = {name: batch_fitter(prior, N + 1, kernel) for name, prior in METHODS.items()}
    results, rows, figure = {}, [], {}
    for level, snr in enumerate(SNR):
        if quick and snr not in QUICK_SNR:
            continue
        X, y, f, sigma = bump_datasets(n_sets, snr, n=N, seed=seed + level)
        fits = {}
        for name, fitter in fitters.items():
            out, t_compile, t_run = run_batch(fitter, X, y, X[0])
            fits[name] = out
            results[f"{snr} {name}"] = summarise(out, f, t_run, t_compile, N)
            rows.append(table_row(f"{snr} ({sigma:.3f})", name, results[f"{snr} {name}"]))
        peer = fastrvm_batch(X, y, X[0], GAMMA, fit_intercept=True)
        if peer is not None:
            results[f"{snr} fastrvm"] = summarise_peer(peer, f)
            rows.append(table_row(f"{snr} ({sigma:.3f})", "fastrvm (peer)", results[f"{snr} fastrvm"]))
        if snr in FIGURE_SNR or quick:
            figure[f"SNR {snr}"] = (X[0, :, 0], y, X[0, :, 0], f, fits)
    fits_figure(figure, N, out_dir, NAME, "Bumps (Figure 2): truth (blue), fit (green), relevance vectors (red), data set 0")
    return report(out_dir, NAME, f"Bumps (Table 2): {n_sets} data sets per SNR, N = {N}", "SNR (sigma)", rows,
                  {"quick": quick, "seed": seed, "n_sets": n_sets, "kernel": kernel, "results": results})

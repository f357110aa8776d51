"""The ROBPCA paper's simulations (Hubert, Rousseeuw & Vanden Branden 2005, Section 5):
ROBPCA against classical PCA (CPCA), spherical (SPHER) and ellipsoidal (ELL) PCA and RAPCA
on contaminated normal samples.

The samples are

    (1 - eps) N_p(0, Sigma) + eps N_p(mu~, Sigma / f2),   mu~ = f1 e_{k+1},

(the first floor(eps n) rows contaminated) in two settings:

- n = 100, p = 4, Sigma = diag(8, 4, 2, 1), k = 3;
- n = 50, p = 100, Sigma = diag(17, 13.5, 8, 3, 1, 0.095, 0.094, ..., 0.001), k = 5;

eps in {0, 0.1, 0.2}, f1 in {6, 8, ..., 20}, f2 in {1, 15}. For each method, over the
replications: the mean of maxsub = (2/pi) arccos(cos of the largest principal angle between
the estimated and the true k-dimensional subspace) (the paper's Table 1), the mean of the
proportion of variability tr(P' Sigma P) / (l_1 + ... + l_k) kept by the estimated loadings
P (Table 2), and the mean squared error of each of the k eigenvalues (Figures 5-8). Each
configuration's replications are one vmapped call per method. The paper's tables were not
available to us; only our numbers are printed.

Full: 1000 replications per configuration. Quick: 20, and f1 in {6, 12, 20}.
"""

from __future__ import annotations

import functools
import time

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.sweep import sweep
from bayeskit.experiments.common import print_table, save_figure, write_json
from bayeskit.robust import pca_baselines, robpca

NAME = "robpca_simulation"
SETTINGS = {
    "n=100, p=4": dict(n=100, sd=np.sqrt([8.0, 4.0, 2.0, 1.0]), k=3),
    "n=50, p=100": dict(n=50, sd=np.sqrt(np.r_[17.0, 13.5, 8.0, 3.0, 1.0, np.linspace(0.095, 0.001, 95)]), k=5),
}
EPSILONS = (0.1, 0.2)
F1 = tuple(range(6, 21, 2))
F2 = (1, 15)
METHODS = ("ROBPCA", "CPCA", "SPHER", "ELL", "RAPCA")


def draw(key, n: int, sd: np.ndarray, k: int, eps: float, f1: float, f2: float, n_rep: int) -> jax.Array:
    """(n_rep, n, p) samples of the contamination model."""
    z = jax.random.normal(key, (n_rep, n, len(sd))) * sd
    m = int(np.floor(eps * n))
    shift = jnp.zeros(len(sd)).at[k].set(f1)
    return z.at[:, :m].set(z[:, :m] / np.sqrt(f2) + shift)


def estimate(method: str, key, X, k: int):
    """(components (n_rep, p, k), eigenvalues (n_rep, k)) of each replication: one sweep
    over the replications, sharded over the devices."""
    return sweep(_one(method, k), jax.random.split(key, X.shape[0]), (X,)).results


@functools.cache
def _one(method: str, k: int):
    """One replication's fit (cached, so that the sweep compiles once per method and k)."""

    def one(key, X):
        if method == "ROBPCA":
            r = robpca.fit(key, X, k).state
            return r.components, r.eigenvalues
        return pca_baselines.METHODS[method](X, k)[1:]

    return one


def scores(components, values, sd: np.ndarray, k: int) -> dict:
    """maxsub, the proportion of variability and the eigenvalues' squared errors."""
    cosines = np.linalg.svd(np.asarray(components)[:, :k, :], compute_uv=False)
    maxsub = 2 / np.pi * np.arccos(np.clip(cosines.min(1), 0, 1))
    var = sd**2
    kept = np.einsum("rpk,p,rpk->r", np.asarray(components), var, np.asarray(components)) / var[:k].sum()
    errors = (np.sort(np.asarray(values), 1)[:, ::-1] - var[:k]) ** 2
    return {"maxsub": float(maxsub.mean()), "variability": float(kept.mean()), "eigenvalue_mse": errors.mean(0).tolist()}


def configurations(quick: bool):
    f1s = (6, 12, 20) if quick else F1
    yield 0.0, None, None
    for eps in EPSILONS:
        for f2 in F2:
            for f1 in f1s:
                yield eps, f1, f2


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    n_rep = 20 if quick else 1000
    key = jax.random.key(seed)
    results = {}
    for setting, spec in SETTINGS.items():
        n, sd, k = spec["n"], spec["sd"], spec["k"]
        rows, cells = [], []
        for eps, f1, f2 in configurations(quick):
            key, k_data, k_fit = jax.random.split(key, 3)
            X = draw(k_data, n, sd, k, eps, f1 or 0.0, f2 or 1.0, n_rep)
            cell = {"eps": eps, "f1": f1, "f2": f2}
            for method in METHODS:
                t = time.perf_counter()
                components, values = estimate(method, k_fit, X, k)
                cell[method] = {**scores(components, values, sd, k), "seconds": time.perf_counter() - t}
            cells.append(cell)
            rows.append([eps, f1 or "-", f2 or "-"] + [f"{cell[m]['maxsub']:.3f}" for m in METHODS]
                        + [f"{cell[m]['variability']:.3f}" for m in METHODS])
        print_table(f"\n{setting}, k = {k}: mean maxsub (0 = the true subspace) and proportion of variability "
                    f"({n_rep} replications)", ["eps", "f1", "f2"] + [f"maxsub {m}" for m in METHODS]
                    + [f"var {m}" for m in METHODS], rows, paper="Tables 1-2 and Figures 5-8; their values were not available to us")
        results[setting] = cells
    figure(results, out_dir, n_rep)
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "n_replications": n_rep, "methods": METHODS,
               "settings": {s: {"n": v["n"], "variances": (v["sd"] ** 2).tolist(), "k": v["k"]} for s, v in SETTINGS.items()},
               "results": results}
    write_json(out_dir, NAME, payload)
    return payload


def figure(results: dict, out_dir, n_rep: int):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(s, eps, f2) for s in results for eps in EPSILONS for f2 in F2]
    fig, axes = plt.subplots(2, len(panels), figsize=(3.2 * len(panels), 6.0), squeeze=False)
    for col, (setting, eps, f2) in enumerate(panels):
        cells = [c for c in results[setting] if c["eps"] == eps and c["f2"] == f2]
        f1 = [c["f1"] for c in cells]
        for i, method in enumerate(METHODS):
            axes[0, col].plot(f1, [c[method]["maxsub"] for c in cells], "o-", ms=3, color=f"C{i}", label=method)
            axes[1, col].plot(f1, [c[method]["eigenvalue_mse"][0] for c in cells], "o-", ms=3, color=f"C{i}")
        axes[0, col].set(title=f"{setting}\neps={eps}, f2={f2}", xlabel="f1", ylabel="mean maxsub", ylim=(0, 1))
        axes[1, col].set(xlabel="f1", ylabel="MSE of l_1", yscale="log")
    axes[0, 0].legend(fontsize=7)
    return save_figure(fig, out_dir, f"{NAME}.png", f"ROBPCA simulations: {n_rep} replications per point")


__all__ = ["run", "draw", "estimate", "scores", "SETTINGS", "METHODS"]

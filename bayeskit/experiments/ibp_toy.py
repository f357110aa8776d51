"""The toy demonstration of the IBP review (Griffiths & Ghahramani, JMLR 2011, Section
5.3): N = 100 images of 6 x 6 pixels, each the sum of a random subset of four base
images plus N(0, 0.5^2) noise; the linear-Gaussian model with an IBP prior, sampled by
collapsed Gibbs from one feature (z_i1 ~ Bernoulli(1/2)), alpha = sigma_x = sigma_a = 1,
all three resampled (Gamma(1, 1) on alpha, inverse-Gamma(1, 1) on the variances).

Four chains run vectorised. From one feature, a chain often grows a compound feature
(two base images together) that single-site Gibbs moves rarely split; such a chain sits
at a lower log joint, so the chain with the highest mean log joint after burn-in is
reported, with every chain's summary beside it.

Reported: the traces of K+, sigma_x, sigma_a, alpha and the log joint; the posterior of
K+ after burn-in; each true base image's inferred feature E[A | X, Z] of the last draw
under the one-to-one assignment of least total RMSE (Hungarian), with its RMSE per pixel;
a figure of the base images, the inferred features (numbered as the true ones they are
assigned to, the unassigned after) and reconstructions. Full: 1000 sweeps, 200 burn-in; quick: 300 and 100.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.datasets import ibp_toy_images
from bayeskit.experiments.common import print_table, save_figure, write_json
from bayeskit.relational import ibp

NAME = "ibp_toy"
PAPER_NOTE = "figures only (the inferred features beside the four base images), no numbers to print"
CHAINS = 4


def _match(features: np.ndarray, truth: np.ndarray) -> list[tuple[int, float]]:
    """For each true feature, (index of its inferred feature, RMSE per pixel) under the
    one-to-one assignment of least total RMSE (the Hungarian method); (-1, RMSE against
    zero) for a true feature left without one when fewer features were inferred."""
    from scipy.optimize import linear_sum_assignment

    out = [(-1, float(np.sqrt(np.mean(t**2)))) for t in truth]
    if len(features):
        err = np.sqrt(((features[None, :, :] - truth[:, None, :]) ** 2).mean(-1))
        for i, j in zip(*linear_sum_assignment(err)):
            out[i] = (int(j), float(err[i, j]))
    return out


def _matched_order(matches: list[tuple[int, float]], n_features: int) -> list[int]:
    """Inferred features in the order of the true ones they are assigned to, the rest after."""
    assigned = [j for j, _ in matches if j >= 0]
    return assigned + [j for j in range(n_features) if j not in assigned]


def _figure(out_dir, A_true, features, X, recon):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n_feat = max(len(features), 1)
    cols = max(4, n_feat)
    fig, axes = plt.subplots(3, cols, figsize=(1.6 * cols, 5.2))
    for ax in axes.flat:
        ax.axis("off")
    for k in range(4):
        axes[0, k].imshow(A_true[k].reshape(6, 6), cmap="gray", vmin=0, vmax=1)
        axes[0, k].set_title(f"true {k + 1}", fontsize=8)
    for k, f in enumerate(features):
        axes[1, k].imshow(f.reshape(6, 6), cmap="gray", vmin=-0.2, vmax=1.2)
        axes[1, k].set_title(f"inferred {k + 1}", fontsize=8)
    for j in range(min(cols // 2, 4)):
        axes[2, 2 * j].imshow(X[j].reshape(6, 6), cmap="gray")
        axes[2, 2 * j].set_title(f"image {j + 1}", fontsize=8)
        axes[2, 2 * j + 1].imshow(recon[j].reshape(6, 6), cmap="gray", vmin=-0.2, vmax=2.2)
        axes[2, 2 * j + 1].set_title("reconstruction", fontsize=8)
    save_figure(fig, out_dir, f"{NAME}.png", "IBP linear-Gaussian model on the 6 x 6 toy images")


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    sweeps, burn = (300, 100) if quick else (1000, 200)
    k_data, k_mcmc = jax.random.split(jax.random.key(seed))
    X, Z_true, A_true = ibp_toy_images(k_data, 100, sigma_x=0.5)
    hp = ibp.Hyperparams(k_max=20)
    t = time.perf_counter()
    s = ibp.sample_posterior(k_mcmc, X, hp, num_warmup=burn, num_samples=sweeps - burn, num_chains=CHAINS, progress=True)
    seconds = time.perf_counter() - t
    chains = [{"mean_log_joint": float(np.mean(s["log_joint"][c])), "mean_k_plus": float(np.mean(s["n_features"][c]))}
              for c in range(CHAINS)]
    best = int(np.argmax([c["mean_log_joint"] for c in chains]))
    draws = {k: np.asarray(v[best]) for k, v in s.items()}
    Z = jnp.asarray(draws["Z"][-1], X.dtype)
    A = np.asarray(ibp.feature_means(X, Z, draws["sigma_x"][-1], draws["sigma_a"][-1]))
    used = np.asarray(Z.sum(0))
    order = [k for k in np.argsort(-used) if used[k] > 0]
    features = A[order]
    matches = _match(features, np.asarray(A_true))
    features = features[_matched_order(matches, len(features))]  # inferred k is the match of true k
    k_plus = draws["n_features"]
    values, counts = np.unique(k_plus, return_counts=True)
    rows = [[f"true feature {k + 1}", f"inferred {k + 1}" if j >= 0 else "none", f"{err:.3f}"] for k, (j, err) in enumerate(matches)]
    print_table(f"\nIBP toy images, {CHAINS} chains", ["chain", "mean log joint", "mean K+"],
                [[c, f"{v['mean_log_joint']:.1f}", f"{v['mean_k_plus']:.2f}"] for c, v in enumerate(chains)], paper=PAPER_NOTE)
    print_table(f"\nChain {best}: {sweeps} sweeps ({burn} burn-in) in {seconds:.1f} s for all chains; "
                f"K+ after burn-in: mean {k_plus.mean():.2f}, mode {int(values[np.argmax(counts)])}; "
                f"sigma_x {draws['sigma_x'].mean():.3f} (truth 0.5), sigma_a {draws['sigma_a'].mean():.3f}, "
                f"alpha {draws['alpha'].mean():.2f}", ["base image", "inferred feature (one-to-one assignment)", "RMSE per pixel"], rows,
                paper=PAPER_NOTE)
    recon = np.asarray(Z @ A)
    _figure(out_dir, np.asarray(A_true), features, np.asarray(X), recon)
    payload = {
        "experiment": NAME, "quick": quick, "seed": seed, "sweeps": sweeps, "burn_in": burn, "seconds": seconds,
        "chains": chains, "reported_chain": best,
        "k_plus_posterior": {int(v): int(c) for v, c in zip(values, counts)},
        "posterior_means": {k: float(draws[k].mean()) for k in ("sigma_x", "sigma_a", "alpha")},
        "feature_match_rmse": [err for _, err in matches],
        "reconstruction_rmse": float(np.sqrt(np.mean((recon - np.asarray(Z_true @ A_true)) ** 2))),
        "traces": {k: draws[k].tolist() for k in ("n_features", "sigma_x", "sigma_a", "alpha", "log_joint")},
    }
    write_json(out_dir, NAME, payload)
    return payload

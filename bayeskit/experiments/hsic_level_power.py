"""HSIC independence tests (Gretton et al., NIPS 2007): level under independence and power
curves of the gamma and permutation tests, Gaussian kernels with the median heuristic.

Level: x, y independent N(0, 1) samples; the rejection rate at alpha = 0.05 over many data
sets, beside the binomial 99.9% band around 0.05. Power, the rejection rate over data sets
drawn from three dependence families, each with a parameter that weakens the dependence:

- rotation: two independent U(-1, 1) sources rotated by an angle theta in [0, pi/4] (the
  ICA benchmark of the paper's Section 4, one dimension per variable; theta = 0 is
  independence);
- sinusoid: x ~ U(-pi, pi), y = sin(f x) + N(0, 0.5^2), over frequencies f;
- quadratic: x ~ N(0, 1), y = x^2 + N(0, s^2), over noise levels s.

Sample sizes m = 100, 300, 1000. Every cell's data sets run as one sweep over the devices
(``bayeskit.sweep``; chunks of data sets vmapped at a time to bound memory). The paper's curves are for other
data (its Figure 1 and text benchmarks) and were not available to us; none are printed.
Full: 200 data sets per cell, 200 permutations; power of the permutation test for m <= 300
(at m = 1000 it costs 200 times the gamma test, whose power it matches at smaller m).
Quick: m = 100 and 200, 100 data sets, 50 permutations (p-values in steps of 1/51, so the
permutation test's exact size is 2/51 = 0.039 at alpha = 0.05), three or four parameters per
family.
"""

from __future__ import annotations

import time
from functools import cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy import stats

from bayeskit.core.sweep import sweep
from bayeskit.covariance import hsic
from bayeskit.experiments.common import print_table, save_figure, write_json

NAME = "hsic_level_power"
PAPER_NOTE = ("not reported for these data: the paper's level and power curves are for other data (its Figure 1 "
              "and text benchmarks), which were not available to us")
ALPHA = 0.05
METHODS = ("gamma", "permutation")
PERMUTATION_POWER_MAX_M = 300
CHUNK_ELEMENTS = 4 * 10**6  # m^2 numbers per data set: the data sets vmapped together hold about 6x this


def null(key, m, _):
    kx, ky = jax.random.split(key)
    return jax.random.normal(kx, (m,)), jax.random.normal(ky, (m,))


def rotation(key, m, theta):
    s = jax.random.uniform(key, (2, m), minval=-1.0, maxval=1.0)
    c, si = jnp.cos(theta), jnp.sin(theta)
    return c * s[0] - si * s[1], si * s[0] + c * s[1]


def sinusoid(key, m, frequency):
    kx, ky = jax.random.split(key)
    x = jax.random.uniform(kx, (m,), minval=-jnp.pi, maxval=jnp.pi)
    return x, jnp.sin(frequency * x) + 0.5 * jax.random.normal(ky, (m,))


def quadratic(key, m, noise):
    kx, ky = jax.random.split(key)
    x = jax.random.normal(kx, (m,))
    return x, x**2 + noise * jax.random.normal(ky, (m,))


# name: (generator, parameter label, full grid, quick grid); "null" draws the level's data
FAMILIES = {
    "rotation": (rotation, "angle theta", tuple(np.linspace(0, np.pi / 4, 6)), tuple(np.linspace(0, np.pi / 4, 4))),
    "sinusoid": (sinusoid, "frequency f", (1.0, 2.0, 4.0, 8.0, 16.0), (1.0, 4.0, 16.0)),
    "quadratic": (quadratic, "noise sd s", (0.5, 1.0, 2.0, 4.0, 8.0), (1.0, 4.0, 8.0)),
}
GENERATORS = [null] + [family for family, *_ in FAMILIES.values()]


@partial(jax.jit, static_argnames=("m", "n_sets"))
def draw_sets(key, family, parameter, *, m, n_sets):
    """``n_sets`` data sets (x, y) of size m drawn from ``GENERATORS[family]`` at
    ``parameter`` (both traced: one compilation per m)."""
    branches = [partial(lambda k, t, g: g(k, m, t), g=g) for g in GENERATORS]
    return jax.vmap(lambda k: jax.lax.switch(family, branches, k, parameter))(jax.random.split(key, n_sets))


@cache
def _test(method: str, n_permutations: int):
    """One data set's p-value (cached, so that the sweep compiles once per method and m)."""
    return lambda k, a, b: hsic.test(k, a, b, method=method, n_permutations=n_permutations).p_value


def p_values(key, family, parameter, *, m, n_sets, method, n_permutations):
    """p-values of ``n_sets`` data sets: one sweep over the data sets, sharded over the
    devices, a chunk of data sets vmapped at a time to bound memory."""
    k_data, k_test = jax.random.split(key)
    x, y = draw_sets(k_data, family, parameter, m=m, n_sets=n_sets)
    chunk = max(1, CHUNK_ELEMENTS // m**2)
    return sweep(_test(method, n_permutations), jax.random.split(k_test, n_sets), (x, y), chunk_size=chunk).results


def rejection_rate(key, family, parameter, m, n_sets, method, n_permutations) -> dict:
    """The rate and the seconds of the call (compilation included on a first call)."""
    t = time.perf_counter()
    p = np.asarray(p_values(key, GENERATORS.index(family), jnp.asarray(parameter, float), m=m, n_sets=n_sets,
                            method=method, n_permutations=n_permutations))
    return {"rate": float(np.mean(p <= ALPHA)), "seconds": time.perf_counter() - t}


def binomial_band(n_sets: int) -> tuple[float, float]:
    lo, hi = stats.binom.ppf([0.0005, 0.9995], n_sets, ALPHA) / n_sets
    return float(lo), float(hi)


def figure(level: dict, power: dict, sizes, band, out_dir, n_sets):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 1 + len(FAMILIES), figsize=(4.2 * (1 + len(FAMILIES)), 3.6))
    styles = {"gamma": "-", "permutation": "--"}
    ax = axes[0]
    ax.axhspan(*band, color="0.9", label="99.9% binomial band")
    for method in METHODS:
        ax.plot(sizes, [level[f"{m} {method}"]["rate"] for m in sizes], "o" + styles[method], color="k", label=method)
    ax.axhline(ALPHA, color="C3", lw=0.8)
    ax.set(xscale="log", xlabel="m", ylabel="rejection rate", title="level (independent normals)", ylim=(0, 0.15))
    ax.legend(fontsize=8)
    for ax, (name, (_, label, _, _)) in zip(axes[1:], FAMILIES.items()):
        for i, m in enumerate(sizes):
            for method in METHODS:
                if f"{m} {method}" not in power[name]:
                    continue
                curve = power[name][f"{m} {method}"]
                ax.plot(curve["parameters"], curve["rates"], "o" + styles[method], color=f"C{i}", ms=3,
                        label=f"m = {m}, {method}")
        ax.axhline(ALPHA, color="C3", lw=0.8)
        ax.set(xlabel=label, ylabel="power", title=name, ylim=(-0.02, 1.02))
        if name == "sinusoid":
            ax.set_xscale("log", base=2)
    axes[1].legend(fontsize=7)
    return save_figure(fig, out_dir, f"{NAME}.png", f"HSIC tests at alpha = {ALPHA}: {n_sets} data sets per point "
                       "(solid: gamma, dashed: permutation)")


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    sizes = (100, 200) if quick else (100, 300, 1000)
    n_sets = 100 if quick else 200
    n_permutations = 50 if quick else 200
    band = binomial_band(n_sets)
    key = jax.random.key(seed)
    level, rows = {}, []
    for m in sizes:
        for method in METHODS:
            key, sub = jax.random.split(key)
            level[f"{m} {method}"] = r = rejection_rate(sub, null, 0.0, m, n_sets, method, n_permutations)
            rows.append([m, method, f"{r['rate']:.3f}", f"[{band[0]:.3f}, {band[1]:.3f}]",
                         "yes" if band[0] <= r["rate"] <= band[1] else "NO", f"{r['seconds']:.1f}"])
    print_table(f"\nLevel at alpha = {ALPHA}: {n_sets} independent data sets per row, {n_permutations} permutations",
                ["m", "method", "rejection rate", "99.9% band", "inside", "seconds"], rows, paper=PAPER_NOTE)
    power, rows = {}, []
    for name, (family, _label, full, short) in FAMILIES.items():
        parameters = short if quick else full
        power[name] = {}
        for m in sizes:
            for method in METHODS if m <= PERMUTATION_POWER_MAX_M else ("gamma",):
                cells = []
                for parameter in parameters:
                    key, sub = jax.random.split(key)
                    cells.append(rejection_rate(sub, family, parameter, m, n_sets, method, n_permutations))
                power[name][f"{m} {method}"] = {"parameters": [float(p) for p in parameters],
                                                "rates": [c["rate"] for c in cells],
                                                "seconds": sum(c["seconds"] for c in cells)}
        for parameter_index, parameter in enumerate(parameters):
            rates = [power[name].get(f"{m} {method}", {"rates": [None] * len(parameters)})["rates"][parameter_index]
                     for m in sizes for method in METHODS]
            rows.append([name, f"{parameter:.3g}"] + ["-" if r is None else f"{r:.2f}" for r in rates])
    print_table(f"\nPower at alpha = {ALPHA} ({n_sets} data sets per cell): rotation angle, sinusoid frequency, "
                "quadratic noise sd", ["family", "parameter"] + [f"m={m} {method[:4]}" for m in sizes for method in METHODS],
                rows, paper=PAPER_NOTE)
    figure(level, power, sizes, band, out_dir, n_sets)
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "alpha": ALPHA, "n_sets": n_sets,
               "n_permutations": n_permutations, "binomial_band_99.9": band, "kernel": "gaussian, median heuristic",
               "level": level, "power": power}
    write_json(out_dir, NAME, payload)
    return payload

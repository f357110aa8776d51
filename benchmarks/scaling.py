"""Scaling curves: time and memory of each model against problem size, with the fitted
log-log slope beside the algorithm's stated complexity.

    python benchmarks/scaling.py [--only CASE ...] [--repeats 2]

Each case is one jitted call at a ladder of sizes: the time is the best of ``--repeats``
runs after compilation, the memory XLA's own account of the compiled program (arguments,
outputs and temporaries: the peak it plans for). The slope is fitted to the largest three
sizes (the asymptotic regime) and compared with the exponent of the stated complexity of
the varied size; a slope more than 0.35 above it is flagged as steeper than the
algorithm. Writes ``benchmarks/results/scaling.json`` and ``scaling.png`` (or ``--out`` and
the PNG beside it, the folder made first). A run of some cases (``--only``) keeps the other
cases' earlier results in the file and the figure; each case records the date it ran.

| case | call | stated time | stated memory |
|---|---|---|---|
| BSML vs N | 20 VB sweeps, D = 50, R = 5, L = 5 | O(N D R) per sweep | O(N (D + L)) |
| BSML vs D | 20 VB sweeps, N = 500, R = 5, L = 5 | O(R D^3 + N D R) per sweep (R D x D factorisations) | O(R D^2) |
| SBMoE vs N | 2 VB sweeps, C = 16, Dx = 2 | O(N^2 C) per sweep (estep.py) | O(N^2) |
| LFRM vs N | 2 Gibbs sweeps, K_max = 8 | O(R K^2 N^2) per sweep (N K candidates at O(R K N)) | O(R N^2) |
| LFRM vs K | 2 Gibbs sweeps, N = 100, K_max = K | O(R K^2 N^2) | O(R N^2 + N K) |
| GLASSO vs p | one fit, alpha = 0.1, tol 1e-4 | O(p^3) per Newton step (Cholesky, inverse) | O(p^2) |
| HSIC vs m | gamma test | O(m^2) (Gram matrices) | O(m^2) |
| RVM vs N | fast marginal likelihood on the N x N kernel design, at most 32 relevance vectors | O(N M) per addition and O(N M k) per recomputation, M = N candidates | O(N M) (the design) |
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bayeskit.covariance import glasso, hsic
from bayeskit.density import sbmoe
from bayeskit.multilabel import bsml
from bayeskit.relational import data as relational_data
from bayeskit.relational import lfrm
from bayeskit.relational.lfrm import gibbs  # noqa: E402
from bayeskit.sparse import sparse_bayes  # noqa: E402

STEEPER = 0.35  # slope tolerance above the stated exponent


def bsml_case(n: int, d: int):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    Y = (X @ rng.normal(size=(d, 5)) > 0).astype(np.int8)
    hp = bsml.Hyperparams(n_components=5)
    f = jax.jit(lambda k, X, Y: bsml.fit(k, X, Y, hp, max_iter=20, tol=0.0, throw=False).trace)
    return f, (jax.random.key(0), jnp.asarray(X), jnp.asarray(Y))


def sbmoe_case(n: int):
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(n, 2))
    Y = np.sin(3 * X[:, :1]) + 0.1 * rng.normal(size=(n, 1))
    hp = sbmoe.Hyperparams(n_experts=16, gate_steps=5)
    labels = jnp.asarray(np.arange(n) % 16)
    f = jax.jit(lambda k, X, Y: sbmoe.fit(k, X, Y, hp, max_iter=2, init_labels=labels, throw=False).trace)
    return f, (jax.random.key(0), jnp.asarray(X), jnp.asarray(Y))


def lfrm_case(n: int, k: int):
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, n)
    Y = (rng.random((n, n)) < np.where(truth[:, None] == truth, 0.7, 0.1)).astype(np.int8)
    mask = ~np.eye(n, dtype=bool)
    data, hp = relational_data.as_data(Y[None], mask[None], False), lfrm.Hyperparams(k_max=k)
    f = jax.jit(lambda key, d: jax.lax.fori_loop(0, 2, lambda _, s: gibbs.step(s, d, hp), gibbs.init(key, d, hp)).Z)
    return f, (jax.random.key(0), data)


def glasso_case(p: int):
    rng = np.random.default_rng(0)
    A = np.eye(p) + np.diag(np.full(p - 1, 0.4), 1) + np.diag(np.full(p - 1, 0.4), -1)
    X = rng.multivariate_normal(np.zeros(p), np.linalg.inv(A), size=2 * p)
    S = jnp.asarray(np.cov(X, rowvar=False))
    f = jax.jit(lambda S: glasso.fit(S, glasso.Hyperparams(0.1), tol=1e-4, throw=False).state.precision)
    return f, (S,)


def hsic_case(m: int):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(m, 1))
    y = x**2 + rng.normal(size=(m, 1))
    f = jax.jit(lambda k, x, y: hsic.test(k, x, y, method="gamma").p_value)
    return f, (jax.random.key(0), jnp.asarray(x), jnp.asarray(y))


def rvm_case(n: int):
    rng = np.random.default_rng(0)
    x = rng.uniform(-10, 10, size=(n, 1))
    y = np.sinc(x[:, 0] / np.pi) + 0.1 * rng.normal(size=n)
    hp = sparse_bayes.Hyperparams(prior="rvm", max_basis=32)
    f = jax.jit(lambda x, y: sparse_bayes.fit(sparse_bayes.design(x, gamma=0.1), y, hp, throw=False).state.mu)
    return f, (jnp.asarray(x), jnp.asarray(y))


# name: (builder of (function, arguments) at a size, sizes, stated time exponent, stated memory exponent)
CASES = {
    "BSML vs N": (lambda s: bsml_case(s, 50), [500, 1000, 2000, 4000, 8000], 1, 1),
    "BSML vs D": (lambda s: bsml_case(500, s), [25, 50, 100, 200, 400], 3, 2),
    "SBMoE vs N": (sbmoe_case, [250, 500, 1000, 2000], 2, 2),
    "LFRM vs N": (lambda s: lfrm_case(s, 8), [25, 50, 100, 200], 2, 2),
    "LFRM vs K": (lambda s: lfrm_case(100, s), [4, 8, 16, 32], 2, 1),
    "GLASSO vs p": (glasso_case, [50, 100, 200, 400], 3, 2),
    "HSIC vs m": (hsic_case, [500, 1000, 2000, 4000], 2, 2),
    "RVM vs N": (rvm_case, [500, 1000, 2000, 4000], 2, 2),
}


def measure(fn, args, repeats: int) -> tuple[float, float, int]:
    """(best seconds after compilation, compile seconds, XLA's planned bytes)."""
    t = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - t
    mem = compiled.memory_analysis()
    planned = sum(int(getattr(mem, a, 0) or 0) for a in ("argument_size_in_bytes", "output_size_in_bytes", "temp_size_in_bytes"))
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        times.append(time.perf_counter() - t)
    return min(times), compile_s, planned


def slope(sizes, values) -> float:
    """Least-squares slope of log(value) on log(size) over the largest three sizes."""
    return float(np.polyfit(np.log(sizes[-3:]), np.log(values[-3:]), 1)[0])


def run_case(name: str, repeats: int) -> dict:
    build, sizes, time_exp, mem_exp = CASES[name]
    rows = []
    for s in sizes:
        seconds, compile_s, planned = measure(*build(s), repeats)
        rows.append({"size": s, "seconds": seconds, "compile_seconds": compile_s, "xla_bytes": planned})
        print(f"  {name}: {s:>6}  {seconds:9.4f} s  (compile {compile_s:5.1f} s)  {planned / 2**20:9.2f} MiB", flush=True)
    t_slope = slope(sizes, [r["seconds"] for r in rows])
    m_slope = slope(sizes, [r["xla_bytes"] for r in rows])
    out = {"rows": rows, "time_slope": t_slope, "stated_time_exponent": time_exp, "memory_slope": m_slope,
           "stated_memory_exponent": mem_exp, "time_steeper": t_slope > time_exp + STEEPER,
           "memory_steeper": m_slope > mem_exp + STEEPER}
    print(f"  {name}: time slope {t_slope:.2f} (stated {time_exp}), memory slope {m_slope:.2f} (stated {mem_exp})"
          + ("  STEEPER THAN STATED" if out["time_steeper"] or out["memory_steeper"] else ""), flush=True)
    return out


def figure(results: dict, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(3.2 * len(results), 6.0), squeeze=False)
    for col, (name, r) in enumerate(results.items()):
        sizes = np.array([row["size"] for row in r["rows"]], float)
        for ax, key, exp, fitted, label in ((axes[0, col], "seconds", r["stated_time_exponent"], r["time_slope"], "seconds"),
                                            (axes[1, col], "xla_bytes", r["stated_memory_exponent"], r["memory_slope"], "XLA bytes")):
            values = np.array([row[key] for row in r["rows"]], float)
            ax.loglog(sizes, values, "o-", label=f"measured (slope {fitted:.2f})")
            ax.loglog(sizes, values[-1] * (sizes / sizes[-1]) ** exp, "k--", lw=0.8, label=f"stated exponent {exp}")
            ax.set(xlabel=name.split(" vs ")[1], ylabel=label)
            ax.legend(fontsize=7)
        axes[0, col].set_title(name)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def merged(path: Path, run: dict) -> dict:
    """This run's results over the earlier ones at ``path``: the cases not run now keep their
    rows (each with the date it ran, "unrecorded" from a file before these dates), the others
    are replaced; the cases keep the order of ``CASES``."""
    old = json.loads(path.read_text()) if path.exists() else {}
    earlier = {name: {"date": old.get("date", "unrecorded"), **case} for name, case in old.get("cases", {}).items()}
    cases = {**earlier, **run["cases"]}
    order = [name for name in CASES if name in cases] + [name for name in cases if name not in CASES]
    return {**run, "cases": {name: cases[name] for name in order}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(CASES), default=list(CASES), metavar="CASE")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", default=str(HERE / "results" / "scaling.json"))
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)  # before measuring: a path that cannot be written fails at once
    date = time.strftime("%Y-%m-%d")
    results = {}
    for name in args.only:
        print(f"== {name}", flush=True)
        results[name] = {"date": date, **run_case(name, args.repeats)}
    data = merged(out, {"machine": platform.platform(), "date": date, "jax": jax.__version__,
                        "devices": [str(d) for d in jax.devices()], "cases": results})
    out.write_text(json.dumps(data, indent=2))
    figure(data["cases"], out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

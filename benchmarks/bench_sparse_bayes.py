"""Speed of the sparse-Bayes engine against fastrvm (a C++ port of Tipping's SparseBayes),
measured in one run on the same data.

    python benchmarks/bench_sparse_bayes.py [--only batch large] [--sets 100]

* ``batch``: sinc, N = 100, Gaussian kernel exp(-0.1 (x - x')^2): each method's
  ``--sets`` data sets per noise level as one vmapped fit; amortised milliseconds per fit
  after compilation (compile time apart) against fastrvm's per-fit time, and the whole
  4-method x 5-level table's run time (target: below fastrvm per fit, table <= 30 s);
* ``large``: one RVM fit at N = 1000 and 2000 (sinc, noise sd 0.1), ours against fastrvm
  (target: within 2x), with the relevance vectors and RMSE of each.

fastrvm is a benchmark-only dependency (``pip install fastrvm``, in the ``bench`` extra);
without it the peer columns are skipped with a message. kernlab's ``rvm`` (R) is not run
here: no R on this machine. Writes ``benchmarks/results/sparse_bayes.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit import sparse_bayes
from bayeskit.datasets import sinc_datasets
from bayeskit.experiments.sparse_bayes_sinc import GAMMA, MAX_BASIS, METHODS, NOISE, batch_fitter, fastrvm_batch, run_batch

HERE = Path(__file__).resolve().parent


def _has_fastrvm() -> bool:
    try:
        import fastrvm  # noqa: F401
    except ImportError:
        print("fastrvm is not installed (pip install fastrvm): peer columns skipped.")
        return False
    return True


def batch(n_sets: int) -> dict:
    kernel = {"kernel": "rbf", "gamma": GAMMA}
    out, table_seconds = {}, 0.0
    peer = _has_fastrvm()
    for level, sd in enumerate(NOISE):
        X, y, X_test, f_test = sinc_datasets(n_sets, sd, seed=level)
        row = {}
        for name, prior in METHODS.items():
            fits, t_compile, t_run = run_batch(batch_fitter(prior, MAX_BASIS, kernel), X, y, X_test)
            table_seconds += t_run
            row[name] = {"ms_per_fit": 1e3 * t_run / n_sets, "compile_s": t_compile,
                         "iterations_max": int(fits["n_iter"].max()), "iterations_mean": float(fits["n_iter"].mean())}
        if peer:
            row["fastrvm"] = {"ms_per_fit": 1e3 * fastrvm_batch(X, y, X_test, GAMMA)[3]}
            for name in METHODS:
                row[name]["fastrvm_over_ours"] = row["fastrvm"]["ms_per_fit"] / row[name]["ms_per_fit"]
        out[str(sd)] = row
        print(f"sd {sd}: " + ", ".join(f"{k} {v['ms_per_fit']:.2f} ms" for k, v in row.items()), flush=True)
    out["table_run_seconds"] = table_seconds
    print(f"whole table (4 methods x 5 levels x {n_sets} sets): {table_seconds:.1f} s after compilation")
    return out


def large(sizes=(1000, 2000)) -> dict:
    out = {}
    peer = _has_fastrvm()
    for n in sizes:
        X, y, X_test, f_test = sinc_datasets(1, 0.1, n_train=n, seed=n)
        X, y = X[0], y[0]
        hp = sparse_bayes.Hyperparams(prior="rvm", max_basis=MAX_BASIS)
        fit = jax.jit(lambda X, y: sparse_bayes.fit(sparse_bayes.design(X, gamma=GAMMA), y, hp, throw=False))
        t = time.perf_counter()
        compiled = fit.lower(jnp.asarray(X), jnp.asarray(y)).compile()
        t_compile = time.perf_counter() - t
        t = time.perf_counter()
        r = jax.block_until_ready(compiled(jnp.asarray(X), jnp.asarray(y)))
        ours = time.perf_counter() - t
        Phi = sparse_bayes.design(X, gamma=GAMMA)
        mean, _ = sparse_bayes.predict(r.state, sparse_bayes.design(X_test, X, gamma=GAMMA), sparse_bayes.as_data(Phi, y).scale)
        row = {"ours_s": ours, "compile_s": t_compile, "nov": int(sparse_bayes.relevance(r.state).sum()),
               "rmse": float(np.sqrt(np.mean((np.asarray(mean) - f_test) ** 2))), "iterations": int(r.n_iter)}
        if peer:
            from fastrvm import RVR

            t = time.perf_counter()
            m = RVR(kernel="rbf", gamma=GAMMA).fit(X, y)
            row["fastrvm_s"] = time.perf_counter() - t
            row["fastrvm_nov"] = int(m.n_relevance_)
            row["fastrvm_rmse"] = float(np.sqrt(np.mean((m.predict(X_test) - f_test) ** 2)))
            row["fastrvm_over_ours"] = row["fastrvm_s"] / ours
        out[str(n)] = row
        print(f"N = {n}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()), flush=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=["batch", "large"], default=["batch", "large"])
    ap.add_argument("--sets", type=int, default=100)
    args = ap.parse_args()
    jax.config.update("jax_enable_x64", True)
    out = {"machine": platform.platform(), "cpus": jax.local_device_count(), "jax": jax.__version__}
    if "batch" in args.only:
        out["batch"] = batch(args.sets)
    if "large" in args.only:
        out["large"] = large()
    path = HERE / "results" / "sparse_bayes.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

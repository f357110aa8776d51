"""Speed of the sparse-Bayes engine against its peers, measured in one run on the same data:
fastrvm (a C++ port of Tipping's SparseBayes), kernlab's ``rvm`` and glmnet's
``cv.glmnet`` (R), and scikit-learn's ``LassoCV``.

    python benchmarks/bench_sparse_bayes.py [--only batch large diabetes] [--sets 100] [--splits 100] [--out PATH]

* ``batch``: sinc, N = 100, Gaussian kernel exp(-0.1 (x - x')^2): each method's
  ``--sets`` data sets per noise level as one vmapped fit; amortised milliseconds per fit
  after compilation (compile time apart) against fastrvm's and kernlab's per-fit times,
  and the whole 4-method x 5-level table's run time (target: below fastrvm per fit, table
  <= 30 s). kernlab (Tipping's 2001 re-estimation on the full kernel, O(N^3) per
  iteration) fits the same data sets in one Rscript call, each fit timed inside R; its
  RMSE, relevance vectors, noise sd and the fits it fails ("non-conformable arrays") go
  into the JSON, with ``kernlab_over_ours`` for each of our methods;
* ``large``: one RVM fit at N = 1000 and 2000 (sinc, noise sd 0.1), ours against fastrvm
  (target: within 2x) and kernlab, with the relevance vectors and RMSE of each;
* ``diabetes``: scikit-learn's diabetes data (442 x 10, raw), ``--splits`` random 70/30
  splits, predictors standardised with the training split's mean and sd. glmnet's
  ``cv.glmnet`` (10 folds, lambda.min; all splits in one Rscript call, timed inside R),
  ours (BLS on the linear design, centred y, every split in one jitted vmapped fit;
  amortised seconds per fit) and ``LassoCV(cv=10)``: test RMSE mean (sd), mean non-zero
  coefficients and seconds per fit.

fastrvm is a benchmark-only dependency (``pip install fastrvm``, in the ``bench`` extra), as
are R, kernlab and glmnet (``bash benchmarks/setup_r_peers.sh``; run through
``benchmarks/peers_r.py``); a missing peer is skipped with a message. Writes
``benchmarks/results/sparse_bayes.json`` (or ``--out``); a run of some parts (``--only``) keeps
the other parts' earlier entries, and ``dates`` says when each part last ran. A part whose saved
entry was measured against a peer that is missing now is not run: its saved entry stays as it
was (the script says so), rather than being replaced by ours alone.
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

from bayeskit.datasets import sinc_datasets
from bayeskit.experiments.sparse_bayes_selection import bls_batch, diabetes_split_data, lasso_batch
from bayeskit.experiments.sparse_bayes_sinc import GAMMA, MAX_BASIS, METHODS, NOISE, batch_fitter, fastrvm_batch, run_batch
from bayeskit.sparse import sparse_bayes

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import peers_r  # noqa: E402  (benchmarks/peers_r.py)
from saved_parts import merged, parts_to_run  # noqa: E402


def _has_fastrvm() -> bool:
    try:
        import fastrvm  # noqa: F401
    except ImportError:
        print("fastrvm is not installed (pip install fastrvm): peer columns skipped.")
        return False
    return True


def _has_r(package: str) -> bool:
    missing = peers_r.r_missing(package)
    if missing:
        print(f"{missing}: {package} skipped.")
    return missing is None


def _rmse(mean, f):
    return np.sqrt(np.mean((np.asarray(mean) - np.asarray(f)) ** 2, axis=-1))


def _kernlab_summary(r, f_test) -> dict:
    """RMSE, relevance vectors and noise sd over kernlab's successful fits; times over all."""
    ok = r["ok"]
    rmse = _rmse(r["mean"][ok], f_test)
    n = len(ok)
    return {"ms_per_fit": 1e3 * float(r["seconds"].mean()),
            "ms_per_successful_fit": 1e3 * float(r["seconds"][ok].mean()) if ok.any() else None,
            "predict_ms_per_fit": 1e3 * float(r["predict_seconds"][ok].mean()) if ok.any() else None,
            "rmse_mean": float(rmse.mean()) if ok.any() else None, "rmse_sd": float(rmse.std()) if ok.any() else None,
            "nov_mean": float(r["nov"][ok].mean()) if ok.any() else None,
            "sigma_mean": float(np.sqrt(r["noise_var"][ok]).mean()) if ok.any() else None,
            "failures": r["n_failed"], "failure_rate": r["n_failed"] / n, "errors": r["errors"],
            "warnings": int(r["warnings"].sum()), "r_process_s": r["wall_seconds"], "versions": r["versions"]}


def batch(n_sets: int) -> dict:
    kernel = {"kernel": "rbf", "gamma": GAMMA}
    out, table_seconds = {}, 0.0
    peer = _has_fastrvm()
    kernlab = _has_r("kernlab")
    for level, sd in enumerate(NOISE):
        X, y, X_test, f_test = sinc_datasets(n_sets, sd, seed=level)
        row = {}
        for name, prior in METHODS.items():
            fits, t_compile, t_run = run_batch(batch_fitter(prior, MAX_BASIS, kernel), X, y, X_test)
            table_seconds += t_run
            row[name] = {"ms_per_fit": 1e3 * t_run / n_sets, "compile_s": t_compile,
                         "iterations_max": int(fits["n_iter"].max()), "iterations_mean": float(fits["n_iter"].mean()),
                         "rmse_mean": float(_rmse(fits["mean"], f_test).mean()), "nov_mean": float(fits["relevant"].sum(1).mean())}
        if peer:
            means, nov, _, seconds = fastrvm_batch(X, y, X_test, GAMMA)
            row["fastrvm"] = {"ms_per_fit": 1e3 * seconds, "rmse_mean": float(_rmse(means, f_test).mean()),
                              "nov_mean": float(nov.mean())}
            for name in METHODS:
                row[name]["fastrvm_over_ours"] = row["fastrvm"]["ms_per_fit"] / row[name]["ms_per_fit"]
        if kernlab:
            row["kernlab"] = _kernlab_summary(peers_r.kernlab_rvm_batch(X, y, X_test, GAMMA), f_test)
            for name in METHODS:
                row[name]["kernlab_over_ours"] = row["kernlab"]["ms_per_fit"] / row[name]["ms_per_fit"]
        out[str(sd)] = row
        print(f"sd {sd}: " + ", ".join(f"{k} {v['ms_per_fit']:.2f} ms" for k, v in row.items()), flush=True)
        print("    RMSE: " + ", ".join(f"{k} {v['rmse_mean']:.4f}" for k, v in row.items() if v.get("rmse_mean") is not None)
              + "; NOV: " + ", ".join(f"{k} {v['nov_mean']:.1f}" for k, v in row.items() if v.get("nov_mean") is not None))
        if kernlab:
            k = row["kernlab"]
            print(f"    kernlab: {k['failures']}/{n_sets} fits failed {k['errors'] or ''}, noise sd "
                  + (f"{k['sigma_mean']:.4f}" if k["sigma_mean"] is not None else "-")
                  + "; kernlab / ours: " + ", ".join(f"{name} {row[name]['kernlab_over_ours']:.1f}x" for name in METHODS),
                  flush=True)
    out["table_run_seconds"] = table_seconds
    print(f"whole table (4 methods x 5 levels x {n_sets} sets): {table_seconds:.1f} s after compilation")
    return out


def large(sizes=(1000, 2000)) -> dict:
    out = {}
    peer = _has_fastrvm()
    kernlab = _has_r("kernlab")
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
        if kernlab:
            k = peers_r.kernlab_rvm_batch(X[None], y[None], X_test, GAMMA)
            if k["ok"][0]:
                row["kernlab_s"] = float(k["seconds"][0])
                row["kernlab_nov"] = int(k["nov"][0])
                row["kernlab_rmse"] = float(_rmse(k["mean"][0], f_test))
                row["kernlab_sigma"] = float(np.sqrt(k["noise_var"][0]))
                row["kernlab_over_ours"] = row["kernlab_s"] / ours
            else:
                print(f"N = {n}: kernlab failed: {k['errors']}")
        out[str(n)] = row
        print(f"N = {n}: " + ", ".join(f"{k} {v:.4g}" for k, v in row.items()), flush=True)
    return out


def diabetes(n_splits: int, seed: int = 0) -> dict:
    Xtr, ytr, Xte, yte = diabetes_split_data(n_splits, seed)
    K, n_train, d = Xtr.shape
    print(f"diabetes: {K} random splits, {n_train} train / {Xte.shape[1]} test, {d} predictors (standardised on the "
          "training split)", flush=True)
    out = {"splits": K, "n_train": n_train, "n_test": int(Xte.shape[1]), "seed": seed}

    def summary(pred, nonzero, seconds_per_fit, **extra):
        rmse = _rmse(pred, yte)
        return {"rmse_mean": float(rmse.mean()), "rmse_sd": float(rmse.std()), "nonzero_mean": float(np.mean(nonzero)),
                "s_per_fit": float(seconds_per_fit), **extra}

    args = (jnp.asarray(Xtr), jnp.asarray(ytr), jnp.asarray(Xte))
    t = time.perf_counter()
    compiled = bls_batch.lower(*args).compile()
    t_compile = time.perf_counter() - t
    t = time.perf_counter()
    coef, pred = (np.asarray(a) for a in jax.block_until_ready(compiled(*args)))
    out["ours_bls"] = summary(pred, np.count_nonzero(coef, axis=1), (time.perf_counter() - t) / K, compile_s=t_compile)
    if _has_r("glmnet"):
        g = peers_r.glmnet_cv_batch(Xtr, ytr, Xte, nfolds=10, seed=seed)
        if g["n_failed"]:
            print(f"glmnet: {g['n_failed']} fits failed: {g['errors']}")
        ok = g["ok"]
        out["glmnet_cv"] = {**summary(g["mean"][ok], g["nonzero"][ok], g["seconds"].mean()),
                            "predict_s_per_fit": float(np.nanmean(g["predict_seconds"])), "failures": g["n_failed"],
                            "r_process_s": g["wall_seconds"], "versions": g["versions"]}
        out["ours_bls"]["glmnet_over_ours"] = out["glmnet_cv"]["s_per_fit"] / out["ours_bls"]["s_per_fit"]
    t = time.perf_counter()
    coef, pred = lasso_batch(Xtr, ytr, Xte)
    out["sklearn_lassocv"] = summary(pred, np.count_nonzero(coef, axis=1), (time.perf_counter() - t) / K)
    out["ours_bls"]["lassocv_over_ours"] = out["sklearn_lassocv"]["s_per_fit"] / out["ours_bls"]["s_per_fit"]
    for key, label in (("glmnet_cv", "glmnet cv.glmnet (10 folds, lambda.min)"), ("ours_bls", "ours BLS (linear, vmapped)"),
                       ("sklearn_lassocv", "scikit-learn LassoCV(cv=10)")):
        if key in out:
            r = out[key]
            print(f"  {label:40s} RMSE {r['rmse_mean']:.2f} ({r['rmse_sd']:.2f})  non-zero {r['nonzero_mean']:.2f}  "
                  f"{1e3 * r['s_per_fit']:.2f} ms/fit", flush=True)
    ours = out["ours_bls"]
    print(f"  ours: compile {ours['compile_s']:.1f} s; per-fit time over ours: "
          + ", ".join(f"{k.split('_over')[0]} {v:.1f}x" for k, v in ours.items() if k.endswith("_over_ours")), flush=True)
    return out


PARTS = ("batch", "large", "diabetes")


def missing_peers() -> dict[str, str]:
    """The peers that cannot run here, each with why (nothing printed)."""
    try:
        import fastrvm  # noqa: F401
        missing = {}
    except ImportError:
        missing = {"fastrvm": "fastrvm is not installed (pip install fastrvm)"}
    for package in ("kernlab", "glmnet"):
        why = peers_r.r_missing(package)
        if why:
            missing[package] = why
    return missing


def peers_in(part: str, saved) -> set[str]:
    """The peers whose numbers the saved entry of ``part`` holds."""
    text = json.dumps(saved)
    names = {"fastrvm": "fastrvm", "kernlab": "kernlab", "glmnet": "glmnet_cv"}
    return {peer for peer, key in names.items() if f'"{key}' in text}


def kept_without_peers(path: Path, parts) -> dict[str, str]:
    """The parts of ``parts`` not to run now, each with what is missing: the saved results at
    ``path`` hold the part measured against a peer that cannot run here."""
    saved = json.loads(path.read_text()) if path.exists() else {}
    missing = missing_peers()
    kept = {}
    for part in parts:
        lost = sorted(peers_in(part, saved[part]) & set(missing)) if part in saved else []
        if lost:
            kept[part] = "; ".join(missing[peer] for peer in lost)
    return kept


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    ap.add_argument("--sets", type=int, default=100)
    ap.add_argument("--splits", type=int, default=100, help="random 70/30 diabetes splits")
    ap.add_argument("--out", default=str(HERE / "results" / "sparse_bayes.json"))
    args = ap.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    args.only = parts_to_run(args.only, kept_without_peers(path, args.only), path, "that peer")
    if not args.only:
        return
    jax.config.update("jax_enable_x64", True)
    out = {"date": time.strftime("%Y-%m-%d"), "machine": platform.platform(), "cpus": os.cpu_count(),
           "devices": jax.local_device_count(), "jax": jax.__version__}
    if "batch" in args.only:
        out["batch"] = batch(args.sets)
    if "large" in args.only:
        out["large"] = large()
    if "diabetes" in args.only:
        out["diabetes"] = diabetes(args.splits)
    path.write_text(json.dumps(merged(path, out, args.only, PARTS), indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

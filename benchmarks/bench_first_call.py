"""First calls: what a user waits for the first ``fit`` of each estimator in a new process,
with and without the persistent compilation cache (:mod:`bayeskit.core.cache`).

For every estimator of ``bayeskit.estimators.__all__``, on the small problem of
``bench_estimators.py`` (the same data and settings), three fresh processes:

1. cache off (``BAYESKIT_COMPILATION_CACHE=0``): the first fit and a second fit on new data
   of the same shapes; their difference is what compiling costs;
2. a new, empty cache folder: the first fit compiles and fills the cache;
3. the same folder again: the first fit of a second process, which reads the compiled
   programs from disk.

The programs each first fit compiles and those it reads from the cache are counted
(``jax.monitoring``). Targets: compiling (1: first fit - second fit) <= 5 s, and
the cached first fit (3) <= 1 s. After the first fit, each process also times the first
use of the fitted estimator (``predict``, ``predict_proba``, ``transform``, ``score`` or
``mahalanobis`` on the fit's rows) and counts what it compiles and reads. Results:
``benchmarks/results/first_call.json``.

``--functional`` measures the public functional fits the same way, called as a user's own
code calls them: at top level, with their default ``throw=True``, on the small data and
settings of an estimator's case (``functional_calls``; no first use). Results:
``benchmarks/results/first_call_functional.json``.

    python benchmarks/bench_first_call.py                      # every estimator
    python benchmarks/bench_first_call.py --only GraphicalLasso MinCovDet
    python benchmarks/bench_first_call.py --functional
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
COMPILE_TARGET_S, CACHED_TARGET_S = 5.0, 1.0
CACHE_HIT_EVENT = "/jax/compilation_cache/cache_hits"
MODES = ("off", "fill", "cached")


def functional_calls() -> dict:
    """Each public functional fit: the estimator case whose small data it takes, the call on
    that case's drawn arguments (top level, default ``throw``, the case's settings) and a
    description of the call."""
    sys.path.insert(0, str(HERE))
    import bench_estimators as bench
    import jax

    from bayeskit.covariance import glasso
    from bayeskit.density import sbmoe
    from bayeskit.multilabel import bsml
    from bayeskit.relational import mmsb
    from bayeskit.sparse import sparse_bayes

    k, r = jax.random.key(0), bench.multilabel_problem("small")[2]
    return {
        "glasso.fit": ("GraphicalLasso", lambda X: glasso.fit(bench.covariance_of(X), glasso.Hyperparams(0.1)),
                       "glasso.fit(covariance, Hyperparams(0.1))"),
        "sbmoe.fit": ("SBMoERegressor", lambda X, Y: sbmoe.fit(k, X, Y, sbmoe.Hyperparams(n_experts=8, gate_steps=10), max_iter=5),
                      "sbmoe.fit, C = 8, 5 sweeps x 10 gate steps"),
        "bsml.fit": ("BSMLClassifier", lambda X, Y: bsml.fit(k, X, Y, bsml.Hyperparams(n_components=r), max_iter=100),
                     f"bsml.fit, R = {r}, at most 100 sweeps"),
        "mmsb.fit": ("MMSBLinkPredictor", lambda Y, mask: mmsb.fit(k, Y, mask, mmsb.Hyperparams(n_blocks=4), max_iter=100),
                     "mmsb.fit, K = 4, at most 100 sweeps, one start"),
        "sparse_bayes.fit": ("RVMRegressor", lambda X, y: sparse_bayes.fit(sparse_bayes.design(X, kernel="rbf", gamma=0.1, bias=True), y),
                             "sparse_bayes.fit (rvm) of an RBF design with intercept, gamma 0.1"),
    }


FUNCTIONAL = ("bsml.fit", "glasso.fit", "mmsb.fit", "sbmoe.fit", "sparse_bayes.fit")


def _started():
    """``bench_estimators`` and the list that JAX's cache hits are appended to from now on,
    the backend started (outside the timings)."""
    sys.path.insert(0, str(HERE))
    import bench_estimators as bench
    import jax
    import jax.numpy as jnp

    jax.block_until_ready(jnp.zeros(1) + 1)
    hits = []
    jax.monitoring.register_event_listener(lambda event, **kw: hits.append(1) if event == CACHE_HIT_EVENT else None)
    return bench, hits


def _counted(bench, hits, run):
    """``run()``'s value, the XLA compilations it made and the programs it read from the cache."""
    counter, before = bench.CompileCounter(), len(hits)
    with counter.counting():
        value = run()
    read = len(hits) - before
    return value, sum(counter.compiles.values()) - read, read


def _timed(call, *args) -> float:
    import jax

    t = time.perf_counter()
    jax.block_until_ready(call(*args))
    return time.perf_counter() - t


def measure_functional(name: str) -> dict:
    """:func:`measure` for the public functional fit ``name`` (no first use)."""
    bench, hits = _started()
    estimator, call, description = functional_calls()[name]
    case = bench.CASES[estimator]("small")
    first_args, second_args = case.draw(0), case.draw(1)
    first_s, compiled, read = _counted(bench, hits, lambda: _timed(call, *first_args))
    return {"first_fit_s": first_s, "second_fit_s": _timed(call, *second_args), "compilations": compiled,
            "read_from_cache": read, "first_use": None, "problem": f"{description} on {estimator}'s small data"}


def measure(name: str) -> dict:
    """In this (fresh) process: the first and a second fit of ``name``'s small case, and the
    XLA compilations of the first."""
    if name in FUNCTIONAL:
        return measure_functional(name)
    bench, hits = _started()
    case = bench.CASES[name]("small")
    first_args, second_args = case.draw(0), case.draw(1)
    caught = []
    (first_s, _, fitted), compiled, read = _counted(bench, hits, lambda: bench.timed_fit(case, case.first, 0, first_args, caught))
    use_s, use_compiled, use_read = _counted(bench, hits, lambda: first_use(name, fitted, first_args))
    second_s, _, _ = bench.timed_fit(case, case.second, 1, second_args, caught)
    return {"first_fit_s": first_s, "second_fit_s": second_s, "compilations": compiled, "read_from_cache": read,
            "first_use": USES[name], "first_use_s": use_s, "first_use_compilations": use_compiled,
            "first_use_read_from_cache": use_read, "problem": case.problem}


# the method that uses a fitted estimator: on the fit's rows, or (link predictors) on the fit's pairs
USES = dict.fromkeys(("BSMLClassifier", "ProbitClassifier", "LFRMLinkPredictor", "IRMLinkPredictor", "MMSBLinkPredictor"),
                     "predict_proba")
USES |= dict.fromkeys(("SBMoERegressor", "RVMRegressor", "BLSRegressor", "FLAPRegressor", "BayesianLassoRegressor"), "predict")
USES |= dict.fromkeys(("ROBPCA", "RCA", "SparsePCA"), "transform")
USES |= {"GraphicalLasso": "score", "EMRCA": "score", "MinCovDet": "mahalanobis"}


def first_use(name: str, estimator, args: tuple) -> float:
    """Seconds of the first prediction (or transform, score) of a fitted estimator."""
    import jax

    use = getattr(estimator, USES[name])
    t = time.perf_counter()
    jax.block_until_ready(use() if name.endswith("LinkPredictor") else use(args[0]))
    return time.perf_counter() - t


def in_process(name: str, mode: str, cache_dir: str, timeout: float) -> dict:
    """:func:`measure` in a new Python process, the cache as ``mode`` says."""
    from bayeskit.core.xla import use_safe_cpu_scheduler

    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BAYESKIT_CACHE_DIR")}
    use_safe_cpu_scheduler(env)
    if mode == "off":
        env["BAYESKIT_COMPILATION_CACHE"] = "0"
    else:
        env["BAYESKIT_COMPILATION_CACHE"], env["BAYESKIT_CACHE_DIR"] = "1", cache_dir
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "case.json"
        cmd = [sys.executable, str(Path(__file__).resolve()), "--case", name, "--case-out", str(out)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=HERE.parent)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
        if proc.returncode != 0 or not out.exists():
            return {"error": f"exit {proc.returncode}: " + " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])[-600:]}
        return json.loads(out.read_text())


def run(name: str, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as cache_dir:
        runs = {mode: in_process(name, mode, cache_dir, timeout) for mode in MODES}
    row = {"estimator": name, **{mode: r for mode, r in runs.items()}}
    if not any("error" in r for r in runs.values()):
        off, cached = runs["off"], runs["cached"]
        row["problem"] = off["problem"]
        row["compile_s"] = off["first_fit_s"] - off["second_fit_s"]
        row["cached_first_fit_s"] = cached["first_fit_s"]
        row["meets_compile_target"] = bool(row["compile_s"] <= COMPILE_TARGET_S)
        row["meets_cached_target"] = bool(cached["first_fit_s"] <= CACHED_TARGET_S)
    return row


def print_row(r: dict) -> None:
    errors = {m: r[m]["error"] for m in MODES if "error" in r[m]}
    if errors:
        print(f"{r['estimator']:<23} failed: {errors}", flush=True)
        return
    off, fill, cached = r["off"], r["fill"], r["cached"]
    use = "" if off["first_use"] is None else f"  {off['first_use_s']:6.2f} {off['first_use_compilations']:3d} {cached['first_use_s']:6.3f}"
    print(f"{r['estimator']:<23} {off['first_fit_s']:8.2f} {off['second_fit_s']:8.3f} {r['compile_s']:8.2f} {off['compilations']:5d} "
          f"{fill['first_fit_s']:8.2f} {cached['first_fit_s']:8.3f} {cached['read_from_cache']:5d} {cached['compilations']:5d}  "
          f"{'yes' if r['meets_compile_target'] else 'NO':>4} {'yes' if r['meets_cached_target'] else 'NO':>4}{use}", flush=True)


def main(argv=None) -> int:
    import bayeskit.estimators as estimators

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(estimators.__all__) + list(FUNCTIONAL), metavar="NAME",
                        help="these estimators (or, with --functional, fits) only")
    parser.add_argument("--functional", action="store_true", help="the public functional fits (FUNCTIONAL), not the estimators")
    parser.add_argument("--case-timeout", type=float, default=600.0, help="seconds before one process is stopped")
    parser.add_argument("--out", default=None, help="default: results/first_call.json (first_call_functional.json with --functional)")
    parser.add_argument("--case", help=argparse.SUPPRESS)
    parser.add_argument("--case-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        Path(args.case_out).write_text(json.dumps(measure(args.case), indent=2, default=float))
        return 0
    import platform

    names = FUNCTIONAL if args.functional else estimators.__all__
    if args.only and set(args.only) - set(names):
        parser.error(f"{sorted(set(args.only) - set(names))} not among {'the functional fits' if args.functional else 'the estimators'}")
    args.out = args.out or str(HERE / "results" / ("first_call_functional.json" if args.functional else "first_call.json"))
    chosen = args.only or sorted(names, key=str.lower)
    results = {"date": time.strftime("%Y-%m-%d"), "machine": f"{platform.platform()}; {os.cpu_count()} CPU cores",
               "targets": {"compile_s": COMPILE_TARGET_S, "cached_first_fit_s": CACHED_TARGET_S}, "cases": []}
    if args.only and Path(args.out).is_file():  # keep the other estimators' rows of the earlier run
        earlier = json.loads(Path(args.out).read_text())
        results["cases"] = [{**c, "kept_from": c.get("kept_from", earlier["date"])} for c in earlier["cases"] if c["estimator"] not in chosen]
    use = "" if args.functional else "; the first use after the first fit: cache off (seconds, programs compiled), cached"
    print("seconds; cache off: first fit, second fit, compiling (their difference), compilations; with the cache: first fit "
          "of the process that fills it, of the next process, the programs it read and compiled; targets: compiling <= 5 s, cached <= 1 s"
          + use)
    print(f"{'fit' if args.functional else 'estimator':<23} {'first':>8} {'second':>8} {'compile':>8} {'#':>5} {'fill':>8} {'cached':>8} "
          f"{'read':>5} {'#':>5} {'<=5s':>5} {'<=1s':>4}" + ("" if args.functional else f"  {'use':>6} {'#':>3} {'cached':>6}"))
    for name in chosen:
        r = run(name, args.case_timeout)
        results["cases"].append(r)
        results["cases"].sort(key=lambda c: c["estimator"].lower())
        print_row(r)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

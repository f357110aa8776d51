"""Speed and memory of the SBMoE fit at the paper's size, measured in one run.

    python benchmarks/bench_sbmoe.py [--only fit restarts large] [--dtype float32|float64] [--out PATH]

* ``fit``: the 2-D problem of Section 4.2 at the paper's size (N = 2000, Dx = 32,
  Dy = 2, C = 64, 20 VB sweeps x 50 gate sub-steps, 2 Bartlett draws per sub-step).
  Target: <= 2 minutes on two cores after compilation. Reports compile time apart,
  the peak resident memory of the process, and the achieved fraction of the machine's
  matrix-multiply throughput (the fit's GEMM flops over its time, against a square
  GEMM of the same dtype measured in the same run; aim >= 30%).
* ``restarts``: four keys vmapped in one call against one fit (target <= 3x).
* ``large``: N = 8000 (the 2-D problem), two sweeps with the gate's log-sum-exp in
  row blocks of 1000: fits in memory, peak resident memory reported.

Each case runs in its own process so that its peak memory is its own. Writes
``benchmarks/results/sbmoe.json`` (or ``--out``): the cases run now over those kept from earlier runs (another
dtype, or cases not run now), ``dates`` saying when each case last ran.
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CASES = ("fit", "restarts", "large")


def gemm_flops(n: int, dx: int, c: int, hp, sweeps: int) -> float:
    """Matrix-multiply flops of ``sweeps`` VB sweeps (a multiply-add counts 2).

    Per sweep: E-step 3 GEMMs of N x N x C and the gate Gram N x N x Dx; the scatter
    S_Omega (Omega X); per gate sub-step and draw, the Gram forward and two products
    backward; the ELBO's draws, one Gram each."""
    nn = 2.0 * n * n
    per_sweep = 3 * nn * c + nn * dx + nn * dx + hp.gate_steps * hp.gate_samples * 3 * nn * dx + hp.elbo_samples * nn * dx
    return sweeps * per_sweep


def peak_gemm(dtype) -> float:
    import jax

    a = jax.random.normal(jax.random.key(0), (2000, 2000), dtype)
    f = jax.jit(lambda a: a @ a)
    f(a).block_until_ready()
    t = time.perf_counter()
    for _ in range(5):
        f(a).block_until_ready()
    return 5 * 2 * 2000.0**3 / (time.perf_counter() - t)


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: str, dtype_name: str) -> dict:
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    from bayeskit.datasets import sbmoe_synthetic_2d
    from bayeskit.density import sbmoe

    dtype = jnp.float32 if dtype_name == "float32" else jnp.float64
    n = 8000 if case == "large" else 2000
    sweeps = 2 if case == "large" else 20
    hp = sbmoe.Hyperparams(n_experts=64, gate_chunk=1000 if case == "large" else None)
    X, Y = sbmoe_synthetic_2d(jax.random.key(0), n, dtype)
    labels = sbmoe.agglomerative_labels(Y, hp.n_experts)
    one = lambda k: sbmoe.fit(k, X, Y, hp, max_iter=sweeps, init_labels=labels, throw=False)
    if case == "restarts":
        keys = jax.random.split(jax.random.key(1), 4)
        batch = jax.jit(jax.vmap(one))
        single = jax.jit(one)
        t = time.perf_counter()
        single(keys[0]).trace.block_until_ready()
        compile_single = time.perf_counter() - t
        t = time.perf_counter()
        single(keys[1]).trace.block_until_ready()
        t_single = time.perf_counter() - t
        t = time.perf_counter()
        batch(keys).trace.block_until_ready()
        compile_batch = time.perf_counter() - t
        t = time.perf_counter()
        out = batch(jax.random.split(jax.random.key(2), 4))
        out.trace.block_until_ready()
        t_batch = time.perf_counter() - t
        return {"case": case, "dtype": dtype_name, "one_fit_seconds": t_single, "batch_of_4_seconds": t_batch,
                "ratio": t_batch / t_single, "compile_one_seconds": compile_single, "compile_batch_plus_run_seconds": compile_batch,
                "finite": bool(jax.numpy.all(jax.numpy.isfinite(out.trace))), "peak_rss_mib": peak_rss_mib()}
    fitter = jax.jit(one)
    t = time.perf_counter()
    fitter(jax.random.key(1)).trace.block_until_ready()
    first = time.perf_counter() - t
    t = time.perf_counter()
    result = fitter(jax.random.key(2))
    result.trace.block_until_ready()
    seconds = time.perf_counter() - t
    flops = gemm_flops(n, X.shape[1], hp.n_experts, hp, sweeps)
    peak = peak_gemm(dtype)
    return {
        "case": case, "dtype": dtype_name, "n": n, "sweeps": sweeps, "seconds": seconds,
        "compile_seconds": max(first - seconds, 0.0), "peak_rss_mib": peak_rss_mib(),
        "gemm_gflops": flops / 1e9, "achieved_gflops_per_s": flops / seconds / 1e9,
        "machine_gemm_gflops_per_s": peak / 1e9, "fraction_of_gemm_peak": flops / seconds / peak,
        "final_elbo": float(result.trace[-1]), "finite": bool(jnp.all(jnp.isfinite(result.trace))),
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--out", default=str(HERE / "results" / "sbmoe.json"))
    parser.add_argument("--case", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.case:
        print(json.dumps(run_case(args.case, args.dtype)))
        return
    results = {"machine": platform.platform(), "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"),
               "cases": {}}
    started = time.strftime("%Y-%m-%d %H:%M:%S")  # marks this run's cases among those kept from earlier runs
    for case in args.only:
        proc = subprocess.run([sys.executable, __file__, "--case", case, "--dtype", args.dtype], capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{case}: failed\n{proc.stderr[-2000:]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        results["cases"][f"{case}_{args.dtype}"] = {**r, "run": started, "machine": platform.platform()}
        if case == "fit":
            print(f"fit N=2000 C=64 20x50 ({args.dtype}): {r['seconds']:.1f} s after {r['compile_seconds']:.1f} s compile "
                  f"(target <= 120 s); peak RSS {r['peak_rss_mib']:.0f} MiB; {r['achieved_gflops_per_s']:.1f} GFLOP/s = "
                  f"{100 * r['fraction_of_gemm_peak']:.0f}% of the machine's {r['machine_gemm_gflops_per_s']:.1f} GFLOP/s GEMM")
        elif case == "restarts":
            print(f"restarts: 4 keys vmapped {r['batch_of_4_seconds']:.1f} s vs one fit {r['one_fit_seconds']:.1f} s "
                  f"-> {r['ratio']:.2f}x (target <= 3x); peak RSS {r['peak_rss_mib']:.0f} MiB")
        else:
            print(f"large N=8000, 2 sweeps: {r['seconds']:.1f} s ({r['seconds'] / 2:.1f} s per sweep), "
                  f"peak RSS {r['peak_rss_mib']:.0f} MiB, finite ELBO {r['finite']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    previous = json.loads(out.read_text()) if out.exists() else {}
    previous.setdefault("cases", {}).update(results["cases"])
    previous.update({k: v for k, v in results.items() if k != "cases"})
    previous["dates"] = {name: c.get("run", "unrecorded")[:10] for name, c in previous["cases"].items()}
    out.write_text(json.dumps(previous, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()

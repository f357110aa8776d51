"""HSIC independence tests: bayeskit.covariance.hsic against hyppo's ``Hsic`` (``pip install hyppo``;
skipped with a message when absent) and, when R has it, dHSIC, in one run.

Data: x ~ N(0, 1) and y = x^2 + 0.5 N(0, 1) (dependent) or y ~ N(0, 1) (independent), one
feature each, Gaussian kernels with the median heuristic. Times are the best of a few
calls after a first (compiling) call; the compile time is reported apart. hyppo's first
call compiles with numba (about 16 s) and is excluded the same way; its inputs are
standardised because hyppo 0.5.2 applies x's bandwidth to y as well.

Parts:
- ``permutation``: the permutation test at m = 1000, 1000 permutations (ours) and 200
  (hyppo, which is slower), compared per permutation.
- ``gamma``: the gamma test at m = 1000 and 10,000, with the XLA memory plan of the
  compiled test (arguments plus temporaries) at 10,000; hyppo's chi^2 test ("auto") at 1000.
- ``rff``: random Fourier features (D = 256 frequencies): the statistic and p-value against
  the exact test at m = 10,000, and the time at m = 100,000.
- ``dhsic``: R dHSIC's gamma and permutation p-values on the same draws, if installed.

A run of some parts (``--only``) keeps the other parts' earlier entries in the results file;
``dates`` says when each part last ran. Without hyppo, a part whose saved entry was measured
against it (``permutation``, ``gamma``) is not run: its saved entry stays as it was (the script
says so), rather than being replaced by ours alone.

    python benchmarks/bench_hsic.py
    python benchmarks/bench_hsic.py --only permutation gamma --repeats 2
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayeskit.covariance import hsic  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from saved_parts import merged, parts_to_run  # noqa: E402

PARTS = ("permutation", "gamma", "rff", "dhsic")


def data(m: int, dependent: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=m)
    return x, (x**2 + 0.5 * rng.normal(size=m)) if dependent else rng.normal(size=m)


def timed(f, repeats: int) -> tuple[object, float, float]:
    """(last output, best seconds after the first call, first call's extra seconds)."""
    t = time.perf_counter()
    out = jax.block_until_ready(f())
    first = time.perf_counter() - t
    best = np.inf
    for _ in range(repeats):
        t = time.perf_counter()
        out = jax.block_until_ready(f())
        best = min(best, time.perf_counter() - t)
    return out, best, max(first - best, 0.0)


def summary(result) -> dict:
    return {"statistic": float(result.statistic), "p_value": float(result.p_value)}


def hyppo_or_reason():
    try:
        from hyppo.independence import Hsic
    except ImportError:
        return None, "hyppo is not installed (pip install hyppo)"
    return Hsic, None


def standardised(a):
    return ((a - a.mean()) / a.std())[:, None]


def permutation_part(repeats: int) -> dict:
    m, B, B_hyppo = 1000, 1000, 200
    out = {"m": m}
    for label, dependent in (("independent", False), ("dependent", True)):
        x, y = data(m, dependent)
        key = jax.random.key(0)
        r, seconds, compile_s = timed(lambda: hsic.test(key, x, y, method="permutation", n_permutations=B), repeats)
        out[label] = {"bayeskit": {**summary(r), "n_permutations": B, "seconds": seconds, "compile_seconds": compile_s,
                                   "ms_per_permutation": 1e3 * seconds / B}}
    Hsic, missing = hyppo_or_reason()
    if missing:
        print(f"permutation: hyppo skipped: {missing}")
        out["hyppo"] = {"skipped": missing}
        return out
    for label, dependent in (("independent", False), ("dependent", True)):
        x, y = data(m, dependent)
        xs, ys = standardised(x), standardised(y)
        (stat, p), seconds, first_extra = timed(lambda: Hsic().test(xs, ys, reps=B_hyppo, workers=1, auto=False), 1)
        ours = out[label]["bayeskit"]
        out[label]["hyppo"] = {"statistic (Dcorr of kernel distances)": float(stat), "p_value": float(p),
                               "n_permutations": B_hyppo, "seconds": seconds, "first_call_extra_seconds": first_extra,
                               "ms_per_permutation": 1e3 * seconds / B_hyppo}
        out[label]["ratio_per_permutation"] = out[label]["hyppo"]["ms_per_permutation"] / ours["ms_per_permutation"]
    return out


def gamma_part(repeats: int) -> dict:
    out = {}
    for m in (1000, 10_000):
        x, y = data(m, True)
        r, seconds, compile_s = timed(lambda: hsic.test(jax.random.key(0), x, y), repeats if m < 10_000 else 1)
        out[str(m)] = {"bayeskit": {**summary(r), "seconds": seconds, "compile_seconds": compile_s}}
    x, y = (jax.numpy.asarray(v) for v in data(10_000, True))
    compiled = jax.jit(lambda k, x, y: hsic.test(k, x, y)).lower(jax.random.key(0), x, y).compile()
    memory = compiled.memory_analysis()
    if memory is not None:
        out["10000"]["bayeskit"]["xla_temp_bytes"] = int(memory.temp_size_in_bytes)
        out["10000"]["bayeskit"]["xla_temp_in_m2_float64"] = memory.temp_size_in_bytes / (8 * 10_000**2)
    Hsic, missing = hyppo_or_reason()
    if missing:
        out["1000"]["hyppo"] = {"skipped": missing}
        return out
    x, y = data(1000, True)
    (stat, p), seconds, first_extra = timed(lambda: Hsic().test(standardised(x), standardised(y), auto=True), 1)
    out["1000"]["hyppo (chi^2, auto)"] = {"p_value": float(p), "seconds": seconds, "first_call_extra_seconds": first_extra}
    out["1000"]["hyppo_over_ours"] = seconds / out["1000"]["bayeskit"]["seconds"]
    return out


def rff_part(repeats: int, n_features: int = 256) -> dict:
    out = {"n_features": n_features}
    for label, dependent in (("independent", False), ("dependent", True)):
        x, y = data(10_000, dependent, seed=1)
        exact = hsic.test(jax.random.key(0), x, y)
        errors = []
        for seed in range(5):
            approx = hsic.test(jax.random.key(seed), x, y, approximation="rff", n_features=n_features)
            errors.append({"statistic_relative_error": float(approx.statistic / exact.statistic - 1),
                           "p_value": float(approx.p_value)})
        out[f"10000 {label}"] = {"exact": summary(exact), "rff, 5 keys": errors}
    x, y = data(100_000, True)
    r, seconds, compile_s = timed(lambda: hsic.test(jax.random.key(0), x, y, approximation="rff",
                                                    n_features=n_features), repeats)
    out["100000 dependent"] = {**summary(r), "seconds": seconds, "compile_seconds": compile_s}
    return out


def dhsic_part() -> dict:
    """R dHSIC's gamma and permutation p-values on our draws (m = 300), beside ours."""
    if shutil.which("Rscript") is None:
        return {"skipped": "Rscript not found"}
    if subprocess.run(["Rscript", "-e", "library(dHSIC)"], capture_output=True).returncode != 0:
        return {"skipped": "the R package dHSIC is not installed"}
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, dependent in (("independent", False), ("dependent", True)):
            x, y = data(300, dependent)
            np.savetxt(Path(tmp) / "xy.csv", np.column_stack([x, y]), delimiter=",")
            script = (f"library(dHSIC); d <- as.matrix(read.csv('{tmp}/xy.csv', header = FALSE)); set.seed(0); "
                      "g <- dhsic.test(d[, 1], d[, 2], method = 'gamma'); "
                      "p <- dhsic.test(d[, 1], d[, 2], method = 'permutation', B = 1000); "
                      "cat(g$statistic, g$p.value, p$p.value)")
            stat, p_gamma, p_perm = map(float, subprocess.run(["Rscript", "-e", script], capture_output=True, text=True,
                                                              check=True).stdout.split())
            ours = {m: summary(hsic.test(jax.random.key(0), x, y, method=m)) for m in ("gamma", "permutation")}
            out[label] = {"dHSIC": {"statistic": stat, "gamma_p": p_gamma, "permutation_p": p_perm}, "bayeskit": ours}
    return out


def kept_without_hyppo(path: Path, parts) -> list[str]:
    """The parts of ``parts`` not to run now: hyppo is not installed here, and the results at
    ``path`` hold a run of the part against it, which a run without hyppo would replace by
    ours alone."""
    if hyppo_or_reason()[0] is not None or not path.exists():
        return []
    saved = json.loads(path.read_text())
    measured = {"permutation": lambda part: any("seconds" in part.get(label, {}).get("hyppo", {}) for label in ("independent", "dependent")),
                "gamma": lambda part: "hyppo (chi^2, auto)" in part.get("1000", {})}
    return [part for part in parts if part in measured and part in saved and measured[part](saved[part])]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "hsic.json"))
    args = parser.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    why = hyppo_or_reason()[1]
    args.only = parts_to_run(args.only, {part: why for part in kept_without_hyppo(path, args.only)}, path, "hyppo")
    if not args.only:
        return
    results = {"machine": platform.processor() or platform.machine(), "cpus": os.cpu_count(), "devices": jax.local_device_count(),
               "date": time.strftime("%Y-%m-%d"), "jax": jax.__version__, "float": "float64"}
    if "permutation" in args.only:
        results["permutation"] = part = permutation_part(args.repeats)
        for label in ("independent", "dependent"):
            ours, peer = part[label]["bayeskit"], part[label].get("hyppo")
            peer_text = (f"hyppo {peer['seconds']:.2f} s / {peer['n_permutations']} (p {peer['p_value']:.3g}), "
                         f"{part[label]['ratio_per_permutation']:.0f}x per permutation") if peer else "hyppo skipped"
            print(f"permutation m = 1000, {label}: ours {ours['seconds']:.3f} s / 1000 permutations "
                  f"(p {ours['p_value']:.3g}, compile {ours['compile_seconds']:.1f} s); {peer_text}")
    if "gamma" in args.only:
        results["gamma"] = part = gamma_part(args.repeats)
        for m in ("1000", "10000"):
            ours = part[m]["bayeskit"]
            print(f"gamma m = {m}: ours {ours['seconds']:.3f} s (statistic {ours['statistic']:.4g}, "
                  f"compile {ours['compile_seconds']:.1f} s)")
        if "xla_temp_bytes" in part["10000"]["bayeskit"]:
            print(f"  m = 10000 XLA temporaries: {part['10000']['bayeskit']['xla_temp_bytes'] / 1e9:.2f} GB "
                  f"({part['10000']['bayeskit']['xla_temp_in_m2_float64']:.1f} m^2 float64)")
        if "hyppo_over_ours" in part["1000"]:
            print(f"  hyppo chi^2 (auto) m = 1000: {part['1000']['hyppo (chi^2, auto)']['seconds']:.3f} s, "
                  f"{part['1000']['hyppo_over_ours']:.1f}x ours")
    if "rff" in args.only:
        results["rff"] = part = rff_part(args.repeats)
        for label in ("independent", "dependent"):
            errors = [e["statistic_relative_error"] for e in part[f"10000 {label}"]["rff, 5 keys"]]
            p = [e["p_value"] for e in part[f"10000 {label}"]["rff, 5 keys"]]
            print(f"rff D = 256, m = 10000 {label}: statistic error {min(errors):+.3f} to {max(errors):+.3f}, "
                  f"p {min(p):.3g}-{max(p):.3g} (exact p {part[f'10000 {label}']['exact']['p_value']:.3g})")
        print(f"rff m = 100000: {part['100000 dependent']['seconds']:.3f} s")
    if "dhsic" in args.only:
        results["dhsic"] = dhsic_part()
        print(f"dHSIC: {results['dhsic'].get('skipped', 'compared (see JSON)')}")
    path.write_text(json.dumps(merged(path, results, args.only, PARTS), indent=2, default=float))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

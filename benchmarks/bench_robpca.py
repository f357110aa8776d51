"""ROBPCA and FAST-MCD: bayeskit against rrcov's ``PcaHubert`` and robustbase's ``covMcd`` (R,
when present: ``bash benchmarks/setup_r_peers.sh``) and scikit-learn's ``MinCovDet``, in one run.

Parts:
- ``robpca``: ROBPCA at 1000 x 50 and 50 x 1000 (k = 5; 10% of the rows shifted off the
  subspace) and on the paper's Glass (180 x 750, k = 3), Cars (MAD-scaled, k = 2) and Octane
  (k = 2): seconds after compilation (best of 3; rrcov's best of 3 calls timed inside R), the
  largest angle between the two k-dimensional subspaces, the agreement of the flagged points
  (SD or OD above its cutoff), and on the paper's data the flagged rows of each; the same
  under ``conventions="rrcov"`` (rrcov's own conventions, so the two should agree).
- ``replications``: 1000 replications of the paper's p = 4 simulation (n = 100, Sigma =
  diag(8, 4, 2, 1), k = 3, 10% contamination at f1 = 10), vmapped in one call.
- ``mcd``: FAST-MCD at 1000 x 10 and 1000 x 50 (10% shifted rows, h = (n + p + 1) // 2):
  seconds, and the log-determinant of each method's raw h-subset covariance (smaller is
  better: the MCD criterion).
- ``small``: the calls a researcher makes on small data sets (robustbase's hbk, wood, starsCYG,
  milk, bushfire, salinity, R's stackloss; scikit-learn's iris, wine, breast_cancer), each
  column standardised as in ``bench_robust_agreement.py``, warm, ours against R's under R's
  conventions: ROBPCA with k chosen by each (``robpca.fit_auto(key, X, None, 0.75,
  conventions="rrcov")`` / ``PcaHubert(X, k = 0, alpha = 0.75)``) and FAST-MCD at alpha = 0.5
  (``mcd.fit(key, X, conventions="robustbase")`` / ``covMcd(X, alpha = 0.5)``). Seconds per
  call: the best of 5 timed calls, after a first one (ours ending in ``jax.block_until_ready``,
  R's timed inside R); where one call takes under 50 ms, the best of 5 runs of 10 consecutive
  calls each, divided by 10 (R's clock counts milliseconds). The ratio R / ours per data set and its
  geometric mean; and where our time goes: ROBPCA's k-choosing ``robpca.provisional`` and its
  ``robpca.fit`` at the chosen k, each timed alone, and the MCD's jitted ``mcd.fit_core``
  without ``mcd.fit``'s host-side checks. Without R it is skipped.

A run of some parts (``--only``) keeps the other parts' earlier entries in the results file;
``dates`` says when each part last ran. Without R, a part whose saved entry was measured
against R (``robpca``, ``mcd``, ``small``) is not run: its saved entry, R's numbers and ours
of that run, stays as it was (the script says so), rather than being replaced by ours alone.

    python benchmarks/bench_robpca.py
    python benchmarks/bench_robpca.py --only mcd
    python benchmarks/bench_robpca.py --only small
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
from statistics import geometric_mean

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import bayeskit  # noqa: E402
from bayeskit.datasets import load_robpca  # noqa: E402
from bayeskit.robust import mcd, robpca  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import bench_robust_agreement as agreement  # noqa: E402
import peers_r  # noqa: E402
from saved_parts import merged, parts_to_run  # noqa: E402

PARTS = ("robpca", "replications", "mcd", "small")
SMALL_R_DATA = ("hbk", "stackloss", "wood", "starsCYG", "milk", "bushfire", "salinity")
SMALL_SKLEARN_DATA = ("iris", "wine", "breast_cancer")
SMALL_REPEATS, SMALL_CALLS, SMALL_FAST_S = 5, 10, 0.05


def best_of(f, repeats: int = 3, calls: int = 1):
    """(result, best seconds per call, first-call seconds minus best): f is called once, then
    ``repeats`` times ``calls`` times in a row, each run of calls timed and divided by ``calls``."""
    t = time.perf_counter()
    out = jax.block_until_ready(f())
    first = time.perf_counter() - t
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(calls):
            out = jax.block_until_ready(f())
        times.append((time.perf_counter() - t) / calls)
    return out, min(times), first - min(times)


def shifted(n: int, p: int, k: int = 5, seed: int = 0) -> np.ndarray:
    """A k-dimensional signal with noise, 10% of the rows shifted off it."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(p, k)))[0]
    X = rng.normal(size=(n, k)) * np.linspace(5, 1, k) @ basis.T + 0.3 * rng.normal(size=(n, p))
    X[: n // 10] += 6 * rng.normal(size=p) / np.sqrt(p) * 3
    return X


def largest_angle(A, B) -> float:
    """The largest principal angle (degrees) between the column spans of A and B."""
    cosines = np.linalg.svd(np.linalg.qr(A)[0].T @ np.linalg.qr(B)[0], compute_uv=False)
    return float(np.degrees(np.arccos(np.clip(cosines.min(), -1, 1))))


def robpca_row(name: str, X: np.ndarray, k: int) -> dict:
    f = jax.jit(lambda key, X: robpca.fit(key, X, k).state)
    r, seconds, compile_s = best_of(lambda: f(jax.random.key(0), X))
    ours_flag = (np.asarray(r.score_distances) > float(r.sd_cutoff)) | (np.asarray(r.orthogonal_distances) > float(r.od_cutoff))
    row = {"data": name, "n": X.shape[0], "p": X.shape[1], "k": k,
           "bayeskit": {"seconds": seconds, "compile_seconds": compile_s, "h": int(r.h),
                        "eigenvalues": np.asarray(r.eigenvalues).tolist(), "n_flagged": int(ours_flag.sum()),
                        "sd_cutoff": float(r.sd_cutoff), "od_cutoff": float(r.od_cutoff)}}
    missing = peers_r.r_missing("rrcov")
    if missing:
        row["rrcov"] = {"skipped": missing}
        return row
    peer = peers_r.pca_hubert(X, k)
    flag = (peer["sd"] > peer["sd_cutoff"]) | (peer["od"] > peer["od_cutoff"])
    row["rrcov"] = {"seconds": min(peer["seconds"]), "h": peer["h"], "eigenvalues": peer["eigenvalues"].tolist(),
                    "n_flagged": int(flag.sum()), "sd_cutoff": peer["sd_cutoff"], "od_cutoff": peer["od_cutoff"],
                    "versions": peer["versions"]}
    row["ratio"] = row["rrcov"]["seconds"] / seconds
    row["largest_angle_degrees"] = largest_angle(np.asarray(r.components), peer["loadings"])
    row["flag_agreement"] = float(np.mean(flag == ours_flag))
    g = jax.jit(lambda key, X: robpca.fit(key, X, k, conventions="rrcov").state)
    rr, rr_seconds, rr_compile = best_of(lambda: g(jax.random.key(0), X))
    rr_flag = np.asarray(rr.labels) != 0
    row["bayeskit_rrcov_conventions"] = {
        "seconds": rr_seconds, "compile_seconds": rr_compile, "ratio": row["rrcov"]["seconds"] / rr_seconds,
        "largest_angle_degrees": largest_angle(np.asarray(rr.components), peer["loadings"]),
        "eigenvalues_relative": float(np.max(np.abs(np.asarray(rr.eigenvalues) / peer["eigenvalues"] - 1))),
        "flag_agreement": float(np.mean(flag == rr_flag))}
    if X.shape[0] <= 200:  # small data sets (the paper's among them): the flagged rows (1-based) of each
        row["bayeskit"]["flagged_rows"] = (np.nonzero(ours_flag)[0] + 1).tolist()
        row["rrcov"]["flagged_rows"] = (np.nonzero(flag)[0] + 1).tolist()
    return row


def cars_scaled() -> np.ndarray:
    """The car data with each variable divided by its MAD (their units differ), as in the paper."""
    from scipy.stats import median_abs_deviation

    C = load_robpca("cars")["X"]
    return (C - np.median(C, 0)) / median_abs_deviation(C, 0, scale="normal")


def replications(n_rep: int = 1000, seed: int = 0) -> dict:
    """The paper's first simulation (n = 100, p = 4, k = 3), eps = 0.1, f1 = 10, f2 = 1."""
    rng = np.random.default_rng(seed)
    sd = np.sqrt([8.0, 4.0, 2.0, 1.0])
    X = rng.normal(size=(n_rep, 100, 4)) * sd
    X[:, :10] = rng.normal(size=(n_rep, 10, 4)) * sd + [0, 0, 0, 10.0]
    keys = jax.random.split(jax.random.key(seed), n_rep)
    one = lambda key, X: robpca.fit(key, X, 3).state  # noqa: E731
    r, seconds, compile_s = best_of(lambda: bayeskit.sweep(one, keys, (X,)).results, repeats=1)
    angles = [largest_angle(np.asarray(c), np.eye(4)[:, :3]) for c in np.asarray(r.components)]
    return {"n_replications": n_rep, "seconds": seconds, "compile_seconds": compile_s,
            "median_largest_angle_degrees": float(np.median(angles)),
            "mean_eigenvalues": np.asarray(r.eigenvalues).mean(0).tolist()}


def raw_log_det(X, support) -> float:
    return float(np.linalg.slogdet(np.cov(X[np.asarray(support, bool)].T, bias=True))[1])


def mcd_row(n: int, p: int) -> dict:
    from sklearn.covariance import MinCovDet

    X = shifted(n, p, k=min(5, p), seed=1)
    h = mcd.default_h(n, p)
    f = jax.jit(lambda key, X: mcd.fit(key, X).state)
    r, seconds, compile_s = best_of(lambda: f(jax.random.key(0), X))
    row = {"n": n, "p": p, "h": h, "bayeskit": {"seconds": seconds, "compile_seconds": compile_s,
                                                "raw_log_det": raw_log_det(X, r.raw_support)}}
    t = time.perf_counter()
    sk = MinCovDet(support_fraction=h / n, random_state=0).fit(X)
    row["scikit-learn"] = {"seconds": time.perf_counter() - t, "raw_log_det": raw_log_det(X, sk.raw_support_)}
    missing = peers_r.r_missing("robustbase")
    if missing:
        row["R covMcd"] = {"skipped": missing}
    else:
        peer = peers_r.cov_mcd(X, alpha=0.5)
        row["R covMcd"] = {"seconds": min(peer["seconds"]), "h": peer["h"],
                           "raw_log_det": raw_log_det(X, peer["raw_support"]), "versions": peer["versions"]}
    for name in ("scikit-learn", "R covMcd"):
        if "seconds" in row[name]:
            row[name]["ratio"] = row[name]["seconds"] / seconds
    return row


def small_sets() -> dict[str, np.ndarray]:
    """The small data sets, each column centred and divided by its standard deviation."""
    raw = {**peers_r.r_datasets(SMALL_R_DATA), **{name: agreement.sklearn_data(name) for name in SMALL_SKLEARN_DATA}}
    return {name: agreement.standardised(X) for name, X in raw.items()}


def warm(f):
    """(result, seconds per call, compile seconds) of our call ``f``: the best of SMALL_REPEATS
    calls, or of as many runs of SMALL_CALLS calls where one call is faster than SMALL_FAST_S."""
    out, seconds, compile_s = best_of(f, SMALL_REPEATS)
    if seconds < SMALL_FAST_S:
        seconds = best_of(f, SMALL_REPEATS, SMALL_CALLS)[1]
    return out, seconds, compile_s


def r_warm(fit) -> dict:
    """R's ``fit(calls=...)`` (pca_hubert or cov_mcd with its data and repeats) as :func:`warm`
    times ours, its ``seconds`` the best."""
    peer = fit(calls=1)
    if min(peer["seconds"]) < SMALL_FAST_S:
        peer = fit(calls=SMALL_CALLS)
    return {**peer, "seconds": min(peer["seconds"])}


def small_row(name: str, X: np.ndarray) -> dict:
    """Warm seconds per call, ours and R's, of ROBPCA (k chosen by each) and FAST-MCD (alpha =
    0.5) under R's conventions on one small data set, and the parts of our time."""
    n, p = X.shape
    key = jax.random.key(0)
    r, seconds, compile_s = warm(lambda: robpca.fit_auto(key, X, None, 0.75, conventions="rrcov"))
    k = r.state.eigenvalues.shape[-1]
    provisional_s = warm(lambda: robpca.provisional(key, X, 0.75, conventions="rrcov"))[1]
    fit_s = warm(lambda: robpca.fit(key, X, k, conventions="rrcov"))[1]
    peer = r_warm(lambda calls: peers_r.pca_hubert(X, 0, 0.75, repeats=SMALL_REPEATS, calls=calls))
    row = {"data": name, "n": n, "p": p, "versions": peer["versions"],
           "robpca": {"k": k, "rrcov_k": peer["k"], "refits": int(r.n_iter), "seconds": seconds,
                      "compile_seconds": compile_s, "provisional_seconds": provisional_s, "fit_seconds": fit_s,
                      "rrcov_seconds": peer["seconds"], "ratio": peer["seconds"] / seconds}}
    _, seconds, compile_s = warm(lambda: mcd.fit(key, X, conventions="robustbase"))
    h, factors = mcd.h_alpha_n(0.5, n, p), mcd.robustbase_factors(p, n, 0.5)
    X_, h_, factors_ = jnp.asarray(X), jnp.asarray(h, jnp.int32), jnp.asarray(factors, X.dtype)
    core_s = warm(lambda: mcd.fit_core(key, X_, h_, factors_, 500, 10, 100, "robustbase", None))[1]  # mcd.fit's defaults
    peer = r_warm(lambda calls: peers_r.cov_mcd(X, 0.5, repeats=SMALL_REPEATS, calls=calls))
    row["versions"].update(peer["versions"])
    row["mcd"] = {"h": h, "covMcd_h": peer["h"], "seconds": seconds, "compile_seconds": compile_s, "core_seconds": core_s,
                  "covMcd_seconds": peer["seconds"], "ratio": peer["seconds"] / seconds}
    jax.clear_caches()  # every data set compiles anew; without this LLVM can run out of memory maps
    return row


def small() -> dict:
    """The ``small`` part: a row per data set and the geometric means of the ratios R / ours."""
    missing = peers_r.r_missing("rrcov")
    if missing:
        return {"skipped": missing}
    rows = [small_row(name, X) for name, X in small_sets().items()]
    return {"repeats": SMALL_REPEATS, "calls_below_50_ms": SMALL_CALLS, "rows": rows,
            "geometric_mean_ratio": {m: geometric_mean([r[m]["ratio"] for r in rows]) for m in ("robpca", "mcd")}}


def print_small(part: dict) -> None:
    if "skipped" in part:
        print(f"small data sets skipped: {part['skipped']}")
        return
    print("small data sets, ms per call (warm) and R / ours; our parts: ROBPCA's provisional + fit at k, MCD's core")
    print(f"{'data':>14} {'n':>4} {'p':>3} | {'k':>5} {'ROBPCA':>7} {'rrcov':>7} {'ratio':>6} | {'MCD':>7} {'covMcd':>7} "
          f"{'ratio':>6} | {'prov.':>6} {'fit':>6} {'core':>6}")
    for r in part["rows"]:
        a, m = r["robpca"], r["mcd"]
        k = f"{a['k']}/{a['rrcov_k']}"
        print(f"{r['data']:>14} {r['n']:>4} {r['p']:>3} | {k:>5} {1e3 * a['seconds']:7.2f} {1e3 * a['rrcov_seconds']:7.2f} "
              f"{a['ratio']:6.2f} | {1e3 * m['seconds']:7.2f} {1e3 * m['covMcd_seconds']:7.2f} {m['ratio']:6.2f} | "
              f"{1e3 * a['provisional_seconds']:6.2f} {1e3 * a['fit_seconds']:6.2f} {1e3 * m['core_seconds']:6.2f}")
    g = part["geometric_mean_ratio"]
    print(f"geometric mean of R / ours: ROBPCA {g['robpca']:.2f}, FAST-MCD {g['mcd']:.2f}")


# the R package each part compares with, and where a saved part keeps R's numbers
R_PEERS = {"robpca": "rrcov", "mcd": "robustbase", "small": "rrcov"}


def holds_r(part: str, saved) -> bool:
    """Whether the saved entry of ``part`` holds numbers measured with R."""
    if part == "small":
        return "rows" in saved
    peer = "rrcov" if part == "robpca" else "R covMcd"
    return any("seconds" in row.get(peer, {}) for row in saved)


def kept_without_r(path: Path, parts) -> dict[str, str]:
    """The parts of ``parts`` not to run now, each with what is missing: its R package does
    not load here, and the results at ``path`` hold a run of it against R, which a run
    without R would replace by ours alone."""
    saved = json.loads(path.read_text()) if path.exists() else {}
    kept = {}
    for part in parts:
        if part in R_PEERS and holds_r(part, saved.get(part, [])):
            missing = peers_r.r_missing(R_PEERS[part])
            if missing:
                kept[part] = missing
    return kept


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "robpca.json"))
    args = parser.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    parts = parts_to_run(args.only, kept_without_r(path, args.only), path, "R")
    if not parts:
        return
    out = {"machine": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d"),
           "jax": jax.__version__}
    if "robpca" in parts:
        out["robpca"] = []
        for name, X, k in (("1000 x 50", shifted(1000, 50), 5), ("50 x 1000", shifted(50, 1000), 5),
                           ("Glass", load_robpca("glass")["X"], 3), ("Cars (MAD-scaled)", cars_scaled(), 2),
                           ("Octane", load_robpca("octane")["X"], 2)):
            row = robpca_row(name, X, k)
            out["robpca"].append(row)
            peer = row["rrcov"]
            tail = (f"rrcov {peer['seconds']:.3f} s ({row['ratio']:.1f}x), largest angle "
                    f"{row['largest_angle_degrees']:.2f} deg, flags agree on {100 * row['flag_agreement']:.1f}%"
                    if "seconds" in peer else f"rrcov skipped: {peer['skipped']}")
            print(f"ROBPCA {name}, k = {k}: ours {row['bayeskit']['seconds']:.3f} s "
                  f"(compile {row['bayeskit']['compile_seconds']:.1f} s); {tail}")
            if "bayeskit_rrcov_conventions" in row:
                c = row["bayeskit_rrcov_conventions"]
                print(f"  conventions='rrcov': {c['seconds']:.3f} s ({c['ratio']:.1f}x), largest angle "
                      f"{c['largest_angle_degrees']:.2g} deg, eigenvalues within {100 * c['eigenvalues_relative']:.2g}%, "
                      f"flags agree on {100 * c['flag_agreement']:.1f}%")
            if "flagged_rows" in row["bayeskit"]:
                ours_rows, peer_rows = set(row["bayeskit"]["flagged_rows"]), set(row["rrcov"]["flagged_rows"])
                print(f"  flagged by both: {len(ours_rows & peer_rows)}; ours only: {sorted(ours_rows - peer_rows)}; "
                      f"rrcov only: {sorted(peer_rows - ours_rows)}")
    if "replications" in parts:
        out["replications"] = rep = replications()
        print(f"ROBPCA {rep['n_replications']} vmapped replications (n = 100, p = 4, k = 3): {rep['seconds']:.2f} s "
              f"(compile {rep['compile_seconds']:.1f} s), median largest angle {rep['median_largest_angle_degrees']:.2f} deg")
    if "mcd" in parts:
        out["mcd"] = []
        for n, p in ((1000, 10), (1000, 50)):
            row = mcd_row(n, p)
            out["mcd"].append(row)
            cols = "; ".join(f"{name} {row[name]['seconds']:.3f} s ({row[name]['ratio']:.1f}x), log det "
                             f"{row[name]['raw_log_det']:.4f}" if "seconds" in row[name] else f"{name} skipped"
                             for name in ("scikit-learn", "R covMcd"))
            print(f"FAST-MCD {n} x {p}: ours {row['bayeskit']['seconds']:.3f} s, log det "
                  f"{row['bayeskit']['raw_log_det']:.4f}; {cols}")
    if "small" in parts:
        out["small"] = small()
        print_small(out["small"])
    path.write_text(json.dumps(merged(path, out, parts, PARTS), indent=2, default=float))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

"""Graphical lasso: bayeskit.covariance.glasso against scikit-learn's ``graphical_lasso`` and, when R is
present, R glasso (``bash benchmarks/setup_r_peers.sh``), in one run.

Problems: a sparse, well-conditioned precision with about two random edges per variable
(weights +-[0.2, 0.4], made diagonally dominant, unit diagonal), n = 2p draws, the
empirical covariance S; alpha = 0.1, the diagonal unpenalised (penalize.diagonal = FALSE
in R). Every solver is judged by the same KKT residual (``bayeskit.covariance.glasso.kkt_residual``,
the largest violation of the optimality conditions): ours runs to residual <= 1e-4; each
peer runs at a decreasing sequence of its own tolerances and is timed at the first one
that reaches 1e-4 (the row says which). Times after compilation; compile time apart.

Path: 20 penalties from 0.5 down to 0.05, as one warm-started ``glasso.path`` call and as
one ``vmap`` over the penalties, against one fit at alpha = 0.1.

Real (``--real``): correlation matrices of real data (scikit-learn's diabetes, wine, breast
cancer and digits without its constant pixels; Sachs et al.'s flow cytometry), alpha in
{0.03, 0.1, 0.3}, both diagonal conventions. Ours with the default solver at KKT <= 1e-4
(best of 20 warm calls of the jitted fit, and of ``glasso.fit`` called at top level as a
user calls it: host checks of S, default ``throw``); R glasso at its first threshold reaching the same residual (the
mean of 20 calls inside R); the ratio R / ours (above 1: we are faster), its geometric
mean (also for the top-level call), our iterations and the relative gap of our objective to R's at threshold 1e-8. The
same comparison on raw covariance matrices (wine, breast cancer, Sachs in their own mixed
units), alpha in {0.03, 0.1, 0.3} times the median variance: the KKT residual is relative
to sqrt(S_ii S_jj) (``kkt_residual``), and R glasso's threshold, relative to the mean
|S_ij|, must fall further to reach it.

Without R, a part whose saved entry was measured against R glasso (a size, ``--real``) is not
run: its saved entry stays as it was (the script says so), rather than being replaced by ours
alone.

    python benchmarks/bench_glasso.py                    # p = 100, 500, 1000 and the path
    python benchmarks/bench_glasso.py --sizes 100 --no-path
    python benchmarks/bench_glasso.py --real --sizes --no-path
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import platform
import sys
import time
import warnings
from pathlib import Path
from statistics import geometric_mean

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)

from bayeskit.covariance import glasso  # noqa: E402
from bayeskit.datasets import sparse_precision  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
import peers_r  # noqa: E402
from saved_parts import parts_to_run  # noqa: E402

TARGET = 1e-4
ALPHA = 0.1


def problem(p: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    theta = sparse_precision(p, rng)
    X = rng.multivariate_normal(np.zeros(p), np.linalg.inv(theta), size=2 * p)
    return np.cov(X.T, bias=True)


def kkt(precision, covariance, S) -> float:
    return float(glasso.kkt_residual(precision, covariance, S, glasso.Hyperparams(ALPHA)))


def timed(f, *args):
    t = time.perf_counter()
    out = jax.block_until_ready(f(*args))
    return out, time.perf_counter() - t


def ours(S) -> dict:
    f = jax.jit(lambda S: glasso.fit(S, glasso.Hyperparams(ALPHA), tol=TARGET, throw=False))
    _, first = timed(f, S)
    r, seconds = timed(f, S)
    return {"seconds": seconds, "compile_seconds": first - seconds, "kkt": float(r.state.kkt), "n_iter": int(r.n_iter),
            "nnz": int(np.count_nonzero(np.asarray(r.state.precision))), "precision": np.asarray(r.state.precision)}


def first_reaching(runs) -> dict:
    """The first (tolerance, seconds, precision, covariance) whose KKT residual <= TARGET."""
    for run in runs:
        if run["kkt"] <= TARGET:
            return run
    return {**runs[-1], "note": f"no tolerance reached KKT {TARGET:g}"}


def sklearn_peer(S, budget: float) -> dict:
    """scikit-learn down the tolerance ladder, stopping once its runs have taken ``budget``
    seconds (then the row says it did not reach the target)."""
    from sklearn.covariance import graphical_lasso

    runs = []
    for tol in (1e-4, 1e-5, 1e-6, 1e-7, 1e-8):
        if sum(r["seconds"] for r in runs) > budget:
            break
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cov, prec = graphical_lasso(S, ALPHA, tol=tol, enet_tol=tol, max_iter=1000)
        runs.append({"tolerance": tol, "seconds": time.perf_counter() - t, "kkt": kkt(prec, cov, S), "precision": prec})
        if runs[-1]["kkt"] <= TARGET:
            break
    return first_reaching(runs)


def r_peer(S) -> dict:
    thresholds = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
    out = peers_r.glasso_fits(S, ALPHA, thresholds)
    runs = [{"tolerance": thr, "seconds": sec, "kkt": kkt(prec, cov, S), "precision": prec}
            for thr, sec, prec, cov in zip(thresholds, out["seconds"], out["precision"], out["covariance"])]
    return {**first_reaching(runs), "versions": out["versions"]}


def compare(p: int, budget: float) -> dict:
    S = problem(p)
    row = {"p": p, "n": 2 * p, "alpha": ALPHA, "bayeskit": ours(S), "scikit-learn": sklearn_peer(S, budget)}
    missing = peers_r.r_missing("glasso")
    row["R glasso"] = {"skipped": missing} if missing else r_peer(S)
    ref = row["bayeskit"]["precision"]
    for name in ("scikit-learn", "R glasso"):
        peer = row[name]
        if "precision" in peer:
            peer["max_abs_diff_precision"] = float(np.abs(peer["precision"] - ref).max())
            peer["ratio"] = peer["seconds"] / row["bayeskit"]["seconds"]
    for part in row.values():
        if isinstance(part, dict):
            part.pop("precision", None)
    return row


def path_part(p: int) -> dict:
    S = problem(p)
    alphas = np.geomspace(0.5, 0.05, 20)
    one = jax.jit(lambda S: glasso.fit(S, glasso.Hyperparams(ALPHA), tol=TARGET, throw=False))
    warm = jax.jit(lambda S: glasso.path(S, alphas, tol=TARGET))
    batched = jax.jit(lambda S: jax.vmap(lambda a: glasso.fit(S, glasso.Hyperparams(a), tol=TARGET, throw=False))(alphas))
    out = {"p": p, "n_alphas": len(alphas)}
    for name, f in (("one fit", one), ("path, warm-started", warm), ("vmap over alphas", batched)):
        timed(f, S)
        r, seconds = timed(f, S)
        out[name] = {"seconds": seconds, "n_iter": np.asarray(r.n_iter).tolist(), "max_kkt": float(np.max(r.state.kkt))}
    for name in ("path, warm-started", "vmap over alphas"):
        out[name]["ratio_to_one_fit"] = out[name]["seconds"] / out["one fit"]["seconds"]
    return out


REAL_ALPHAS = (0.03, 0.1, 0.3)
REPEATS = 20  # warm calls per case, the fastest kept: a few milliseconds on a busy machine vary by a third
RAW_SETS = ("wine", "breast cancer", "sachs")


def _real_data() -> dict:
    from sklearn import datasets as sk

    from bayeskit.datasets import load_sachs

    data = {"diabetes": sk.load_diabetes().data, "wine": sk.load_wine().data, "breast cancer": sk.load_breast_cancer().data,
            "digits": sk.load_digits().data, "sachs": load_sachs()}
    return {name: X[:, X.std(0) > 0] for name, X in data.items()}  # columns with zero variance dropped


def real_matrices() -> dict:
    """Correlation matrices of real data sets."""
    return {name: np.corrcoef(X.T) for name, X in _real_data().items()}


def raw_matrices() -> dict:
    """Covariance matrices of real data in their own mixed units: variances from 7e-6 to 3e5
    (breast cancer), 0.015 to 1e5 (wine), 150 to 3e5 (Sachs' intensities)."""
    return {name: np.cov(X.T, bias=True) for name, X in _real_data().items() if name in RAW_SETS}


def real_case(S, alpha: float, penalize_diagonal: bool) -> dict:
    hp = glasso.Hyperparams(alpha, penalize_diagonal)
    f = jax.jit(lambda S: glasso.fit(S, hp, tol=TARGET, max_iter=500, throw=False))
    timed(f, S)
    runs = [timed(f, S) for _ in range(REPEATS)]
    r, seconds = runs[0][0], min(t for _, t in runs)
    top = lambda S: glasso.fit(S, hp, tol=TARGET, max_iter=500)  # noqa: E731  as a user calls it: host checks, default throw
    timed(top, S)
    F = float(glasso.objective(r.state, S, hp))
    row = {"alpha": alpha, "penalize_diagonal": penalize_diagonal, "seconds": seconds, "n_iter": int(r.n_iter),
           "kkt": float(r.state.kkt), "solver": "bcd" if hp.uses_bcd(len(S)) else "quic",
           "top_level_seconds": min(timed(top, S)[1] for _ in range(REPEATS))}
    missing = peers_r.r_missing("glasso")
    if missing:
        return {**row, "R glasso": {"skipped": missing}}
    thresholds = (1e-4, 1e-5, 1e-6, 1e-7, 1e-8)
    out = peers_r.glasso_fits(S, alpha, thresholds, penalize_diagonal=penalize_diagonal, calls=20)
    kkts = [float(glasso.kkt_residual(P, W, S, hp)) for P, W in zip(out["precision"], out["covariance"])]
    k = next((i for i, v in enumerate(kkts) if v <= TARGET), len(kkts) - 1)
    best = out["precision"][-1]
    F_r = float(glasso.objective_of(best, np.linalg.slogdet(best)[1], S, hp))
    return {**row, "objective_gap": abs(F - F_r) / abs(F_r),
            "R glasso": {"threshold": thresholds[k], "seconds": out["seconds"][k], "kkt": kkts[k], "ratio": out["seconds"][k] / seconds}}


def real_part(matrices: dict, per_median_variance: bool = False) -> dict:
    """Every matrix at every penalty of ``REAL_ALPHAS`` (times the median variance when
    ``per_median_variance``: the same problem whatever the data's units), both diagonal
    conventions, against R glasso."""
    rows = []
    print(f"{'data':>13} {'p':>3} {'alpha':>8} {'diag':>5} {'ours ms':>8} {'top ms':>7} {'iters':>5} {'R ms':>7} {'R/ours':>7} {'F gap':>8}")
    for name, S in matrices.items():
        unit = float(np.median(np.diagonal(S))) if per_median_variance else 1.0
        for penalize_diagonal in (False, True):
            for alpha in REAL_ALPHAS:
                row = {"data": name, "p": len(S), **real_case(S, alpha * unit, penalize_diagonal)}
                rows.append(row)
                r = row["R glasso"]
                peer = f"{r['seconds'] * 1e3:7.2f} {r['ratio']:7.2f} {row['objective_gap']:8.1e}" if "ratio" in r else r["skipped"]
                print(f"{name:>13} {len(S):3d} {alpha * unit:8.3g} {str(penalize_diagonal):>5} {row['seconds'] * 1e3:8.2f} "
                      f"{row['top_level_seconds'] * 1e3:7.2f} {row['n_iter']:5d} {peer}", flush=True)
    ratios = [row["R glasso"]["ratio"] for row in rows if "ratio" in row["R glasso"]]
    out = {"rows": rows, "versions": peers_r.glasso_fits(np.eye(2), 0.1, (1e-4,))["versions"] if ratios else None}
    if ratios:
        cancer = [row["R glasso"]["ratio"] for row in rows if row["data"] == "breast cancer"]
        out["geometric_mean_ratio"] = geometric_mean(ratios)
        out["geometric_mean_ratio_top_level"] = geometric_mean([row["R glasso"]["seconds"] / row["top_level_seconds"] for row in rows
                                                                 if "ratio" in row["R glasso"]])
        out["breast_cancer_min_ratio"] = float(min(cancer))
        out["max_iterations"] = max(row["n_iter"] for row in rows)
        out["max_objective_gap"] = max(row["objective_gap"] for row in rows)
        print(f"R / ours, geometric mean over {len(ratios)} cases: {out['geometric_mean_ratio']:.2f} (glasso.fit called at top "
              f"level: {out['geometric_mean_ratio_top_level']:.2f}); breast cancer, smallest: "
              f"{out['breast_cancer_min_ratio']:.2f}; most iterations {out['max_iterations']}; largest objective gap "
              f"{out['max_objective_gap']:.1e}")
    return out


def kept_without_r(earlier: dict, sizes, real: bool) -> list[str]:
    """The parts asked for that are not to run now, as "p = P" or "real": R glasso does not
    load here, and the saved results hold a run of that part against it, which a run without R
    would replace by ours alone."""
    if not peers_r.r_missing("glasso"):
        return []
    measured = lambda entry: "seconds" in entry.get("R glasso", {})  # noqa: E731
    kept = [f"p = {row['p']}" for row in earlier.get("sizes", []) if row["p"] in sizes and measured(row)]
    if real and any(measured(row) for row in earlier.get("real", {}).get("rows", [])):
        kept.append("real")
    return kept


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 500, 1000])
    parser.add_argument("--path-size", type=int, default=100)
    parser.add_argument("--no-path", action="store_true")
    parser.add_argument("--real", action="store_true", help="also the real correlation matrices against R glasso")
    parser.add_argument("--peer-budget", type=float, default=300.0,
                        help="seconds after which scikit-learn stops tightening its tolerance")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "glasso.json"))
    args = parser.parse_args(argv)
    earlier = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}  # parts not run stay
    kept = {part: peers_r.r_missing("glasso") for part in kept_without_r(earlier, args.sizes, args.real)}
    run = parts_to_run([f"p = {p}" for p in args.sizes] + ["real"] * args.real, kept, args.out, "R glasso")
    args.sizes, args.real = [p for p in args.sizes if f"p = {p}" in run], "real" in run
    results = {**earlier, "machine": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d"),
               "kkt_target": TARGET}
    if args.sizes:  # rows of sizes not run now stay
        results["sizes"] = [row for row in earlier.get("sizes", []) if row["p"] not in args.sizes]
    print(f"{'p':>5} {'ours s':>8} {'iters':>5} {'sklearn s':>10} {'ratio':>6} {'R s':>8} {'ratio':>6}")
    for p in dict.fromkeys(args.sizes):
        row = compare(p, args.peer_budget)
        results["sizes"] = sorted([*results["sizes"], row], key=lambda r: r["p"])
        sk, r = row["scikit-learn"], row["R glasso"]
        r_cols = f"{r['seconds']:8.3f} {r['ratio']:6.1f}" if "seconds" in r else f"  skipped: {r['skipped']}"
        flags = "".join(f"  ({name}: {row[name]['note']}, KKT {row[name]['kkt']:.1e})" for name in ("scikit-learn", "R glasso")
                        if "note" in row[name])
        print(f"{p:5d} {row['bayeskit']['seconds']:8.3f} {row['bayeskit']['n_iter']:5d} {sk['seconds']:10.3f} "
              f"{sk['ratio']:6.1f} {r_cols}{flags}")
    if args.real:
        results["real"] = real_part(real_matrices())
        print("raw covariance matrices (penalties per median variance):")
        results["raw"] = real_part(raw_matrices(), per_median_variance=True)
    if not args.no_path:
        results["path"] = path_part(args.path_size)
        for name in ("path, warm-started", "vmap over alphas"):
            part = results["path"][name]
            print(f"{name} (20 alphas, p = {args.path_size}): {part['seconds']:.3f} s, "
                  f"{part['ratio_to_one_fit']:.1f}x one fit")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()

"""One performance report for every model: run the speed benchmarks against their peers, in
one run, and write ``benchmarks/results/REPORT.md``.

    python benchmarks/report.py [--run] [--only MODEL ...] [--device cpu|gpu] [--quick] [--bsml-peer PATH]
    bayeskit bench --all [...]                      (the same, from a checkout)

Without ``--run`` the report is written from the results the benchmarks last saved. With it,
each model's benchmark script runs first (in its own process, its output kept under
``benchmarks/results/logs/``). Every table row is one case: our time, the peer's time, the
ratio (peer / ours: above 1 we are faster), what each reached (accuracy, objective,
agreement) and our compile time, apart. ``--device gpu`` runs the scripts with
``JAX_PLATFORMS=cuda`` and records the device; peers stay where they run (CPU, R, Octave).
``--quick`` passes each script its small settings where it has them. ``--bsml-peer`` is a
checkout of the BSML author's code (``mehmetgonen/bssml``), timed under Octave beside ours.

``--only`` chooses which scripts run; the report always has every model's section, each from
the results its script last saved. A peer the script skipped (R, Octave or hyppo not
installed) is marked so in the peer column beside our numbers. The exit status is 1 when a
script that ran failed (the report is still written), 130 when the run was interrupted
(Ctrl-C: the running script is stopped, the ones after it are not run, and the report is
written from the saved results), else 0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from statistics import geometric_mean

from bayeskit.core.xla import use_safe_cpu_scheduler

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

# model: (script, its result file, arguments for --quick)
SCRIPTS = {
    "bsml": ("bench_bsml.py", "bsml.json", ["--only", "small", "restarts", "memory"]),
    "sbmoe": ("bench_sbmoe.py", "sbmoe.json", ["--only", "fit"]),
    "sparse_bayes": ("bench_sparse_bayes.py", "sparse_bayes.json", ["--sets", "10", "--splits", "10"]),
    "lfrm": ("bench_lfrm.py", "lfrm.json", ["--sweeps", "20", "--numpy-sweeps", "1"]),
    "glasso": ("bench_glasso.py", "glasso.json", ["--sizes", "100", "500", "--peer-budget", "30"]),
    "hsic": ("bench_hsic.py", "hsic.json", ["--repeats", "1"]),
    "robpca": ("bench_robpca.py", "robpca.json", []),
    "sparse_pca": ("bench_sparse_pca.py", "sparse_pca.json", []),
    "estimators": ("bench_estimators.py", "estimators.json", ["--quick"]),
}
# sections titled otherwise than by the model's name
TITLES = {"estimators": "Estimators: second fit against the functional call"}


def _git(path: Path, *args: str) -> str:
    """The output of ``git ARGS -- path`` run beside ``path`` ("" where git or a repository is missing)."""
    try:
        out = subprocess.run(["git", *args, "--", path.name], capture_output=True, text=True, cwd=path.parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _committed(path: Path) -> str | None:
    """The date of the last commit of ``path`` when the file is as committed (a checkout's file
    times are those of the checkout); None when it has changes not committed (a fresh run's
    results), is untracked, or is outside a repository."""
    if _git(path, "status", "--porcelain"):
        return None
    return _git(path, "log", "-1", "--format=%cs") or None


def results_date(data: dict, path: Path) -> str:
    """When the results were measured: the date the script recorded, else the date of the
    file's last commit while the file is unchanged since, else its modification time. Where
    parts were rerun apart (``--only``), the range of their dates, each part named."""
    dates = data.get("dates", {})
    known = sorted(v for v in dates.values() if v[:1].isdigit())  # not "unrecorded"
    if len(set(dates.values())) > 1:
        span = " to ".join(dict.fromkeys([known[0], known[-1]])) if known else "unrecorded dates"
        return f"{span} ({', '.join(f'{k} {v}' for k, v in sorted(dates.items()))})"
    return ((known and known[0]) or data.get("date") or _committed(path)
            or datetime.date.fromtimestamp(path.stat().st_mtime).isoformat())


def row(case, ours=None, peer=None, peer_s=None, accuracy="", compile_s=None) -> dict:
    """One table row with the ratio peer_s / ours."""
    ratio = peer_s / ours if ours and peer_s else None
    return {"case": case, "ours": ours, "peer": peer, "peer_s": peer_s, "ratio": ratio, "accuracy": accuracy,
            "compile_s": compile_s}


def measured(entry) -> bool:
    """Whether a peer's entry holds its results (not absent, not marked skipped)."""
    return isinstance(entry, dict) and "skipped" not in entry


def absent(peer: str, entry=None) -> str:
    """The peer column of a peer that was not measured: its name and the script's reason."""
    reason = entry.get("skipped") if isinstance(entry, dict) else None
    return f"{peer}: skipped ({reason})" if reason else f"{peer}: not run"


def batch_row(case, batch_s, one_s) -> dict:
    """A batched call against one fit of ours: its cost in fits, not a peer ratio."""
    return row(case, batch_s, accuracy=f"costs {batch_s / one_s:.1f}x one fit ({one_s:.3g} s)")


def rows_bsml(d):
    out = []
    if "tmc" in d:
        t = d["tmc"]["bsml"]
        out.append(row("TMC2007-500, R = 22, 500 iterations, float64", t["train_seconds"], accuracy=f"Hamming {t['hamming_loss']:.4f}",
                       compile_s=t["compile_seconds"]))
        if "bsml_float32" in d["tmc"]:
            low = d["tmc"]["bsml_float32"]
            out.append(row("TMC2007-500, R = 22, 500 iterations, float32", low["train_seconds"],
                           accuracy=f"Hamming {low['hamming_loss']:.4f}", compile_s=low["compile_seconds"]))
    if "wide" in d:
        w = d["wide"]
        out.append(row(f"N = {w['n']}, D = {w['d']} (D > N), R = 6, 500 iterations: dense N x N form", w["dual_seconds"],
                       "the D x D form", w["primal_seconds"],
                       f"bound traces agree to {w.get('max_relative_trace_difference_dense', w['max_relative_trace_difference']):.0e}"))
        if "sparse_seconds" in w:
            out.append(row(f"N = {w['n']}, D = {w['d']} (D > N, 5% ones), R = 6, 500 iterations: sparse N x N form "
                           f"({w['pairs']} column pairs)", w["sparse_seconds"] + w["pairs_seconds"], "the D x D form",
                           w["primal_seconds"], f"bound traces agree to {w['max_relative_trace_difference_sparse']:.0e}"))
    for name, r in d.get("small", {}).items():
        ours, author = r["bsml"], r.get("author")
        out.append(row(f"{name}, R = 6, 500 iterations", ours["train_seconds"], "author's Matlab (Octave)" if author else "author's Matlab: not run",
                       author and author["train_seconds"],
                       f"Hamming {ours['hamming_loss']:.4f}" + (f" / {author['hamming_loss']:.4f}" if author else ""),
                       ours.get("compile_seconds")))
    for name, r in d.get("restarts", {}).items():
        out.append(batch_row(f"{name}: 8 vmapped restarts", r["eight_restarts_seconds"], r["one_fit_seconds"]))
    return out


def rows_sbmoe(d):
    """The cases of the last run, and any kept from an earlier one (another dtype), marked."""
    out = []
    runs = [c["run"] for c in d.get("cases", {}).values() if "run" in c]
    for _name, c in d.get("cases", {}).items():
        earlier = " (earlier run)" if runs and c.get("run") != max(runs) else ""
        if c.get("case") == "restarts":
            out.append(batch_row(f"4 vmapped restarts ({c['dtype']}){earlier}", c["batch_of_4_seconds"], c["one_fit_seconds"]))
        else:
            out.append(row(f"N = {c['n']}, {c['sweeps']} sweeps ({c['dtype']}){earlier}", c["seconds"],
                           accuracy=f"ELBO {c['final_elbo']:.1f}; {100 * c['fraction_of_gemm_peak']:.0f}% of GEMM peak; {c['peak_rss_mib']:.0f} MiB",
                           compile_s=c["compile_seconds"]))
    return out


def rows_sparse_bayes(d):
    out = []
    for noise, methods in d.get("batch", {}).items():
        if not isinstance(methods, dict):
            continue
        peer = methods.get("fastrvm")
        for m in ("RVM", "FLAP", "FLAP-sigma", "BLS"):
            if m in methods:
                r = methods[m]
                out.append(row(f"sinc, noise {noise}: {m} (per fit, vmapped)", r["ms_per_fit"] / 1e3,
                               "fastrvm" if peer else absent("fastrvm"), peer and peer["ms_per_fit"] / 1e3,
                               f"RMSE {r['rmse_mean']:.4f}" + (f" / {peer['rmse_mean']:.4f}" if peer else ""), r.get("compile_s")))
        if "RVM" in methods:
            k, ours = methods.get("kernlab"), methods["RVM"]
            reached = f"RMSE {ours['rmse_mean']:.4f}" + (f" / {k['rmse_mean']:.4f}" if k and k["rmse_mean"] is not None else "")
            out.append(row(f"sinc, noise {noise}: RVM vs kernlab rvm", ours["ms_per_fit"] / 1e3,
                           "R kernlab" if k else absent("R kernlab"), k and k["ms_per_fit"] / 1e3, reached))
    for n, r in d.get("large", {}).items():
        peer = "fastrvm_s" in r
        out.append(row(f"sinc, N = {n}: RVM", r["ours_s"], "fastrvm" if peer else absent("fastrvm"), r.get("fastrvm_s"),
                       f"RMSE {r['rmse']:.4f}" + (f" / {r['fastrvm_rmse']:.4f}" if peer else ""), r.get("compile_s")))
    if "diabetes" in d and "ours_bls" in d["diabetes"]:
        db = d["diabetes"]
        case = f"diabetes, {db['splits']} splits: BLS (per fit)"
        for peer, name in (("glmnet_cv", "R glmnet cv.glmnet"), ("sklearn_lassocv", "scikit-learn LassoCV")):
            if peer in db:
                out.append(row(case, db["ours_bls"]["s_per_fit"], name, db[peer]["s_per_fit"],
                               f"RMSE {db['ours_bls']['rmse_mean']:.2f} / {db[peer]['rmse_mean']:.2f}", db["ours_bls"].get("compile_s")))
            else:
                out.append(row(case, db["ours_bls"]["s_per_fit"], absent(name), accuracy=f"RMSE {db['ours_bls']['rmse_mean']:.2f}",
                               compile_s=db["ours_bls"].get("compile_s")))
    return out


def rows_lfrm(d):
    out = []
    for name, c in d.get("cases", {}).items():
        ours, numpy_ = c["ours_1_chain"], c["numpy_1_chain"]
        out.append(row(f"{name}: seconds per sweep, 1 chain", ours["seconds_per_sweep"], "NumPy Gibbs (same algorithm)",
                       numpy_["seconds_per_sweep"], f"ESS/s of the log joint {ours['ess_per_second']:.3f}", ours["compile_s"]))
        four = c["ours_4_chains"]
        out.append(row(f"{name}: seconds per chain-sweep, 4 vmapped chains", four["seconds_per_sweep"] / four["chains"],
                       "NumPy Gibbs (same algorithm)", numpy_["seconds_per_sweep"], compile_s=four["compile_s"]))
    return out


def rows_glasso(d):
    out = []
    for s in d.get("sizes", []):
        ours = s["bayeskit"]
        for peer in ("R glasso", "scikit-learn"):
            if measured(s.get(peer)):
                out.append(row(f"p = {s['p']}, alpha = {s['alpha']}", ours["seconds"], peer, s[peer]["seconds"],
                               f"KKT {ours['kkt']:.1e} / {s[peer].get('kkt', float('nan')):.1e}", ours.get("compile_seconds")))
            elif peer in s:
                out.append(row(f"p = {s['p']}, alpha = {s['alpha']}", ours["seconds"], absent(peer, s[peer]),
                               accuracy=f"KKT {ours['kkt']:.1e}", compile_s=ours.get("compile_seconds")))
    real = [r for r in d.get("real", {}).get("rows", []) if measured(r["R glasso"])]
    for r in (r for r in real if r["data"] == "breast cancer"):
        out.append(row(f"breast-cancer correlation (p = 30), alpha = {r['alpha']}, "
                       f"{'diagonal penalised' if r['penalize_diagonal'] else 'diagonal free'}", r["seconds"], "R glasso",
                       r["R glasso"]["seconds"], f"{r['n_iter']} iterations; objective gap {r['objective_gap']:.0e}"))
    for part, kind in (("real", "correlation"), ("raw", "raw covariance")):
        rows = d.get(part, {}).get("rows", [])
        for name in dict.fromkeys(r["data"] for r in rows):
            cases = [r for r in rows if r["data"] == name and measured(r["R glasso"])]
            peer = ("R glasso", geometric_mean([r["R glasso"]["seconds"] for r in cases])) if cases else (
                absent("R glasso", next(r for r in rows if r["data"] == name)["R glasso"]), None)
            cases = cases or [r for r in rows if r["data"] == name]
            top = (f"; glasso.fit at top level {geometric_mean([r['top_level_seconds'] for r in cases]):.3g} s"
                   if all("top_level_seconds" in r for r in cases) else "")
            out.append(row(f"{name} {kind} (p = {cases[0]['p']}), {len(cases)} cases, geometric mean",
                           geometric_mean([r["seconds"] for r in cases]), *peer,
                           f"at most {max(r['n_iter'] for r in cases)} iterations{top}"))
    path = d.get("path", {})
    for name in ("path, warm-started", "vmap over alphas"):
        if name in path:
            out.append(batch_row(f"{path['n_alphas']}-penalty path ({name}), p = {path['p']}", path[name]["seconds"],
                                 path["one fit"]["seconds"]))
    return out


def rows_hsic(d):
    out = []
    perm = d.get("permutation", {})
    for name in ("independent", "dependent"):
        if name in perm:
            ours = perm[name]["bayeskit"]
            hy = perm[name].get("hyppo", perm.get("hyppo"))  # a skipped hyppo is recorded once, for the whole part
            peer = ("hyppo", hy["ms_per_permutation"] / 1e3) if measured(hy) else (absent("hyppo", hy), None)
            out.append(row(f"permutation test, m = {perm['m']}, {name} (per permutation)", ours["ms_per_permutation"] / 1e3,
                           *peer, f"p {ours['p_value']:.3f}" + (f" / {hy['p_value']:.3f}" if measured(hy) else ""),
                           ours.get("compile_seconds")))
    for m, g in d.get("gamma", {}).items():
        name = next((k for k in g if k.startswith("hyppo") and isinstance(g[k], dict)), None)
        peer = (name, g[name]["seconds"]) if measured(g.get(name)) else (name and absent("hyppo", g[name]), None)
        out.append(row(f"gamma test, m = {m}", g["bayeskit"]["seconds"], *peer,
                       f"p {g['bayeskit']['p_value']:.3g}", g["bayeskit"].get("compile_seconds")))
    return out


def rows_robpca(d):
    out = []
    for r in d.get("robpca", []):
        if measured(r.get("rrcov")):
            out.append(row(f"ROBPCA {r['data']}", r["bayeskit"]["seconds"], "R rrcov PcaHubert", r["rrcov"]["seconds"],
                           f"largest angle {r['largest_angle_degrees']:.1f} deg, flags agree {100 * r['flag_agreement']:.0f}%",
                           r["bayeskit"].get("compile_seconds")))
        else:
            out.append(row(f"ROBPCA {r['data']}", r["bayeskit"]["seconds"], absent("R rrcov PcaHubert", r.get("rrcov")),
                           compile_s=r["bayeskit"].get("compile_seconds")))
        c = r.get("bayeskit_rrcov_conventions")
        if c:
            out.append(row(f"ROBPCA {r['data']}, conventions='rrcov'", c["seconds"], "R rrcov PcaHubert",
                           r["rrcov"]["seconds"], f"largest angle {c['largest_angle_degrees']:.2g} deg, eigenvalues within "
                           f"{100 * c['eigenvalues_relative']:.2g}%, flags agree {100 * c['flag_agreement']:.0f}%",
                           c.get("compile_seconds")))
    rep = d.get("replications")
    if rep:
        out.append(row(f"ROBPCA, {rep['n_replications']} vmapped replications (n = 100, p = 4)", rep["seconds"],
                       compile_s=rep.get("compile_seconds")))
    for m in d.get("mcd", []):
        for peer in ("R covMcd", "scikit-learn"):
            if measured(m.get(peer)):
                out.append(row(f"FAST-MCD {m['n']} x {m['p']}", m["bayeskit"]["seconds"], peer, m[peer]["seconds"],
                               f"raw log det {m['bayeskit']['raw_log_det']:.3f} / {m[peer]['raw_log_det']:.3f}",
                               m["bayeskit"].get("compile_seconds")))
            elif peer in m:
                out.append(row(f"FAST-MCD {m['n']} x {m['p']}", m["bayeskit"]["seconds"], absent(peer, m[peer]),
                               accuracy=f"raw log det {m['bayeskit']['raw_log_det']:.3f}", compile_s=m["bayeskit"].get("compile_seconds")))
    if not measured(d.get("small", {})):
        out.append(row("ROBPCA and FAST-MCD on small real data sets", peer=absent("R rrcov and robustbase", d["small"])))
    small = d.get("small", {}).get("rows", [])
    for method, ours, peer, peer_key, what in (("robpca", "seconds", "R rrcov PcaHubert", "rrcov_seconds", "ROBPCA (k chosen)"),
                                               ("mcd", "seconds", "R robustbase covMcd", "covMcd_seconds", "FAST-MCD")):
        if small:
            out.append(row(f"{what} on {len(small)} small real data sets (n = {min(r['n'] for r in small)}-"
                           f"{max(r['n'] for r in small)}), geometric mean per call", geometric_mean([r[method][ours] for r in small]),
                           peer, geometric_mean([r[method][peer_key] for r in small]), "R's conventions"))
    return out


def rows_sparse_pca(d):
    out = []
    if "large" in d:
        lg = d["large"]
        out.append(row(f"{lg['shape'][0]} x {lg['shape'][1]} CSR, 5 components of cardinality 5", lg["seconds"],
                       accuracy=f"planted topics recovered {lg['topics_recovered']}/5"))
    if "sklearn" in d:
        s = d["sklearn"]
        out.append(row(f"{s['shape'][0]} x {s['shape'][1]}, one component of cardinality 5", s["bayeskit"]["seconds"],
                       "scikit-learn SparsePCA (one fit at the found alpha)", s["scikit-learn"]["fit_seconds"],
                       f"variance {s['bayeskit']['variance']:.2f} / {s['scikit-learn']['variance']:.2f}"))
    return out


def rows_estimators(d):
    """One row per estimator and size: the second fit (new data of the same shapes, new float
    hyperparameters; median) against the functional call it wraps on the same data (median,
    after a warm-up). The functional call stands where a peer does, so ``ratio`` is functional /
    estimator; the first fit (compilation included) stands where compile time does."""
    out = []
    for c in d.get("cases", []):
        case = f"{c['estimator']}, {c['size']}" + (f": {c['problem']}" if c.get("problem") else "")
        if c.get("kept_from") and c["kept_from"] != d.get("date"):
            case += f" (run of {c['kept_from']})"
        if "error" in c:
            out.append({**row(case, accuracy=f"failed: {c['error']}"), "error": c["error"]})
            continue
        r = row(case, c["second_fit_s"], c["functional"], c["functional_s"], compile_s=c["first_fit_s"])
        iters = c.get("n_iter", {})
        r.update(traces=c["second_fit_traces"], compilations=c["second_fit_compilations"], target_s=c["target_s"],
                 meets_target=c["meets_target"], repeats=c.get("repeats"), traced=c.get("second_fit_traced", {}),
                 iterations=(iters.get("estimator"), iters.get("functional")), same_iterations=c.get("same_iterations", True))
        out.append(r)
    return out


def table_estimators(rows, data) -> list[str]:
    """The estimators' own columns: first fit, second fit, functional call, their ratio, the
    traces and compilations in the second fit, and whether the target holds."""
    quick = " Quick run (`--quick`): small sizes only." if data.get("quick") else ""
    lines = [f"Second fit: a new estimator on new data of the same shapes, with new values of the continuous "
             f"hyperparameters, median of {data.get('repeats', '?')}; functional call: the call the estimator wraps on "
             f"the same data and settings, after a warm-up. Target: {data.get('target', 'second fit <= 1.5 x functional call + 5 ms')}."
             f"{quick}",
             "", "| estimator, size: problem | first fit | second fit | functional call | second / functional | traces / compilations "
             "in the second fit | target |", "|---|---|---|---|---|---|---|"]
    met = failed = 0
    for r in rows:
        if "error" in r:
            failed += 1
            lines.append(f"| {r['case']} | — | — | — | — | — | {r['accuracy'].replace('|', '/')} |")
            continue
        met += r["meets_target"]
        ratio = r["ours"] / r["peer_s"] if r["peer_s"] else None
        ours_iter, their_iter = r["iterations"]
        differ = "" if r["same_iterations"] else f" (iterations {ours_iter} / {their_iter})"
        traced = ", ".join(f"{name} x{n}" for name, n in list(r["traced"].items())[:3])
        lines.append(f"| {r['case']} | {fmt(r['compile_s'])} | {fmt(r['ours'])} | {fmt(r['peer_s'])} ({r['peer']}) | "
                     f"{'—' if ratio is None else f'{ratio:.2f}x'}{differ} | {r['traces']} / {r['compilations']}"
                     f"{f' ({traced})' if traced else ''} | {'met' if r['meets_target'] else '**missed**'} "
                     f"(<= {fmt(r['target_s'])}) |")
    return lines + ["", f"Target met in {met} of {len(rows) - failed} measured cases" + (f" ({failed} failed to run)." if failed else ".")]


EXTRACT = {name: globals()[f"rows_{name}"] for name in SCRIPTS}
# sections with their own table (rows, the results file's data) -> lines; the others use the common one
TABLES = {"estimators": table_estimators}


def run_benchmark(name: str, device: str, quick: bool, bsml_peer: str | None = None) -> dict:
    """Run one model's benchmark script in its own process; its output goes to a log."""
    script, _, quick_args = SCRIPTS[name]
    extra = ["--peer", bsml_peer] if name == "bsml" and bsml_peer else []
    env = {**os.environ, "JAX_PLATFORMS": "cuda" if device == "gpu" else "cpu"}
    use_safe_cpu_scheduler(env)
    (RESULTS / "logs").mkdir(parents=True, exist_ok=True)
    log = RESULTS / "logs" / f"{name}.log"
    t = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.call([sys.executable, str(HERE / script), *(quick_args if quick else []), *extra], stdout=f,
                             stderr=subprocess.STDOUT, env=env, cwd=HERE.parent)
    return {"returncode": rc, "seconds": time.perf_counter() - t, "log": _shown(log)}


def _shown(path: Path) -> str:
    """The path relative to the checkout when it is inside it."""
    return str(path.relative_to(HERE.parent)) if path.is_relative_to(HERE.parent) else str(path)


def machine(device: str) -> str:
    import jax

    devices = ", ".join(sorted({d.device_kind for d in jax.devices()}))
    return (f"{platform.platform()}; {os.cpu_count()} CPU cores; Python {platform.python_version()}; "
            f"jax {jax.__version__}; devices: {devices} ({device} run)")


def fmt(x, unit=" s"):
    if x is None:
        return "—"
    return f"{x:.3g}{unit}"


def report(names, runs: dict, device: str) -> str:
    lines = ["# bayeskit performance report", "",
             f"Written {datetime.date.today().isoformat()} by `benchmarks/report.py`.", "",
             f"Machine: {machine(device)}.", "",
             "Ratio = peer's time / our time (above 1: bayeskit is faster). Our times exclude "
             "compilation, which is listed apart. Each model's numbers come from one run of its "
             "benchmark script, peers included; the script's docstring says what is timed.", ""]
    for name in names:
        script, result_file, _ = SCRIPTS[name]
        lines += [f"## {TITLES.get(name, name)} (`benchmarks/{script}`)", ""]
        run = runs.get(name)
        if run:
            failed = " **failed**: the results below are those it last saved" if run["returncode"] else ""
            lines += [f"Run now: exit status {run['returncode']}{failed}, {run['seconds']:.0f} s, log `{run['log']}`.", ""]
        path = RESULTS / result_file
        if not path.exists():
            lines += [f"No results: `{_shown(path)}` is missing (run `python benchmarks/{script}`).", ""]
            continue
        data = json.loads(path.read_text())
        where = data.get("machine", "an unrecorded machine")
        where = where.get("platform", str(where)) if isinstance(where, dict) else where
        lines += [f"Results of {results_date(data, path)} on {where}.", ""]
        try:
            rows = EXTRACT[name](data)
        except (KeyError, TypeError, ValueError) as e:
            lines += [f"The results file has an unexpected layout ({type(e).__name__}: {e}).", ""]
            continue
        if name in TABLES:
            lines += TABLES[name](rows, data) + [""]
            continue
        lines += ["| case | ours | peer | peer's time | ratio | reached (ours / peer) | compile |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}x"
            lines.append(f"| {r['case']} | {fmt(r['ours'])} | {r['peer'] or '—'} | {fmt(r['peer_s'])} | {ratio} | "
                         f"{r['accuracy'] or '—'} | {fmt(r['compile_s'])} |")
        lines.append("")
    return "\n".join(lines + scaling_section())


def scaling_section() -> list[str]:
    """The fitted slopes of ``benchmarks/scaling.py`` beside the stated complexities."""
    path = RESULTS / "scaling.json"
    if not path.exists():
        return ["## Scaling", "", "No results: run `python benchmarks/scaling.py`.", ""]
    data = json.loads(path.read_text())
    data["dates"] = {name: c["date"] for name, c in data["cases"].items() if "date" in c}  # cases rerun apart (--only)
    lines = ["## Scaling (`benchmarks/scaling.py`, `results/scaling.png`)", "",
             f"Results of {results_date(data, path)} on {data['machine']}. Log-log slopes over the largest three sizes; "
             "memory is XLA's planned bytes of the compiled call.", "",
             "| case | sizes | time slope (stated) | memory slope (stated) | largest: time, memory |", "|---|---|---|---|---|"]
    for name, c in data["cases"].items():
        last = c["rows"][-1]
        flag = lambda steeper: " **steeper**" if steeper else ""  # noqa: E731
        lines.append(f"| {name} | {', '.join(str(r['size']) for r in c['rows'])} | {c['time_slope']:.2f} "
                     f"({c['stated_time_exponent']}){flag(c['time_steeper'])} | {c['memory_slope']:.2f} "
                     f"({c['stated_memory_exponent']}){flag(c['memory_steeper'])} | {last['seconds']:.3g} s, "
                     f"{last['xla_bytes'] / 2**20:.1f} MiB |")
    return lines + [""]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", action="store_true", help="run the benchmark scripts first")
    parser.add_argument("--only", nargs="+", choices=list(SCRIPTS), default=list(SCRIPTS),
                        help="run only these models' scripts (the report keeps every model's section)")
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--quick", action="store_true", help="the scripts' small settings")
    parser.add_argument("--bsml-peer", metavar="PATH", help="the BSML author's code (mehmetgonen/bssml), run under Octave")
    parser.add_argument("--out", default=str(RESULTS / "REPORT.md"))
    args = parser.parse_args(argv)
    if args.device == "gpu":
        os.environ["JAX_PLATFORMS"] = "cuda"
    args.only = list(dict.fromkeys(args.only))
    on_interrupt = signal.getsignal(signal.SIGINT)
    try:
        runs = run_all(args) if args.run else {}
        text = report(list(SCRIPTS), runs, args.device)
        Path(args.out).write_text(text + "\n")
    finally:
        signal.signal(signal.SIGINT, on_interrupt)
    print(f"wrote {args.out}")
    failed = [name for name, run in runs.items() if run["returncode"] != 0]
    if failed:
        print(f"failed: {', '.join(failed)} (see their logs under {_shown(RESULTS / 'logs')})", file=sys.stderr)
    if args.run and len(runs) < len(args.only):
        print(f"interrupted: {', '.join(args.only[len(runs):])} not run to the end; the report gives the results saved earlier",
              file=sys.stderr)
        return 130
    return 1 if failed else 0


def run_all(args) -> dict:
    """Run the chosen models' scripts one after another: {model: its run}. A Ctrl-C stops the
    running script and runs no more; the runs that ended are returned, for the report, and
    further Ctrl-Cs are ignored until it is written."""
    runs = {}
    try:
        for name in args.only:
            print(f"== {name}", flush=True)
            runs[name] = run_benchmark(name, args.device, args.quick, args.bsml_peer)
            print(f"   exit {runs[name]['returncode']} after {runs[name]['seconds']:.0f} s", flush=True)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C does not cut the report short
    return runs


if __name__ == "__main__":
    sys.exit(main())

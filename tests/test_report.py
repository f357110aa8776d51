"""benchmarks/report.py: the report's rows come from the benchmarks' result files, ratios
are peer / ours, a missing or malformed result says so instead of failing, a skipped peer
is marked beside our rows, and the run's exit status says whether every script ran. The
benchmark scripts record their date and keep the parts of their results not run now."""

import datetime
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def report(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("report", ROOT / "benchmarks" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    return module


def test_rows_and_ratios(report, tmp_path):
    glasso = {"date": "2026-01-01", "machine": "test", "sizes": [
        {"p": 100, "alpha": 0.1, "bayeskit": {"seconds": 0.5, "compile_seconds": 1.0, "kkt": 1e-6},
         "R glasso": {"seconds": 2.0, "kkt": 2e-6}}],
        "path": {"p": 100, "n_alphas": 20, "one fit": {"seconds": 0.1}, "vmap over alphas": {"seconds": 0.6}},
        "real": {"rows": [{"data": "breast cancer", "p": 30, "alpha": 0.1, "penalize_diagonal": False, "seconds": 0.004,
                           "n_iter": 9, "objective_gap": 1e-9, "R glasso": {"seconds": 0.001}},
                          {"data": "digits", "p": 61, "alpha": 0.1, "penalize_diagonal": True, "seconds": 0.02, "n_iter": 7,
                           "objective_gap": 1e-9, "R glasso": {"seconds": 0.005}},
                          {"data": "digits", "p": 61, "alpha": 0.3, "penalize_diagonal": True, "seconds": 0.005, "n_iter": 4,
                           "objective_gap": 1e-9, "R glasso": {"seconds": 0.005}}]},
        "raw": {"rows": [{"data": "wine", "p": 13, "alpha": 0.02, "penalize_diagonal": False, "seconds": 0.001, "n_iter": 5,
                          "objective_gap": 1e-9, "R glasso": {"seconds": 0.003}}]}}
    (tmp_path / "glasso.json").write_text(json.dumps(glasso))
    (tmp_path / "hsic.json").write_text(json.dumps({"permutation": {}}))
    (tmp_path / "robpca.json").write_text(json.dumps({"robpca": [{"data": "x", "rrcov": {}}]}))
    text = report.report(["glasso", "hsic", "robpca", "lfrm"], {}, "cpu")
    assert "| p = 100, alpha = 0.1 | 0.5 s | R glasso | 2 s | 4.00x | KKT 1.0e-06 / 2.0e-06 | 1 s |" in text
    assert "costs 6.0x one fit" in text
    assert ("| breast-cancer correlation (p = 30), alpha = 0.1, diagonal free | 0.004 s | R glasso | 0.001 s | 0.25x | "
            "9 iterations; objective gap 1e-09 |") in text
    assert "| digits correlation (p = 61), 2 cases, geometric mean | 0.01 s | R glasso | 0.005 s | 0.50x | at most 7 iterations |" in text
    assert "| wine raw covariance (p = 13), 1 cases, geometric mean | 0.001 s | R glasso | 0.003 s | 3.00x | at most 5 iterations |" in text
    assert "Results of 2026-01-01 on test." in text
    assert "unexpected layout" in text  # robpca's row lacks its fields
    assert "`" in text and "lfrm.json` is missing" in text


def test_every_model_has_a_script_and_an_extractor(report):
    for name, (script, _, _) in report.SCRIPTS.items():
        assert (ROOT / "benchmarks" / script).exists()
        assert callable(report.EXTRACT[name])


def test_cli_writes_the_report(tmp_path):
    from bayeskit.cli import main

    with pytest.raises(SystemExit):
        main(["bench", "--report", "--benchmarks", str(tmp_path)])  # no report.py there


@pytest.fixture
def script(monkeypatch):
    """A loader of a benchmark script as a module, its environment changes undone after the test."""
    monkeypatch.setenv("BAYESKIT_COMPILATION_CACHE", os.environ.get("BAYESKIT_COMPILATION_CACHE", "1"))

    def load(name):
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load


def test_a_skipped_peer_leaves_our_rows_with_the_peer_marked(report, tmp_path):
    """The layouts the scripts write when hyppo, R or fastrvm is missing give our rows, the
    peer column saying it was skipped and why, instead of "unexpected layout"."""
    ours = {"p_value": 0.4, "ms_per_permutation": 1.0, "seconds": 1.0, "compile_seconds": 2.0, "raw_log_det": -6.0}
    no_hyppo = {"skipped": "hyppo is not installed (pip install hyppo)"}
    no_r = {"skipped": "Rscript is not on PATH (bash benchmarks/setup_r_peers.sh)"}
    results = {
        "hsic": {"permutation": {"m": 1000, "independent": {"bayeskit": ours}, "dependent": {"bayeskit": ours}, "hyppo": no_hyppo},
                 "gamma": {"1000": {"bayeskit": ours, "hyppo": no_hyppo}, "10000": {"bayeskit": ours}}},
        "robpca": {"robpca": [{"data": "Glass", "bayeskit": ours, "rrcov": no_r}],
                   "mcd": [{"n": 1000, "p": 10, "bayeskit": ours, "scikit-learn": ours, "R covMcd": no_r}], "small": no_r},
        "glasso": {"sizes": [{"p": 100, "alpha": 0.1, "bayeskit": {"seconds": 0.5, "kkt": 1e-5}, "scikit-learn": {"seconds": 2.0},
                              "R glasso": no_r}],
                   "real": {"rows": [{"data": "wine", "p": 13, "alpha": 0.1, "penalize_diagonal": False, "seconds": 0.001,
                                      "n_iter": 5, "R glasso": no_r}]}},
        "sparse_bayes": {"batch": {"0.1": {"RVM": {"ms_per_fit": 2.0, "rmse_mean": 0.04}}, "table_run_seconds": 1.0},
                         "large": {"1000": {"ours_s": 0.03, "rmse": 0.008}},
                         "diabetes": {"splits": 10, "ours_bls": {"s_per_fit": 3e-4, "rmse_mean": 55.5},
                                      "sklearn_lassocv": {"s_per_fit": 0.25, "rmse_mean": 55.2}}},
    }
    for name, data in results.items():
        (tmp_path / f"{name}.json").write_text(json.dumps({"date": "2026-01-01", **data}))
    text = report.report(list(results), {}, "cpu")
    assert "unexpected layout" not in text
    assert ("| permutation test, m = 1000, independent (per permutation) | 0.001 s | hyppo: skipped (hyppo is not installed "
            "(pip install hyppo)) | — | — | p 0.400 | 2 s |") in text
    assert "| gamma test, m = 1000 | 1 s | hyppo: skipped (hyppo is not installed (pip install hyppo)) |" in text
    assert "| ROBPCA Glass | 1 s | R rrcov PcaHubert: skipped (Rscript is not on PATH" in text
    assert "| FAST-MCD 1000 x 10 | 1 s | R covMcd: skipped (Rscript" in text and "| FAST-MCD 1000 x 10 | 1 s | scikit-learn | 1 s |" in text
    assert "| ROBPCA and FAST-MCD on small real data sets | — | R rrcov and robustbase: skipped (Rscript" in text
    assert "| p = 100, alpha = 0.1 | 0.5 s | R glasso: skipped (Rscript" in text
    assert "| wine correlation (p = 13), 1 cases, geometric mean | 0.001 s | R glasso: skipped (Rscript" in text
    assert "| sinc, noise 0.1: RVM (per fit, vmapped) | 0.002 s | fastrvm: not run |" in text
    assert "| sinc, N = 1000: RVM | 0.03 s | fastrvm: not run | — | — | RMSE 0.0080 |" in text


def test_the_diabetes_rows_give_the_number_of_splits_run(report, tmp_path):
    bls = {"s_per_fit": 3e-4, "rmse_mean": 55.5}
    (tmp_path / "sparse_bayes.json").write_text(json.dumps({"diabetes": {"splits": 10, "ours_bls": bls, "glmnet_cv": bls}}))
    text = report.report(["sparse_bayes"], {}, "cpu")
    assert "| diabetes, 10 splits: BLS (per fit) |" in text and "100 splits" not in text


def _results(tmp_path):
    (tmp_path / "glasso.json").write_text(json.dumps({"date": "2026-01-01", "sizes": [
        {"p": 100, "alpha": 0.1, "bayeskit": {"seconds": 0.5, "kkt": 1e-5}, "R glasso": {"seconds": 2.0, "kkt": 1e-5}}]}))
    (tmp_path / "lfrm.json").write_text(json.dumps({"date": "2026-01-01", "cases": {}}))


def test_only_chooses_what_runs_and_the_report_keeps_every_model(report, tmp_path, monkeypatch):
    """``--only glasso`` runs glasso alone; lfrm's section stays, from its saved results."""
    _results(tmp_path)
    ran = []
    monkeypatch.setattr(report, "run_benchmark", lambda name, *a: ran.append(name) or {"returncode": 0, "seconds": 1.0, "log": "x"})
    out = tmp_path / "REPORT.md"
    assert report.main(["--run", "--only", "glasso", "--out", str(out)]) == 0
    text = out.read_text()
    assert ran == ["glasso"]
    assert "## glasso" in text and "## lfrm" in text and "## hsic" in text and "## Scaling" in text
    assert report.main(["--only", "lfrm", "--out", str(out)]) == 0  # without --run: the whole report
    assert "## glasso" in out.read_text()


def test_a_failed_script_fails_the_run_and_the_report_is_still_written(report, tmp_path, monkeypatch, capsys):
    _results(tmp_path)
    codes = {"glasso": -15, "lfrm": 0}
    monkeypatch.setattr(report, "run_benchmark", lambda name, *a: {"returncode": codes[name], "seconds": 1.0, "log": "x"})
    out = tmp_path / "REPORT.md"
    assert report.main(["--run", "--only", "glasso", "lfrm", "--out", str(out)]) == 1
    assert "Run now: exit status -15 **failed**" in out.read_text() and "failed: glasso" in capsys.readouterr().err
    assert report.main(["--run", "--only", "lfrm", "--out", str(out)]) == 0


def test_an_interrupted_run_writes_the_report_and_exits_130(report, tmp_path, monkeypatch, capsys):
    """Ctrl-C during a script: no script after it runs, the report is written from the saved
    results, the exit status is 130, and the caller's Ctrl-C handler is back afterwards."""
    _results(tmp_path)

    def run(name, *a):
        if name == "lfrm":
            raise KeyboardInterrupt
        return {"returncode": 0, "seconds": 1.0, "log": "x"}

    monkeypatch.setattr(report, "run_benchmark", run)
    handler = signal.getsignal(signal.SIGINT)
    out = tmp_path / "REPORT.md"
    assert report.main(["--run", "--only", "glasso", "lfrm", "hsic", "--out", str(out)]) == 130
    assert signal.getsignal(signal.SIGINT) is handler
    assert "## lfrm" in out.read_text() and "lfrm, hsic not run to the end" in capsys.readouterr().err


def test_the_date_of_uncommitted_results_is_their_modification_time(report, tmp_path):
    """Results without a recorded date are dated by their last commit while unchanged since,
    and by their modification time once a fresh run has changed them."""
    git = shutil.which("git")
    if git is None:
        pytest.skip("no git")
    path = tmp_path / "lfrm.json"
    path.write_text("{}")
    env = {**os.environ, "GIT_AUTHOR_DATE": "2020-01-02T12:00:00", "GIT_COMMITTER_DATE": "2020-01-02T12:00:00"}
    for args in (["init", "-q"], ["add", "lfrm.json"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "r"]):
        subprocess.run([git, *args], cwd=tmp_path, env=env, check=True, capture_output=True)
    assert report.results_date({}, path) == "2020-01-02"
    path.write_text('{"cases": {}}')
    os.utime(path, (datetime.datetime(2024, 5, 6, 12).timestamp(),) * 2)
    assert report.results_date({}, path) == "2024-05-06"
    assert report.results_date({"date": "2025-01-01"}, path) == "2025-01-01"
    assert report.results_date({"dates": {"a": "2025-01-01", "b": "unrecorded"}}, path) == "2025-01-01 (a 2025-01-01, b unrecorded)"


def test_lfrm_and_sparse_bayes_record_their_date_and_keep_the_parts_not_run(script, tmp_path, monkeypatch):
    """A run of one data set (part) keeps the others' entries, each dated; entries of a file
    from before the dates were kept are "unrecorded"."""
    lfrm = script("bench_lfrm")
    path = tmp_path / "lfrm.json"
    path.write_text(json.dumps({"cases": {"kinship": {"old": 1}, "nips234": {"old": 2}}, "paper_scale_nips234": {"old": 3}}))
    timing = {"seconds_per_sweep": 1.0, "ess_per_second": 1.0, "compile_s": 1.0}
    monkeypatch.setattr(lfrm, "problem", lambda name: (None, None))
    monkeypatch.setattr(lfrm, "time_ours", lambda data, hp, sweeps, chains: timing)
    monkeypatch.setattr(lfrm, "time_numpy", lambda data, hp, sweeps: timing)
    lfrm.main(["--only", "kinship", "--out", str(path)])
    saved = json.loads(path.read_text())
    today = time.strftime("%Y-%m-%d")
    assert saved["date"] == today and saved["cases"]["nips234"] == {"old": 2} and saved["paper_scale_nips234"] == {"old": 3}
    assert saved["cases"]["kinship"]["speedup_1_chain"] == 1.0
    assert saved["dates"] == {"kinship": today, "nips234": "unrecorded", "paper_scale_nips234": "unrecorded"}

    sparse = script("bench_sparse_bayes")
    path = tmp_path / "sparse_bayes.json"
    path.write_text(json.dumps({"date": "2026-01-01", "batch": {"old": 1}, "large": {"old": 2}, "diabetes": {"old": 3}}))
    monkeypatch.setattr(sparse, "diabetes", lambda splits: {"splits": splits})
    sparse.main(["--only", "diabetes", "--splits", "10", "--out", str(path)])
    saved = json.loads(path.read_text())
    assert saved["batch"] == {"old": 1} and saved["large"] == {"old": 2} and saved["diabetes"] == {"splits": 10}
    assert saved["dates"] == {"batch": "2026-01-01", "large": "2026-01-01", "diabetes": today} and saved["date"] == today


def test_sbmoe_records_its_date(script, tmp_path, monkeypatch):
    sbmoe = script("bench_sbmoe")
    case = {"case": "fit", "seconds": 1.0, "compile_seconds": 1.0, "peak_rss_mib": 1.0, "achieved_gflops_per_s": 1.0,
            "fraction_of_gemm_peak": 0.5, "machine_gemm_gflops_per_s": 2.0}
    monkeypatch.setattr(sbmoe.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, json.dumps(case), ""))
    path = tmp_path / "sbmoe.json"
    path.write_text(json.dumps({"cases": {"fit_float64": {"case": "fit"}}}))
    sbmoe.main(["--only", "fit", "--out", str(path)])
    saved = json.loads(path.read_text())
    today = time.strftime("%Y-%m-%d")
    assert saved["date"] == today and saved["dates"] == {"fit_float64": "unrecorded", "fit_float32": today}


def test_hsic_keeps_the_parts_not_run(script, tmp_path, monkeypatch):
    hsic = script("bench_hsic")
    path = tmp_path / "hsic.json"
    path.write_text(json.dumps({"date": "2026-01-01", "rff": {"old": 1}, "dhsic": {"skipped": "old"}}))
    monkeypatch.setattr(hsic, "dhsic_part", lambda: {"skipped": "new"})
    hsic.main(["--only", "dhsic", "--out", str(path)])
    saved = json.loads(path.read_text())
    assert saved["rff"] == {"old": 1} and saved["dhsic"] == {"skipped": "new"}
    assert saved["dates"] == {"rff": "2026-01-01", "dhsic": time.strftime("%Y-%m-%d")}


def test_robpca_without_r_keeps_the_saved_part_measured_against_r(script, tmp_path, monkeypatch, capsys):
    """Without R, ``--only small`` neither measures nor replaces the saved R-measured part."""
    robpca = script("bench_robpca")
    monkeypatch.setattr(robpca.peers_r, "r_missing", lambda package=None: "Rscript is not on PATH")
    monkeypatch.setattr(robpca, "small", lambda: pytest.fail("measured without R"))
    path = tmp_path / "robpca.json"
    text = json.dumps({"date": "2026-01-01", "small": {"rows": [{"data": "hbk"}]}, "dates": {"small": "2026-01-01"}})
    path.write_text(text)
    robpca.main(["--only", "small", "--out", str(path)])
    assert path.read_text() == text
    assert "small: not run (Rscript is not on PATH); its saved entry, measured against R, is kept" in capsys.readouterr().out
    path.write_text(json.dumps({"date": "2026-01-01", "small": {"skipped": "Rscript is not on PATH"}}))
    assert robpca.kept_without_r(path, ["small", "replications"]) == {}  # nothing of R's to keep: it runs


def test_glasso_without_r_keeps_the_saved_parts_measured_against_r(script, tmp_path, monkeypatch, capsys):
    """Without R, a size or the real matrices measured against R glasso are not rerun (ours
    alone would replace R's numbers); a size without R's numbers runs."""
    glasso = script("bench_glasso")
    monkeypatch.setattr(glasso.peers_r, "r_missing", lambda package=None: "Rscript is not on PATH")
    ran = []
    monkeypatch.setattr(glasso, "compare", lambda p, budget: ran.append(p) or {
        "p": p, "bayeskit": {"seconds": 1.0, "n_iter": 3}, "scikit-learn": {"seconds": 2.0, "ratio": 2.0},
        "R glasso": {"skipped": "Rscript is not on PATH"}})
    monkeypatch.setattr(glasso, "real_part", lambda *a, **k: pytest.fail("the real matrices measured without R"))
    path = tmp_path / "glasso.json"
    r_row = {"p": 100, "bayeskit": {"seconds": 0.1}, "R glasso": {"seconds": 0.2}}
    path.write_text(json.dumps({"sizes": [r_row], "real": {"rows": [{"R glasso": {"seconds": 0.01}}]}}))
    glasso.main(["--sizes", "100", "500", "--real", "--no-path", "--out", str(path)])
    saved = json.loads(path.read_text())
    assert ran == [500] and saved["sizes"][0] == r_row and saved["real"] == {"rows": [{"R glasso": {"seconds": 0.01}}]}
    assert "p = 100: not run (Rscript is not on PATH)" in capsys.readouterr().out


def test_hsic_without_hyppo_keeps_the_saved_parts_measured_against_it(script, tmp_path, monkeypatch, capsys):
    hsic = script("bench_hsic")
    monkeypatch.setattr(hsic, "hyppo_or_reason", lambda: (None, "hyppo is not installed (pip install hyppo)"))
    monkeypatch.setattr(hsic, "permutation_part", lambda repeats: pytest.fail("measured without hyppo"))
    path = tmp_path / "hsic.json"
    text = json.dumps({"permutation": {"independent": {"hyppo": {"seconds": 1.0}}}, "dates": {"permutation": "2026-01-01"}})
    path.write_text(text)
    hsic.main(["--only", "permutation", "--out", str(path)])
    assert path.read_text() == text
    assert "permutation: not run (hyppo is not installed" in capsys.readouterr().out


def test_sparse_bayes_without_a_peer_keeps_the_parts_measured_against_it(script, tmp_path, monkeypatch, capsys):
    sparse = script("bench_sparse_bayes")
    monkeypatch.setattr(sparse, "missing_peers", lambda: {"kernlab": "Rscript is not on PATH"})
    monkeypatch.setattr(sparse, "batch", lambda sets: pytest.fail("measured without kernlab"))
    monkeypatch.setattr(sparse, "diabetes", lambda splits: {"splits": splits})
    path = tmp_path / "sparse_bayes.json"
    batch = {"0.1": {"RVM": {"kernlab_over_ours": 9.9}, "kernlab": {"ms_per_fit": 30.0}}}
    path.write_text(json.dumps({"date": "2026-01-01", "batch": batch, "diabetes": {"glmnet_cv": {}}}))
    sparse.main(["--only", "batch", "diabetes", "--splits", "5", "--out", str(path)])
    saved = json.loads(path.read_text())
    assert saved["batch"] == batch and saved["diabetes"] == {"splits": 5}  # glmnet is not missing: diabetes ran
    assert "batch: not run (Rscript is not on PATH)" in capsys.readouterr().out


def test_scaling_makes_its_folder_and_keeps_the_cases_not_run(script, tmp_path, monkeypatch):
    import jax
    import jax.numpy as jnp

    scaling = script("scaling")
    tiny = (lambda s: (jax.jit(lambda x: x * 2), (jnp.ones(s),)), [1, 2, 3], 1, 1)
    monkeypatch.setattr(scaling, "CASES", {"A vs n": tiny, "B vs n": tiny})
    out = tmp_path / "new" / "scaling.json"
    assert scaling.main(["--only", "B vs n", "--repeats", "1", "--out", str(out)]) == 0
    assert scaling.main(["--only", "A vs n", "--repeats", "1", "--out", str(out)]) == 0
    saved = json.loads(out.read_text())
    assert list(saved["cases"]) == ["A vs n", "B vs n"] and out.with_suffix(".png").exists()
    assert {c["date"] for c in saved["cases"].values()} == {time.strftime("%Y-%m-%d")}

"""benchmarks/report.py: the report's rows come from the benchmarks' result files, ratios
are peer / ours, and a missing or malformed result says so instead of failing."""

import importlib.util
import json
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

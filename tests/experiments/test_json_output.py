"""The experiments' JSON is standard JSON (RFC 8259): a number that is not finite, such as
the infinite R-hat of restarts that froze, is written as null, which strict parsers read,
and a resumed run reads it back as "not defined"."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bayeskit.experiments import common, lfrm_link_prediction

ROOT = Path(__file__).resolve().parents[2]


def strict(text: str):
    """``text`` parsed as standard JSON: NaN, Infinity and -Infinity refused."""
    return json.loads(text, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))


def test_numbers_that_are_not_finite_are_written_as_null(tmp_path):
    payload = {"r_hat": math.inf, "nan": float("nan"), "numpy": np.float64(-np.inf), "float32": np.float32(np.inf),
               "list": [1.5, np.nan, (2, math.inf)], "finite": np.float32(0.5), "count": 3, "nested": {"x": -math.inf}}
    path = common.write_json(tmp_path, "exp", payload)
    assert strict(path.read_text()) == {"r_hat": None, "nan": None, "numpy": None, "float32": None, "list": [1.5, None, [2, None]],
                                        "finite": 0.5, "count": 3, "nested": {"x": None}}


def test_a_resumed_run_counts_a_null_r_hat_as_frozen():
    split = {"IRM": {"auc_mean": 0.9, "seconds": 1.0, "r_hat_log_joint": None}}
    moved = {"IRM": {"auc_mean": 0.8, "seconds": 1.0, "r_hat_log_joint": 1.1}}
    summary = lfrm_link_prediction.summarise({"case": {"paper": {}, "splits": {"0": split, "1": moved}}})["case"]["IRM"]
    assert summary["frozen_splits"] == 1 and summary["r_hat_defined_splits"] == 1 and summary["r_hat_log_joint_max"] == 1.1


def test_the_committed_reproduction_results_are_standard_json():
    files = sorted((ROOT / "benchmarks" / "results" / "reproduce").glob("*.json"))
    assert files
    for path in files:
        strict(path.read_text())

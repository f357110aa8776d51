"""The example notebooks run end to end (at a small size) and are stored without outputs."""

import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")  # provides the "python3" kernel even when no kernelspec is registered
pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "bsml.ipynb"
SMALL = {"N_ITER": 20}


def _parameters_cell(nb):
    cells = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1, "the notebook needs exactly one cell tagged 'parameters'"
    return cells[0]


def _set_parameters(nb, values):
    cell = _parameters_cell(nb)
    for name, value in values.items():
        cell.source, n = re.subn(rf"^{name}\s*=\s*[^#\n]+", f"{name} = {value!r} ", cell.source, flags=re.M)
        assert n == 1, f"parameter {name} not found in {cell.source!r}"


def _text_outputs(nb) -> str:
    parts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                parts.append(out["text"])
            elif "data" in out:
                parts.append(out["data"].get("text/plain", ""))
    return "\n".join(parts)


def _n_images(nb) -> int:
    return sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))


def _run(path, params, tmp_path, monkeypatch):
    """Execute the notebook at ``path`` with ``params`` in the parameters cell, in an empty
    working directory; returns the executed notebook."""
    nb = nbformat.read(path, as_version=4)
    _set_parameters(nb, params)
    # The kernel inherits os.environ: no progress bars, and this checkout importable
    # from the temporary working directory.
    monkeypatch.setenv("CI", "1")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.delenv("MPLBACKEND", raising=False)  # ipykernel then picks its inline backend
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    assert list(tmp_path.iterdir()) == []  # the notebook leaves no files behind
    return nb


def test_notebook_stored_clean():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert re.search(r"^N_ITER = 500\b", _parameters_cell(nb).source, flags=re.M)
    assert nb.metadata.kernelspec.name == "python3"


def test_bsml_notebook_runs(tmp_path, monkeypatch):
    nb = _run(NOTEBOOK, SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    assert "hamming_loss" in text
    for method in ("BSML (R = 2)", "MLDA+PROBIT", "PROBIT (D = 72)", "BSML+ARD", "BSSML (all inputs)", "best of 4"):
        assert method in text, method
    metrics = [float(x) for x in re.findall(r"^BSML \(R = 2\)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)", text, flags=re.M)[0]]
    assert 0 <= metrics[0] < 0.5 and 0.5 < metrics[1] <= 1  # hamming loss, average AUC: better than chance
    assert "ELBO never decreases: True" in text
    assert "identical predictions: True" in text
    assert _n_images(nb) >= 3  # embeddings, ARD relevance, ELBO traces


SBMOE_NOTEBOOK = ROOT / "notebooks" / "sbmoe.ipynb"
SBMOE_SMALL = {"N_TRAIN": 200, "N_EXPERTS": 6, "MAX_ITER": 3, "GATE_STEPS": 5, "N_TEST": 10}


def test_sbmoe_notebook_stored_clean():
    nb = nbformat.read(SBMOE_NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert re.search(r"^N_TRAIN = 2000\b", _parameters_cell(nb).source, flags=re.M)


def test_sbmoe_notebook_runs(tmp_path, monkeypatch):
    nb = _run(SBMOE_NOTEBOOK, SBMOE_SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    kls = {m: float(v) for m, v in re.findall(r"^(SBMoE|C-DPMM|GP)\s+exact KL (\S+)", text, flags=re.M)}
    assert set(kls) == {"SBMoE", "C-DPMM", "GP"} and all(0 <= v < 5 for v in kls.values())
    assert "effective neighbours" in text and "final ELBO of 3 restarts" in text
    assert _n_images(nb) >= 4


LFRM_NOTEBOOK = ROOT / "notebooks" / "lfrm.ipynb"
LFRM_SMALL = {"N_IMAGES": 30, "IBP_SWEEPS": 20, "IBP_CHAINS": 1, "LFRM_WARMUP": 5, "LFRM_SAMPLES": 5, "N_RELATIONS": 2}


def test_lfrm_notebook_stored_clean():
    nb = nbformat.read(LFRM_NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert re.search(r"^IBP_SWEEPS = 1000\b", _parameters_cell(nb).source, flags=re.M)


def test_lfrm_notebook_runs(tmp_path, monkeypatch):
    nb = _run(LFRM_NOTEBOOK, LFRM_SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    aucs = {m: float(v) for m, v in re.findall(r"^(LFRM w/IRM|IRM): held-out AUC (\S+)", text, flags=re.M)}
    assert set(aucs) == {"LFRM w/IRM", "IRM"} and all(0.6 < v <= 1 for v in aucs.values())
    assert "sigma_x" in text and "K+ mean" in text
    assert _n_images(nb) >= 3  # toy images, inferred features, kinship features and trace

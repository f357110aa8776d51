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


SPARSE_NOTEBOOK = ROOT / "notebooks" / "sparse_bayes.ipynb"
SPARSE_SMALL = {"NUM_SAMPLES": 1000, "NUM_WARMUP": 300, "BUMP_GAMMAS": (5000, 10000), "N_BUMPS": 100, "N_SETS": 4}


def test_sparse_bayes_notebook_stored_clean():
    nb = nbformat.read(SPARSE_NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    source = _parameters_cell(nb).source
    assert re.search(r"^NUM_SAMPLES = 15000\b", source, flags=re.M) and re.search(r"^NUM_WARMUP = 3000\b", source, flags=re.M)
    assert nb.metadata.kernelspec.name == "python3"


def test_sparse_bayes_notebook_runs(tmp_path, monkeypatch):
    nb = _run(SPARSE_NOTEBOOK, SPARSE_SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    methods = ("RVM", "FLAP", "FLAP-sigma", "BLS")
    # sinc at noise sd 0.1: RMSE against the true function, relevance vectors, noise sd
    sinc = {m: (float(r), int(k), float(s)) for m, r, k, s in
            re.findall(r"^0\.1\s+(RVM|FLAP|FLAP-sigma|BLS)\s+(\S+)\s+(\d+)\s+(\S+)$", text, flags=re.M)}
    assert set(sinc) == set(methods)
    assert all(r < 0.1 and 1 <= k <= 20 and 0.05 < s < 0.2 for r, k, s in sinc.values()), sinc
    # bumps at SNR 10 with the chosen width: the RVM resolves them
    assert "gamma = 10000" in text
    bumps = {m: float(r) for m, r in re.findall(r"^10\s+(RVM|FLAP|FLAP-sigma|BLS)\s+(\S+)\s+\d+", text, flags=re.M)}
    assert set(bumps) == set(methods) and bumps["RVM"] < 0.1, bumps
    # diabetes: BLS, Bayesian Lasso median and interval, LassoCV for every predictor; bmi is selected by all
    rows = dict(re.findall(r"^(age|sex|bmi|bp|s[1-6])\s+(.+)$", text, flags=re.M))
    assert len(rows) == 10
    bls, median, lo, hi, lasso = (float(v) for v in re.findall(r"-?\d+\.\d+", rows["bmi"]))
    assert bls > 10 and lasso > 10 and 0 < lo < median < hi
    # the vmapped functional fit: relevance vectors per data set
    counts = [int(v) for v in re.search(r"^relevance vectors per set: \[([\d\s]+)\]", text, flags=re.M).group(1).split()]
    assert len(counts) == SPARSE_SMALL["N_SETS"] and all(1 <= c <= 32 for c in counts)
    assert _n_images(nb) >= 4  # sinc fits, the gamma sweep, bump fits, diabetes coefficients


RCA_HSIC_NOTEBOOK = ROOT / "notebooks" / "rca_hsic.ipynb"
# plain floats (the parameters cell gets their repr); penalties large enough for EM/RCA to converge fast
RCA_HSIC_SMALL = {"ALPHAS": (0.04, 1.0, 5.0, 25.0), "SACHS_ALPHAS": tuple(5.0**k for k in range(-7, 1)),
                  "HSIC_N": 100, "N_DATASETS": 30, "N_PERMUTATIONS": 100}


def test_rca_hsic_notebook_stored_clean():
    nb = nbformat.read(RCA_HSIC_NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    source = _parameters_cell(nb).source
    assert re.search(r"^ALPHAS = 5\.0 \*\* np\.linspace\(-8, 3, 30\)", source, flags=re.M)
    assert re.search(r"^SACHS_ALPHAS = 5\.0 \*\* np\.linspace\(-8, 3, 50\)", source, flags=re.M)
    for name, full in (("HSIC_N", 300), ("N_DATASETS", 200), ("N_PERMUTATIONS", 1000)):
        assert re.search(rf"^{name} = {full}\b", source, flags=re.M), name
    assert nb.metadata.kernelspec.name == "python3"


def test_rca_hsic_notebook_runs(tmp_path, monkeypatch):
    nb = _run(RCA_HSIC_NOTEBOOK, RCA_HSIC_SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    # ML RCA: PPCA for Sigma = s2 I; under a non-isotropic Sigma, RCA finds span(W) and PCA does not
    assert "RCA equals PPCA: True" in text
    angles = re.findall(r"^p = (\d+), q = (\d+)\s+(\S+)\s+(\S+)$", text, flags=re.M)
    assert len(angles) == 2
    for _, _, pca, rca_angle in angles:
        assert float(rca_angle) < 15 < float(pca), angles
    # dual RCA ranks the genes with a treatment-only response first
    assert float(re.search(r"^residual-score AUC: (\S+)$", text, flags=re.M).group(1)) > 0.8
    # EM/RCA and the graphical lasso: interpolated precision tables (simulated network, Sachs)
    rows = re.findall(r"^(EM/RCA|GLASSO|ideal GLASSO \(no confounder\))((?:\s+\d\.\d{3}){4})$", text, flags=re.M)
    assert [name for name, _ in rows] == ["EM/RCA", "GLASSO", "ideal GLASSO (no confounder)", "EM/RCA", "GLASSO"]
    assert all(0 <= float(v) <= 1 for _, values in rows for v in values.split())
    assert "same precision as the sweep, to 0.02: True" in text
    assert re.search(r"^from Lambda = I / m: \d+ iterations, bound \S+, \d+ edges$", text, flags=re.M)
    assert "bound never decreases: True" in text
    # the graphical lasso on all Sachs cells at alpha 0.05 (R glasso: 14 edges, 8 true)
    found, tp = map(int, re.search(r"alpha 0\.05, all 2666 cells: (\d+) edges, (\d+) true", text).groups())
    assert 12 <= found <= 16 and tp >= 7, (found, tp)
    # HSIC: the tests see the quadratic dependence and not the independent pair
    p = {(m, pair): float(v) for m, pair, v in
         re.findall(r"^(gamma|permutation) p-value \((dependent|independent)\): (\S+)", text, flags=re.M)}
    assert len(p) == 4
    assert p["gamma", "dependent"] < 0.01 and p["permutation", "dependent"] < 0.05
    assert p["gamma", "independent"] > 0.001 and p["permutation", "independent"] > 0.001
    # the level of the vmapped gamma test lies in its binomial 99.9% band
    rate, n_sets = re.search(r"^rejection rate at 0\.05: (\S+) over (\d+) data sets", text, flags=re.M).groups()
    lo, hi = map(float, re.search(r"^binomial 99\.9% band: \[(\S+), (\S+)\]", text, flags=re.M).groups())
    assert int(n_sets) == RCA_HSIC_SMALL["N_DATASETS"] and lo <= float(rate) <= hi
    power = [float(v) for v in re.search(r"^power\s+(.+)$", text, flags=re.M).group(1).split()]
    assert len(power) == 5 and power[0] > 0.9  # y = x^2 + 0.5 e at m = 100
    # residual components, dual RCA, PR curves, heat maps, bound trace, Sachs PR, HSIC nulls, level and power
    assert _n_images(nb) >= 8


ROBUST_SPARSE_NOTEBOOK = ROOT / "notebooks" / "robust_sparse_pca.ipynb"
ROBUST_SPARSE_SMALL = {"N_STARTS": 50, "N_REPLICATIONS": 10, "N_DOCUMENTS": 1500, "N_WORDS": 5000}


def test_robust_sparse_pca_notebook_stored_clean():
    nb = nbformat.read(ROBUST_SPARSE_NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    source = _parameters_cell(nb).source
    for name, full in (("N_STARTS", 500), ("N_REPLICATIONS", 200), ("N_DOCUMENTS", 10000), ("N_WORDS", 100000)):
        assert re.search(rf"^{name} = {full}\b", source, flags=re.M), name


def test_robust_sparse_pca_notebook_runs(tmp_path, monkeypatch):
    nb = _run(ROBUST_SPARSE_NOTEBOOK, ROBUST_SPARSE_SMALL, tmp_path, monkeypatch)
    text = _text_outputs(nb)
    assert "octane bad leverage: [25, 26, 36, 37, 38, 39]" in text
    robust = re.search(r"^ROBPCA bad leverage: (.+)$", text, flags=re.M).group(1)
    assert all(car in robust for car in ("Chevrolet Corvette", "Mazda RX7", "Dodge Grand Caravan"))
    glass_sd = re.search(r"^good_leverage: \[(.*)\]$", text, flags=re.M).group(1)
    assert "143" in glass_sd and "180" in glass_sd
    assert "outliers in the MCD subset: 0 of 40" in text
    maxsub = {m: float(v) for m, v in re.findall(r"^(\w+)\s+maxsub (\S+)", text, flags=re.M)}
    assert maxsub["ROBPCA"] < 0.3 < maxsub["CPCA"]
    assert "topics recovered: 5 of 5" in text
    assert _n_images(nb) == 5  # octane, cars (four panels), glass, MCD, the variances of the words

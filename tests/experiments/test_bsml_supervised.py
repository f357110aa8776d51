"""The hours-long Figures 2-5 run keeps what it finished when it is started again."""

import json

import pytest

from bayeskit.experiments import bsml_supervised


def _tiny_settings(quick):
    return {"emotions": [1, 2]}, 3


def test_rerun_keeps_finished_entries_and_completes_the_rest(tmp_path, monkeypatch):
    monkeypatch.setattr(bsml_supervised, "_settings", _tiny_settings)
    monkeypatch.setattr(bsml_supervised, "plot", lambda payload, out_dir: None)
    monkeypatch.setattr(bsml_supervised, "PROJECTIONS", {"PCA": bsml_supervised.PROJECTIONS["PCA"]})
    first = bsml_supervised.run(tmp_path, quick=True)
    assert first["complete"] and sorted(first["results"]["emotions"]["by_R"]) == ["1", "2"]

    # An interrupted run: R = 2 missing, the file says incomplete.
    on_disk = json.loads((tmp_path / "bsml_supervised.json").read_text())
    del on_disk["results"]["emotions"]["by_R"]["2"]
    on_disk["complete"] = False
    (tmp_path / "bsml_supervised.json").write_text(json.dumps(on_disk))

    fitted = []
    real_fit = bsml_supervised.fit_bsml
    monkeypatch.setattr(bsml_supervised, "fit_bsml", lambda *a, **k: fitted.append(a[4].n_components) or real_fit(*a, **k))
    monkeypatch.setattr(bsml_supervised, "fit_probit", lambda *a, **k: pytest.fail("PROBIT was finished"))
    second = bsml_supervised.run(tmp_path, quick=True)
    assert fitted == [2]
    assert second["complete"]
    assert second["results"]["emotions"]["by_R"]["1"] == on_disk["results"]["emotions"]["by_R"]["1"]
    assert json.loads((tmp_path / "bsml_supervised.json").read_text())["complete"]


def test_other_settings_start_afresh(tmp_path, monkeypatch):
    monkeypatch.setattr(bsml_supervised, "_settings", _tiny_settings)
    (tmp_path / "bsml_supervised.json").write_text(json.dumps(
        {"experiment": "bsml_supervised", "quick": True, "max_iter": 3, "seed": 1, "results": {"emotions": {}}}))
    earlier = lambda settings: bsml_supervised.earlier_results(tmp_path, "bsml_supervised", settings)
    assert earlier({"experiment": "bsml_supervised", "quick": True, "max_iter": 3, "seed": 0}) == {}
    assert earlier({"quick": True, "max_iter": 3, "seed": 1}) == {"emotions": {}}

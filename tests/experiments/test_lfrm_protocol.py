"""The LFRM experiment's multi-split protocol: per-split rows, their summary, the leaky
row's wiring and a resumed run, with the samplers replaced by cheap stand-ins (the
samplers have their own tests in tests/relational)."""

import json

import numpy as np
import pytest

from bayeskit.experiments import lfrm_link_prediction as exp


def _fake_model(calls):
    """A stand-in for _mcmc / _mmsb: scores from the training links (common neighbours)
    plus method-specific noise; records what it was called with."""

    def fit(method, key, Y, train, symmetric, chains, covariates=None, births=None):
        calls.append({"method": method, "train": np.asarray(train), "symmetric": symmetric, "covariates": covariates is not None,
                      "births": births})
        A = np.where(train, Y, 0).astype(float)
        rng = np.random.default_rng(len(calls))
        scale = {"LFRM rand": 0.1, "LFRM w/IRM": 0.2, "IRM": 1.0, "MMSB": 3.0}[method]
        return [A @ A + scale * rng.random(A.shape) for _ in range(chains)]

    def mcmc(method, key, Y, train, k_max, symmetric, single, sweeps, burn, chains, covariates=None, births="prior"):
        saturated = 0.5 if method == "LFRM rand" else 0.0
        frozen = method == "LFRM w/IRM"  # its restarts keep K+ = 3 and 5 throughout
        sizes = [3.0 + 2.0 * c for c in range(chains)] if frozen else [1.0] * chains
        return fit(method, key, Y, train, symmetric, chains, covariates, births), sizes, 1.0 + 0.01 * len(calls), saturated, frozen

    def mmsb(key, Y, train, symmetric, single, restarts, max_iter, grid):
        return fit("MMSB", key, Y, train, symmetric, restarts), [grid[0]] * restarts, {str(grid[0]): 0.0}

    return mcmc, mmsb


@pytest.fixture
def fake(monkeypatch):
    calls = []
    mcmc, mmsb = _fake_model(calls)
    monkeypatch.setattr(exp, "_mcmc", mcmc)
    monkeypatch.setattr(exp, "_mmsb", mmsb)
    return calls


def _mirror_in_train(call):
    """The fraction of held-out off-diagonal cells whose mirror is a training cell."""
    train = call["train"][0]
    held = ~train & ~np.eye(train.shape[0], dtype=bool)
    return float(np.mean(train.T[held]))


def test_summary_is_the_mean_over_splits_and_the_leaky_row_reads_mirrors(tmp_path, fake, capsys):
    payload = exp.run(tmp_path, splits=3, cases=[("nips234", "global")])
    printed = capsys.readouterr().out
    assert "LFRM rand - IRM" in printed and "nips234 global, entries (leaky)" in printed and "0.8906" in printed
    assert payload["complete"] and set(payload["results"]) == {"nips234 global", "nips234 global, entries (leaky)"}
    main = payload["results"]["nips234 global"]["splits"]
    assert sorted(main) == ["0", "1", "2"]
    summary = payload["summary"]["nips234 global"]
    for method in (*exp.METHODS, "Katz", "common neighbours"):
        per_split = [main[s][method]["auc_mean"] for s in main]
        assert summary[method]["auc_mean"] == pytest.approx(np.mean(per_split))
        assert summary[method]["auc_sd"] == pytest.approx(np.std(per_split))
    gaps = [main[s]["LFRM rand"]["auc_mean"] - main[s]["IRM"]["auc_mean"] for s in main]
    assert summary["LFRM rand - IRM"]["gaps"] == pytest.approx(gaps)
    assert summary["LFRM rand - IRM"]["splits_above"] == sum(g > 0 for g in gaps)
    assert summary["IRM"]["paper"] == 0.8906 and summary["LFRM rand"]["r_hat_log_joint_median"] > 1
    # a saturated truncation is a note under the table, per method that hit it
    assert summary["LFRM rand"]["saturated_share_max"] == 0.5 and summary["IRM"]["saturated_share_max"] == 0
    assert "nips234 global, LFRM rand: 50.0% of a split's draws use all k_max columns" in printed
    assert printed.count("use all k_max") == 2  # LFRM rand in the main and the leaky row, no other method
    # restarts that kept different K+ throughout: the K+ column gives their range, a note says so
    assert summary["LFRM w/IRM"]["k_frozen_splits"] == 3 and summary["LFRM rand"]["k_frozen_splits"] == 0
    assert (summary["LFRM w/IRM"]["size_min"], summary["LFRM w/IRM"]["size_max"]) == (3.0, 5.0)
    assert "4.0 (3-5)" in printed and "nips234 global, LFRM w/IRM: on 3 of 3 splits each restart kept one K+" in printed
    assert printed.count("kept one K+") == 1  # the leaky row runs LFRM rand only

    # the split protocol: unordered pairs never leak; the leaky row fits a directed model
    # on ordered cells, about 80% of whose held-out cells have their mirror in training
    pairs = [c for c in fake if c["symmetric"]]
    leaky = [c for c in fake if not c["symmetric"]]
    assert len(pairs) == 3 * len(exp.METHODS) and [c["method"] for c in leaky] == ["LFRM rand"] * 3
    assert max(_mirror_in_train(c) for c in pairs) == 0
    assert all(0.75 < _mirror_in_train(c) < 0.85 for c in leaky)
    assert set(payload["results"]["nips234 global, entries (leaky)"]["splits"]["0"]) == {"LFRM rand", "Katz", "common neighbours"}


def test_a_rerun_keeps_finished_methods_and_runs_the_rest(tmp_path, fake):
    cases = [("nips234", "global")]
    exp.run(tmp_path, splits=2, cases=cases)
    path = tmp_path / f"{exp.NAME}.json"
    on_disk = json.loads(path.read_text())
    splits = on_disk["results"]["nips234 global"]["splits"]
    del splits["1"]  # an interrupted run: split 1 not started, split 0 stopped before the MMSB
    for name in ("MMSB", "Katz", "common neighbours"):
        del splits["0"][name]
    on_disk["complete"] = False
    path.write_text(json.dumps(on_disk))
    fake.clear()
    second = exp.run(tmp_path, splits=2, cases=cases)
    assert [c["method"] for c in fake] == ["MMSB", *exp.METHODS]
    assert second["results"]["nips234 global"]["splits"]["0"]["IRM"] == splits["0"]["IRM"]
    assert second["complete"] and json.loads(path.read_text())["summary"]["nips234 global"]["MMSB"]["n_splits"] == 2

    fake.clear()
    exp.run(tmp_path, splits=2, sweeps=7, cases=cases)  # other settings: everything again
    assert len(fake) == 2 * (len(exp.METHODS) + 1)


def test_only_the_labelled_countries_row_gives_the_lfrm_covariates(tmp_path, fake):
    payload = exp.run(tmp_path, splits=2, cases=[("countries", "single")])
    main, extra = "countries single", "countries single, LFRM with covariates"
    assert set(payload["results"]) == {main, extra}
    with_cov = [c["method"] for c in fake if c["covariates"]]
    assert with_cov == ["LFRM rand", "LFRM w/IRM"] * 2 and len(fake) == 2 * (len(exp.METHODS) + 2)
    assert set(payload["results"][extra]["splits"]["1"]) == {"LFRM rand", "LFRM w/IRM", "Katz", "common neighbours"}
    assert payload["summary"][main]["LFRM rand"]["n_splits"] == 2 and payload["summary"][extra]["LFRM w/IRM"]["paper"] == 0.8521

    # a split whose baselines ran but whose LFRM rows were taken out is finished on a rerun
    path = tmp_path / f"{exp.NAME}.json"
    on_disk = json.loads(path.read_text())
    del on_disk["results"][main]["splits"]["0"]["LFRM rand"]
    path.write_text(json.dumps(on_disk))
    fake.clear()
    exp.run(tmp_path, splits=2, cases=[("countries", "single")])
    assert [(c["method"], c["covariates"]) for c in fake] == [("LFRM rand", False)]


def test_only_the_labelled_countries_row_proposes_fitted_births(tmp_path, fake):
    payload = exp.run(tmp_path, splits=1, cases=[("countries", "global")])
    label = "countries global, LFRM with fitted births"
    assert set(payload["results"]) == {"countries global", "countries global, LFRM with covariates", label}
    lfrm_calls = [(c["method"], c["births"], c["covariates"]) for c in fake if c["method"].startswith("LFRM")]
    assert lfrm_calls == [("LFRM rand", "prior", False), ("LFRM w/IRM", "prior", False), ("LFRM rand", "prior", True),
                          ("LFRM w/IRM", "prior", True), ("LFRM rand", "fitted", False), ("LFRM w/IRM", "fitted", False)]
    assert payload["lfrm_priors"]["births"] == "prior" and payload["extra_rows"][label] == ["LFRM rand", "LFRM w/IRM"]


def test_r_hat_of_the_log_joint_flags_chains_that_disagree():
    rng = np.random.default_rng(0)
    mixed = rng.normal(size=(2, 200))
    apart = mixed + np.array([[0.0], [5.0]])
    assert exp.r_hat_log_joint({"log_joint": mixed}, single=False) < 1.05
    assert exp.r_hat_log_joint({"log_joint": apart}, single=False) > 2
    # separate relations: (relation, chain, draw), the worst relation counts
    assert exp.r_hat_log_joint({"log_joint": np.stack([mixed, apart])}, single=True) > 2
    # a relation whose R-hat is undefined makes the whole undefined, in either order
    undefined = mixed.copy()
    undefined[0, 3] = np.nan
    assert np.isnan(exp.r_hat_log_joint({"log_joint": np.stack([mixed, undefined])}, single=True))
    assert np.isnan(exp.r_hat_log_joint({"log_joint": np.stack([undefined, mixed])}, single=True))
    # restarts that hold one and the same partition agree (R-hat 1); held apart, they are frozen (inf)
    same = np.full_like(mixed, -5.0)
    assert exp.r_hat_log_joint({"log_joint": same}, single=False) == 1.0
    frozen_apart = np.stack([np.full(mixed.shape[1], -5.0), np.full(mixed.shape[1], -7.0)])
    assert exp.r_hat_log_joint({"log_joint": np.stack([mixed, frozen_apart])}, single=True) == np.inf


def test_restarts_frozen_in_one_state_are_counted_apart_from_r_hat(monkeypatch, tmp_path, fake, capsys):
    """Restarts whose log joint never moves have R-hat NaN (identical), inf or astronomically
    large (rounding noise within, a gap between): the summary counts those splits and takes
    median and max over the others only, and a note under the table says what happened."""
    frozen = np.stack([np.full(100, -3039.05158444), np.full(100, -2968.42171648)])
    frozen[1, ::7] += 4.5e-13  # within-restart rounding noise, as a stuck chain's trace shows
    stuck = exp.r_hat_log_joint({"log_joint": frozen}, single=False)
    assert stuck >= exp.FROZEN_R_HAT
    assert exp.r_hat_log_joint({"log_joint": np.stack([np.full(100, -5.0), np.full(100, -7.0)])}, single=False) == np.inf
    values = iter([1.2, stuck, 1.6, float("nan"), float("inf")])
    mcmc = exp._mcmc

    def irm_frozen(method, *args, **kwargs):
        probs, sizes, r_hat, saturated, frozen = mcmc(method, *args, **kwargs)
        return probs, sizes, next(values) if method == "IRM" else r_hat, saturated, frozen

    monkeypatch.setattr(exp, "_mcmc", irm_frozen)
    irm = exp.run(tmp_path, splits=5, cases=[("countries", "global")])["summary"]["countries global"]["IRM"]
    assert irm["frozen_splits"] == 3 and irm["r_hat_defined_splits"] == 2
    assert irm["r_hat_log_joint_median"] == pytest.approx(1.4) and irm["r_hat_log_joint_max"] == pytest.approx(1.6)
    printed = capsys.readouterr().out
    assert "1.40 / 1.60 (frozen on 3)" in printed and "countries global, IRM: on 3 of 5 splits" in printed


def test_a_run_that_did_not_record_frozen_k_says_so(capsys):
    """Splits from a run before the frozen-K+ record: the summary holds None (not 0), and
    one note per case names the LFRM starts it concerns."""
    split = {"auc_mean": 0.9, "aucs": [0.9], "seconds": 1.0, "size_mean_per_chain": [3.0, 5.0], "r_hat_log_joint": 1.5}
    summary = exp.summarise({"countries global": {"paper": {}, "splits": {"0": {"LFRM rand": split, "LFRM w/IRM": split}}}})
    assert summary["countries global"]["LFRM rand"]["k_frozen_splits"] is None
    exp._table(summary, {"split_seeds": [0], "chains": 2, "sweeps": 10, "burn_in": 5})
    printed = capsys.readouterr().out
    assert "countries global: whether the restarts of LFRM rand and LFRM w/IRM kept K+ of their own was not recorded" in printed
    assert "4.0 (3-5)" in printed

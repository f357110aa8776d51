"""bayeskit.save / bayeskit.load on every estimator: the loaded estimator is of the same
class, with the same parameters and every attribute (fitted and private) equal bit for
bit, and predicts the same; the allow-list; import cost."""

from __future__ import annotations

import io as _io
import json
import stat
import subprocess
import sys
import warnings
import zipfile

import jax
import numpy as np
import pytest
from identical import assert_identical

import bayeskit
import bayeskit.estimators as E
from bayeskit.covariance import rca, sparse_pca
from bayeskit.density import cdpmm, gp
from bayeskit.persistence import allowed_classes
from bayeskit.robust import mcd, robpca

_rng = np.random.default_rng(0)
X = _rng.normal(size=(30, 4))
Y_ML = (X[:, :2] + 0.3 * _rng.normal(size=(30, 2)) > 0).astype(int)
Y_REG = X[:, 0] - X[:, 1] + 0.1 * _rng.normal(size=30)
LINKS = (_rng.random((12, 12)) < 0.3).astype(np.int8)


def _transform(est):
    return est.transform(X)


# name -> (estimator, fit arguments, what must give the same output after loading)
CASES = {
    "GraphicalLasso": (lambda: E.GraphicalLasso(alpha=0.1, max_iter=5), (X,), lambda e: e.score(X)),
    "RCA": (lambda: E.RCA(n_components=1), (X, np.eye(4)), lambda e: (e.transform(X), e.score(X))),
    "EMRCA": (lambda: E.EMRCA(alpha=0.1, max_iter=3), (X,), lambda e: e.score(X)),
    "SparsePCA": (lambda: E.SparsePCA(n_components=1, cardinality=2), (X,), _transform),
    "MinCovDet": (lambda: E.MinCovDet(n_starts=10, random_state=0), (X,), lambda e: e.mahalanobis(X)),
    "ROBPCA": (lambda: E.ROBPCA(n_components=2, n_starts=10, n_directions=20, random_state=0), (X,), _transform),
    "SBMoERegressor": (lambda: E.SBMoERegressor(n_experts=2, max_iter=2, gate_steps=2, n_gate=4, n_draws=4, random_state=0),
                       (X[:, :2], Y_REG), lambda e: e.predict(X[:5, :2])),
    "BSMLClassifier": (lambda: E.BSMLClassifier(n_components=2, max_iter=3, random_state=0), (X, Y_ML),
                       lambda e: (e.predict_proba(X), e.score(X, Y_ML))),
    "ProbitClassifier": (lambda: E.ProbitClassifier(max_iter=3, random_state=0), (X, np.where(Y_ML[:, 0] == 1, "yes", "no")),
                         lambda e: (e.predict_proba(X), e.predict(X))),
    "IRMLinkPredictor": (lambda: E.IRMLinkPredictor(n_clusters_max=4, num_warmup=2, num_samples=3, random_state=0),
                         (LINKS,), lambda e: e.predict_proba()),
    "LFRMLinkPredictor": (lambda: E.LFRMLinkPredictor(n_features_max=3, num_warmup=1, num_samples=2, random_state=0),
                          (LINKS,), lambda e: e.predict_proba()),
    "MMSBLinkPredictor": (lambda: E.MMSBLinkPredictor(n_blocks=2, max_iter=3, n_init=2, random_state=0),
                          (LINKS,), lambda e: e.predict_proba()),
    "RVMRegressor": (lambda: E.RVMRegressor(max_iter=5), (X, Y_REG), lambda e: e.predict(X, return_std=True)),
    "BLSRegressor": (lambda: E.BLSRegressor(kernel="linear", max_iter=5), (X, Y_REG), lambda e: e.predict(X, return_std=True)),
    "FLAPRegressor": (lambda: E.FLAPRegressor(max_iter=5, fit_intercept=False), (X, Y_REG), lambda e: e.predict(X)),
    "BayesianLassoRegressor": (lambda: E.BayesianLassoRegressor(num_samples=5, num_warmup=2, random_state=0), (X, Y_REG),
                               lambda e: e.predict(X)),
}


def test_every_estimator_has_a_case():
    assert sorted(CASES) == sorted(E.__all__)


@pytest.mark.parametrize("name", sorted(CASES))
def test_estimator_round_trip_is_bit_for_bit(name, tmp_path):
    make, args, outputs = CASES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few iterations: convergence warnings
        est = make().fit(*args)
    path = bayeskit.save(tmp_path / f"{name}.bkz", est)
    loaded = bayeskit.load(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    assert sorted(vars(loaded)) == sorted(vars(est))
    assert_identical(est, loaded)
    assert_identical(outputs(est), outputs(loaded))


def test_vmapped_fit_result_with_hyperparameters(tmp_path):
    """Restarts of a model's fit as one vmapped FitResult (leading restart axis), saved
    with its hyperparameters."""
    from bayeskit.multilabel import probit

    priors = probit.Hyperparams(alpha_lambda=2.0)
    keys = jax.random.split(jax.random.key(0), 3)
    Y = Y_ML[:, :1].astype(np.int8)  # the shapes of ProbitClassifier's case: its predict_proba is compiled already
    result = jax.vmap(lambda k: probit.fit(k, X, Y, priors, max_iter=3, throw=False))(keys)
    loaded, hp = bayeskit.load(bayeskit.save(tmp_path / "restarts.bkz", result, priors))
    assert_identical(result, loaded)
    assert_identical(priors, hp)
    assert loaded.trace.shape == (3, 3) and loaded.status._value.shape == (3,)
    second = lambda r: jax.tree.map(lambda a: a[1], r.state)
    assert_identical(probit.predict_proba(second(loaded), X), probit.predict_proba(second(result), X))


CLOSED_FORM = {  # fits without an iteration trace, each of a different kind of state
    "mcd": lambda: mcd.fit(jax.random.key(0), X, n_starts=5),
    "robpca": lambda: robpca.fit_auto(jax.random.key(0), X, n_starts=5),
    "rca": lambda: rca.fit(X.T @ X / len(X), np.eye(4)),
    "sparse_pca": lambda: sparse_pca.fit_components(X, 2, alpha=0.1),
    "gp": lambda: gp.fit(X, Y_REG, max_iter=5),
    "cdpmm": lambda: cdpmm.fit(jax.random.key(0), X, Y_REG, 2, max_iter=5),
}


@pytest.mark.parametrize("name", sorted(CLOSED_FORM))
def test_closed_form_fit_result_round_trip_is_bit_for_bit(name, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # few iterations: convergence warnings
        result = CLOSED_FORM[name]()
    loaded = bayeskit.load(bayeskit.save(tmp_path / f"{name}.bkz", result))
    assert type(loaded.state) is type(result.state)
    assert_identical(result, loaded)


def test_shared_arrays_stay_shared(tmp_path):
    """``state_`` is ``result_.state``: stored once, and one object again after loading."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = E.FLAPRegressor(max_iter=5, fit_intercept=False).fit(X, Y_REG)
    loaded = bayeskit.load(bayeskit.save(tmp_path / "flap.bkz", est))
    assert loaded.state_.mu is loaded.result_.state.mu


def test_an_optimizer_parameter_is_refused_before_writing(tmp_path):
    import optax

    est = E.SBMoERegressor(optimizer=optax.sgd(0.1))
    est.n_features_in_ = 2  # stands in for a fit: the parameter alone makes it unsaveable
    with pytest.raises(TypeError, match=r"optimizer"):
        bayeskit.save(tmp_path / "sbmoe.bkz", est)
    assert list(tmp_path.iterdir()) == []


def test_allow_list_is_bayeskits_own():
    classes = allowed_classes()
    assert classes["bayeskit.estimators.GraphicalLasso"] is E.GraphicalLasso
    from bayeskit.core.status import FitResult, Status

    assert classes["bayeskit.core.status.FitResult"] is FitResult
    assert classes["bayeskit.core.status.Status"] is Status
    assert set(E.__all__) <= {name.rsplit(".", 1)[1] for name in classes if name.startswith("bayeskit.estimators.")}
    # bayeskit's classes, and the states of the optax optimisers bayeskit itself defines
    assert all(name.startswith(("bayeskit.", "optax.")) for name in classes)
    assert all(cls.__module__.startswith(("bayeskit.", "optax.")) for cls in classes.values())
    assert "optax.ScaleByAdamState" in classes


def test_import_bayeskit_stays_light():
    code = ("import sys, bayeskit, bayeskit.core.io; "
            "heavy = [m for m in ('sklearn', 'bayeskit.estimators', 'bayeskit.persistence', 'bayeskit.multilabel', "
            "'bayeskit.density', 'bayeskit.relational', 'bayeskit.sparse', 'bayeskit.covariance', 'bayeskit.robust') "
            "if m in sys.modules]; "
            "assert not heavy, heavy; assert callable(bayeskit.save) and 'bayeskit.persistence' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_float64_file_in_a_float32_session_names_the_setting(tmp_path):
    """A file of 64-bit JAX arrays is sound; a session with x64 off cannot hold them: the
    message says which setting to change, not that the file is bad."""
    path = bayeskit.save(tmp_path / "x64.bkz", jax.numpy.arange(3.0))
    with jax.enable_x64(False), pytest.raises(ValueError, match="jax_enable_x64") as e:
        bayeskit.load(path)
    assert "bad bayeskit file" not in str(e.value)


# ------------------------------------------------------------------ optax optimiser states

OPTIMIZERS = {
    "sgd_momentum": lambda optax: optax.sgd(0.01, momentum=0.9),
    "rmsprop": lambda optax: optax.rmsprop(0.01),
    "adagrad": lambda optax: optax.adagrad(0.01),
    "lion": lambda optax: optax.lion(0.01),
    "adabelief": lambda optax: optax.adabelief(0.01),
    "inject_hyperparams": lambda optax: optax.inject_hyperparams(optax.adam)(learning_rate=0.01),
    "adam_schedule": lambda optax: optax.adam(optax.exponential_decay(0.01, 10, 0.5)),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_any_optax_optimiser_state_round_trips(name, tmp_path):
    """The state of an optax optimiser after a step, as a functional fit keeps it."""
    import optax

    optimizer = OPTIMIZERS[name](optax)
    params = {"w": jax.numpy.arange(3.0), "b": jax.numpy.ones(())}
    state = optimizer.init(params)
    _, state = optimizer.update(jax.tree.map(jax.numpy.cos, params), state, params)
    assert_identical(state, bayeskit.load(bayeskit.save(tmp_path / f"{name}.bkz", state)))


def test_sbmoe_fit_with_its_own_optimizer_round_trips(tmp_path):
    import optax

    from bayeskit.density import sbmoe

    hparams = sbmoe.Hyperparams(n_experts=2, gate_steps=2)
    result = sbmoe.fit(jax.random.key(0), X[:, :2], Y_REG[:, None], hparams, max_iter=2,
                       optimizer=optax.sgd(0.01, momentum=0.9), throw=False)
    loaded, hp = bayeskit.load(bayeskit.save(tmp_path / "sbmoe.bkz", result, hparams))
    assert_identical(result, loaded)
    assert_identical(hparams, hp)


def test_optax_classes_on_the_allow_list_are_data_containers():
    import optax

    optax_classes = [cls for name, cls in allowed_classes().items() if name.startswith("optax.")]
    assert {optax.TraceState, optax.ScaleByRmsState, optax.InjectStatefulHyperparamsState} <= set(optax_classes)
    assert all(issubclass(cls, tuple) and hasattr(cls, "_fields") for cls in optax_classes)
    assert not any(issubclass(cls, optax.GradientTransformation) for cls in optax_classes)


def test_an_optimizer_parameter_is_refused_with_what_to_do_instead(tmp_path):
    import optax

    est = E.SBMoERegressor(optimizer=optax.sgd(0.1))
    with pytest.raises(TypeError, match=r"default optimizer.*sbmoe\.fit\(\.\.\., optimizer=\.\.\.\)"):
        bayeskit.save(tmp_path / "sbmoe.bkz", est)


# ------------------------------------------------------------------ values of object arrays


def test_object_arrays_of_numpy_scalars_load_as_python_values(tmp_path):
    labels = np.array([np.str_("a") if v else np.str_("b") for v in Y_ML[:, 0]], dtype=object)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = E.ProbitClassifier(max_iter=3, random_state=0).fit(X, labels)
    loaded = bayeskit.load(bayeskit.save(tmp_path / "probit.bkz", est))
    assert loaded.predict(X).tolist() == est.predict(X).tolist()
    mixed = np.array([np.int64(2), np.float64(0.5), np.bool_(True), np.str_("x"), None], dtype=object)
    items = bayeskit.load(bayeskit.save(tmp_path / "mixed.bkz", mixed)).tolist()
    assert items == [2, 0.5, True, "x", None] and [type(x) for x in items] == [int, float, bool, str, type(None)]


# ------------------------------------------------------------------ corrupt and hostile files


def _members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def _rewrite(path, members: dict, header=None, compression=zipfile.ZIP_STORED):
    if header is not None:
        members = {**members, "bayeskit.json": header if isinstance(header, bytes) else json.dumps(header).encode()}
    with zipfile.ZipFile(path, "w", compression) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def test_a_member_declaring_more_data_than_it_holds_is_refused_before_allocating(tmp_path):
    path = bayeskit.save(tmp_path / "huge.bkz", np.arange(8.0))
    header = json.loads(_members(path)["bayeskit.json"])
    header["arrays"][0]["shape"] = [10**12]
    npy = _io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": (10**12,)})
    _rewrite(path, {**_members(path), "arrays/0.npy": npy.getvalue() + np.arange(8.0).tobytes()}, header)
    with pytest.raises(ValueError, match=r"huge\.bkz: bad bayeskit file: arrays/0\.npy"):
        bayeskit.load(path)


def test_compressed_members_are_refused(tmp_path):
    path = bayeskit.save(tmp_path / "deflated.bkz", np.zeros(1000))
    _rewrite(path, _members(path), compression=zipfile.ZIP_DEFLATED)
    with pytest.raises(ValueError, match=r"deflated\.bkz: bad bayeskit file: .*compressed"):
        bayeskit.load(path)


def _huge_integer(header, members):
    return json.dumps(header).replace('"tree": 1', '"tree": ' + "9" * 5000).encode(), members


def _object_array_too_big(header, members):
    header["tree"] = {"kind": "object_array", "shape": [0, 10**20], "items": []}
    return header, members


def _big_endian_jax_array(header, members):
    header["tree"] = {"kind": "array", "lib": "jax", "index": 0}
    header["arrays"][0]["dtype"] = ">f8"
    npy = _io.BytesIO()
    np.lib.format.write_array(npy, np.arange(3.0).astype(">f8"))
    return header, {**members, "arrays/0.npy": npy.getvalue()}


@pytest.mark.parametrize("tamper, part", [(_huge_integer, r"bayeskit\.json"), (_object_array_too_big, r"tree"),
                                          (_big_endian_jax_array, r"arrays/0\.npy")], ids=["integer", "object_array", "byte_order"])
def test_malformed_headers_name_the_file_and_the_part(tmp_path, tamper, part):
    path = bayeskit.save(tmp_path / "bad.bkz", 1, np.arange(3.0))
    members = _members(path)
    header, members = tamper(json.loads(members["bayeskit.json"]), members)
    _rewrite(path, members, header)
    with pytest.raises(ValueError, match=rf"bad\.bkz: bad bayeskit file: .*{part}"):
        bayeskit.load(path)


# ------------------------------------------------------------------ where and how a file is written


def test_saving_through_a_symlink_writes_its_target(tmp_path):
    target = tmp_path / "target.bkz"
    target.write_text("old")
    link = tmp_path / "link.bkz"
    link.symlink_to(target)
    bayeskit.save(link, np.arange(3.0))
    assert link.is_symlink() and link.resolve() == target
    np.testing.assert_array_equal(bayeskit.load(target), np.arange(3.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.bkz", "target.bkz"]


def test_overwriting_a_file_keeps_its_mode(tmp_path):
    path = bayeskit.save(tmp_path / "private.bkz", np.arange(3.0))
    path.chmod(0o600)
    bayeskit.save(path, np.arange(4.0))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    np.testing.assert_array_equal(bayeskit.load(path), np.arange(4.0))


def test_a_file_in_place_of_the_folder_is_named_a_file(tmp_path):
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"afile is a file, not a folder"):
        bayeskit.save(tmp_path / "afile" / "x.bkz", np.arange(3.0))

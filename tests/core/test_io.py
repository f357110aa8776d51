"""The safe codec of bayeskit.core.io: round trips bit for bit, and files that are
truncated, corrupted, foreign or hostile are refused with a ValueError, importing and
calling nothing."""

from __future__ import annotations

import io as _io
import json
import sys
import zipfile
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from identical import assert_identical

from bayeskit.core import io
from bayeskit.core.status import FitResult, Status


class Box(eqx.Module):
    a: Any
    b: Any = None
    label: str = eqx.field(static=True, default="box")


class Pair(NamedTuple):
    first: Any
    second: Any


class Unlisted(eqx.Module):
    a: Any


CLASSES = {"test.Box": Box, "test.Pair": Pair, "bayeskit.core.status.Status": Status,
           "bayeskit.core.status.FitResult": FitResult}


def save(path, obj, hparams=None):
    return io.save(path, obj, hparams, classes=CLASSES, version="test")


def load(path):
    return io.load(path, classes=CLASSES)


def _tree():
    rs = np.random.RandomState(3)
    rs.normal(size=3)  # a cached Gaussian in its state
    return Box(
        a={
            "f64": np.linspace(0, 1, 6).reshape(2, 3), "f32": jnp.arange(4, dtype=jnp.float32), "i8": np.int8([-1, 0, 1]),
            "bool": jnp.array([True, False]), "c64": np.array([1 + 2j], np.complex64), "u32": np.uint32([7]),
            "empty": jnp.zeros((0, 3)), "nan": np.array([np.nan, -np.inf, -0.0]), "fortran": np.asfortranarray(np.eye(3)[:, :2]),
            "weak": jnp.asarray(2.5), "np_scalar": np.float32(1.5), "np_int": np.int64(2**40), "np_str": np.str_("hi"),
            "strings": np.array(["regular", "bad_leverage"]), "bytes": np.array([b"ab", b"c"]),
            "objects": np.array(["x0", "x1", "x2"], dtype=object), "dtype": np.dtype("float32"),
            "key": jax.random.key(1), "keys": jax.random.split(jax.random.key(2), 3), "rbg": jax.random.key(0, impl="rbg"),
            "raw_key": jax.random.PRNGKey(0), "rs": rs,
        },
        b=(None, True, 0, -(2**70), 1.25, float("nan"), float("-inf"), "text", [1, [2, (3,)]], {2: "int key", 1: None},
           {(2, "b"): None, (1, "a"): 3.0}, Pair(Status.successful, Status.nonfinite), Box(jnp.ones(2), label="inner")),
        label="outer",
    )


def test_round_trip_bit_for_bit(tmp_path):
    tree = _tree()
    path = save(tmp_path / "tree.bkz", tree)
    assert path == tmp_path / "tree.bkz" and [p.name for p in tmp_path.iterdir()] == ["tree.bkz"]
    loaded = load(path)
    assert_identical(tree, loaded)
    assert loaded.label == "outer" and loaded.b[-1].label == "inner"
    assert loaded.a["weak"].weak_type and loaded.b[-2].first == Status.successful
    assert Status[loaded.b[-2].second] == Status[Status.nonfinite]
    # the same key draws the same numbers
    assert_identical(jax.random.normal(loaded.a["keys"][1]), jax.random.normal(tree.a["keys"][1]))
    assert_identical(loaded.a["rs"].normal(size=4), tree.a["rs"].normal(size=4))
    # the file is a zip of .npy arrays that numpy reads without pickle
    with np.load(path, allow_pickle=False) as npz:
        assert "bayeskit.json" in npz.files and npz["arrays/0"].dtype == np.float64
    header = json.loads(zipfile.ZipFile(path).read("bayeskit.json"))
    assert header["format"] == "bayeskit" and header["format_version"] == io.FORMAT_VERSION
    assert header["bayeskit_version"] == "test" and header["object"] == "test.Box"


def test_vmapped_fit_result_with_hyperparameters(tmp_path):
    def one(key):
        x = jax.random.normal(key, (4,))
        status = Status.where(jnp.all(x > -1), Status.successful, Status.max_iter_reached)
        return FitResult(state=Box(x, key), trace=jnp.cumsum(x), n_iter=jnp.sum(x > 0), status=status)

    result = jax.vmap(one)(jax.random.split(jax.random.key(0), 5))
    hparams = Box(0.5, (1, 2), label="hp")
    loaded, hp = load(save(tmp_path / "fit", result, hparams))
    assert_identical(result, loaded)
    assert_identical(hparams, hp)
    assert loaded.status._value.shape == (5,) and Status[loaded.status] == Status[result.status]
    np.testing.assert_array_equal(loaded.objective, result.objective)
    assert not isinstance(load(save(tmp_path / "fit2", result)), tuple)  # without hparams: the object alone


def _valid(tmp_path):
    return save(tmp_path / "good.bkz", Box(np.arange(3.0), jax.random.key(0)))


def _members(path) -> dict:
    with zipfile.ZipFile(path) as z:
        return {name: z.read(name) for name in z.namelist()}


def _rewrite(path, members: dict, header=None):
    """The archive ``members`` with the header replaced (a dict is dumped to JSON)."""
    if header is not None:
        members = {**members, "bayeskit.json": header if isinstance(header, bytes) else json.dumps(header).encode()}
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _header(path) -> dict:
    return json.loads(_members(path)["bayeskit.json"])


def test_truncated_file(tmp_path):
    path = _valid(tmp_path)
    data = path.read_bytes()
    for size in (len(data) // 2, len(data) - 10, 7, 0):
        cut = tmp_path / f"cut{size}.bkz"
        cut.write_bytes(data[:size])
        with pytest.raises(ValueError, match=rf"cut{size}\.bkz.*(zip|truncated|corrupted)"):
            load(cut)


def test_corrupted_bytes_inside_the_archive(tmp_path):
    path = _valid(tmp_path)
    data = bytearray(path.read_bytes())
    i = data.index(b"\x93NUMPY") + 60  # inside the first array's data: the CRC no longer matches
    data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=r"good\.bkz.*arrays/0\.npy"):
        load(path)


def test_corrupted_json(tmp_path):
    path = _valid(tmp_path)
    _rewrite(path, _members(path), b'{"format": "bayeskit", "format_ver')
    with pytest.raises(ValueError, match=r"good\.bkz.*bayeskit\.json.*not valid JSON"):
        load(path)


@pytest.mark.parametrize("kind", ["npz", "text", "zip_without_header", "other_json"])
def test_foreign_files(tmp_path, kind):
    path = tmp_path / "foreign"
    if kind == "npz":
        np.savez(path, a=np.ones(3))
        path = tmp_path / "foreign.npz"
    elif kind == "text":
        path.write_text("hello, world\n")
    elif kind == "zip_without_header":
        _rewrite(path, {"data.txt": b"x"})
    else:
        _rewrite(path, {}, {"format": "something else", "tree": None, "arrays": []})
    with pytest.raises(ValueError, match=r"foreign.*not (a bayeskit|a readable zip)"):
        load(path)


def test_missing_array_and_mismatched_arrays(tmp_path):
    path = _valid(tmp_path)
    members = _members(path)
    _rewrite(tmp_path / "missing.bkz", {k: v for k, v in members.items() if k != "arrays/0.npy"})
    with pytest.raises(ValueError, match=r"missing\.bkz.*arrays/0\.npy.*missing"):
        load(tmp_path / "missing.bkz")
    header = _header(path)
    header["arrays"][0]["shape"] = [4]
    _rewrite(tmp_path / "shape.bkz", members, header)
    with pytest.raises(ValueError, match=r"shape\.bkz.*arrays/0\.npy.*header says"):
        load(tmp_path / "shape.bkz")
    header["arrays"][0] = {"dtype": "<f4", "shape": [3]}
    _rewrite(tmp_path / "dtype.bkz", members, header)
    with pytest.raises(ValueError, match=r"dtype\.bkz.*arrays/0\.npy.*<f8.*header says <f4"):
        load(tmp_path / "dtype.bkz")
    header = _header(path)
    header["tree"]["fields"]["a"]["index"] = 9
    _rewrite(tmp_path / "index.bkz", members, header)
    with pytest.raises(ValueError, match=r"index\.bkz.*tree\.a.*outside"):
        load(tmp_path / "index.bkz")


def test_pickled_array_is_not_unpickled(tmp_path):
    path = _valid(tmp_path)
    buffer = _io.BytesIO()
    np.save(buffer, np.array([Pair(1, 2)], dtype=object), allow_pickle=True)
    header = _header(path)
    header["arrays"][0] = {"dtype": "|O", "shape": [1]}
    _rewrite(path, {**_members(path), "arrays/0.npy": buffer.getvalue()}, header)
    with pytest.raises(ValueError, match=r"arrays/0\.npy.*not a readable \.npy"):
        load(path)


HOSTILE = [
    {"kind": "module", "class": "os.system", "fields": {}},
    {"kind": "estimator", "class": "subprocess.Popen", "params": {"args": "touch PWNED"}, "attributes": {}},
    {"kind": "module", "class": "evil_module_xyz.Payload", "fields": {}},
    {"kind": "namedtuple", "class": "evil_module_xyz.Payload", "items": []},
    {"kind": "enum", "class": "evil_module_xyz.Payload", "value": 0},
    {"kind": "estimator", "class": "evil_module_xyz.Payload", "params": {}, "attributes": {}},
    {"kind": "module", "class": "json.decoder.JSONDecoder", "fields": {}},
    {"kind": "module", "class": "builtins.eval", "fields": {}},
    {"kind": "evil_module_xyz.Payload"},
    {"kind": "module", "class": "test.Pair", "fields": {}},  # allowed class, wrong kind
    {"kind": "module", "class": "test.Box", "fields": {"a": 1, "b": 2, "label": "x", "__class__": 3}},
]


@pytest.mark.parametrize("tree", HOSTILE, ids=lambda t: f"{t['kind']}:{t.get('class')}")
def test_hostile_header_imports_and_calls_nothing(tmp_path, monkeypatch, tree):
    monkeypatch.chdir(tmp_path)
    path = _valid(tmp_path)
    header = _header(path)
    header["tree"] = {"kind": "tuple", "items": [1, tree]}
    _rewrite(path, _members(path), header)
    modules = set(sys.modules)
    with pytest.raises(ValueError) as info:
        load(path)
    assert type(info.value) is ValueError
    assert "good.bkz" in str(info.value) and "tree[1]" in str(info.value)
    if "class" in tree and tree["class"] not in CLASSES:
        assert repr(tree["class"]) in str(info.value) and "not one of the classes bayeskit may load" in str(info.value)
    assert "evil_module_xyz" not in sys.modules
    assert set(sys.modules) == modules  # nothing was imported
    assert not (tmp_path / "PWNED").exists()


def test_an_importable_module_named_by_the_file_is_not_imported(tmp_path, monkeypatch):
    """A module that exists on sys.path and would leave a mark if imported: loading a
    file that names it only raises."""
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "bayeskit_trap_xyz.py").write_text(
        "import pathlib\npathlib.Path(__file__).with_name('IMPORTED').touch()\nclass Payload:\n    pass\n")
    path = _valid(tmp_path)
    for tree in ({"kind": "module", "class": "bayeskit_trap_xyz.Payload", "fields": {}},
                 {"kind": "estimator", "class": "bayeskit_trap_xyz.Payload", "params": {}, "attributes": {}}):
        header = _header(path)
        header["tree"] = tree
        _rewrite(path, _members(path), header)
        with pytest.raises(ValueError, match="'bayeskit_trap_xyz.Payload', which is not one of the classes"):
            load(path)
    assert "bayeskit_trap_xyz" not in sys.modules and not (tmp_path / "IMPORTED").exists()


def test_hostile_estimator_attribute_names(tmp_path):
    """Even an allowed estimator class only gets fitted state, never a name its class
    defines (no shadowing of methods) and no dunder."""
    from sklearn.base import BaseEstimator

    class Est(BaseEstimator):
        def __init__(self, alpha=1.0):
            self.alpha = alpha

        def predict(self, X):
            return X

    classes = {**CLASSES, "test.Est": Est}
    est = Est(2.0)
    est.coef_, est._private = np.ones(2), "x"
    path = io.save(tmp_path / "est", est, classes=classes, version="test")
    loaded = io.load(path, classes=classes)
    assert loaded.alpha == 2.0 and loaded._private == "x" and loaded.coef_.tobytes() == est.coef_.tobytes()
    members = _members(path)
    for attributes, params in (({"predict": 1}, {}), ({"__class__": 1}, {}), ({}, {"gamma": 1}), ({"alpha": 1}, {"alpha": 1})):
        header = json.loads(members["bayeskit.json"])
        header["tree"]["attributes"].update(attributes)
        header["tree"]["params"].update(params)
        _rewrite(path, members, header)
        with pytest.raises(ValueError, match=r"est: bad bayeskit file: tree"):
            io.load(path, classes=classes)


def test_newer_format_and_old_folder(tmp_path):
    path = _valid(tmp_path)
    header = _header(path)
    header["format_version"] = io.FORMAT_VERSION + 1
    _rewrite(path, _members(path), header)
    with pytest.raises(ValueError, match="newer bayeskit"):
        load(path)
    old = tmp_path / "old"
    old.mkdir()
    (old / "meta.json").write_text("{}")
    with pytest.raises(ValueError, match="old format"):
        load(old)


@pytest.mark.parametrize("bad", [lambda x: x, Unlisted(1.0), np.array([object()], dtype=object), {object(): 1}, {"f": print},
                                 np.zeros(2, dtype=[("a", "f8")])], ids=["lambda", "unlisted", "objects", "key", "builtin", "record"])
def test_unsupported_objects_write_nothing(tmp_path, bad):
    path = tmp_path / "out.bkz"
    with pytest.raises(TypeError, match=r"cannot save object"):
        save(path, Box(np.ones(3), (1, bad)))
    assert not path.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(TypeError, match=r"cannot save hparams"):
        save(path, Box(np.ones(3)), hparams=Box(bad))
    assert list(tmp_path.iterdir()) == []


def test_a_failed_save_keeps_the_old_file(tmp_path):
    path = _valid(tmp_path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        save(path, Box(lambda x: x))
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["good.bkz"]


def test_a_path_that_cannot_be_written_is_named_as_given(tmp_path, monkeypatch):
    """A missing folder or a folder as the file name is refused by the user's path (not
    the hidden temporary file's) before anything is encoded; ``~`` is the home folder."""
    with pytest.raises(FileNotFoundError, match=r"cannot save to .*nofolder/x\.bkz: the folder .*nofolder does not exist"):
        save(tmp_path / "nofolder" / "x.bkz", Box(np.ones(3)))
    with pytest.raises(IsADirectoryError, match=r"it is a folder"):
        save(tmp_path, Box(np.ones(3)))
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv("HOME", str(tmp_path))
    written = save("~/home.bkz", Box(np.ones(3)))
    assert written == tmp_path / "home.bkz" and written.exists()
    np.testing.assert_array_equal(load("~/home.bkz").a, np.ones(3))


def test_a_static_setting_added_since_the_file_was_written_takes_its_default(tmp_path):
    """A file written before ``Box.label`` existed loads with the default; a missing array
    field is still refused."""
    path = save(tmp_path / "old.bkz", Box(np.arange(3.0), 2.0, label="mine"))
    header = _header(path)
    del header["tree"]["fields"]["label"]
    _rewrite(path, _members(path), header)
    loaded = load(path)
    assert loaded.label == "box"
    np.testing.assert_array_equal(loaded.a, np.arange(3.0))
    del header["tree"]["fields"]["b"]
    _rewrite(path, _members(path), header)
    with pytest.raises(ValueError, match="do not match"):
        load(path)

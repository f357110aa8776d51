"""Safe save and load: a tree of arrays, keys, scalars, strings, containers and
allow-listed classes to one zip file of ``.npy`` arrays and a versioned JSON header, and
back. No pickle anywhere: arrays are read with ``allow_pickle=False`` and the only code
that loading runs is the construction of classes found in the allow-list that the caller
passes in (``{"stable.name": class}``); a name in the file is looked up in that mapping
and nowhere else, so nothing is imported or resolved by a name read from the file.

This module knows no model: :mod:`bayeskit.persistence` builds bayeskit's allow-list and
offers ``bayeskit.save`` / ``bayeskit.load`` on top of :func:`save` and :func:`load`.

The file
--------
A zip archive (``np.load`` can open it too) holding ``bayeskit.json`` and one
``arrays/<i>.npy`` per array, written and checked by :mod:`bayeskit.core.archive`. The
header is a JSON object::

    {"format": "bayeskit", "format_version": 1, "bayeskit_version": "0.1.0",
     "versions": {"jax": ..., "numpy": ..., "equinox": ...},
     "object": "bayeskit.estimators.GraphicalLasso",   # what the file holds
     "tree": <node>, "hparams": <node>,                # "hparams" only when given
     "arrays": [{"dtype": "<f8", "shape": [4, 4]}, ...]}

A node is a JSON ``null``, boolean, integer, string or finite number standing for
itself, or an object with a ``"kind"``:

- ``float`` (``bits``: the IEEE bits of a non-finite Python float, hex),
- ``tuple`` / ``list`` (``items``), ``dict`` (``items``: ``[key, value]`` pairs),
- ``array`` (``index`` into ``arrays``, ``lib``: ``"numpy"`` or ``"jax"``, ``weak``:
  JAX's weak type), ``scalar`` (a NumPy scalar, stored as a 0-d array),
  ``object_array`` (a NumPy object array of strings or other JSON scalars, in the
  header), ``dtype`` (a NumPy dtype), ``key`` (a typed JAX PRNG key: ``impl`` and the
  ``data`` array), ``random_state`` (a NumPy ``RandomState``'s state),
- ``module`` (an ``eqx.Module``: ``class`` and ``fields``), ``enum`` (an
  ``eqx.Enumeration`` item: ``class`` and ``value``), ``namedtuple`` (``class`` and
  ``items``), ``estimator`` (an object with ``get_params``: ``class``, the
  constructor's ``params`` and the other instance ``attributes``).

Everything is encoded in memory before the file is written (to a temporary name in the
same folder, then renamed), so an object that cannot be saved raises ``TypeError``
and leaves nothing on disk. A file that is truncated, corrupted, foreign or names a
class outside the allow-list raises ``ValueError`` naming the file and the bad part.
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import json
import math
import struct
from collections.abc import Mapping
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.archive import ARRAY_KINDS, FORMAT, FORMAT_VERSION, array_name, bad, read, write

KEY_IMPLS = ("threefry2x32", "rbg", "unsafe_rbg")
_LITERALS = (type(None), bool, int, str)


class _Probe(eqx.Enumeration):
    probe = ""


_ENUM_ITEM = type(_Probe.probe)  # equinox's EnumerationItem, without a private import
_ENUM_META = type(_Probe)


def class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_namedtuple_class(cls) -> bool:
    return isinstance(cls, type) and issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple)


def _is_estimator_class(cls) -> bool:
    return isinstance(cls, type) and callable(getattr(cls, "get_params", None)) and not issubclass(cls, eqx.Module)


def _constructor_params(cls) -> set[str]:
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {p.name for p in inspect.signature(cls).parameters.values() if p.kind in kinds}


def _attribute_name_ok(cls: type, name) -> bool:
    """Fitted state: an identifier, not a dunder, and not the name of anything the class
    defines (so loaded data never shadows a method or property)."""
    return (isinstance(name, str) and name.isidentifier() and not name.startswith("__")
            and not any(name in vars(c) for c in cls.__mro__))


# ----------------------------------------------------------------------------- encoding


class _Encoder:
    """Python tree -> (JSON node, .npy blobs). Raises ``TypeError`` naming the path of
    anything it cannot store safely."""

    def __init__(self, classes: Mapping[str, type]):
        self.names = {cls: name for name, cls in classes.items()}
        self.table: list[dict] = []
        self.blobs: list[bytes] = []
        self._memo: dict[int, int] = {}
        self._alive: list = []  # keeps memoised objects alive so their ids stay unique

    def unsupported(self, where: str, value, why: str = "") -> TypeError:
        what = f"a {class_name(type(value))}"
        return TypeError(f"cannot save {where}: {what} {why or 'is not a type bayeskit can store safely'}.")

    def encode(self, v, where: str):
        if type(v) in _LITERALS:
            return v
        if type(v) is float:
            return v if math.isfinite(v) else {"kind": "float", "bits": struct.pack(">d", v).hex()}
        for test, method in self._dispatch:
            if test(v):
                return method(self, v, where)
        raise self.unsupported(where, v, "is not a type bayeskit can store safely (functions, optimisers and "
                                         "arbitrary objects cannot be saved)")

    def _store(self, v, where: str) -> int:
        """Index of ``v``'s array in the file (one entry per distinct object)."""
        if id(v) in self._memo:
            return self._memo[id(v)]
        host = np.asarray(v)
        if host.dtype.kind not in ARRAY_KINDS:
            raise self.unsupported(where, v, f"has dtype {host.dtype}, which cannot be stored without pickle")
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, host, allow_pickle=False)
        self.blobs.append(buffer.getvalue())
        self.table.append({"dtype": np.lib.format.dtype_to_descr(host.dtype), "shape": list(host.shape)})
        self._memo[id(v)] = len(self.table) - 1
        self._alive.append(v)
        return len(self.table) - 1

    def _jax(self, v, where):
        if isinstance(v, jax.core.Tracer):
            raise self.unsupported(where, v, "is traced: save outside jit/vmap")
        if jax.dtypes.issubdtype(v.dtype, jax.dtypes.prng_key):
            impl = str(jax.random.key_impl(v))
            if impl not in KEY_IMPLS:
                raise self.unsupported(where, v, f"is a key of the PRNG implementation {impl!r}; known: {KEY_IMPLS}")
            return {"kind": "key", "impl": impl, "data": self._numpy(np.asarray(jax.random.key_data(v)), where)}
        node = {"kind": "array", "lib": "jax", "index": self._store(v, where)}
        if v.weak_type:
            node["weak"] = True
        return node

    def _numpy(self, v, where):
        if v.dtype == object:
            items = [x.item() if isinstance(x, np.generic) else x for x in v.ravel().tolist()]  # np.str_("a") as "a"
            if not all(type(x) in _LITERALS or (type(x) is float and math.isfinite(x)) for x in items):
                raise self.unsupported(where, v, "of dtype object holds values other than strings, numbers, "
                                                 "booleans and None")
            return {"kind": "object_array", "shape": list(v.shape), "items": items}
        return {"kind": "array", "lib": "numpy", "index": self._store(v, where)}

    def _scalar(self, v, where):
        return {"kind": "scalar", "index": self._store(np.asarray(v), where)}

    def _dtype(self, v, where):
        if v.kind not in ARRAY_KINDS:
            raise self.unsupported(where, v, f"{v} cannot be stored")
        return {"kind": "dtype", "descr": np.lib.format.dtype_to_descr(v)}

    def _random_state(self, v, where):
        name, keys, pos, has_gauss, cached = v.get_state(legacy=True)
        return {"kind": "random_state", "keys": self._numpy(np.asarray(keys), where), "pos": int(pos),
                "has_gauss": int(has_gauss), "cached_gaussian": self.encode(float(cached), where)}

    def _allowed(self, v, where) -> str:
        name = self.names.get(type(v))
        if name is None:
            raise self.unsupported(where, v, "is not one of the classes bayeskit may load (its allow-list)")
        return name

    def _enum(self, v, where):
        name = self.names.get(v._enumeration)
        if name is None:
            raise self.unsupported(where, v, f"is an item of {class_name(v._enumeration)}, which is not on the allow-list")
        return {"kind": "enum", "class": name, "value": self.encode(v._value, f"{where}._value")}

    def _module(self, v, where):
        name = self._allowed(v, where)
        fields = {f.name: self.encode(getattr(v, f.name), f"{where}.{f.name}") for f in dataclasses.fields(v)}
        return {"kind": "module", "class": name, "fields": fields}

    def _namedtuple(self, v, where):
        name = self._allowed(v, where)
        return {"kind": "namedtuple", "class": name,
                "items": [self.encode(x, f"{where}.{f}") for f, x in zip(type(v)._fields, v)]}

    def _sequence(self, v, where):
        return {"kind": type(v).__name__, "items": [self.encode(x, f"{where}[{i}]") for i, x in enumerate(v)]}

    def _dict(self, v, where):
        items = []
        for k, x in v.items():
            if not _hashable_literal(k):
                raise self.unsupported(f"{where} key {k!r}", k, "is not a string, number, boolean, None or tuple of them")
            items.append([self.encode(k, where), self.encode(x, f"{where}[{k!r}]")])
        return {"kind": "dict", "items": items}

    def _estimator(self, v, where):
        name = self._allowed(v, where)
        params = v.get_params(deep=False)
        state = {k: x for k, x in vars(v).items() if k not in params}
        for k in state:
            if not _attribute_name_ok(type(v), k):
                raise TypeError(f"cannot save {where}: its attribute {k!r} could not be restored (fitted state must be "
                                "an identifier, not a dunder, and not a name its class defines).")
        return {"kind": "estimator", "class": name,
                "params": {k: self.encode(x, f"{where}.params[{k!r}]") for k, x in params.items()},
                "attributes": {k: self.encode(x, f"{where}.{k}") for k, x in state.items()}}

    _dispatch = (
        (lambda v: isinstance(v, jax.Array), _jax),
        (lambda v: type(v) is np.ndarray, _numpy),
        (lambda v: isinstance(v, np.generic), _scalar),
        (lambda v: isinstance(v, np.dtype), _dtype),
        (lambda v: type(v) is np.random.RandomState, _random_state),
        (lambda v: isinstance(v, _ENUM_ITEM), _enum),
        (lambda v: isinstance(v, eqx.Module), _module),
        (lambda v: _is_namedtuple_class(type(v)), _namedtuple),
        (lambda v: type(v) in (tuple, list), _sequence),
        (lambda v: type(v) is dict, _dict),
        (lambda v: _is_estimator_class(type(v)), _estimator),
    )


def _hashable_literal(k) -> bool:
    if type(k) is tuple:
        return all(_hashable_literal(x) for x in k)
    return type(k) in (*_LITERALS, float)


# ----------------------------------------------------------------------------- decoding


class _Decoder:
    """JSON node + arrays -> Python tree. Every class comes from ``classes``; anything
    unexpected raises ``ValueError`` naming the file and the node."""

    def __init__(self, source: Path, classes: Mapping[str, type], arrays: list[np.ndarray]):
        self.source, self.classes, self.arrays = source, classes, arrays
        self._cache: dict[tuple, object] = {}

    def bad(self, where: str, problem: str) -> ValueError:
        return bad(self.source, where, problem)

    def decode(self, node, where: str):
        if type(node) in _LITERALS or type(node) is float:
            return node
        if type(node) is not dict:
            raise self.bad(where, f"expected a value, found a JSON {type(node).__name__}")
        kind = node.get("kind")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            raise self.bad(where, f"unknown kind {kind!r}")
        keys, method = handler
        if set(node) != {"kind", *keys} and not (kind == "array" and set(node) == {"kind", *keys, "weak"}):
            raise self.bad(where, f"a {kind!r} node needs the entries {sorted(keys)}, found {sorted(set(node) - {'kind'})}")
        return method(self, node, where)

    def get(self, node, name, types, where):
        value = node[name]
        if type(value) not in (types if isinstance(types, tuple) else (types,)):
            raise self.bad(where, f"{name!r} should be {types}, found {type(value).__name__}")
        return value

    def resolve(self, node, where, check, what) -> type:
        name = self.get(node, "class", str, where)
        cls = self.classes.get(name)  # the only place a class is found: the allow-list
        if cls is None:
            raise self.bad(where, f"names the class {name!r}, which is not one of the classes bayeskit may load")
        if not check(cls):
            raise self.bad(where, f"{name!r} is not {what}")
        return cls

    def array(self, node, where):
        index = self.get(node, "index", int, where)
        if not 0 <= index < len(self.arrays):
            raise self.bad(where, f"array index {index} is outside the {len(self.arrays)} arrays of the file")
        return self.arrays[index]

    def _float(self, node, where):
        bits = self.get(node, "bits", str, where)
        try:
            return struct.unpack(">d", bytes.fromhex(bits))[0]
        except (ValueError, struct.error) as e:
            raise self.bad(where, f"bad float bits {bits!r}") from e

    def _items(self, node, where):
        return [self.decode(x, f"{where}[{i}]") for i, x in enumerate(self.get(node, "items", list, where))]

    def _tuple(self, node, where):
        return tuple(self._items(node, where))

    def _dict(self, node, where):
        out = {}
        for i, pair in enumerate(self.get(node, "items", list, where)):
            if type(pair) is not list or len(pair) != 2:
                raise self.bad(f"{where}[{i}]", "a dict item must be a [key, value] pair")
            key = self.decode(pair[0], f"{where}[{i}] key")
            if not _hashable_literal(key):
                raise self.bad(f"{where}[{i}]", f"a {type(key).__name__} cannot be a dict key")
            out[key] = self.decode(pair[1], f"{where}[{key!r}]")
        return out

    def _array(self, node, where):
        lib, weak = self.get(node, "lib", str, where), node.get("weak", False)
        if lib not in ("numpy", "jax") or type(weak) is not bool:
            raise self.bad(where, f"unknown array library {lib!r} or weak flag {weak!r}")
        index = self.get(node, "index", int, where)
        cache = (index, lib, weak)
        if cache not in self._cache:  # one object per stored array, as when it was saved
            self._cache[cache] = self._make_array(self.array(node, where), lib, weak, where, array_name(index))
        return self._cache[cache]

    def _make_array(self, host: np.ndarray, lib: str, weak: bool, where: str, member: str):
        if lib == "numpy":
            return host
        if host.dtype.kind not in "biufc" or not host.dtype.isnative:
            raise self.bad(member, f"holds {host.dtype.str}, which the JAX array {where} cannot have (it needs a numeric "
                                   "dtype in this machine's byte order)")
        if jax.dtypes.canonicalize_dtype(host.dtype) != host.dtype:
            raise ValueError(f"{self.source}: saved with 64-bit JAX arrays ({where} is {host.dtype}), which this "
                             f"session's JAX does not hold: enable them (jax.config.update('jax_enable_x64', True)) "
                             f"before loading.")
        x = jnp.asarray(host)
        return _weak(x) if weak else x

    def _scalar(self, node, where):
        host = self.array(node, where)
        if host.ndim:
            raise self.bad(where, f"a scalar needs a 0-d array, found shape {host.shape}")
        return host[()]

    def _object_array(self, node, where):
        shape, items = self.get(node, "shape", list, where), self.get(node, "items", list, where)
        if not all(type(n) is int and n >= 0 for n in shape) or math.prod(shape) != len(items):
            raise self.bad(where, f"shape {shape} does not fit {len(items)} items")
        if not all(type(x) in (*_LITERALS, float) for x in items):
            raise self.bad(where, "an object array holds only strings, numbers, booleans and None")
        out = np.empty(len(items), dtype=object)
        out[:] = items
        try:
            return out.reshape(shape)
        except ValueError as e:  # more dimensions, or longer ones, than NumPy holds
            raise self.bad(where, f"shape {shape} cannot be made ({e})") from e

    def _dtype(self, node, where):
        descr = self.get(node, "descr", str, where)
        try:
            dtype = np.lib.format.descr_to_dtype(descr)
        except (TypeError, ValueError) as e:
            raise self.bad(where, f"bad dtype {descr!r}") from e
        if dtype.kind not in ARRAY_KINDS:
            raise self.bad(where, f"dtype {descr!r} is not allowed")
        return dtype

    def _key(self, node, where):
        impl, data = self.get(node, "impl", str, where), self.decode(self.get(node, "data", dict, where), f"{where}.data")
        if impl not in KEY_IMPLS or type(data) is not np.ndarray or data.dtype != np.uint32:
            raise self.bad(where, f"a key needs a known implementation {KEY_IMPLS} and uint32 data")
        try:
            return jax.random.wrap_key_data(data, impl=impl)
        except (TypeError, ValueError, IndexError) as e:
            raise self.bad(where, f"key data of shape {data.shape} do not fit {impl}: {e}") from e

    def _random_state(self, node, where):
        keys = self.decode(self.get(node, "keys", dict, where), f"{where}.keys")
        pos, has_gauss = self.get(node, "pos", int, where), self.get(node, "has_gauss", int, where)
        cached = self.decode(node["cached_gaussian"], f"{where}.cached_gaussian")
        if type(keys) is not np.ndarray or keys.dtype != np.uint32 or keys.shape != (624,) or type(cached) is not float:
            raise self.bad(where, "a RandomState needs 624 uint32 keys and a float")
        state = np.random.RandomState()
        try:
            state.set_state(("MT19937", keys, pos, has_gauss, cached))
        except (TypeError, ValueError, OverflowError) as e:
            raise self.bad(where, f"bad RandomState: {e}") from e
        return state

    def _enum(self, node, where):
        cls = self.resolve(node, where, lambda c: isinstance(c, _ENUM_META), "an enumeration")
        value = self.decode(node["value"], f"{where}.value")
        host = np.asarray(value) if isinstance(value, (np.ndarray, jax.Array)) else None
        if host is None or host.dtype.kind not in "iu" or not np.all((host >= 0) & (host < len(cls))):
            raise self.bad(where, f"an item of {cls.__qualname__} needs integers in [0, {len(cls)})")
        item = object.__new__(_ENUM_ITEM)  # as equinox itself unflattens a Module
        object.__setattr__(item, "_value", value)
        object.__setattr__(item, "_enumeration", cls)
        return item

    def _module(self, node, where):
        cls = self.resolve(node, where, lambda c: isinstance(c, type) and issubclass(c, eqx.Module)
                           and not issubclass(c, _ENUM_ITEM), "an equinox Module")
        fields = self.get(node, "fields", dict, where)
        names = [f.name for f in dataclasses.fields(cls)]
        # a static setting added to the class since the file was written takes its default
        defaults = {f.name: f.default for f in dataclasses.fields(cls)
                    if f.metadata.get("static") and f.default is not dataclasses.MISSING and f.name not in fields}
        if set(fields) | set(defaults) != set(names):
            raise self.bad(where, f"fields {sorted(fields)} do not match {cls.__qualname__}'s {sorted(names)}")
        values = {name: defaults[name] if name in defaults else self.decode(fields[name], f"{where}.{name}") for name in names}
        module = object.__new__(cls)  # as equinox's own unflatten: no __init__, no checks
        for name in names:
            object.__setattr__(module, name, values[name])
        return module

    def _namedtuple(self, node, where):
        cls = self.resolve(node, where, _is_namedtuple_class, "a named tuple")
        items = self._items(node, where)
        if len(items) != len(cls._fields):
            raise self.bad(where, f"{cls.__qualname__} has {len(cls._fields)} fields, found {len(items)}")
        return cls(*items)

    def _estimator(self, node, where):
        cls = self.resolve(node, where, _is_estimator_class, "an estimator")
        params, attributes = self.get(node, "params", dict, where), self.get(node, "attributes", dict, where)
        unknown = set(params) - _constructor_params(cls)
        if unknown:
            raise self.bad(where, f"{cls.__qualname__} takes no parameters {sorted(unknown)}")
        bad_names = [k for k in attributes if k in params or not _attribute_name_ok(cls, k)]
        if bad_names:
            raise self.bad(where, f"attributes {bad_names} are not fitted state of {cls.__qualname__}")
        kwargs = {k: self.decode(v, f"{where}.params[{k!r}]") for k, v in params.items()}
        state = {k: self.decode(v, f"{where}.{k}") for k, v in attributes.items()}
        try:
            estimator = cls(**kwargs)
        except (TypeError, ValueError) as e:
            raise self.bad(where, f"{cls.__qualname__}(**params) failed: {e}") from e
        vars(estimator).update(state)
        return estimator

    _handlers = {
        "float": (("bits",), _float),
        "tuple": (("items",), _tuple),
        "list": (("items",), _items),
        "dict": (("items",), _dict),
        "array": (("index", "lib"), _array),
        "scalar": (("index",), _scalar),
        "object_array": (("shape", "items"), _object_array),
        "dtype": (("descr",), _dtype),
        "key": (("impl", "data"), _key),
        "random_state": (("keys", "pos", "has_gauss", "cached_gaussian"), _random_state),
        "enum": (("class", "value"), _enum),
        "module": (("class", "fields"), _module),
        "namedtuple": (("class", "items"), _namedtuple),
        "estimator": (("class", "params", "attributes"), _estimator),
    }


def _weak(x: jax.Array) -> jax.Array:
    """``x`` with JAX's weak type (as a Python scalar has), so it promotes as it did."""
    try:
        from jax._src.lax.lax import _convert_element_type
    except ImportError:  # pragma: no cover - a JAX without it keeps the strong type
        return x
    return _convert_element_type(x, x.dtype, weak_type=True)


# ------------------------------------------------------------------------------- public


def save(path, obj, hparams=None, *, classes: Mapping[str, type], version: str) -> Path:
    """Write ``obj`` (and ``hparams`` when given) to the file ``path``; see the module
    docstring for what can be stored. Everything is encoded before anything is written.

    Parameters
    ----------
    path : str or Path
        The file (``~`` expanded); its folder must exist. An existing file is replaced,
        keeping its permissions; a symbolic link is followed, its target replaced.
    obj, hparams
        What to store.
    classes : mapping from stable name to class
        The allow-list: every Module, enumeration, named tuple or estimator class in
        ``obj`` must be one of its values.
    version : str
        The library version written into the header.

    Raises
    ------
    TypeError
        If some part of ``obj`` or ``hparams`` cannot be stored; nothing is written.
    FileNotFoundError, NotADirectoryError, IsADirectoryError
        If ``path``'s folder does not exist, is a file, or ``path`` is a folder.
    """
    path = _writable(path)
    encoder = _Encoder(classes)
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "bayeskit_version": str(version),
              "versions": {"jax": jax.__version__, "numpy": np.__version__, "equinox": eqx.__version__},
              "object": encoder.names.get(type(obj), type(obj).__name__),
              "tree": encoder.encode(obj, "object")}
    if hparams is not None:
        header["hparams"] = encoder.encode(hparams, "hparams")
    header["arrays"] = encoder.table
    data = json.dumps(header, allow_nan=False, indent=1).encode("utf-8")
    return write(path, data, encoder.blobs)


def _writable(path) -> Path:
    """``path`` (``~`` expanded) if a file can be written there, refused by its own name
    otherwise (the write goes through a hidden temporary file, whose name the OS would give)."""
    path = Path(path).expanduser()
    if path.is_dir():
        raise IsADirectoryError(f"cannot save to {path}: it is a folder; give a file name such as {path / 'fit.bkz'}")
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(f"cannot save to {path}: {path.parent} is a file, not a folder")
    if not path.parent.is_dir():
        raise FileNotFoundError(f"cannot save to {path}: the folder {path.parent} does not exist")
    return path


def load(path, *, classes: Mapping[str, type]):
    """Read a file written by :func:`save`: the object, or ``(object, hparams)`` when
    hyperparameters were saved with it.

    Raises
    ------
    FileNotFoundError
        If there is no file ``path``.
    ValueError
        If the file is not a bayeskit file, is truncated or corrupted, or names a class
        that is not in ``classes``; the message names the file and the bad part.
    """
    path = Path(path).expanduser()
    header, arrays = read(path)
    decoder = _Decoder(path, classes, arrays)
    try:
        obj = decoder.decode(header["tree"], "tree")
        if "hparams" not in header:
            return obj
        return obj, decoder.decode(header["hparams"], "hparams")
    except RecursionError as e:
        raise bad(path, "header", "nested too deeply") from e
    except (TypeError, KeyError, IndexError, OverflowError) as e:  # a crafted header the checks above did not foresee
        raise bad(path, "header", f"cannot be decoded ({type(e).__name__}: {e})") from e

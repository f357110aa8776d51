"""The container of a bayeskit file (:mod:`bayeskit.core.io` encodes what goes in it): a
zip archive holding the JSON header ``bayeskit.json`` and one ``.npy`` member per array,
``arrays/<i>.npy``, stored uncompressed. :func:`write` writes it atomically; :func:`read`
checks every part before anything is decoded and names the bad one."""

from __future__ import annotations

import io
import json
import math
import os
import secrets
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

FORMAT = "bayeskit"
FORMAT_VERSION = 1
HEADER = "bayeskit.json"
ARRAY_KINDS = "biufcUS"  # numeric, bool and fixed-width string dtypes: no objects, no records
_NPY_HEADERS = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}


def array_name(i: int) -> str:
    return f"arrays/{i}.npy"


def bad(source, where: str, problem: str) -> ValueError:
    return ValueError(f"{source}: bad bayeskit file: {where}: {problem}.")


def write(path: Path, header: bytes, blobs: list[bytes]) -> Path:
    """Write the archive under a temporary name beside ``path`` (beside the target of a
    symbolic link), then rename it over that file: a reader never sees half a file, and
    a failure leaves none. A file replaced keeps its permissions."""
    target = path.resolve()
    tmp = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    try:
        with open(tmp, "xb") as f:
            if target.exists():
                os.fchmod(f.fileno(), stat.S_IMODE(target.stat().st_mode))
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as z:
                z.writestr(HEADER, header)
                for i, blob in enumerate(blobs):
                    z.writestr(array_name(i), blob)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _check_table(source, table) -> list[tuple[str, list[int]]]:
    if type(table) is not list:
        raise bad(source, "header 'arrays'", "must be a list")
    out = []
    for i, entry in enumerate(table):
        ok = (type(entry) is dict and set(entry) == {"dtype", "shape"} and type(entry["dtype"]) is str
              and type(entry["shape"]) is list and all(type(n) is int and n >= 0 for n in entry["shape"]))
        if not ok:
            raise bad(source, f"header 'arrays'[{i}]", f"needs a dtype string and a shape list, found {entry!r}")
        out.append((entry["dtype"], entry["shape"]))
    return out


def _member(source, z: zipfile.ZipFile, name: str) -> bytes:
    try:
        info = z.getinfo(name)
    except KeyError as e:
        raise bad(source, name, "missing") from e
    if info.compress_type != zipfile.ZIP_STORED:
        raise bad(source, name, "compressed, but a bayeskit file stores its members uncompressed")
    try:
        return z.read(info)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError, RuntimeError) as e:
        # RuntimeError, NotImplementedError: zipfile's "encrypted" and "unsupported feature"
        raise bad(source, name, f"cannot be read, the file is truncated or corrupted ({e})") from e


def _read_header(source, z: zipfile.ZipFile) -> dict:
    names = z.namelist()
    if HEADER not in names:
        raise bad(source, HEADER, "missing: this is not a bayeskit file")
    if len(set(names)) != len(names):
        raise bad(source, "archive", "members appear twice")
    try:
        header = json.loads(_member(source, z, HEADER).decode("utf-8"))
    except (ValueError, RecursionError) as e:  # ValueError: undecodable UTF-8, bad JSON, an integer too long
        raise bad(source, HEADER, f"not valid JSON ({e})") from e
    if type(header) is not dict or header.get("format") != FORMAT:
        raise bad(source, HEADER, "not a bayeskit header (no \"format\": \"bayeskit\")")
    version = header.get("format_version")
    if type(version) is not int or version < 1:
        raise bad(source, "header 'format_version'", f"{version!r} is not a format version")
    if version > FORMAT_VERSION:
        raise bad(source, "header 'format_version'", f"format {version} was written by a newer bayeskit "
                   f"({header.get('bayeskit_version')!r}); this one reads format {FORMAT_VERSION}")
    if "tree" not in header:
        raise bad(source, "header 'tree'", "missing")
    expected = {HEADER} | {array_name(i) for i in range(len(_check_table(source, header.get("arrays"))))}
    extra = sorted(set(names) - expected)
    if extra:
        raise bad(source, "archive", f"unexpected members {extra[:5]}")
    return header


def _check_declared_size(raw: bytes) -> None:
    """Raise ``ValueError`` if the shape and dtype that the header of the ``.npy`` ``raw``
    declares need more bytes than follow it (NumPy would allocate them before reading)."""
    stream = io.BytesIO(raw)
    version = np.lib.format.read_magic(stream)
    if version not in _NPY_HEADERS:
        raise ValueError(f".npy format version {version} is not one bayeskit writes")
    shape, _, dtype = _NPY_HEADERS[version](stream)
    held = len(raw) - stream.tell()
    if math.prod(shape) * dtype.itemsize > held:
        raise ValueError(f"its header declares {dtype.str} {list(shape)}, more than the {held} bytes that follow")


def _read_array(source, z: zipfile.ZipFile, i: int, dtype: str, shape: list[int]) -> np.ndarray:
    name = array_name(i)
    raw = _member(source, z, name)
    try:
        _check_declared_size(raw)
        array = np.lib.format.read_array(io.BytesIO(raw), allow_pickle=False)
    except (ValueError, OSError, EOFError, SyntaxError) as e:
        raise bad(source, name, f"not a readable .npy array ({e})") from e
    found = np.lib.format.dtype_to_descr(array.dtype)
    if array.dtype.kind not in ARRAY_KINDS or found != dtype or list(array.shape) != shape:
        raise bad(source, name, f"holds {found} {list(array.shape)}, the header says {dtype} {shape}")
    return array


def read(path: Path) -> tuple[dict, list[np.ndarray]]:
    if path.is_dir():
        old = (path / "meta.json").exists()
        raise bad(path, "file", "a folder in the old format (meta.json, result.eqx), which bayeskit no longer reads; "
                   "fit again and save" if old else "a folder, not a bayeskit file")
    try:
        with zipfile.ZipFile(path) as z:
            header = _read_header(path, z)
            table = _check_table(path, header["arrays"])
            return header, [_read_array(path, z, i, dtype, shape) for i, (dtype, shape) in enumerate(table)]
    except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as e:
        raise bad(path, "archive", f"not a readable zip archive, truncated or corrupted ({e})") from e

"""Compiled programs kept on disk whole, so that a new process skips tracing and lowering.

JAX's persistent compilation cache (:mod:`bayeskit.core.cache`) is keyed on the lowered
program, so every new process still traces and lowers a program before it finds the
compiled one on disk; for an MCMC driver that takes longer than running it on a small
problem. :func:`jit` is ``jax.jit`` that also keeps each program's serialised executable
in ``<cache folder>/executables``, keyed on what determines the program without tracing
it: the function and a digest of its file, a digest of bayeskit's source, the versions of
Python, JAX, jaxlib, NumPy, equinox, numpyro and optax, JAX's configuration, the backend
and its devices, ``XLA_FLAGS``, the compiler options, the static arguments, and the
structure, shapes and dtypes of the others. A later process with the same key loads the
executable and runs it.

Calls go to plain ``jax.jit`` when an argument is traced (inside ``jit``, ``vmap``,
``grad``) or is not a single-device array on the default device, and when a static
argument's ``repr`` names an object's address (it would differ from process to process).
Nothing is stored for a program with a host callback (progress bars, errors raised from
inside the program), which cannot be serialised, nor for one this process read from
JAX's cache instead of compiling it: XLA's CPU executables read from JAX's cache serialise
without their kernels (jaxlib 0.10: the load succeeds and the run fails).

It is on when bayeskit's compilation cache is on in bayeskit's folder (not in a folder the
user gave JAX), unless ``BAYESKIT_EXECUTABLE_CACHE=0``. A file that cannot be read is
compiled again and replaced. Loading an executable runs native code from the cache
folder, as JAX's own cache does: keep the folder private to its user.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import sys
import threading
from importlib import metadata
from pathlib import Path

import jax
from jax.experimental import serialize_executable

from bayeskit.core import cache

_SWITCH = "BAYESKIT_EXECUTABLE_CACHE"
_HIT_EVENT = "/jax/compilation_cache/cache_hits"
_PACKAGES = ("jax", "jaxlib", "numpy", "equinox", "numpyro", "optax")
_lock = threading.Lock()
_reads_from_jax_cache = threading.local()


def folder() -> Path | None:
    """Where executables are kept, or None when the cache is off (see the module docstring)."""
    if os.environ.get(_SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    configured = jax.config.jax_compilation_cache_dir
    if not configured or Path(configured) != cache.directory():
        return None
    return Path(configured) / "executables"


@functools.cache
def _environment() -> str:
    """Everything outside a call that shapes its program (computed once per process)."""
    source = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        source.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    versions = {name: metadata.version(name) for name in _PACKAGES}
    config = {k: v for k, v in sorted(jax.config.values.items()) if not any(w in k for w in ("cache", "log", "profil"))}
    devices = [(d.platform, d.device_kind) for d in jax.devices()]
    return repr((source.hexdigest(), sys.version, versions, config, jax.default_backend(), devices,
                 os.environ.get("XLA_FLAGS", "")))


@functools.cache
def _file_digest(path: str | None) -> str:
    """A digest of the file that defines a function (bayeskit's files are in
    :func:`_environment` already; this covers a caller's own)."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else ""


def _on_event(event: str, **_) -> None:
    if event == _HIT_EVENT:
        _reads_from_jax_cache.value = True


@functools.cache
def _listen() -> None:
    jax.monitoring.register_event_listener(_on_event)


def _plain(leaf, device) -> bool:
    """A concrete array on ``device`` (or a host value), not a tracer."""
    if isinstance(leaf, jax.core.Tracer):
        return False
    if isinstance(leaf, jax.Array):
        return leaf.is_fully_addressable and leaf.devices() == {device}
    return True


def jit(fun=None, /, *, static_argnums=(), static_argnames=(), donate_argnums=(), compiler_options=None):
    """``jax.jit(fun, ...)`` whose executables a later process loads instead of tracing,
    lowering and compiling again; usable as a decorator, with or without arguments."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, compiler_options=compiler_options)
    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    jitted = jax.jit(fun, static_argnums=static_argnums, static_argnames=static_argnames, donate_argnums=donate_argnums,
                     compiler_options=compiler_options)
    params = list(inspect.signature(fun).parameters)
    static_positions = set(static_argnums) | {params.index(n) for n in static_argnames if n in params}
    static_names = set(static_argnames) | {params[i] for i in static_argnums if i < len(params)}
    name = f"{fun.__module__}.{fun.__qualname__}:{_file_digest(inspect.getsourcefile(fun))}"
    loaded = {}

    @functools.wraps(fun)
    def call(*args, **kwargs):
        where = folder()
        if where is None:
            return jitted(*args, **kwargs)
        static = ([(i, a) for i, a in enumerate(args) if i in static_positions],
                  sorted((k, v) for k, v in kwargs.items() if k in static_names))
        dynamic = (tuple(a for i, a in enumerate(args) if i not in static_positions),
                   {k: v for k, v in kwargs.items() if k not in static_names})
        leaves, tree = jax.tree.flatten(dynamic)
        device = jax.devices()[0]
        static_text = repr(static)
        if " at 0x" in static_text or not all(_plain(leaf, device) for leaf in leaves):
            return jitted(*args, **kwargs)
        avals = [(jax.typeof(leaf).str_short(), getattr(jax.typeof(leaf), "weak_type", False)) for leaf in leaves]
        text = repr((name, _environment(), repr(compiler_options), static_text, str(tree), avals))
        key = hashlib.sha256(text.encode()).hexdigest()
        compiled = loaded.get(key)
        if compiled is None:
            compiled = _load(where / f"{key}.bin", tree)
            if compiled is None:
                compiled = _compile_and_store(jitted, args, kwargs, where / f"{key}.bin")
            loaded[key] = compiled
        return compiled(*dynamic[0], **dynamic[1])

    call.jitted, call.lower = jitted, jitted.lower
    return call


def _load(path: Path, tree):
    """The executable stored at ``path``, or None when there is none or it is unreadable."""
    try:
        payload, skeleton = pickle.loads(path.read_bytes())
        _initialize_lapack()
        return serialize_executable.deserialize_and_load(payload, tree, jax.tree.structure(skeleton))
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001 - a damaged or foreign file: compile again and replace it
        return None


@functools.cache
def _initialize_lapack() -> None:
    """Point jaxlib's LAPACK kernels at their functions, which jaxlib does when it first
    lowers a LAPACK call: an executable loaded before that crashed at its first LAPACK call
    (``jax.export`` does the same before it loads a program)."""
    from jax._src.lax import linalg

    linalg.initialize_lapack()


def _compile_and_store(jitted, args, kwargs, path: Path):
    """Compile through ``jitted`` and return the executable; store it when this process
    compiled it (not read it from JAX's cache) and it has no host callback."""
    _listen()
    with _lock:
        _reads_from_jax_cache.value = False
        compiled = jitted.lower(*args, **kwargs).compile()
        from_jax_cache = _reads_from_jax_cache.value
    if from_jax_cache:
        return compiled
    try:
        payload, _, out_tree = serialize_executable.serialize(compiled)
        # the output structure as a skeleton of zeros: equinox modules' tree definitions do not unpickle
        blob = pickle.dumps((payload, jax.tree.unflatten(out_tree, [0] * out_tree.num_leaves)))
    except Exception:  # noqa: BLE001 - host callbacks (and anything else unpicklable) stay in memory only
        return compiled
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial_path = path.with_suffix(f".{os.getpid()}.tmp")
        partial_path.write_bytes(blob)
        os.replace(partial_path, path)
    except OSError:
        pass
    return compiled

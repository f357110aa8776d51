"""Compiled programs kept on disk whole, so that a new process skips tracing and lowering.

JAX's persistent compilation cache (:mod:`bayeskit.core.cache`) is keyed on the lowered
program, so every new process still traces and lowers a program before it finds the
compiled one on disk; for an MCMC driver that takes longer than running it on a small
problem. :func:`jit` is ``jax.jit`` that also keeps each program's serialised executable
in ``<cache folder>/executables``, keyed on what determines the program without tracing
it:

- the code: the function's module and name, a digest of bayeskit's source and of the
  function's file, the versions of Python, JAX, jaxlib, NumPy, equinox, numpyro and optax;
- the settings read while tracing: JAX's configuration as it stands at the call (thread-
  local contexts included), the environment variables of JAX, XLA, equinox
  (``EQX_ON_ERROR``) and bayeskit, and ``CI``; the backend and its devices, the processor
  and its instruction sets, ``XLA_FLAGS`` as the process started, the compiler options;
- the call: the static arguments, the structure of the others (with the static fields of
  their nodes), their shapes, dtypes and weak types.

A later process with the same key loads the executable and runs it. The key covers
bayeskit's source and the function's own file, not other modules that the function calls:
it is meant for bayeskit's programs.

The key is only trusted where it is complete. Calls go to plain ``jax.jit`` when the
function is a closure, a lambda or has no source file; when a static argument or a node of
the arguments' structure is anything but None, a bool, an int, a float, a string, a dtype,
a tuple or list of these (exact types: a named tuple or an enumeration carries code), or a
class or closure-free function defined in bayeskit or in the function's own module; when
an argument is not a single-device array on the default device; and under a mesh context.
Under any transformation of the caller's (``jit``, ``grad``, ``vmap``, ``eval_shape``,
``lower``) a call goes to plain ``jax.jit`` without the compiler options: JAX refuses them
wherever the program is staged into a caller's, and the trace state tells transformations
apart only as "none" or "some" (so a ``vmap`` at the top level, which would take them, runs
without them too). Nothing is stored for a program with a
host callback (progress bars, errors raised from inside the program), which cannot be
serialised.

A program to be stored is compiled afresh, under a compiler option of its own and never
written to JAX's disk cache, so that JAX's caches cannot hand it back: an executable that
JAX read from its disk cache serialises without its kernels (jaxlib 0.10 on the CPU: the
load succeeds and the run fails). A file that cannot be read is compiled again and replaced.

It is on when bayeskit's compilation cache is on in bayeskit's folder (not in a folder the
user gave JAX), unless ``BAYESKIT_EXECUTABLE_CACHE=0``. The folder grows with every new
shape, setting and bayeskit version; deleting it is safe. Loading an executable runs
native code from the folder, as JAX's own cache does: keep it private to its user.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import platform
import sys
import threading
import types
from importlib import metadata
from pathlib import Path

import jax
import numpy as np
from jax._src import config as _jax_config
from jax._src import core as _jax_core
from jax.experimental import serialize_executable

from bayeskit.core import cache
from bayeskit.core.xla import loop_program

_SWITCH = "BAYESKIT_EXECUTABLE_CACHE"
_PACKAGES = ("jax", "jaxlib", "numpy", "equinox", "numpyro", "optax")
_ENVIRONMENT_PREFIXES = ("JAX_", "XLA_", "EQX_", "BAYESKIT_")
# an option at its default value: it gives the fresh compile its own key in JAX's caches
_FRESH = {"xla_hlo_profile": False}
_SCALARS = (type(None), bool, int, float, str)
_CONTAINERS = (tuple, list, dict, type(None))


def folder() -> Path | None:
    """Where executables are kept, or None when the cache is off (see the module docstring)."""
    if cache.switched_off(_SWITCH):
        return None
    configured = jax.config.jax_compilation_cache_dir
    if not configured or Path(configured) != cache.directory():
        return None
    return Path(configured) / "executables"


@functools.cache
def _process() -> str:
    """What is fixed for the life of the process: bayeskit's source, versions, devices, and
    ``XLA_FLAGS`` as the backend read them."""
    source = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        source.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    versions = {name: metadata.version(name) for name in _PACKAGES}
    devices = [(d.platform, d.device_kind, d.client.platform_version) for d in jax.devices()]
    return repr((source.hexdigest(), sys.version, versions, jax.default_backend(), devices, _cpu(),
                 os.environ.get("XLA_FLAGS", "")))


def _cpu() -> str:
    """The processor and its instruction sets: XLA compiles CPU code for the host's, so a
    folder shared between machines must not hand one machine's code to another."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = [line for line in info if line.startswith(("model name", "flags"))]
        return platform.machine() + "".join(sorted(set(lines)))
    except OSError:
        return f"{platform.machine()} {platform.processor()}"


def _settings() -> str:
    """JAX's configuration as it stands for this thread, and the environment variables that
    code read while tracing (equinox's error mode, bayeskit's progress switches)."""
    config = [(name, getattr(jax.config, name, None)) for name in sorted(jax.config.values)]
    environment = sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENVIRONMENT_PREFIXES) or k == "CI")
    return repr((config, environment))


@functools.cache
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _covered(obj, home: str) -> bool:
    """A class, or a function without a closure, whose code the key covers: bayeskit's, or
    from ``home``."""
    module = getattr(obj, "__module__", None) or ""
    qualname = getattr(obj, "__qualname__", "")
    plain = isinstance(obj, type) or getattr(obj, "__closure__", None) is None
    return (module == home or module == "bayeskit" or module.startswith("bayeskit.")) and "<locals>" not in qualname and plain


def _faithful(value, home: str) -> bool:
    """True when ``repr(value)`` determines ``value`` for tracing (see the module docstring):
    exact types only, since a subclass (a named tuple, an enumeration) carries code."""
    kind = type(value)
    if kind in _SCALARS or isinstance(value, np.dtype) or value is np.float32 or value is np.float64 or _is_missing(value):
        return True
    if kind in (tuple, list):
        return all(_faithful(v, home) for v in value)
    if isinstance(value, type) or kind is types.FunctionType:  # a class under any metaclass (ABCMeta)
        return _covered(value, home)
    return False


def _is_missing(value) -> bool:
    """equinox's marker of a module's dynamic fields in its static data (a singleton)."""
    kind = type(value)
    return kind.__name__ == "_Missing" and kind.__module__.startswith("equinox")


def _describe(value) -> str:
    """``repr`` with classes and functions named by module and qualified name."""
    if isinstance(value, type | types.FunctionType):
        return f"{value.__module__}.{value.__qualname__}"
    if type(value) in (tuple, list):
        return type(value).__name__ + "(" + ", ".join(_describe(v) for v in value) + ")"
    return repr(value)


def _tree_key(tree, home: str) -> str | None:
    """The tree definition with every node named by module and qualified name and its
    static data; None when a node is not a container or class the key covers, or its
    data is not faithful. (``str(tree)`` names node classes without their module.)"""
    node = tree.node_data()
    if node is None:
        return "*"
    node_type, data = node
    if node_type not in _CONTAINERS and not _covered(node_type, home):
        return None
    if node_type is dict:
        data = tuple(data)
    if data is not None and not _faithful(data, home):
        return None
    children = [_tree_key(child, home) for child in tree.children()]
    if any(c is None for c in children):
        return None
    return f"{_describe(node_type)}[{_describe(data)}](" + ", ".join(children) + ")"


def _key_source(fun) -> str | None:
    """The function's module, code name and file digest, or None when the key cannot cover
    its code: not a plain function, a closure (``functools.wraps`` copies a wrapped
    function's name, not its code), a lambda or a function without a file."""
    if not isinstance(fun, types.FunctionType) or fun.__closure__ is not None:
        return None
    code = fun.__code__
    if "<" in code.co_qualname or not Path(code.co_filename).is_file():
        return None
    return f"{fun.__module__}.{code.co_qualname}:{_file_digest(code.co_filename)}"


def jit(fun=None, /, *, static_argnums=(), static_argnames=(), donate_argnums=(), compiler_options=None):
    """``jax.jit(fun, ...)`` whose executables a later process loads instead of tracing,
    lowering and compiling again; usable as a decorator, with or without arguments."""
    if fun is None:
        return functools.partial(jit, static_argnums=static_argnums, static_argnames=static_argnames,
                                 donate_argnums=donate_argnums, compiler_options=compiler_options)
    params = list(inspect.signature(fun).parameters.values())
    positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    nums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    names = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    # both lists complete, so that jax.jit and this wrapper split a call the same way
    positions = sorted({i % len(positional) if positional else i for i in nums} | {positional.index(n) for n in names if n in positional})
    names = sorted(set(names) | {positional[i] for i in positions if i < len(positional)})
    jitted = jax.jit(fun, static_argnums=positions, static_argnames=names, donate_argnums=donate_argnums,
                     compiler_options=compiler_options)
    # under any transformation (a trace state that is not clean: JAX's private check, as
    # jax._src.config above) the call takes no options: JAX refuses them on a staged jit
    nested = jax.jit(fun, static_argnums=positions, static_argnames=names, donate_argnums=donate_argnums) if compiler_options else jitted
    source = _key_source(fun)
    home = fun.__module__
    loaded = {}
    lock = threading.Lock()

    @functools.wraps(fun)
    def call(*args, **kwargs):
        if not _jax_core.trace_state_clean():
            return nested(*args, **kwargs)
        where = folder()
        if where is None or source is None:
            return jitted(*args, **kwargs)
        static = ([(i, a) for i, a in enumerate(args) if i in positions],
                  sorted((k, v) for k, v in kwargs.items() if k in names))
        dynamic = (tuple(a for i, a in enumerate(args) if i not in positions),
                   {k: v for k, v in kwargs.items() if k not in names})
        leaves, tree = jax.tree.flatten(dynamic)
        device = jax.devices()[0]
        values = [v for _, v in static[0]] + [v for _, v in static[1]]
        tree_key = _tree_key(tree, home)
        if (tree_key is None or not _faithful(values, home) or not jax.sharding.get_abstract_mesh().empty
                or not all(_plain(leaf, device) for leaf in leaves)):
            return jitted(*args, **kwargs)
        avals = [(jax.typeof(leaf).str_short(), getattr(jax.typeof(leaf), "weak_type", False)) for leaf in leaves]
        statics = ([(i, _describe(v)) for i, v in static[0]], [(k, _describe(v)) for k, v in static[1]])
        text = repr((source, _process(), _settings(), repr(compiler_options), statics, tree_key, avals))
        key = hashlib.sha256(text.encode()).hexdigest()
        with lock:
            compiled = loaded.get(key)
        if compiled is None:
            path = where / f"{key}.bin"
            compiled = _load(path, tree)
            if compiled is None:
                compiled = _compile_and_store(jitted, args, kwargs, compiler_options, path)
            with lock:
                loaded[key] = compiled
        return compiled(*dynamic[0], **dynamic[1])

    call.jitted = jitted
    return call


def _plain(leaf, device) -> bool:
    """A concrete array on ``device`` (or a host value), not a tracer."""
    if isinstance(leaf, jax.core.Tracer):
        return False
    if isinstance(leaf, jax.Array):
        return leaf.is_fully_addressable and leaf.devices() == {device}
    return True


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


def loop_jit(fun, /, **kwargs):
    """:func:`jit` of a program that is one long loop of small steps (the SBMoE and MMSB
    fits' sweeps), with the compiler options of loop programs
    (:func:`bayeskit.core.xla.loop_program`) of the backend that runs each call, chosen at
    the call so that importing a module starts no backend. ``program(platform)`` is the
    :func:`jit` of one platform."""
    program = functools.cache(lambda platform: jit(fun, compiler_options=loop_program(platform), **kwargs))

    @functools.wraps(fun)
    def call(*args, **call_kwargs):
        return program(jax.default_backend())(*args, **call_kwargs)

    call.program = program
    return call


def _compile_and_store(jitted, args, kwargs, compiler_options, path: Path):
    """Compile afresh, past JAX's caches (see the module docstring), store the executable
    unless it has a host callback, and return it."""
    lowered = jitted.lower(*args, **kwargs)
    # its own key in JAX's caches, never written to JAX's disk cache: so never read from it
    with _jax_config.persistent_cache_min_compile_time_secs(float("inf")):
        compiled = lowered.compile(compiler_options={**(compiler_options or {}), **_FRESH})
    try:
        payload, _, out_tree = serialize_executable.serialize(compiled)
        # the output structure as a skeleton of zeros: equinox modules' tree definitions do not unpickle
        blob = pickle.dumps((payload, jax.tree.unflatten(out_tree, [0] * out_tree.num_leaves)))
    except Exception:  # noqa: BLE001 - host callbacks (and anything else unpicklable) stay in memory only
        return compiled
    partial_path = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial_path.write_bytes(blob)
        os.replace(partial_path, path)
    except OSError:
        partial_path.unlink(missing_ok=True)
    return compiled

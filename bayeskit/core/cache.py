"""JAX's persistent compilation cache, on by default for bayeskit.

Compiling a model's programs takes seconds to tens of seconds on a CPU; without a
persistent cache every new process (a notebook kernel, a script run) pays it again. When
the first bayeskit module that computes is imported, :func:`enable` points JAX's
compilation cache at ``$BAYESKIT_CACHE_DIR`` (default ``$XDG_CACHE_HOME/bayeskit/jax``,
else ``~/.cache/bayeskit/jax``), so a later process loads the compiled programs of the
same shapes from disk instead of compiling them again.

It leaves alone a cache the user configured (``JAX_COMPILATION_CACHE_DIR`` or
``jax.config.update("jax_compilation_cache_dir", ...)``), and does nothing when
``BAYESKIT_COMPILATION_CACHE=0``. Every program is stored, however fast it compiled
(``MIN_COMPILE_SECONDS``, unless the user chose JAX's threshold): a first fit runs dozens
of small programs besides its main one, and their compile times add up to a second or
more. The folder grows with every new shape and setting compiled; deleting it is safe. JAX reads the
setting at its first compilation: a process that compiled something before importing
bayeskit starts using the cache only for programs compiled after
``jax.experimental.compilation_cache.compilation_cache.reset_cache()``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

MIN_COMPILE_SECONDS = 0.0


def directory(environ=os.environ) -> Path:
    """Where the cache lives: ``$BAYESKIT_CACHE_DIR``, else the user's cache folder."""
    if environ.get("BAYESKIT_CACHE_DIR"):
        return Path(environ["BAYESKIT_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "bayeskit" / "jax"


def switched_off(name: str, environ=os.environ) -> bool:
    """True when the environment variable ``name`` reads 0, false, no or off."""
    return environ.get(name, "1").strip().lower() in ("0", "false", "no", "off")


def enable(environ=os.environ) -> Path | None:
    """Turn JAX's persistent compilation cache on in :func:`directory`, unless switched off
    or already configured; return the folder in use (None when off).

    Before JAX is imported this only sets JAX's environment variables
    (``JAX_COMPILATION_CACHE_DIR``, ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``), which
    JAX reads when it starts, so that importing bayeskit (the ``bayeskit`` command's help)
    imports no JAX; after, it sets JAX's configuration."""
    jax = sys.modules.get("jax")
    configured = environ.get("JAX_COMPILATION_CACHE_DIR") or (jax is not None and jax.config.jax_compilation_cache_dir)
    if configured:
        return Path(configured)
    if switched_off("BAYESKIT_COMPILATION_CACHE", environ):
        return None
    folder = directory(environ)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:  # a read-only home: compile as JAX does by default
        return None
    if jax is None:
        environ["JAX_COMPILATION_CACHE_DIR"] = str(folder)
        environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(MIN_COMPILE_SECONDS))
        return folder
    jax.config.update("jax_compilation_cache_dir", str(folder))
    if jax.config.jax_persistent_cache_min_compile_time_secs == 1.0:  # JAX's default: the user did not choose
        jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    return folder

"""Test configuration: float64 available (float32 tests create float32 arrays
explicitly), no progress bars, and small shared data sets. The problems are small, so
compilation dominates: XLA's backend optimisation is turned off for the tests (and the
notebook kernels they start), which cuts the suite's time by about a fifth, and compiled
programs are shared through a persistent compilation cache."""

import os
import tempfile

# One persistent compilation cache for the run: the xdist workers, the notebook kernels and
# the subprocess tests compile many of the same programs, and every module drops its
# in-memory executables (below), so a later compile of the same program is read from disk.
# The cache is keyed by the program, the flags and the JAX version. Every program is kept
# (threshold 0 s, as bayeskit sets for its users): most of the suite's programs compile in
# under 0.5 s here, and a rerun that reads them from disk takes about a fifth less time;
# storing one costs one to two milliseconds. The folder is never pruned; deleting it is safe.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "bayeskit-tests-jax-cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")

if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()

from bayeskit.core.xla import use_safe_cpu_scheduler  # noqa: E402

use_safe_cpu_scheduler()

import jax  # noqa: E402
import numpy as np
import pytest

os.environ.setdefault("CI", "1")
jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def emotions():
    from bayeskit.datasets import load_mulan

    return load_mulan("emotions")


@pytest.fixture
def planted_blocks():
    """Two relations on 36 objects in three planted blocks with Beta(0.4, 0.4) link
    probabilities, 20% of the off-diagonal cells held out: (truth, P, Y, train, test)."""
    rng = np.random.default_rng(1)
    n, r = 36, 2
    truth = np.repeat(np.arange(3), 12)
    P = rng.beta(0.4, 0.4, (r, 3, 3))[:, truth][:, :, truth]
    Y = (rng.random(P.shape) < P).astype(np.int8)
    off = ~np.eye(n, dtype=bool)
    test = (rng.random(Y.shape) < 0.2) & off
    return truth, P, Y, off & ~test, test


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drop each module's compiled executables after it ran, so the suite's memory does
    not grow with every shape and setting compiled along the way."""
    yield
    jax.clear_caches()

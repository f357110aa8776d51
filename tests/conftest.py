"""Test configuration: float64 available (float32 tests create float32 arrays
explicitly), no progress bars, and a tiny shared data set."""

import os

import jax
import numpy as np
import pytest

os.environ.setdefault("CI", "1")
jax.config.update("jax_enable_x64", True)


@pytest.fixture(scope="session")
def emotions():
    from bayeskit.datasets import load_mulan

    return load_mulan("emotions")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drop each module's compiled executables after it ran, so the suite's memory does
    not grow with every shape and setting compiled along the way."""
    yield
    jax.clear_caches()

"""``assert_identical``: the bit-for-bit comparison the save/load tests share (on the
test path through ``tests/conftest.py``'s folder)."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import numpy as np


def assert_identical(a, b, where="object"):
    """Same types all the way down; arrays of the same kind, dtype, shape and bytes."""
    assert type(a) is type(b), f"{where}: {type(a)} != {type(b)}"
    if isinstance(a, jax.Array) and jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
        assert jax.random.key_impl(a) == jax.random.key_impl(b), where
        assert_identical(np.asarray(jax.random.key_data(a)), np.asarray(jax.random.key_data(b)), where)
    elif isinstance(a, (np.ndarray, np.generic, jax.Array)):
        assert a.dtype == b.dtype and a.shape == b.shape, f"{where}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
        assert getattr(a, "weak_type", False) == getattr(b, "weak_type", False), where
        if a.dtype == object:
            assert a.tolist() == b.tolist(), where
        else:
            assert np.asarray(a).tobytes() == np.asarray(b).tobytes(), f"{where}: values differ"
    elif isinstance(a, eqx.Module):
        for f in dataclasses.fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes(), f"{where}: {a!r} != {b!r}"
    elif hasattr(a, "get_params"):  # an estimator: every attribute, in order
        assert list(vars(a)) == list(vars(b)), f"{where}: attributes {list(vars(a))} != {list(vars(b))}"
        for k in vars(a):
            assert_identical(vars(a)[k], vars(b)[k], f"{where}.{k}")
    elif isinstance(a, np.random.RandomState):
        assert_identical(a.get_state(legacy=True), b.get_state(legacy=True), where)
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"

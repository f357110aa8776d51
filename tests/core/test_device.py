import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compilations import count_compilations

from bayeskit.core.device import as_array, batch_axis_in_front, call_arg, float_arg


@pytest.mark.parametrize("x, dtype", [
    (np.arange(6.0).reshape(2, 3), None), (np.arange(6).reshape(3, 2), None), (np.ones(4, np.float32), None),
    (np.float64(2.5), None), (np.arange(5.0), jnp.int32), (np.arange(4), jnp.int8), (7, jnp.int32), (0.25, jnp.float32),
    ((1.0, 2.0), jnp.float64), ([True, False], None), (3.0, None), (jnp.arange(3.0), None)])
def test_as_array_is_jnp_asarray_and_puts_host_data_on_the_device_without_compiling(x, dtype):
    jax.clear_caches()  # jnp.asarray's identity programs compile again, where it would run one
    with count_compilations() as seen:
        got = as_array(x, dtype)
    if isinstance(x, (np.ndarray, np.generic)) or (dtype is not None and not isinstance(x, jax.Array)):
        assert seen["compiled"] == [], seen  # a Python number or list without a dtype goes to jnp.asarray
    want = jnp.asarray(x, dtype)
    assert isinstance(got, jax.Array)
    assert got.dtype == want.dtype and got.shape == want.shape and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("x, dtype", [
    (np.arange(6.0).reshape(2, 3), None), (np.arange(5.0), jnp.int32), (7, jnp.int32), ((1.0, 2.0), jnp.float64),
    (np.float64(2.5), None), (3.0, None), (jnp.arange(3.0), jnp.float32)])
def test_call_arg_runs_the_program_compiled_for_as_array(x, dtype):
    """A jitted function called with call_arg's host copy compiles nothing new after a call
    with as_array's device array, and returns the same; the copy is not the caller's buffer."""
    f = jax.jit(lambda v: v * 2)
    want = f(as_array(x, dtype))
    with count_compilations() as seen:
        arg = call_arg(x, dtype)
        got = f(arg)
    assert seen["compiles"] == 0, seen
    assert got.dtype == want.dtype and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    if isinstance(x, np.ndarray):
        assert isinstance(arg, np.ndarray) and not np.shares_memory(arg, x)


def test_jnp_asarray_of_a_host_array_compiles_a_program():
    """What as_array avoids (if JAX stops doing it, as_array can go)."""
    jax.clear_caches()
    with count_compilations() as seen:
        jnp.asarray(np.arange(3.0))
    assert seen["compiles"] == 1, seen


def test_as_array_passes_tracers_through():
    assert jax.jit(lambda v: as_array(v, jnp.float32) * 2)(np.arange(3.0)).dtype == jnp.float32


def test_as_array_reads_a_dataframe_as_numpy_does():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.arange(12.0).reshape(4, 3))
    jax.clear_caches()
    with count_compilations() as seen:
        got = as_array(frame, jnp.float32)
    assert seen["compiled"] == [], seen
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got), frame.to_numpy(np.float32))


def test_as_array_copies_the_callers_array():
    """The transfer to the device runs asynchronously and may read the caller's buffer after
    ``jax.device_put`` returns (about one time in three on the CPU for 4096 float64s; not
    seen for small arrays)."""
    for _ in range(100):
        x = np.arange(4096.0)
        got = as_array(x)
        x[:] = -1.0
        np.testing.assert_array_equal(np.asarray(got), np.arange(4096.0))


def test_as_array_refuses_a_masked_array_as_jnp_asarray_does():
    masked = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    for convert in (as_array, jnp.asarray):
        with pytest.raises(ValueError, match="masked"):
            convert(masked)


def test_as_array_canonicalises_dtypes_as_jnp_asarray_does_without_x64():
    with jax.enable_x64(False):
        for x, dtype in [(np.arange(3.0), None), (np.arange(3), None), (2.5, jnp.float64), (np.arange(3.0), jnp.int64)]:
            got, want = as_array(x, dtype), jnp.asarray(x, dtype)
            assert got.dtype == want.dtype and got.weak_type == want.weak_type, (x, dtype, got.dtype, want.dtype)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            assert call_arg(x, dtype).dtype == want.dtype


def test_as_array_inside_vmap_is_jnp_asarray():
    got = jax.vmap(lambda v: as_array(v, jnp.float32) + 1)(np.arange(6.0).reshape(3, 2))
    assert got.dtype == jnp.float32 and got.shape == (3, 2)
    np.testing.assert_array_equal(np.asarray(got), np.arange(6.0).reshape(3, 2) + 1)


def test_batch_axis_in_front_broadcasts_only_the_unbatched_arguments():
    batched, scalar, matrix = np.arange(6.0).reshape(3, 2), 2.5, np.eye(2)
    out = batch_axis_in_front(3, (True, False, False), (batched, scalar, matrix))
    assert out[0] is batched
    np.testing.assert_array_equal(out[1], np.full(3, 2.5))
    np.testing.assert_array_equal(out[2], np.broadcast_to(np.eye(2), (3, 2, 2)))


def test_float_arg_gives_integers_and_booleans_the_default_float_dtype_and_leaves_floats_alone():
    for x in (np.array([[2, 1], [1, 2]]), np.array([[2, 1], [1, 2]], np.uint8), np.eye(2, dtype=bool), [[2, 1], [1, 2]]):
        got = float_arg(x)
        assert got.dtype == jnp.result_type(float)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(x, float))
    for x in (np.ones((2, 2), np.float32), np.ones((2, 2)), jnp.ones((2, 2), jnp.float32)):
        assert float_arg(x).dtype == jnp.asarray(x).dtype
    assert jax.jit(float_arg)(jnp.arange(3)).dtype == jnp.result_type(float)  # a traced integer array
    with jax.enable_x64(False):  # int64 counts past 2**31 are converted whole, not through int32
        assert float(float_arg(np.array([2**31 + 5]))[0]) == np.float32(2**31 + 5)

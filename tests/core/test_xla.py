import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src import monitoring
from threadpoolctl import threadpool_info, threadpool_limits

from bayeskit.core.xla import FLAG, as_array, host_blas, use_safe_cpu_scheduler


def blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


def test_host_blas_runs_numpy_linear_algebra_on_one_thread_and_restores_the_callers_setting():
    with threadpool_limits(2, "blas"):
        assert blas_threads() and set(blas_threads()) == {2}
        with host_blas():
            assert set(blas_threads()) == {1}
            A = np.eye(3) * 2.0
            np.testing.assert_allclose(np.linalg.cholesky(A), np.sqrt(2.0) * np.eye(3))
        assert set(blas_threads()) == {2}


def test_host_blas_decorates_a_function():
    @host_blas()
    def threads():
        return blas_threads()

    assert set(threads()) == {1}


def test_safe_scheduler_flag_is_added_once_and_never_overrides_the_users_choice():
    env = {"XLA_FLAGS": "--xla_dump_to=xla-dump"}
    use_safe_cpu_scheduler(env)
    use_safe_cpu_scheduler(env)
    assert env["XLA_FLAGS"] == f"--xla_dump_to=xla-dump --{FLAG}=false"
    mine = {"XLA_FLAGS": f"--{FLAG}=true"}
    use_safe_cpu_scheduler(mine)
    assert mine["XLA_FLAGS"] == f"--{FLAG}=true"


_compiled = []
monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: _compiled.append(kw.get("fun_name")) if event.endswith("backend_compile_duration") else None)


@pytest.mark.parametrize("x, dtype", [
    (np.arange(6.0).reshape(2, 3), None), (np.arange(6).reshape(3, 2), None), (np.ones(4, np.float32), None),
    (np.float64(2.5), None), (np.arange(5.0), jnp.int32), (np.arange(4), jnp.int8), (7, jnp.int32), (0.25, jnp.float32),
    ((1.0, 2.0), jnp.float64), ([True, False], None), (3.0, None), (jnp.arange(3.0), None)])
def test_as_array_is_jnp_asarray_and_puts_host_data_on_the_device_without_compiling(x, dtype):
    jax.clear_caches()  # jnp.asarray's identity programs compile again, where it would run one
    _compiled.clear()
    got = as_array(x, dtype)
    if isinstance(x, (np.ndarray, np.generic)) or (dtype is not None and not isinstance(x, jax.Array)):
        assert _compiled == [], _compiled  # a Python number or list without a dtype goes to jnp.asarray
    want = jnp.asarray(x, dtype)
    assert isinstance(got, jax.Array)
    assert got.dtype == want.dtype and got.shape == want.shape and got.weak_type == want.weak_type
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_jnp_asarray_of_a_host_array_compiles_a_program():
    """What as_array avoids (if JAX stops doing it, as_array can go)."""
    jax.clear_caches()
    _compiled.clear()
    jnp.asarray(np.arange(3.0))
    assert _compiled


def test_as_array_passes_tracers_through():
    assert jax.jit(lambda v: as_array(v, jnp.float32) * 2)(np.arange(3.0)).dtype == jnp.float32

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from bayeskit.core.xla import FLAG, LEVEL, host_blas, loop_program, use_safe_cpu_scheduler


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



def test_loop_programs_take_the_lighter_level_on_the_cpu_only_and_never_over_the_users_flags():
    assert loop_program("cpu", {}) == {LEVEL: 1}
    assert loop_program("cpu", {"XLA_FLAGS": "--xla_dump_to=x"}) == {LEVEL: 1}
    assert loop_program("cpu", {"XLA_FLAGS": f"--{LEVEL}=0"}) == {}
    assert loop_program("gpu", {}) == loop_program("tpu", {}) == {}

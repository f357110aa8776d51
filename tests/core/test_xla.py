import os

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


def test_the_level_one_programs_compile_and_run_at_the_users_level(tmp_path):
    """The SBMoE fit, the MMSB fit and its vmapped restarts, in a fresh process at the level
    users get (the tests run at level 0): level 1 aborted the process on the IRM sampler, so
    the programs kept at level 1 are compiled here as a user's would be."""
    import subprocess
    import sys

    code = (
        "import jax, numpy as np\n"
        "from bayeskit.density import sbmoe\nfrom bayeskit.relational import mmsb\n"
        "rng = np.random.default_rng(0)\nX = rng.normal(size=(12, 2)); Y = rng.normal(size=(12, 1))\n"
        "r = sbmoe.fit(jax.random.key(0), X, Y, sbmoe.Hyperparams(n_experts=3, gate_steps=2), max_iter=2, throw=False)\n"
        "L = (rng.random((7, 7)) < .4).astype(np.int8); L = np.triu(L, 1) + np.triu(L, 1).T; mask = ~np.eye(7, dtype=bool)\n"
        "hp = mmsb.Hyperparams(n_blocks=3, symmetric=True)\n"
        "m = mmsb.fit(jax.random.key(1), L, mask, hp, max_iter=3, throw=False)\n"
        "n = mmsb.fit_restarts(jax.random.split(jax.random.key(2), 2), L, mask, hp, max_iter=3)\n"
        "print(bool(np.isfinite(r.objective) and np.isfinite(m.objective) and np.all(np.isfinite(n.objective))))\n"
    )
    flags = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if LEVEL not in f)
    env = {**os.environ, "XLA_FLAGS": flags, "BAYESKIT_CACHE_DIR": str(tmp_path), "BAYESKIT_EXECUTABLE_CACHE": "0"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and run.stdout.strip().endswith("True"), run.stderr[-1500:]

"""What the library does about XLA's costs and stalls: an opt-in XLA setting for long
vmapped CPU programs, the compiler options of loop programs on the CPU, numpy's BLAS on one
thread around the host-side linear algebra of the fits, and the order of batched LAPACK
calls. Imports no JAX (the command line's help runs without it).

XLA's concurrency-optimised scheduler on the CPU can deadlock (the process waits forever,
idle) on vmapped programs of many while loops, such as FAST-MCD's 500 starts vmapped over
20 or more data sets on two cores. Turning it off only changes how independent operations
are scheduled. The flag must be in ``XLA_FLAGS`` before JAX starts its CPU backend (the
first computation), so the library never sets it on import: ``bayeskit reproduce``,
``bayeskit bench``, the benchmarks and the tests call :func:`use_safe_cpu_scheduler`
first, and a user running such sweeps calls it before their first JAX computation.

A second way for a CPU program to wait forever is in jaxlib's batched LAPACK kernels (a
Cholesky factorisation or triangular solve of a batch of matrices, for instance): a call
with a large batch splits it over XLA's CPU threads and waits for the pieces. When as many
such calls run at once as there are threads (two, on two cores), every thread waits for
pieces that no thread is free to run. Neither the scheduler flag above nor
``--xla_cpu_multi_thread_eigen=false`` prevents it. The samplers whose steps solve with a
batch of factors (the LFRM's fitted births, the IBP's draw of A) make each call depend on
the one before, so they run one after another: a draw from N(F^-1 b, F^-1) with F = L L'
is L'^-1 (L^-1 b + eps), two solves in a row rather than a solve for the mean beside one
for the noise. The tests check the order on the traced programs (``tests/lapack_order.py``).
"""

from __future__ import annotations

import contextlib
import os
from functools import cache

from threadpoolctl import ThreadpoolController

FLAG = "xla_cpu_enable_concurrency_optimized_scheduler"

LEVEL = "xla_backend_optimization_level"


def loop_program(platform: str, environ=os.environ) -> dict:
    """Compiler options for a program that is one long loop of small steps (the MCMC drivers)
    on ``platform``.

    On the CPU, LLVM's lighter optimisation level (1 of 3): the loop's time goes to many
    small operations, not to long vectorisable ones, so the lighter pipeline runs it as fast
    and compiles it in about half the time (the first fit of ``SBMoERegressor`` on a small
    problem: 3.1 s against 5.7 s; ``MMSBLinkPredictor`` 1.9 s against 3.9 s). Vectorised
    programs run slower under it, so it is kept to the loops: the SBMoE and MMSB fits. The
    MCMC drivers (:mod:`bayeskit.core.mcmc`) compile at the default level: at level 1
    LLVM's instruction selection aborted the whole process ("Cannot select ...
    SUBV_BROADCAST_LOAD" in a compare fusion) on the IRM sampler with two chains on six
    objects, on an AVX-512 CPU, an abort no exception can catch (their first fits compile
    in 1.5-4.4 s at the default level). The SBMoE fit over 48 small shapes (2-6 experts,
    1-3 inputs, 5-12 points) and the MMSB fit over 40 (2-6 blocks, 5-12 objects, directed
    and symmetric) compiled and ran at level 1 on that CPU. No options elsewhere (the GPU's kernels were not
    measured) or when ``XLA_FLAGS`` sets the level itself (the user's choice, or the tests'
    level 0), which options would override.
    """
    if platform != "cpu" or LEVEL in environ.get("XLA_FLAGS", ""):
        return {}
    return {LEVEL: 1}


def use_safe_cpu_scheduler(environ=os.environ) -> None:
    """Add ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` to ``XLA_FLAGS``
    unless the flag is set already (either way)."""
    flags = environ.get("XLA_FLAGS", "")
    if FLAG not in flags:
        environ["XLA_FLAGS"] = f"{flags} --{FLAG}=false".strip()


@cache
def _blas_libraries() -> tuple:
    """threadpoolctl's controllers of the BLAS libraries loaded when first asked."""
    return tuple(library for library in ThreadpoolController().lib_controllers if library.user_api == "blas")


@contextlib.contextmanager
def host_blas():
    """A context (or decorator) in which numpy's BLAS and LAPACK run on one thread.

    The checks and second moments the fits compute with numpy before their jitted core are
    small (a Cholesky factor of a (p, p) matrix); OpenBLAS's worker threads keep spinning for
    a while after each call and, on a machine with few cores, take the cores XLA's next
    computation needs (a 200 x 200 graphical lasso fit ran at a third of its speed on two
    cores). One thread does this work as fast and leaves the cores to XLA. Entering and
    leaving cost a few microseconds (each library's thread count is read and set directly,
    not through ``threadpoolctl.threadpool_limits``); the caller's own thread settings are
    restored on exit.
    """
    libraries = _blas_libraries()
    threads = [library.num_threads for library in libraries]
    try:
        for library, n in zip(libraries, threads):
            if n != 1:
                library.set_num_threads(1)
        yield
    finally:
        for library, n in zip(libraries, threads):
            if n != 1:
                library.set_num_threads(n)

"""An opt-in XLA setting for long vmapped CPU programs.

XLA's concurrency-optimised scheduler on the CPU can deadlock (the process waits forever,
idle) on vmapped programs of many while loops, such as FAST-MCD's 500 starts vmapped over
20 or more data sets on two cores. Turning it off only changes how independent operations
are scheduled. The flag must be in ``XLA_FLAGS`` before JAX starts its CPU backend (the
first computation), so the library never sets it on import: ``bayeskit reproduce``,
``bayeskit bench``, the benchmarks and the tests call :func:`use_safe_cpu_scheduler`
first, and a user running such sweeps calls it before their first JAX computation.
"""

from __future__ import annotations

import os

FLAG = "xla_cpu_enable_concurrency_optimized_scheduler"


def use_safe_cpu_scheduler(environ=os.environ) -> None:
    """Add ``--xla_cpu_enable_concurrency_optimized_scheduler=false`` to ``XLA_FLAGS``
    unless the flag is set already (either way)."""
    flags = environ.get("XLA_FLAGS", "")
    if FLAG not in flags:
        environ["XLA_FLAGS"] = f"{flags} --{FLAG}=false".strip()

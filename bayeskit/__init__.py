"""bayeskit: Bayesian and statistical models in JAX, from their papers."""

import os

__version__ = "0.1.0"

# XLA's concurrency-optimised scheduler on the CPU can deadlock (the process waits forever,
# idle) on vmapped programs of many while loops, such as FAST-MCD's 500 starts vmapped over
# 20 or more data sets on two cores. The flag only changes how independent operations are
# scheduled; it must be set before JAX starts its CPU backend, so it is set on import
# unless the caller set it already.
_FLAG = "xla_cpu_enable_concurrency_optimized_scheduler"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} --{_FLAG}=false".strip()

from .core.io import load, save  # noqa: E402
from .core.sweep import Swept, sweep  # noqa: E402

__all__ = ["__version__", "load", "save", "sweep", "Swept"]

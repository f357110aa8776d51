"""``count_compilations``: the programs a block of code traces and lowers, from JAX's public
monitoring events (on the test path through ``tests/conftest.py``'s folder).

A lowering happens for every program that is not in the in-memory cache, whether XLA then
compiles it or reads it from the persistent cache; counting lowerings rather than XLA's
compilations keeps the counts true when an earlier test or run left the program on disk."""

from __future__ import annotations

import contextlib

from jax import monitoring

TRACE = "/jax/core/compile/jaxpr_trace_duration"
LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"


@contextlib.contextmanager
def count_compilations():
    """Counts inside the block: ``{"traces", "compiles", "compiled"}``, the last the names of
    the lowered programs (``jit(name)``)."""
    seen = {"traces": 0, "compiles": 0, "compiled": []}

    def listen(event, duration, **kwargs):
        if event == TRACE:
            seen["traces"] += 1
        elif event == LOWER:
            seen["compiles"] += 1
            seen["compiled"].append(kwargs.get("fun_name", ""))

    monitoring.register_event_duration_secs_listener(listen)
    try:
        yield seen
    finally:
        monitoring.unregister_event_duration_listener(listen)

"""``lapack_calls``: the LAPACK calls of a traced program in an order they may run, each
with the earlier calls it waits for, per body: the program's own (nested jits, custom
derivatives and rematerialisations inlined, as XLA inlines them; a loop or branch holding
calls counts as one call there) and each loop's or branch's, looked into in turn.

jaxlib's batched LAPACK kernels on the CPU split a large batch over XLA's CPU threads and
wait for the pieces; calls that can run at the same time can leave every thread waiting
(see :mod:`bayeskit.core.xla`). A body whose calls each wait for the one before cannot."""

from __future__ import annotations

from jax._src import core

LAPACK = {"cholesky", "triangular_solve", "lu", "eigh", "eig", "qr", "geqrf", "geqp3", "householder_product", "ormqr",
          "svd", "schur", "hessenberg", "tridiagonal", "tridiagonal_solve"}
INLINED = ("jit", "pjit", "custom_jvp_call", "custom_vjp_call", "remat2", "checkpoint", "closed_call")


def _open(j):
    return j.jaxpr if isinstance(j, core.ClosedJaxpr) else j


def _count(jaxpr) -> int:
    return sum(eqn.primitive.name in LAPACK or sum(_count(j) for j in core.jaxprs_in_params(eqn.params)) for eqn in jaxpr.eqns)


def _inlined(eqn):
    """The body of a call XLA inlines (same inputs as the equation), else None."""
    if eqn.primitive.name not in INLINED:
        return None
    body = _open(eqn.params.get("call_jaxpr", eqn.params.get("jaxpr")))
    return body if body is not None and len(body.invars) == len(eqn.invars) else None


def _walk(jaxpr, deps_in, calls, inner):
    env = dict(zip(jaxpr.invars, deps_in, strict=True))
    read = lambda v: frozenset() if isinstance(v, core.Literal) else env.get(v, frozenset())
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        after = frozenset().union(*ins)
        body = _inlined(eqn)
        if body is not None:
            outs = _walk(body, ins, calls, inner)
        elif eqn.primitive.name in LAPACK or any(_count(j) for j in core.jaxprs_in_params(eqn.params)):
            calls.append((eqn.primitive.name, after))
            outs = [after | {len(calls) - 1}] * len(eqn.outvars)
            inner.extend(j for j in core.jaxprs_in_params(eqn.params) if _count(j))
        else:
            outs = [after] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def lapack_calls(closed_jaxpr) -> list[list[tuple[str, frozenset]]]:
    """Per body (the program's first, then those of its loops and branches): (primitive
    name, indices of the earlier calls of that body it depends on) for each call."""
    bodies, todo = [], [closed_jaxpr.jaxpr]
    while todo:
        jaxpr, calls = todo.pop(0), []
        _walk(jaxpr, [frozenset()] * len(jaxpr.invars), calls, todo)
        bodies.append(calls)
    return bodies


def one_at_a_time(bodies) -> bool:
    """Whether in every body every call waits for all the calls before it."""
    return all(j in after for calls in bodies for k, (_, after) in enumerate(calls) for j in range(k))

"""``lapack_calls``: the LAPACK calls of a traced program in the order they may run, each
with the earlier calls it waits for (nested jits inlined; a loop or branch holding one counts
as one call).

jaxlib's batched LAPACK kernels on the CPU split a large batch over XLA's CPU threads and
wait for the pieces; two such calls that can run at the same time can leave every thread
waiting, on a machine with two cores (see :mod:`bayeskit.core.xla`). A sampler step whose
calls each wait for the one before cannot stop that way."""

from __future__ import annotations

from jax._src import core

LAPACK = {"cholesky", "triangular_solve", "lu", "eigh", "eig", "qr", "householder_product", "svd", "schur",
          "hessenberg", "tridiagonal", "tridiagonal_solve", "geqp3"}


def _count(jaxpr) -> int:
    return sum(eqn.primitive.name in LAPACK or sum(_count(j) for j in core.jaxprs_in_params(eqn.params)) for eqn in jaxpr.eqns)


def _walk(jaxpr, deps_in, calls):
    env = dict(zip(jaxpr.invars, deps_in, strict=True))
    read = lambda v: frozenset() if isinstance(v, core.Literal) else env.get(v, frozenset())
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        after = frozenset().union(*ins)
        if eqn.primitive.name in ("jit", "pjit"):
            outs = _walk(eqn.params["jaxpr"].jaxpr, ins, calls)
        elif eqn.primitive.name in LAPACK or any(_count(j) for j in core.jaxprs_in_params(eqn.params)):
            calls.append((eqn.primitive.name, after))
            outs = [after | {len(calls) - 1}] * len(eqn.outvars)
        else:
            outs = [after] * len(eqn.outvars)
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def lapack_calls(closed_jaxpr) -> list[tuple[str, frozenset]]:
    """(primitive name, indices of the earlier calls it depends on) for each LAPACK call."""
    calls = []
    _walk(closed_jaxpr.jaxpr, [frozenset()] * len(closed_jaxpr.jaxpr.invars), calls)
    return calls


def one_at_a_time(calls) -> bool:
    """Whether every call waits for all the calls before it."""
    return all(j in after for k, (_, after) in enumerate(calls) for j in range(k))

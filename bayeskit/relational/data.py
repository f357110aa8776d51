"""Relational data shared by the relational models (IRM, MMSB, LFRM): binary relations
Y (R, N, N) among N objects, the mask of observed cells, and the covariates of pairs,
senders and receivers. ``check_relations`` and ``check_covariates`` validate on the host;
``as_data`` packs them for the jitted samplers and fits."""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int8

from bayeskit.core import validation


class Covariates(eqx.Module):
    """Observed covariates shared by all relations: ``pair`` (P, N, N) the X_ij of each
    ordered pair, ``sender`` (N, Dp) the X^p_i, ``receiver`` (N, Dc) the X^c_j; absent
    ones have size 0 (an undirected model uses ``sender`` at both ends)."""

    pair: Float[Array, "p n n"]
    sender: Float[Array, "n dp"]
    receiver: Float[Array, "n dc"]


def no_covariates(n: int, dtype=None) -> Covariates:
    """Empty covariates for n objects, in ``dtype`` (default: JAX's default float, so no
    float64 is requested when float64 is off)."""
    dtype = dtype or jnp.result_type(float)
    return Covariates(np.zeros((0, n, n), dtype), np.zeros((n, 0), dtype), np.zeros((n, 0), dtype))  # host: no device op


class Data(eqx.Module):
    """Training data: Y as floats in {0, 1} (0 where unobserved), the mask of cells in
    the likelihood (for a symmetric model only i < j) and the covariates."""

    Y: Float[Array, "r n n"]
    mask: Bool[Array, "r n n"]
    covariates: Covariates


@partial(jax.jit, static_argnames="symmetric")
def as_data(Y: Int8[Array, "r n n"], mask: Bool[Array, "r n n"], symmetric: bool, covariates: Covariates | None = None) -> Data:
    """Data from Y (values outside the mask ignored), the mask of training cells and the
    covariates (default none); one compiled program. A symmetric model keeps the pairs
    i < j: each unordered pair once, and no self-links (the diagonal is not read)."""
    mask = jnp.asarray(mask, bool)
    n = mask.shape[-1]
    if symmetric:
        mask = mask & jnp.triu(jnp.ones((n, n), bool), 1)
    dtype = jnp.result_type(float)
    covariates = jax.tree.map(lambda a: jnp.asarray(a, dtype), covariates or no_covariates(n, dtype))
    return Data(jnp.where(mask, jnp.asarray(Y), 0).astype(dtype), mask, covariates)


def per_relation(data: Data, num_chains: int) -> Data:
    """The "single-relation" setting: each relation as its own one-relation data set,
    repeated for ``num_chains`` chains, for a kernel with ``data_per_chain``: Y and mask
    (R * num_chains, 1, N, N), relation-major; the covariates repeated alongside."""
    runs = data.Y.shape[0] * num_chains
    cells = lambda a: jnp.repeat(a[:, None], num_chains, axis=0)
    return Data(cells(data.Y), cells(data.mask), jax.tree.map(lambda a: jnp.broadcast_to(a, (runs,) + a.shape), data.covariates))


def by_relation(samples: dict, n_relations: int) -> dict:
    """Draws of a per-relation run, (R * chains, draw, ...) -> (R, chains, draw, ...)."""
    return {k: v.reshape((n_relations, v.shape[0] // n_relations) + v.shape[1:]) for k, v in samples.items()}


def check_relations(Y, mask=None, symmetric: bool = False):
    """Y as (R, N, N) int8 with values in {0, 1} on the observed cells (0 elsewhere: values
    outside the mask are ignored), and the mask (default: every cell except the diagonal);
    for an undirected model the mask, and Y on the observed cells, must be symmetric. A
    ``ValueError`` names what is wrong."""
    Y = np.asarray(Y)
    if Y.dtype.kind not in "biuf":
        raise ValueError(f"Y must be a real numeric array of 0/1 relations; got dtype {Y.dtype}.")
    if Y.ndim == 2:
        Y = Y[None]
    if Y.ndim != 3 or Y.shape[1] != Y.shape[2] or Y.shape[1] < 2:
        raise ValueError(f"Y must be (N, N) or (n_relations, N, N) with N >= 2; got shape {Y.shape}.")
    if mask is None:
        mask = np.broadcast_to(~np.eye(Y.shape[1], dtype=bool), Y.shape)
    mask = as_mask(mask)
    if mask.ndim == 2 and mask.shape == Y.shape[1:]:
        mask = np.broadcast_to(mask, Y.shape)
    if mask.shape != Y.shape:
        raise ValueError(f"mask must have Y's shape {Y.shape} (or {Y.shape[1:]}, for every relation); got {mask.shape}.")
    if not mask.any():
        raise ValueError("mask marks no observed cell.")
    bad = mask & ~np.isin(Y, (0, 1))
    if bad.any():
        where = tuple(int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"Y must be 0 or 1 on observed cells; found {Y[where]!r} at (relation, row, col) {where}.")
    Y = np.where(mask, Y, 0).astype(np.int8)
    if symmetric and not (np.array_equal(mask, np.swapaxes(mask, 1, 2)) and np.array_equal(Y, np.swapaxes(Y, 1, 2))):
        raise ValueError("symmetric=True needs a symmetric mask and a Y symmetric on the observed cells.")
    return Y, mask


def as_mask(mask) -> np.ndarray:
    """A boolean mask, from booleans or numbers that are all 0 or 1: NaN, 0.5 or the string
    "False" would otherwise count as observed."""
    m = np.asarray(mask)
    if m.dtype == bool:
        return m
    if m.dtype.kind in "iuf" and np.all(np.isin(m, (0, 1))):
        return m.astype(bool)
    found = f"dtype {m.dtype}" if m.dtype.kind not in "iuf" else "values other than 0 and 1"
    raise ValueError(f"mask must be boolean (or 0/1), True where a cell is observed; got {found}.")


COVARIATE_KINDS = ("pair", "sender", "receiver")


def check_covariates(covariates, n: int, symmetric: bool = False) -> Covariates:
    """Covariates from a dict with any of ``pair`` ((N, N) or (P, N, N), the X_ij),
    ``sender`` ((N,) or (N, Dp), the X^p_i) and ``receiver`` ((N,) or (N, Dc), the X^c_j),
    or a :class:`Covariates`; finite values and N matching Y, else a ``ValueError``. An
    undirected model takes no ``receiver`` (its sender terms serve both ends) and only
    symmetric ``pair`` covariates."""
    if covariates is None:
        return no_covariates(n)
    if isinstance(covariates, Covariates):
        covariates = {k: getattr(covariates, k) for k in COVARIATE_KINDS}
    if not isinstance(covariates, dict) or set(covariates) - set(COVARIATE_KINDS):
        raise ValueError(f"covariates must be a dict with keys among {COVARIATE_KINDS}; got {covariates!r:.80}.")
    if symmetric and np.size(covariates.get("receiver", np.zeros(0))):
        raise ValueError("an undirected (symmetric) model uses the sender covariates at both ends; pass no receiver covariates.")
    out = {}
    for kind in COVARIATE_KINDS:
        a = covariates.get(kind)
        if a is None:
            out[kind] = np.zeros((0, n, n) if kind == "pair" else (n, 0))
            continue
        a = np.asarray(a, dtype=np.float64)
        if kind == "pair":
            a = a[None] if a.ndim == 2 else a
            if a.ndim != 3 or a.shape[1:] != (n, n):
                raise ValueError(f"pair covariates must be (N, N) or (P, N, N) with N = {n}; got shape {a.shape}.")
        else:
            a = a[:, None] if a.ndim == 1 else a
            if a.ndim != 2 or a.shape[0] != n:
                raise ValueError(f"{kind} covariates must be (N,) or (N, D) with N = {n}; got shape {a.shape}.")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{kind} covariates contain {validation.where_nonfinite(a)}.")
        if kind == "pair" and symmetric and not np.array_equal(a, np.swapaxes(a, 1, 2)):
            raise ValueError("an undirected (symmetric) model needs symmetric pair covariates, X_ij = X_ji: it fits the "
                             "pairs i < j and predicts both orientations.")
        out[kind] = a
    return Covariates(**out)


__all__ = ["COVARIATE_KINDS", "Covariates", "Data", "as_data", "as_mask", "by_relation", "check_covariates", "check_relations",
           "no_covariates", "per_relation"]

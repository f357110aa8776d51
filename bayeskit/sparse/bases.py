"""Design matrices of the sparse Bayesian engine (:mod:`bayeskit.sparse.sparse_bayes`):
kernel columns at the training inputs (or the raw features), and the unit-column basis the
engine works with.

Notation: X (N, D) the inputs, ``centers`` (M, D) the points the kernel columns are centred
on, Phi (N, M) the design; the engine scales each column of Phi to unit norm
(``Data.inv_scale``) without forming the scaled copy.

``data`` is the engine's :class:`~bayeskit.sparse.sparse_bayes.Data`.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.core.linalg import pairwise_sqdist

KERNELS = ("rbf", "poly", "linear")


def design(X, centers=None, *, kernel: str = "rbf", gamma: float = 1.0, degree: int = 3, coef0: float = 1.0,
           bias: bool = False) -> Float[Array, "n m"]:
    """Basis matrix Phi of the inputs ``X`` (N, D) against ``centers`` (M, D; default X).

    rbf: exp(-gamma ||x - c||^2); poly: (gamma x'c + coef0)^degree; linear: the features
    themselves (Phi = X, centers unused: the identity design of variable selection).
    ``bias`` appends a column of ones."""
    if not isinstance(gamma, jax.core.Tracer) and not (np.ndim(gamma) == 0 and np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive finite number; got {gamma!r}.")
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}; got {kernel!r}.")
    return _design(X, centers, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0, bias=bias)


@functools.partial(jax.jit, static_argnames=("kernel", "degree", "bias"))
def _design(X, centers, *, kernel: str, gamma, degree: int, coef0, bias: bool) -> Float[Array, "n m"]:
    X = jnp.asarray(X)
    centers = X if centers is None else jnp.asarray(centers, X.dtype)
    if kernel == "rbf":
        Phi = jnp.exp(-gamma * pairwise_sqdist(X, centers))
    elif kernel == "poly":
        Phi = (gamma * X @ centers.T + coef0) ** degree
    else:  # linear
        Phi = X
    if bias:
        Phi = jnp.concatenate([Phi, jnp.ones((Phi.shape[0], 1), Phi.dtype)], axis=1)
    return Phi


def unit_basis(data) -> Float[Array, "n m"]:
    """The unit-column basis Phi diag(inv_scale) as one array (the engine never forms it)."""
    return data.Phi * data.inv_scale


def cross_row(data, m) -> Float[Array, " m"]:
    """Row m of the unit-column Gram matrix, phi_m' Phi, from one pass over the basis
    (``phi_m @ Phi`` rather than ``Phi.T @ phi_m``, which XLA would serve with a
    transposed copy of the basis)."""
    return (data.Phi[:, m] @ data.Phi) * (data.inv_scale[m] * data.inv_scale)


__all__ = ["KERNELS", "design", "unit_basis", "cross_row"]

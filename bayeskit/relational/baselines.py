"""Link-prediction baselines without a model: scores of unobserved pairs from the observed
links alone, against which the relational models are compared (Liben-Nowell & Kleinberg,
"The link-prediction problem for social networks", 2007).

Notation: A (R, N, N) the training adjacency, 1 for an observed link and 0 for an
observed non-link or an unobserved cell (the held-out cells must not leak into it); one
score matrix per relation.

- common neighbours: (A A)_ij, the number of paths i -> k -> j (for an undirected
  relation, the neighbours that i and j share);
- Katz: sum_{l >= 1} beta^l (A^l)_ij = [(I - beta A)^-1 - I]_ij, paths of every length,
  each damped by beta per step; the series converges for beta < 1 / rho(A) (rho the
  spectral radius), and the default beta is half that bound.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.relational.data import check_relations


def adjacency(Y, mask=None) -> Float[Array, "r n n"]:
    """The training adjacency: Y where observed, 0 elsewhere, as floats (R, N, N); a single
    relation (N, N) becomes (1, N, N)."""
    Y, _ = check_relations(Y, mask)  # zero where unobserved
    return jnp.asarray(Y, jnp.result_type(float))


@jax.jit
def common_neighbours(A: Float[Array, "r n n"]) -> Float[Array, "r n n"]:
    """(A A)_ij per relation: the number of two-step paths from i to j."""
    return A @ A


def spectral_radius(A: Float[Array, "r n n"]) -> np.ndarray:
    """rho(A) per relation (R,): the largest |eigenvalue| (on the host: an unsymmetric
    eigenproblem)."""
    return np.max(np.abs(np.linalg.eigvals(np.asarray(A, np.float64))), axis=-1)


def katz(A: Float[Array, "r n n"], beta=None) -> Float[Array, "r n n"]:
    """[(I - beta A)^-1 - I] per relation. ``beta`` (scalar or (R,)) defaults to
    1 / (2 rho(A)) per relation (1 for a relation without links); a beta at or beyond
    1 / rho(A), where the series diverges, is refused."""
    rho = spectral_radius(A)
    if beta is None:
        beta = np.where(rho > 0, 0.5 / np.where(rho > 0, rho, 1.0), 1.0)
    beta = np.broadcast_to(np.asarray(beta, np.float64), rho.shape)
    if not (np.all(np.isfinite(beta)) and np.all(beta > 0)) or np.any(beta * rho >= 1):
        raise ValueError(f"beta must be positive and below 1 / rho(A) = {1 / np.max(rho):.4g} for the Katz series to "
                         f"converge; got {beta}.")
    return _katz(A, jnp.asarray(beta, A.dtype))


@jax.jit
def _katz(A, beta):
    eye = jnp.eye(A.shape[-1], dtype=A.dtype)
    return jnp.linalg.solve(eye - beta[:, None, None] * A, jnp.broadcast_to(eye, A.shape)) - eye


__all__ = ["adjacency", "common_neighbours", "katz", "spectral_radius"]

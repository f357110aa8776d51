"""The E-step of Proposition 1 without the N x N x C tensor.

``log omega[c, n, m] = A[n, c] + B[m, c] + G[n, m] - log Z_n`` (target n, neighbour m),
so every sum the updates need is a product of N x N and N x C matrices (O(N^2 C) time,
O(N^2 + N C) memory):

    a[n, c] = sum_m omega[c, n, m]        (mass of expert c with n as the target)
    b[m, c] = sum_n omega[c, n, m]        (mass of expert c with m as the neighbour)
    S_Omega = sum_{n, m} Omega[n, m] (x_n - x_m)(x_n - x_m)',   Omega = sum_c omega
    H(omega) = sum_n log Z_n - sum a A - sum b B - sum Omega G

With shifts ``alpha_n = max_c A``, ``beta_m = max_c B`` and ``o_n = max_m (G + beta)``
every exponential is at most 1. A row whose terms all underflow (possible in float32,
when its dominant terms combine individually sub-maximal A and B) would get Z_n = 0: the
``fallback_rows`` rows with the smallest normalisers are therefore recomputed exactly in
log space, which is cheap (O(k N C)) and removes the failure.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from bayeskit.core.linalg import pairwise_sqdist


class EStep(eqx.Module):
    """Reductions of q(u, z) = omega."""

    log_z: Float[Array, " n"]
    a: Float[Array, "n c"]
    b: Float[Array, "n c"]
    s_omega: Float[Array, "dx dx"]
    entropy: Array


def gate_logits(X: Float[Array, "n dx"], L: Float[Array, "dx dx"], dof: Array) -> Float[Array, "n n"]:
    """``G[n, m] = -1/2 E[d_Lambda(x_n, x_m)] = -dof/2 (x_n - x_m)' L L' (x_n - x_m)`` under
    ``q(Lambda) = W(L L', dof)``, ``-inf`` on the diagonal."""
    n = X.shape[0]
    d = pairwise_sqdist(X @ L)
    return jnp.where(jnp.eye(n, dtype=bool), -jnp.inf, -0.5 * dof * d)


def scatter(weights: Float[Array, "n n"], X: Float[Array, "n dx"]) -> Float[Array, "dx dx"]:
    """``sum_{n, m} W[n, m] (x_n - x_m)(x_n - x_m)'`` in O(N^2 Dx) without the pairs."""
    row, col = jnp.sum(weights, axis=1), jnp.sum(weights, axis=0)
    cross = X.T @ (weights @ X)
    return X.T @ ((row + col)[:, None] * X) - cross - cross.T


def _log_space_rows(idx: Array, A: Array, B: Array, G: Array):
    """Exact reductions of the rows ``idx`` from the 3-way log-sum-exp, (k, N, C)."""
    T = A[idx][:, None, :] + B[None, :, :] + G[idx][:, :, None]
    log_z = jax.nn.logsumexp(T, axis=(1, 2))
    w = jnp.exp(T - log_z[:, None, None])
    return log_z, jnp.sum(w, axis=1), jnp.sum(w, axis=0), jnp.sum(w, axis=2)


def estep(A: Float[Array, "n c"], B: Float[Array, "n c"], G: Float[Array, "n n"], X: Float[Array, "n dx"], fallback_rows: int = 32) -> EStep:
    """Proposition 1: normalise ``exp(A[n,c] + B[m,c] + G[n,m])`` over (c, m) per n and
    return the reductions of :class:`EStep` (see the module docstring)."""
    n = A.shape[0]
    tiny = jnp.finfo(A.dtype).tiny
    alpha = jnp.max(A, axis=1)
    beta = jnp.max(B, axis=1)
    A_hat = jnp.exp(A - alpha[:, None])
    B_hat = jnp.exp(B - beta[:, None])
    G_shift = G + beta[None, :]
    o = jnp.max(G_shift, axis=1)
    K = jnp.exp(G_shift - o[:, None])
    S = K * jnp.matmul(A_hat, B_hat.T, precision=jax.lax.Precision.HIGHEST)
    sigma = jnp.sum(S, axis=1)
    k = min(fallback_rows, n)
    idx = jnp.argsort(sigma)[:k]
    in_idx = jnp.zeros(n, bool).at[idx].set(True)
    keep = ~in_idx & (sigma > tiny)
    inv_sigma = jnp.where(keep, 1 / jnp.where(keep, sigma, 1.0), 0.0)
    K_norm = K * inv_sigma[:, None]
    a = A_hat * jnp.matmul(K_norm, B_hat, precision=jax.lax.Precision.HIGHEST)
    b = B_hat * jnp.matmul(K_norm.T, A_hat, precision=jax.lax.Precision.HIGHEST)
    Omega = S * inv_sigma[:, None]
    # a row that underflowed outside the recomputed ones is reported as -inf (nonfinite)
    log_z = jnp.where(keep | in_idx, alpha + o + jnp.log(jnp.where(keep, sigma, 1.0)), -jnp.inf)
    if k > 0:
        lz_rows, a_rows, b_rows, omega_rows = _log_space_rows(idx, A, B, G)
        log_z = log_z.at[idx].set(lz_rows)
        a = a.at[idx].set(a_rows)
        b = b + b_rows
        Omega = Omega.at[idx].set(omega_rows)
    G_finite = jnp.where(jnp.isfinite(G), G, 0.0)
    entropy = jnp.sum(log_z) - jnp.sum(a * A) - jnp.sum(b * B) - jnp.sum(Omega * G_finite)
    return EStep(log_z=log_z, a=a, b=b, s_omega=scatter(Omega, X), entropy=entropy)

"""The Indian buffet process prior on binary feature matrices (Griffiths & Ghahramani,
"The Indian Buffet Process: An Introduction and Review", JMLR 12, 2011).

Notation: Z (N, K) binary, rows are objects (customers), columns features (dishes);
m_k = sum_i z_ik; K+ the number of non-zero columns; H_N = sum_{j <= N} 1 / j.

Matrices have a static number of columns ``k_max``; features beyond what is used are
all-zero columns. Every sampler returns a flag that says whether ``k_max`` was too small
for the draw (the extra features are then lost), never truncating silently.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln
from jaxtyping import Array, Bool, Float, PRNGKeyArray


def harmonic(n) -> Array:
    """H_n = sum_{j=1}^n 1 / j."""
    return jnp.sum(1.0 / jnp.arange(1, n + 1))


def sample_buffet(key: PRNGKeyArray, n: int, alpha, k_max: int) -> tuple[Float[Array, "n k"], Bool[Array, ""]]:
    """Draw Z by the buffet metaphor: customer i takes each earlier dish with probability
    m_k / i, then Poisson(alpha / i) new dishes, placed in the next free columns.

    Returns (Z, overflow); ``overflow`` is True when some customer's new dishes did not
    fit in ``k_max`` columns.
    """
    alpha = jnp.asarray(alpha, jnp.result_type(float))
    cols = jnp.arange(k_max)

    def customer(carry, inputs):
        counts, used, overflow = carry
        i, k = inputs
        k_old, k_new = jax.random.split(k)
        old = (jax.random.uniform(k_old, (k_max,)) * i < counts) & (cols < used)
        n_new = jax.random.poisson(k_new, alpha / i)
        new = (cols >= used) & (cols < used + n_new)
        row = old | new
        return (counts + row, jnp.minimum(used + n_new, k_max), overflow | (used + n_new > k_max)), row

    init = (jnp.zeros(k_max, alpha.dtype), jnp.asarray(0), jnp.asarray(False))
    (_, _, overflow), Z = jax.lax.scan(customer, init, (jnp.arange(1, n + 1, dtype=alpha.dtype), jax.random.split(key, n)))
    return Z.astype(alpha.dtype), overflow


def sample_finite(key: PRNGKeyArray, n: int, alpha, k: int) -> Float[Array, "n k"]:
    """The finite model: pi_k ~ Beta(alpha / K, 1), z_ik ~ Bernoulli(pi_k); the IBP is its
    K -> infinity limit (of the left-ordered classes)."""
    alpha = jnp.asarray(alpha, jnp.result_type(float))
    k_pi, k_z = jax.random.split(key)
    pi = jax.random.beta(k_pi, alpha / k, jnp.ones((), alpha.dtype), (k,))
    return jax.random.bernoulli(k_z, pi, (n, k)).astype(alpha.dtype)


def sample_stick_breaking(key: PRNGKeyArray, n: int, alpha, k_max: int) -> tuple[Float[Array, "n k"], Bool[Array, ""]]:
    """The stick-breaking construction (Teh, Goerur & Ghahramani 2007): mu_l ~ Beta(alpha,
    1), pi_k = prod_{l <= k} mu_l (decreasing), z_ik ~ Bernoulli(pi_k), truncated at
    ``k_max`` sticks.

    Returns (Z, overflow); ``overflow`` is True when a stick beyond ``k_max`` would still
    have been used with probability above 1e-3 (1 - (1 - pi_{k_max})^n > 1e-3).
    """
    alpha = jnp.asarray(alpha, jnp.result_type(float))
    k_mu, k_z = jax.random.split(key)
    log_pi = jnp.cumsum(jnp.log(jax.random.beta(k_mu, alpha, jnp.ones((), alpha.dtype), (k_max,))))
    Z = (jax.random.uniform(k_z, (n, k_max), alpha.dtype) < jnp.exp(log_pi)).astype(alpha.dtype)
    tail = -jnp.expm1(n * jnp.log1p(-jnp.exp(log_pi[-1])))
    return Z, tail > 1e-3


def left_ordered(Z: Float[Array, "n k"]) -> Float[Array, "n k"]:
    """The left-ordered form lof(Z): columns sorted by their binary history (row 1 the
    most significant bit), largest first; all-zero columns come last."""
    order = jnp.lexsort(tuple(1 - Z[::-1]))
    return Z[:, order]


def log_prob_matrix(Z: Float[Array, "n k"], alpha) -> Array:
    """log P(Z) of one matrix whose feature labels are exchangeable (the K+! orderings of
    its non-zero columns equally likely):

        alpha^K+ / K+!  exp(-alpha H_N)  prod_{k <= K+} (N - m_k)! (m_k - 1)! / N!.

    Its ratios give the Gibbs conditionals p(z_ik = 1 | Z_-ik) = m_-ik / N for m_-ik > 0.
    All-zero columns are ignored, so padding to any width leaves it unchanged.
    """
    Z = jnp.asarray(Z)
    n = Z.shape[0]
    alpha = jnp.asarray(alpha, Z.dtype)
    m = Z.sum(0)
    active = m > 0
    k_plus = active.sum()
    per_column = jnp.where(active, gammaln(n - m + 1) + gammaln(jnp.maximum(m, 1)) - gammaln(n + 1.0), 0.0)
    return k_plus * jnp.log(alpha) - gammaln(k_plus + 1.0) - alpha * harmonic(n) + per_column.sum()


def log_prob(Z: Float[Array, "n k"], alpha) -> Array:
    """log P([Z]) of the left-ordered equivalence class of Z (JMLR 2011, eq. 15):

        alpha^K+ / prod_h K_h!  exp(-alpha H_N)  prod_{k <= K+} (N - m_k)! (m_k - 1)! / N!,

    with K_h the number of columns sharing the non-zero history h; that is log P(Z) plus
    log K+! / prod_h K_h!, the number of distinct matrices in the class.
    """
    Z = left_ordered(jnp.asarray(Z))
    active = Z.sum(0) > 0
    # After sorting, equal histories are adjacent: column k's position r inside its run
    # of identical columns gives sum_k log r = sum_h log K_h!.
    same = jnp.concatenate([jnp.zeros(1, bool), jnp.all(Z[:, 1:] == Z[:, :-1], axis=0)]) & active
    run = jax.lax.scan(lambda r, s: (jnp.where(s, r + 1, 1),) * 2, 1, same)[1]
    log_k_h = jnp.sum(jnp.where(active, jnp.log(run.astype(Z.dtype)), 0.0))
    return log_prob_matrix(Z, alpha) + gammaln(active.sum() + 1.0) - log_k_h

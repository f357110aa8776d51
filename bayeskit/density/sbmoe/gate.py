"""M-step II: the gate's factor q(Lambda) = W(L L', eta_q).

Proposition 4 (the paper's experiments) minimises, over the Cholesky factor ``L``,

    F(L) = -eta0 log det L + sum_n E_A LSE_{m != n}(-1/2 ||(x_n - x_m)' L A||^2)
           + eta_q/2 tr(L' (Lambda0^-1 + S_Omega) L)

(minus the L-dependent part of the ELBO; the first and last terms come from
``-KL(W(L L', eta_q) || W(Lambda0, eta0))`` and the E-step's gate term, and the paper
has eta_q = eta0) with an optax optimiser, the expectation over the Bartlett factor
``A`` with eta_q degrees of freedom (``Lambda = L A A' L'``) by Monte Carlo; only the
log-sum-exp needs sampling, since ``E[Lambda] = eta_q L L'``. ``L`` is parameterised by its strict
lower triangle and the logarithm of its diagonal, so ``log det L = sum(log_diag)``.

Proposition 3 sets ``(L L')^-1 = eta_q / eta0 [Lambda0^-1 + sum (Omega - t) (x_n - x_m)(x_n - x_m)']``
with ``t`` the softmax tangent of the gate at the current mean precision; it is damped
in the natural parameter and its eigenvalues are floored.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core import sampling
from bayeskit.core.linalg import pairwise_sqdist
from bayeskit.density.sbmoe.estep import gate_logits, scatter
from bayeskit.density.sbmoe.model import Priors


class GateParams(eqx.Module):
    """``L = tril(lower, -1) + diag(exp(log_diag))``."""

    lower: Float[Array, "dx dx"]
    log_diag: Float[Array, " dx"]

    @property
    def L(self) -> Array:
        return jnp.tril(self.lower, -1) + jnp.diag(jnp.exp(self.log_diag))

    @staticmethod
    def from_factor(L: Array) -> GateParams:
        return GateParams(lower=jnp.tril(L, -1), log_diag=jnp.log(jnp.diagonal(L)))


def log_gammas(keys: PRNGKeyArray, dim: int, dof: Array, n: int, dtype) -> Float[Array, "b n dim"]:
    """The log-Gamma variates behind :func:`bartlett`'s diagonals for a batch of keys, by one
    sampler (vmapped over the keys): row b holds what ``bartlett(keys[b], dim, dof, n)``
    draws, and its first m rows what ``bartlett(keys[b], dim, dof, m)`` draws. The latter
    rests on JAX's partitionable Threefry (``jax_threefry_partitionable``, the default),
    under which a key's variates do not depend on how many are drawn; under other random
    settings the first m rows are other, equally valid, draws."""
    return log_gamma_groups([(keys, dim, dof, n)], dtype)[0]


def log_gamma_groups(groups: list[tuple[PRNGKeyArray, int, Array, int]], dtype) -> list[Array]:
    """:func:`log_gammas` of several groups ``(keys (b,), dim, dof (scalar or (b,)), n)`` by
    one sampler: one (b, n, dim) array per group. Every key draws a flat vector as long as
    the longest group's ``n dim``, its Gamma shapes ``(dof - i) / 2`` laid out as a
    row-major (n, dim) array and padded with ones; by the prefix property above, a group's
    variates are those that :func:`log_gammas` draws for it alone."""
    length = max(n * dim for _, dim, _, n in groups)

    def layout(dof, dim, n):
        shape = (dof - jnp.arange(dim, dtype=dtype)) / 2
        return jnp.pad(jnp.tile(shape, n), (0, length - n * dim), constant_values=1.0)

    keys = jnp.concatenate([keys for keys, *_ in groups])
    shapes = jnp.concatenate([jax.vmap(lambda v, dim=dim, n=n: layout(v, dim, n))(jnp.broadcast_to(jnp.asarray(dof, dtype), keys.shape[:1]))
                              for keys, dim, dof, n in groups])
    k_diag = jax.vmap(lambda k: jax.random.split(k)[0])(keys)
    drawn = jax.vmap(lambda k, a: sampling.loggamma(k, a, (length,), dtype))(k_diag, shapes)
    out, start = [], 0
    for keys, dim, _, n in groups:
        out.append(drawn[start:start + keys.shape[0], : n * dim].reshape(keys.shape[0], n, dim))
        start += keys.shape[0]
    return out


def bartlett(key: PRNGKeyArray, dim: int, dof: Array, n: int, dtype, log_gamma: Array | None = None) -> Float[Array, "n dim dim"]:
    """``n`` Bartlett factors: lower triangular with ``A_ii^2 ~ chi^2(dof + 1 - i)`` and
    standard normal entries below the diagonal, so ``L A A' L' ~ W(L L', dof)``.
    The chi-square draws go through a log-gamma sampler (no underflow at small dof);
    ``log_gamma`` (n, dim) passes them in, drawn by :func:`log_gammas` with others."""
    if log_gamma is None:
        log_gamma = log_gammas(key[None], dim, dof, n, dtype)[0]
    diag = jnp.exp(0.5 * (jnp.log(jnp.asarray(2.0, dtype)) + log_gamma))
    low = jnp.tril(sampling.flat(jax.random.normal, jax.random.split(key)[1], (n, dim, dim), dtype), -1)
    return low + jax.vmap(jnp.diag)(diag)


def bartlett_factors(keys: PRNGKeyArray, dim: int, dof: Array, n: int, dtype) -> Float[Array, "b n dim dim"]:
    """:func:`bartlett` for a batch of keys: row b holds ``bartlett(keys[b], dim, dof, n)``
    and its first m factors ``bartlett(keys[b], dim, dof, m)`` (see :func:`log_gammas`). One
    log-Gamma sampler and one normal draw for the batch, each a random-number computation
    compiled once (in a fit, the gate's sub-steps and the bound draw this way)."""
    log_gamma = log_gammas(keys, dim, dof, n, dtype)
    return jax.vmap(lambda k, lg: bartlett(k, dim, dof, n, dtype, lg))(keys, log_gamma)


def _row_lse(Z_rows: Array, Z: Array, rows: Array) -> Array:
    """``sum_rows LSE_{m != n}(-1/2 ||z_n - z_m||^2)`` for a block of rows."""
    d = pairwise_sqdist(Z_rows, Z)
    mask = rows[:, None] == jnp.arange(Z.shape[0])[None, :]
    return jnp.sum(jax.nn.logsumexp(jnp.where(mask, -jnp.inf, -0.5 * d), axis=1))


def gate_log_normaliser(X: Array, M: Array, chunk: int | None) -> Array:
    """``sum_n LSE_{m != n}(-1/2 ||(x_n - x_m)' M||^2)`` for one draw ``M = L A``; with
    ``chunk`` the rows go in blocks rematerialised in the backward pass."""
    Z = X @ M
    n = Z.shape[0]
    if chunk is None or chunk >= n:
        return _row_lse(Z, Z, jnp.arange(n))
    pad = (-n) % chunk
    rows = jnp.concatenate([jnp.arange(n), jnp.full((pad,), -1)]).reshape(-1, chunk)
    Z_pad = jnp.concatenate([Z, jnp.zeros((pad, Z.shape[1]), Z.dtype)]).reshape(-1, chunk, Z.shape[1])

    @jax.checkpoint
    def block(Zr, r):
        d = pairwise_sqdist(Zr, Z)
        mask = r[:, None] == jnp.arange(n)[None, :]
        lse = jax.nn.logsumexp(jnp.where(mask, -jnp.inf, -0.5 * d), axis=1)
        return jnp.sum(jnp.where(r >= 0, lse, 0.0))

    return jnp.sum(jax.lax.map(lambda args: block(*args), (Z_pad, rows)))


def expected_log_normaliser(key: PRNGKeyArray, X: Array, L: Array, dof: Array, n_samples: int, chunk: int | None = None,
                            factors: Array | None = None) -> Array:
    """Monte Carlo estimate of ``sum_n E_q LSE_{m != n}(-1/2 d_Lambda(x_n, x_m))`` under
    ``q(Lambda) = W(L L', dof)``, with the Bartlett factors of ``key`` (``factors``
    (n_samples, dx, dx) if drawn already by :func:`bartlett_factors`)."""
    A = bartlett(key, L.shape[0], dof, n_samples, L.dtype) if factors is None else factors
    return jnp.mean(jax.vmap(lambda a: gate_log_normaliser(X, L @ a, chunk))(A))


def gate_loss(params: GateParams, key: PRNGKeyArray, X: Array, s_omega: Array, priors: Priors, n_samples: int, chunk: int | None,
              factors: Array | None = None) -> Array:
    """``F(L) / N`` of Proposition 4 (one Monte Carlo estimate; ``factors``: see
    :func:`expected_log_normaliser`)."""
    L = params.L
    total = priors.lambda0_inv + s_omega
    F = (
        -priors.eta0 * jnp.sum(params.log_diag)
        + expected_log_normaliser(key, X, L, priors.eta_q, n_samples, chunk, factors)
        + 0.5 * priors.eta_q * jnp.sum(L * (total @ L))
    )
    return F / X.shape[0]


def stochastic_update(
    key: PRNGKeyArray,
    params: GateParams,
    opt_state,
    X: Array,
    s_omega: Array,
    priors: Priors,
    optimizer: optax.GradientTransformation,
    *,
    steps: int,
    n_samples: int,
    chunk: int | None,
    factors: Array | None = None,
):
    """``steps`` optimiser sub-steps on F (Proposition 4), warm-started at ``params``; the
    sub-step keys are ``split(key, steps)``, and ``factors`` (steps, n_samples, dx, dx)
    their Bartlett factors if drawn already (:func:`bartlett_factors`)."""
    grad = jax.grad(gate_loss)
    keys = jax.random.split(key, steps)
    if factors is None:
        factors = bartlett_factors(keys, X.shape[1], priors.eta_q, n_samples, X.dtype)

    def step(carry, draws):
        (p, o), (k, A) = carry, draws
        g = grad(p, k, X, s_omega, priors, n_samples, chunk, A)
        updates, o = optimizer.update(g, o, p)
        return (optax.apply_updates(p, updates), o), None

    (params, opt_state), _ = jax.lax.scan(step, (params, opt_state), (keys, factors))
    return params, opt_state


def projection_update(L: Array, X: Array, s_omega: Array, priors: Priors) -> tuple[Array, Array]:
    """Proposition 3 with the softmax tangent ``t``, damping and an eigenvalue floor.

    Returns the new factor and whether the floor was hit."""
    t = jax.nn.softmax(gate_logits(X, L, priors.eta_q), axis=1)
    ratio = priors.eta_q / priors.eta0
    target = ratio * (priors.lambda0_inv + s_omega - scatter(t, X))
    current = jnp.linalg.inv(L @ L.T)
    natural = (1 - priors.damping) * current + priors.damping * target
    w, U = jnp.linalg.eigh(0.5 * (natural + natural.T))
    floor = priors.floor * ratio * jnp.max(jnp.linalg.eigvalsh(priors.lambda0_inv))
    floored = jnp.any(w < floor)
    V = (U / jnp.maximum(w, floor)) @ U.T
    return jnp.linalg.cholesky(0.5 * (V + V.T)), floored

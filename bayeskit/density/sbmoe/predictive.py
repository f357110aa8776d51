"""The posterior predictive of Section 3.3, a Gaussian mixture per test input.

    p(y* | x*) ~= 1/K_e sum_k sum_c pi^k_c(x*) N(y* | mu^k_c, Sigma^k_c),
    pi^k_c(x*) = sum_n gbar_n(x*) gamma_c(y_n; theta^k),
    gbar_n(x*) = 1/K_g sum_k' softmax_n(-1/2 (x* - x_n)' Lambda^k' (x* - x_n)),

with ``Lambda^k' ~ q(Lambda)`` and joint expert draws ``theta^k ~ q(mu, Sigma)``; the
same ``theta^k`` enters the weights ``gamma`` and the components. It is a mixture of
``K_e C`` Gaussians whose weights depend on x* and whose components do not.

The plug-in predictive (``plug_in=True``) puts the posterior means in their place:
Lambda = E[Lambda], mu_c = m_c, Sigma_c = E[Sigma_c], a mixture of C Gaussians.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core.chunks import map_blocks
from bayeskit.core.linalg import pairwise_sqdist, spd_inverse
from bayeskit.core.loop import as_arrays
from bayeskit.core.sampling import flat
from bayeskit.core.validation import check_real, is_concrete
from bayeskit.density.mixture import Mixture
from bayeskit.density.sbmoe.gate import bartlett, log_gamma_groups, log_gammas
from bayeskit.density.sbmoe.inference import State
from bayeskit.density.sbmoe.model import Hyperparams


def mean_gate(X_test: Array, X: Array, M: Float[Array, "kg dx dx"]) -> Float[Array, "m n"]:
    """``gbar(x*)``: the gate's softmax over the training points, averaged over draws."""

    def one(Mk):
        return jax.nn.softmax(-0.5 * pairwise_sqdist(X_test @ Mk, X @ Mk), axis=1)

    return jnp.mean(jax.vmap(one)(M), axis=0)


def expert_draws(key: PRNGKeyArray, state: State, n_draws: int, log_gamma: Array | None = None) -> tuple[Array, Array]:
    """Joint draws ``Sigma_c ~ IW(Psi_c, nu_c)``, ``mu_c ~ N(m_c, Sigma_c / kappa_c)``:
    means (K_e, C, Dy) and Cholesky factors (K_e, C, Dy, Dy), standardised units.
    ``log_gamma`` (C, K_e, Dy): the Bartlett diagonals' variates, drawn with others
    (:func:`expert_keys` gives their keys)."""
    e = state.experts
    c, dy = e.m.shape
    dtype = e.m.dtype
    keys, k_mu = expert_keys(key, c), jax.random.split(key)[1]
    if log_gamma is None:
        log_gamma = jax.vmap(lambda k, nu: log_gammas(k[None], dy, nu, n_draws, dtype)[0])(keys, e.nu)
    A = jax.vmap(lambda k, nu, lg: bartlett(k, dy, nu, n_draws, dtype, lg), out_axes=1)(keys, e.nu, log_gamma)
    chol_prec = jnp.linalg.cholesky(jax.vmap(spd_inverse)(e.psi))  # W ~ Wishart(Psi^-1, nu): W = P A A' P'
    factor = chol_prec[None] @ A  # (K_e, C, Dy, Dy): W = factor factor'
    sigma = jax.vmap(jax.vmap(spd_inverse))(factor @ jnp.swapaxes(factor, -1, -2))  # Sigma = W^-1
    chol = jnp.linalg.cholesky(sigma)
    z = flat(jax.random.normal, k_mu, (n_draws, c, dy), dtype)
    mu = e.m + jnp.einsum("kcij,kcj->kci", chol, z) / jnp.sqrt(e.kappa)[None, :, None]
    return mu, chol


def expert_keys(key: PRNGKeyArray, n_experts: int) -> PRNGKeyArray:
    """The keys of the experts' Bartlett factors in :func:`expert_draws` (one per expert)."""
    return jax.random.split(jax.random.split(key)[0], n_experts)


def expert_means(state: State) -> tuple[Array, Array]:
    """The posterior means ``m_c`` and Cholesky factors of ``E[Sigma_c] = Psi_c / (nu_c - Dy - 1)``,
    with a leading draw axis of length 1, standardised units."""
    e = state.experts
    dy = e.m.shape[1]
    sigma = e.psi / (e.nu - dy - 1)[:, None, None]
    return e.m[None], jnp.linalg.cholesky(sigma)[None]


def _log_gauss(Y: Array, mu: Array, chol: Array) -> Array:
    """``log N(y_n | mu_c, chol_c chol_c')`` of shape (N, C)."""
    diff = Y[None, :, :] - mu[:, None, :]
    white = jax.lax.linalg.triangular_solve(chol, diff, left_side=False, lower=True, transpose_a=True)
    logdet = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return (-0.5 * jnp.sum(white**2, axis=-1) - logdet[:, None] - 0.5 * Y.shape[1] * math.log(2 * math.pi)).T


def predictive(
    key: PRNGKeyArray,
    state: State,
    X: Float[Array, "m dx"],
    hparams: Hyperparams,
    *,
    n_gate: int = 100,
    n_draws: int = 100,
    chunk_size: int | None = None,
    plug_in: bool = False,
) -> Mixture:
    """The posterior predictive mixture at the inputs ``X`` (caller's units), from
    ``n_gate`` draws of q(Lambda) (K_g) and ``n_draws`` joint draws of the experts (K_e),
    or with ``plug_in`` the mixture at the posterior means (the draws unused).

    ``chunk_size`` bounds the test rows whose gate is computed at once. Of the
    hyperparameters only q(Lambda)'s degrees of freedom enter, as a traced value: fits
    with other settings share one compiled predictive.
    """
    dx = state.data.X.shape[-1]
    shape = np.shape(X) if np.ndim(X) == 2 else (1, *np.shape(X))  # one input as a vector
    if len(shape) != 2 or shape[-1] != dx:
        raise ValueError(f"X must have shape (m, {dx}) for a fit on {dx} input(s), got {np.shape(X)}.")
    if is_concrete(X) and not isinstance(X, jax.Array):  # a JAX array stays on its device (the estimator checked it)
        X = check_real(np.reshape(X, shape), "X")  # names NaN / inf entries
    eta_q = as_arrays(hparams.gate_dofs(dx)[1], state.data.X.dtype)
    return _predictive(key, state, X, eta_q, n_gate=n_gate, n_draws=n_draws, chunk_size=chunk_size, plug_in=plug_in)


@eqx.filter_jit
def _predictive(key, state, X, eta_q, *, n_gate, n_draws, chunk_size, plug_in) -> Mixture:
    data = state.data
    dtype = data.X.dtype
    X = jnp.atleast_2d(jnp.asarray(X, dtype))
    Xs = (X - data.x_shift) / data.x_scale
    dx = data.X.shape[1]
    k_gate, k_exp = jax.random.split(key)
    if plug_in:
        n_draws = 1
        M = (jnp.sqrt(eta_q) * state.gate.L)[None]
        mu, chol = expert_means(state)
    else:
        # the Bartlett diagonals of the gate and of every expert by one log-Gamma sampler
        c, dy = state.experts.m.shape
        lg_gate, lg_experts = log_gamma_groups([(k_gate[None], dx, eta_q, n_gate),
                                                (expert_keys(k_exp, c), dy, state.experts.nu, n_draws)], dtype)
        M = state.gate.L @ bartlett(k_gate, dx, eta_q, n_gate, dtype, lg_gate[0])
        mu, chol = expert_draws(k_exp, state, n_draws, lg_experts)
    g = map_blocks(lambda x: mean_gate(x, data.X, M), Xs, chunk_size)
    gamma = jax.nn.softmax(jax.vmap(lambda m, c: _log_gauss(data.Y, m, c))(mu, chol), axis=-1)  # (K_e, N, C)
    pi = jnp.einsum("mn,knc->mkc", g, gamma).reshape(X.shape[0], -1)
    log_w = jnp.log(jnp.maximum(pi, jnp.finfo(dtype).tiny)) - math.log(n_draws)
    means = data.y_shift + data.y_scale * mu.reshape(-1, mu.shape[-1])
    scale_tril = data.y_scale[:, None] * chol.reshape((-1,) + chol.shape[-2:])
    return Mixture(log_weights=log_w, means=means, scale_tril=scale_tril)

"""The evidence algebra of the sparse Bayesian engine (:mod:`bayeskit.sparse.sparse_bayes`,
whose docstring holds the notation and the equations): l(gamma) of one basis and its
maximiser, the leave-one-out statistics s and q, the posterior of the active weights and
the log evidence L recomputed from scratch, and MacKay's noise re-estimate.

``state``, ``data`` and ``hparams`` are the engine's :class:`~bayeskit.sparse.sparse_bayes.State`,
:class:`~bayeskit.sparse.sparse_bayes.Data` and :class:`~bayeskit.sparse.sparse_bayes.Hyperparams`.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from bayeskit.core.linalg import spd_inverse_loop


def optimal_gamma(s, q, rho):
    """The maximiser of l(gamma) (:mod:`bayeskit.sparse.sparse_bayes`): the stable root where q^2 - s > rho,
    else 0."""
    theta = q * q - s
    safe_s = jnp.maximum(s, jnp.finfo(jnp.result_type(s)).tiny)
    root = 2.0 * (theta - rho) / (safe_s * ((safe_s + 2.0 * rho) + jnp.sqrt(s * s + 4.0 * rho * q * q)))
    return jnp.where((theta > rho) & (s > 0), root, 0.0)


def basis_objective(gamma, s, q, rho):
    """l(gamma), the part of the log evidence that depends on one basis's variance."""
    return -0.5 * (jnp.log1p(gamma * s) - q * q * gamma / (1.0 + gamma * s) + rho * gamma)


def rho_of(state, hparams):
    """rho of the prior on the variances: 0 (RVM), lambda (FLAP, FLAP-sigma), lambda beta (BLS)."""
    if hparams.prior == "rvm":
        return jnp.zeros_like(state.lam)
    return state.lam * state.beta if hparams.prior == "bls" else state.lam


def leave_one_out(state):
    """s_m, q_m: S, Q with basis m itself taken out of C.

    For an active basis, s = S / (1 - gamma S) and q = Q / (1 - gamma S) (Tipping & Faul,
    eq. 23), or equally s = 1 / Sigma_mm - 1 / gamma and q = mu_m / Sigma_mm, since the
    posterior of w_m is N(q / (1 / gamma + s), 1 / (1 / gamma + s)). The first loses all
    its digits for a well-determined weight (gamma s >> 1: 1 - gamma S = 1 / (1 + gamma s)
    is then a difference of nearly equal numbers, and in float32 s came out 100% wrong); the
    second only for a weight its data barely determine (1 / Sigma_mm near 1 / gamma), whose
    S is then accurate. So the second is used unless Sigma_mm is within 1% of gamma (gamma s
    < 0.01), a test made on Sigma_mm, which is accurate where S is not."""
    active = state.gamma > 0
    factor = 1.0 - state.gamma * state.S
    k = state.used.shape[0]
    j = jnp.minimum(state.slot, k - 1)
    Sigma_mm = jnp.where(active, jnp.diagonal(state.Sigma)[j], 1.0)
    determined = active & (Sigma_mm < 0.99 * state.gamma)
    safe_factor = jnp.where(determined | ~active, 1.0, factor)
    safe_gamma = jnp.where(active, state.gamma, 1.0)
    s = jnp.where(determined, 1.0 / Sigma_mm - 1.0 / safe_gamma, jnp.where(active, state.S / safe_factor, state.S))
    q = jnp.where(determined, state.mu[j] / Sigma_mm, jnp.where(active, state.Q / safe_factor, state.Q))
    return s, q


def precision(state, gamma_slot):
    """beta Phi_A' Phi_A + Gamma_A^-1 on the used slots, identity on the free ones."""
    used = state.used
    G_AA = jnp.where(used[:, None] & used[None, :], state.G[:, state.basis], 0.0)
    inv_gamma = jnp.where(used, 1.0 / jnp.where(used, gamma_slot, 1.0), 1.0)
    return state.beta * G_AA + jnp.diag(inv_gamma)


def posterior(state, data):
    """(Sigma, mu, log |Sigma|) of the slot weights, recomputed from scratch."""
    used = state.used
    size = jnp.max(jnp.where(used, jnp.arange(used.shape[0]) + 1, 0))  # the used slots end here
    Sigma, logdet_A = spd_inverse_loop(precision(state, state.gamma[state.basis]), size)
    Sigma = jnp.where(used[:, None] & used[None, :], Sigma, 0.0)
    mu = state.beta * Sigma @ jnp.where(used, data.Phi_y[state.basis], 0.0)
    return Sigma, mu, -logdet_A


def residual_terms(state, data, mu):
    """(||y - Phi mu||^2, y'(y - Phi mu)) from the cached Gram columns."""
    used = state.used
    Phi_y = jnp.where(used, data.Phi_y[state.basis], 0.0)
    G_AA = jnp.where(used[:, None] & used[None, :], state.G[:, state.basis], 0.0)
    yy = jnp.sum(data.y * data.y)
    fit = mu @ Phi_y
    return yy - 2.0 * fit + mu @ G_AA @ mu, yy - fit


def log_evidence(state, data, hparams, mu, logdet_Sigma):
    """L of :mod:`bayeskit.sparse.sparse_bayes` from the posterior mean ``mu`` and log |Sigma|."""
    n = data.y.shape[0]
    _, y_resid = residual_terms(state, data, mu)
    gamma_A = jnp.where(state.gamma > 0, state.gamma, 1.0)
    log_det_C = -n * jnp.log(state.beta) + jnp.sum(jnp.log(gamma_A)) - logdet_Sigma
    log_ev = -0.5 * (n * math.log(2 * math.pi) + log_det_C + state.beta * y_resid)
    return log_ev - 0.5 * rho_of(state, hparams) * jnp.sum(state.gamma)


@jax.jit
def noise_reestimate(state, data):
    """MacKay's noise variance ||y - Phi mu||^2 / (N - sum_A (1 - Sigma_mm / gamma_m))
    (and that sum of squares), from the current posterior."""
    sq_resid, _ = residual_terms(state, data, state.mu)
    gamma_slot = jnp.where(state.used, state.gamma[state.basis], 1.0)
    dof = data.y.shape[0] - jnp.sum(jnp.where(state.used, 1.0 - jnp.diagonal(state.Sigma) / gamma_slot, 0.0))
    return jnp.maximum(sq_resid, 0.0) / jnp.maximum(dof, 1.0)  # a near-exact fit's sum can round below 0


__all__ = ["optimal_gamma", "basis_objective", "rho_of", "leave_one_out", "precision", "posterior", "residual_terms",
           "log_evidence", "noise_reestimate"]

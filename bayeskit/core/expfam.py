"""Expectations and ELBO pieces of the conjugate Gamma-Normal factors of the VB models.

Gamma distributions use the shape ``alpha`` / scale ``beta`` parameterisation, so
``E[phi] = alpha beta`` and ``E[log phi] = digamma(alpha) + log beta``.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln
from jaxtyping import Array, ArrayLike

LOG_2PI = math.log(2 * math.pi)


def gamma_mean(shape: ArrayLike, scale: ArrayLike) -> Array:
    return jnp.asarray(shape) * scale


def gamma_mean_log(shape: ArrayLike, scale: ArrayLike) -> Array:
    return digamma(shape) + jnp.log(scale)


def gamma_elbo(shape: Array, scale: Array, alpha: ArrayLike, beta: ArrayLike) -> Array:
    """``E_q[log Gamma(phi; alpha, beta)] + H[q]`` summed, for ``q = Gamma(shape, scale)``."""
    mean_log = gamma_mean_log(shape, scale)
    expected_log_prior = (
        (alpha - 1) * mean_log - gamma_mean(shape, scale) / beta - gammaln(alpha) - alpha * jnp.log(beta)
    )
    entropy = shape + jnp.log(scale) + gammaln(shape) + (1 - shape) * digamma(shape)
    return jnp.sum(expected_log_prior + entropy)


def normal_given_precision(second_moment: Array, shape: Array, scale: Array, count: ArrayLike = 1) -> Array:
    """``E[log N(x; 0, phi^{-1})]`` summed, with ``E[x^2]`` summed over ``count`` entries
    that share one precision ``phi ~ q = Gamma(shape, scale)``."""
    return jnp.sum(
        -0.5 * gamma_mean(shape, scale) * second_moment
        + 0.5 * count * (gamma_mean_log(shape, scale) - LOG_2PI)
    )


def gaussian_entropy(logdet_cov: ArrayLike, dim: int) -> Array:
    """Entropy of a ``dim``-variate Gaussian from ``log det`` of its covariance, summed."""
    return jnp.sum(0.5 * dim * (LOG_2PI + 1) + 0.5 * jnp.asarray(logdet_cov))

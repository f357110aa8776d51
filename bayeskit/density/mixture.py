"""Gaussian mixtures with per-input weights: the predictive distributions of the
conditional density models (SBMoE, the conditioned DP mixture, the GP baseline)."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core.sampling import flat


class Mixture(eqx.Module):
    """Gaussian mixtures, one weight vector per input; the components are shared by all
    inputs (SBMoE) or given per input (conditioned joint mixtures, GPs).

    Attributes
    ----------
    log_weights : (M, K) log mixture weights per input (each row sums to 1).
    means : (K, Dy) or (M, K, Dy) component means.
    scale_tril : (K, Dy, Dy) or (M, K, Dy, Dy) Cholesky factors of the covariances.
    """

    log_weights: Float[Array, "m k"]
    means: Float[Array, "*m k dy"]
    scale_tril: Float[Array, "*m k dy dy"]

    def _per_input(self) -> tuple[Array, Array]:
        m, k = self.log_weights.shape
        dy = self.means.shape[-1]
        return jnp.broadcast_to(self.means, (m, k, dy)), jnp.broadcast_to(self.scale_tril, (m, k, dy, dy))

    def component_log_prob(self, y: Float[Array, "... m dy"]) -> Float[Array, "... m k"]:
        dy = self.means.shape[-1]
        eye = jnp.broadcast_to(jnp.eye(dy, dtype=self.means.dtype), self.scale_tril.shape)
        inv = jax.lax.linalg.triangular_solve(self.scale_tril, eye, left_side=True, lower=True)
        diff = y[..., None, :] - self.means  # (..., M, K, Dy)
        white = jnp.einsum("...kij,...kj->...ki", inv, diff)
        logdet = jnp.sum(jnp.log(jnp.diagonal(self.scale_tril, axis1=-2, axis2=-1)), axis=-1)
        return -0.5 * jnp.sum(white**2, axis=-1) - logdet - 0.5 * dy * math.log(2 * math.pi)

    @eqx.filter_jit
    def log_prob(self, y: Float[Array, "... m dy"]) -> Float[Array, "... m"]:
        """Log density of ``y[..., i, :]`` under the mixture of input i."""
        return jax.nn.logsumexp(self.log_weights + self.component_log_prob(y), axis=-1)

    @property
    def weights(self) -> Array:
        return jnp.exp(self.log_weights)

    @property
    @eqx.filter_jit
    def mean(self) -> Float[Array, "m dy"]:
        means, _ = self._per_input()
        return jnp.einsum("mk,mkd->md", self.weights, means)

    @property
    @eqx.filter_jit
    def covariance(self) -> Float[Array, "m dy dy"]:
        means, chol = self._per_input()
        cov = chol @ jnp.swapaxes(chol, -1, -2)
        second = jnp.einsum("mk,mkij->mij", self.weights, cov + means[..., :, None] * means[..., None, :])
        mean = self.mean
        return second - mean[:, :, None] * mean[:, None, :]

    @eqx.filter_jit
    def sample(self, key: PRNGKeyArray, n: int) -> Float[Array, "n m dy"]:
        """``n`` draws per input by ancestral sampling (component, then Gaussian)."""
        means, chol = self._per_input()
        k_comp, k_noise = jax.random.split(key)
        comp = jax.random.categorical(k_comp, self.log_weights, axis=-1, shape=(n,) + self.log_weights.shape[:-1])
        rows = jnp.arange(self.log_weights.shape[0])[None, :]
        z = flat(jax.random.normal, k_noise, comp.shape + (means.shape[-1],), means.dtype)
        return means[rows, comp] + jnp.einsum("nmij,nmj->nmi", chol[rows, comp], z)

    def _marginal(self, dim: int) -> tuple[Array, Array]:
        means, chol = self._per_input()
        return means[..., dim], jnp.sqrt(jnp.sum(chol[..., dim, :] ** 2, axis=-1))

    def marginal_cdf(self, value: Float[Array, " m"], dim: int = 0) -> Float[Array, " m"]:
        """``P(y*_dim <= value)`` per input."""
        mu, sd = self._marginal(dim)
        return jnp.sum(self.weights * jax.scipy.stats.norm.cdf((value[:, None] - mu) / sd), axis=-1)

    @eqx.filter_jit
    def quantile(self, q: float, dim: int = 0, n_bisect: int = 80) -> Float[Array, " m"]:
        """The q-quantile of output ``dim`` per input, by bisection on the marginal CDF."""
        mu, sd = self._marginal(dim)
        lo, hi = jnp.min(mu - 40 * sd, axis=-1), jnp.max(mu + 40 * sd, axis=-1)

        def body(_, bounds):
            lo, hi = bounds
            mid = 0.5 * (lo + hi)
            below = self.marginal_cdf(mid, dim) < q
            return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

        lo, hi = jax.lax.fori_loop(0, n_bisect, body, (lo, hi))
        return 0.5 * (lo + hi)

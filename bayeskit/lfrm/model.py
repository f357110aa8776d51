"""The latent feature relational model (Miller, Griffiths & Jordan, "Nonparametric latent
feature models for link prediction", NIPS 2009): types, likelihood and priors.

Notation: R relations on N objects, Y (R, N, N) in {0, 1} observed where ``mask`` is
True; Z (N, K) binary latent features shared by all relations, Z ~ IBP(alpha); one
weight matrix W_r (K, K) per relation with w ~ N(0, sigma_w^2) and a bias c_r:

    Pr(y_rij = 1 | Z, W, c) = link(eta_rij),   eta_rij = z_i W_r z_j' + c_r,

with the logistic link sigma or the probit link Phi. For an undirected network W_r is
symmetric and each unordered pair enters the likelihood once (the mask keeps i < j).
Z has a static number of columns ``k_max``; unused columns are zero and their weights
are auxiliary draws from the prior.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, log_ndtr
from jaxtyping import Array, Bool, Float, Int8, PRNGKeyArray

from ..ibp import prior as ibp_prior

LINKS = ("logistic", "probit")


class Hyperparams(eqx.Module):
    """Settings and priors of the LFRM sampler.

    Parameters
    ----------
    k_max : int
        Columns of Z (static): the most features a draw can hold. A draw that uses all
        of them is flagged (``saturated``); raise ``k_max`` then.
    link : {"logistic", "probit"}
    symmetric : bool
        Undirected network: symmetric W_r, each unordered pair counted once.
    hmc_steps : int
        Leapfrog steps of the HMC update of (W, c) per sweep.
    alpha_prior : (shape, rate) of the Gamma prior on alpha.
    sigma_w_prior : (shape, scale) of the inverse-Gamma prior on sigma_w^2.
    bias_scale : prior standard deviation of each bias c_r.
    target_accept : acceptance rate the HMC step size is adapted to during warm-up.
    """

    k_max: int = eqx.field(static=True, default=16)
    link: str = eqx.field(static=True, default="logistic")
    symmetric: bool = eqx.field(static=True, default=False)
    hmc_steps: int = eqx.field(static=True, default=10)
    alpha_prior: tuple = (1.0, 1.0)
    sigma_w_prior: tuple = (1.0, 1.0)
    bias_scale: float = 10.0
    target_accept: float = 0.75


class Data(eqx.Module):
    """Training data: Y as floats in {0, 1} (0 where unobserved) and the mask of cells
    in the likelihood (for a symmetric model only i < j)."""

    Y: Float[Array, "r n n"]
    mask: Bool[Array, "r n n"]


def log_lik_cell(y, eta, link: str):
    """log Pr(y | eta) per cell: y eta - softplus(eta) (logistic) or log Phi((2y - 1) eta)."""
    if link == "logistic":
        return y * eta - jax.nn.softplus(eta)
    return log_ndtr((2 * y - 1) * eta)


def link_prob(eta, link: str):
    return jax.nn.sigmoid(eta) if link == "logistic" else jax.scipy.stats.norm.cdf(eta)


def symmetrise(W, symmetric: bool):
    """W_r, or for an undirected model the symmetric matrix of W_r's upper triangle."""
    if not symmetric:
        return W
    upper = jnp.triu(W)
    return upper + jnp.swapaxes(jnp.triu(W, 1), -1, -2)


def logits(Z, W, c, symmetric: bool) -> Float[Array, "r n n"]:
    """eta_rij = z_i W_r z_j' + c_r."""
    return jnp.einsum("ik,rkl,jl->rij", Z, symmetrise(W, symmetric), Z) + c[:, None, None]


def log_likelihood(data: Data, Z, W, c, hparams: Hyperparams) -> Array:
    eta = logits(Z, W, c, hparams.symmetric)
    return jnp.sum(jnp.where(data.mask, log_lik_cell(data.Y, eta, hparams.link), 0.0))


def weight_entries(k_max: int, symmetric: bool) -> Bool[Array, "k k"]:
    """Which entries of W_r are parameters (all, or the upper triangle)."""
    full = jnp.ones((k_max, k_max), bool)
    return jnp.triu(full) if symmetric else full


def log_prior_weights(W, c, active, sigma_w, hparams: Hyperparams) -> Array:
    """log N(W | 0, sigma_w^2) over the entries between active features, and the bias prior."""
    used = weight_entries(W.shape[-1], hparams.symmetric) & active[:, None] & active[None, :]
    normal = lambda x, s: -0.5 * (x / s) ** 2 - jnp.log(s) - 0.5 * math.log(2 * math.pi)
    return jnp.sum(jnp.where(used, normal(W, sigma_w), 0.0)) + jnp.sum(normal(c, hparams.bias_scale))


def log_joint(data: Data, Z, W, c, alpha, sigma_w, hparams: Hyperparams) -> Array:
    """log p(Y, [Z], W_active, c, alpha, sigma_w^2): likelihood, IBP class probability,
    weight and bias priors and the hyperpriors."""
    a, b = hparams.alpha_prior
    sa, sb = hparams.sigma_w_prior
    active = Z.sum(0) > 0
    log_gamma = lambda x, shape, rate: shape * jnp.log(rate) - gammaln(shape) + (shape - 1) * jnp.log(x) - rate * x
    v = sigma_w**2
    return (log_likelihood(data, Z, W, c, hparams) + ibp_prior.log_prob(Z, alpha)
            + log_prior_weights(W, c, active, sigma_w, hparams)
            + log_gamma(alpha, a, b) + log_gamma(1 / v, sa, sb) - 2 * jnp.log(v))


class State(eqx.Module):
    """One state of the chain. ``step_size`` is the HMC step (adapted during warm-up);
    ``accept`` the last HMC acceptance probability; ``births`` the number of rows given
    new features in the last sweep; ``saturated`` whether all ``k_max``
    columns are in use (births then cannot happen: raise ``k_max``)."""

    Z: Float[Array, "n k"]
    W: Float[Array, "r k k"]
    c: Float[Array, " r"]
    alpha: Array
    sigma_w: Array
    rng_key: PRNGKeyArray
    step_size: Array
    iteration: Array
    accept: Array
    births: Array
    log_joint: Array

    @property
    def sample(self) -> dict[str, Array]:
        """What a draw records (leading chain axes kept)."""
        return {"Z": self.Z.astype(jnp.int8), "W": self.W, "c": self.c, "alpha": self.alpha, "sigma_w": self.sigma_w,
                "n_features": jnp.sum(jnp.any(self.Z != 0, axis=-2), axis=-1), "log_joint": self.log_joint,
                "accept": self.accept, "births": self.births,
                "saturated": jnp.all(jnp.any(self.Z != 0, axis=-2), axis=-1)}


def as_data(Y: Int8[Array, "r n n"], mask: Bool[Array, "r n n"], symmetric: bool) -> Data:
    """Data from Y (values outside the mask ignored) and the mask of training cells."""
    mask = jnp.asarray(mask, bool)
    if symmetric:
        n = mask.shape[-1]
        mask = mask & jnp.triu(jnp.ones((n, n), bool), 1)
    return Data(jnp.where(mask, jnp.asarray(Y), 0).astype(jnp.result_type(float)), mask)


def per_relation(data: Data, num_chains: int) -> Data:
    """The "single-relation" setting: each relation as its own one-relation data set,
    repeated for ``num_chains`` chains; leaves (R * num_chains, 1, N, N), relation-major,
    for a kernel with ``data_per_chain``."""
    return jax.tree.map(lambda a: jnp.repeat(a[:, None], num_chains, axis=0), data)


def by_relation(samples: dict, n_relations: int) -> dict:
    """Draws of a per-relation run, (R * chains, draw, ...) -> (R, chains, draw, ...)."""
    return {k: v.reshape((n_relations, -1) + v.shape[1:]) for k, v in samples.items()}


__all__ = ["Data", "Hyperparams", "LINKS", "State", "as_data", "by_relation", "link_prob", "log_joint", "log_lik_cell",
           "log_likelihood", "logits", "per_relation", "symmetrise"]

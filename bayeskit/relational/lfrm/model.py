"""The latent feature relational model (Miller, Griffiths & Jordan, "Nonparametric latent
feature models for link prediction", NIPS 2009): types, likelihood and priors.

Notation: R relations on N objects, Y (R, N, N) in {0, 1} observed where ``mask`` is
True; Z (N, K) binary latent features shared by all relations, Z ~ IBP(alpha); one
weight matrix W_r (K, K) per relation with w ~ N(0, sigma_w^2); the full model (paper,
Section 2) adds pair covariates X_ij, sender and receiver covariates X^p_i, X^c_j with
per-object offsets a_i, b_j, and a bias c, each relation with its own coefficients:

    Pr(y_rij = 1 | .) = link(eta_rij),
    eta_rij = z_i W_r z_j' + beta_r' X_ij + (beta_p,r' X^p_i + a_ri) + (beta_c,r' X^c_j + b_rj) + c_r,

with the logistic link sigma or the probit link Phi. For an undirected network W_r is
symmetric, the receiver terms are the sender's (X^c = X^p, beta_c = beta_p, b = a), and
each unordered pair enters the likelihood once (the mask keeps i < j). Z has a static
number of columns ``k_max``; unused columns are zero and their weights are auxiliary
draws from the prior. Coefficients have N(0, coefficient_scale^2) priors, offsets
N(0, offset_scale^2), the bias N(0, bias_scale^2).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln, log_ndtr
from jaxtyping import Array, Bool, Float, PRNGKeyArray

from bayeskit.relational.data import Covariates, Data
from bayeskit.relational.ibp import prior as ibp_prior

LINKS = ("logistic", "probit")
BIRTHS = ("prior", "fitted")


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
    sigma_w_prior : (shape, scale) of the inverse-Gamma prior on sigma_w^2. The paper puts
        "conjugate priors on sigma_w" with values unstated; the default (1000, 1000) holds
        sigma_w near 1 (E[sigma_w^-2] = 1, as informative as 2000 weights). Under a vague
        (1, 1) the scale follows the weights it governs: on the countries data sigma_w fell
        to 0.07 and every one of 32 columns filled with near-zero weights; on NIPS-234 from
        an IRM start it rose to 5-7 with |W| up to 20. Held near 1, K+ stays unsaturated
        (12-14 on countries), max |W| 5-8, and held-out AUC is unchanged or better.
    bias_scale : prior standard deviation of each bias c_r.
    target_accept : acceptance rate the HMC step size is adapted to during warm-up.
    births : {"prior", "fitted"}
        How a birth proposes the weights between a new feature of one object and the
        features other objects have: from the prior (the paper's move) or from a Gaussian
        fitted to that object's cells (one Fisher-scoring step from zero;
        :func:`bayeskit.relational.lfrm.gibbs.fitted_weights`), which the acceptance ratio
        corrects for. With many relations a prior draw perturbs every cell of the row at
        random and is almost always rejected (countries, 56 relations: none accepted in
        200 sweeps).
    offsets : bool
        Include the per-object sender and receiver offsets a_i, b_j.
    coefficient_scale, offset_scale : prior standard deviations of the covariate
        coefficients and of the offsets.
    """

    k_max: int = eqx.field(static=True, default=16)
    link: str = eqx.field(static=True, default="logistic")
    symmetric: bool = eqx.field(static=True, default=False)
    hmc_steps: int = eqx.field(static=True, default=10)
    alpha_prior: tuple = (1.0, 1.0)
    sigma_w_prior: tuple = (1000.0, 1000.0)
    bias_scale: float = 10.0
    target_accept: float = 0.75
    offsets: bool = eqx.field(static=True, default=False)
    births: str = eqx.field(static=True, default="prior")
    coefficient_scale: float = 1.0
    offset_scale: float = 1.0


class Regression(eqx.Module):
    """The terms of eta besides z_i W_r z_j', per relation: bias c (R,), coefficients
    beta (R, P), beta_p (R, Dp), beta_c (R, Dc) and offsets a (R, N), b (R, N); size 0
    where absent (no such covariates, no ``offsets``, or tied to the sender's)."""

    c: Float[Array, " r"]
    beta: Float[Array, "r p"]
    beta_p: Float[Array, "r dp"]
    beta_c: Float[Array, "r dc"]
    a: Float[Array, "r na"]
    b: Float[Array, "r nb"]


def zero_regression(n_relations: int, covariates: Covariates, hparams: Hyperparams, c=None) -> Regression:
    """All terms 0 (the bias ``c`` if given), shaped for these covariates and settings."""
    n, dtype = covariates.sender.shape[0], covariates.sender.dtype
    zeros = lambda d: jnp.zeros((n_relations, d), dtype)
    n_a = n if hparams.offsets else 0
    tied = hparams.symmetric
    return Regression(jnp.zeros(n_relations, dtype) if c is None else c, zeros(covariates.pair.shape[0]),
                      zeros(covariates.sender.shape[1]), zeros(0 if tied else covariates.receiver.shape[1]),
                      zeros(n_a), zeros(0 if tied else n_a))


def _end_terms(beta, X, offset):
    """beta' X_i + offset_i per relation and object, (R, N)."""
    terms = jnp.einsum("rd,nd->rn", beta, X)
    return terms + offset if offset.shape[-1] else terms


def offset(reg: Regression, covariates: Covariates, symmetric: bool) -> Float[Array, "r n n"]:
    """Everything in eta_rij except z_i W_r z_j'."""
    sender = _end_terms(reg.beta_p, covariates.sender, reg.a)
    receiver = sender if symmetric else _end_terms(reg.beta_c, covariates.receiver, reg.b)
    return (jnp.einsum("rp,pij->rij", reg.beta, covariates.pair) + sender[:, :, None] + receiver[:, None, :]
            + reg.c[:, None, None])


def log_prior_regression(reg: Regression, hparams: Hyperparams) -> Array:
    scales = Regression(hparams.bias_scale, *(hparams.coefficient_scale,) * 3, *(hparams.offset_scale,) * 2)
    return sum(jnp.sum(_log_normal(x, s)) for x, s in zip(jax.tree.leaves(reg), jax.tree.leaves(scales)))


def _log_normal(x, s):
    return -0.5 * (x / s) ** 2 - jnp.log(s) - 0.5 * math.log(2 * math.pi)


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


def logits(Z, W, reg: Regression, covariates: Covariates, symmetric: bool) -> Float[Array, "r n n"]:
    """eta_rij for all cells."""
    return jnp.einsum("ik,rkl,jl->rij", Z, symmetrise(W, symmetric), Z) + offset(reg, covariates, symmetric)


def log_likelihood(data: Data, Z, W, reg: Regression, hparams: Hyperparams) -> Array:
    eta = logits(Z, W, reg, data.covariates, hparams.symmetric)
    return jnp.sum(jnp.where(data.mask, log_lik_cell(data.Y, eta, hparams.link), 0.0))


def weight_entries(k_max: int, symmetric: bool) -> Bool[Array, "k k"]:
    """Which entries of W_r are parameters (all, or the upper triangle)."""
    full = jnp.ones((k_max, k_max), bool)
    return jnp.triu(full) if symmetric else full


def log_prior_weights(W, active, sigma_w, hparams: Hyperparams) -> Array:
    """log N(W | 0, sigma_w^2) over the entries between active features."""
    used = weight_entries(W.shape[-1], hparams.symmetric) & active[:, None] & active[None, :]
    return jnp.sum(jnp.where(used, _log_normal(W, sigma_w), 0.0))


def log_joint(data: Data, Z, W, reg: Regression, alpha, sigma_w, hparams: Hyperparams) -> Array:
    """log p(Y, [Z], W_active, regression terms, alpha, sigma_w^2): likelihood, IBP class
    probability, weight and regression priors and the hyperpriors."""
    a, b = hparams.alpha_prior
    sa, sb = hparams.sigma_w_prior
    active = Z.sum(0) > 0
    log_gamma = lambda x, shape, rate: shape * jnp.log(rate) - gammaln(shape) + (shape - 1) * jnp.log(x) - rate * x
    v = sigma_w**2
    return (log_likelihood(data, Z, W, reg, hparams) + ibp_prior.log_prob(Z, alpha)
            + log_prior_weights(W, active, sigma_w, hparams) + log_prior_regression(reg, hparams)
            + log_gamma(alpha, a, b) + log_gamma(1 / v, sa, sb) - 2 * jnp.log(v))


class State(eqx.Module):
    """One state of the chain. ``step_size`` is the HMC step (adapted during warm-up);
    ``accept`` the last HMC acceptance probability; ``births`` the number of rows given
    new features in the last sweep; ``saturated`` whether all ``k_max``
    columns are in use (births then cannot happen: raise ``k_max``)."""

    Z: Float[Array, "n k"]
    W: Float[Array, "r k k"]
    reg: Regression
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
        reg = {name: getattr(self.reg, name) for name in REGRESSION_TERMS}
        return {"Z": self.Z.astype(jnp.int8), "W": self.W, **reg, "alpha": self.alpha, "sigma_w": self.sigma_w,
                "n_features": jnp.sum(jnp.any(self.Z != 0, axis=-2), axis=-1), "log_joint": self.log_joint,
                "accept": self.accept, "births": self.births,
                "saturated": jnp.all(jnp.any(self.Z != 0, axis=-2), axis=-1)}


REGRESSION_TERMS = ("c", "beta", "beta_p", "beta_c", "a", "b")


__all__ = ["BIRTHS", "Hyperparams", "LINKS", "REGRESSION_TERMS", "Regression", "State", "link_prob", "log_joint", "log_lik_cell",
           "log_likelihood", "log_prior_regression", "logits", "offset", "symmetrise", "zero_regression"]

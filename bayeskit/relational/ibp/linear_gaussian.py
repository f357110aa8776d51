"""The linear-Gaussian latent feature model with an IBP prior (Griffiths & Ghahramani,
JMLR 2011, Section 5) and its collapsed Gibbs sampler.

Model: X = Z A + E with X (N, D) observed, Z ~ IBP(alpha) binary (N, K), the feature
matrix A (K, D) with independent N(0, sigma_a^2) entries and noise E with independent
N(0, sigma_x^2) entries; hyperpriors alpha ~ Gamma(a, b) (shape, rate) and
sigma_x^2, sigma_a^2 ~ inverse-Gamma.

A is integrated out (eq. 26):

    p(X | Z) = exp(-tr(X' (I - Z G^-1 Z') X) / (2 sigma_x^2))
               / ((2 pi)^(ND/2) sigma_x^((N-K)D) sigma_a^(KD) |G|^(D/2)),
    G = Z'Z + (sigma_x^2 / sigma_a^2) I.

An all-zero column of Z leaves p(X | Z) exactly unchanged, so Z is stored with a static
number of columns ``k_max`` (the unused ones zero) and only the prior knows which
features exist.

Each Gibbs sweep visits the rows in turn. Row i is treated as the last customer and
scored against the posterior of A given the other rows (the "accelerated" form of
Doshi-Velez & Ghahramani 2009, which gives the exact collapsed conditional):

    p(x_i | z_i, X_-i) = prod_d N(x_id | z_i' M_d, sigma_x^2 (1 + z_i' P z_i)),
    P = G_-i^-1, M = P Z_-i' X_-i.

* a feature used by other rows: p(z_ik = 1 | .) is proportional to m_-ik p(x_i | z_i),
  and p(z_ik = 0 | .) to (N - m_-ik) p(x_i | z_i);
* the row's singletons are redrawn as a number of new features K_new with
  p(K_new) proportional to Poisson(K_new | alpha / N) p(x_i | z_i, K_new); a new
  feature adds sigma_a^2 to the variance of every x_id. The shared features are flipped
  first, each given the rest of the row (its singletons included), then the singletons
  are dropped and K_new drawn given the shared part. K_new runs over 0..``k_new_max``
  and the free columns; the probability of larger values (up to k_max + 1) is
  accumulated in ``lost_births`` (it should stay zero: if not, raise ``k_new_max`` or
  ``k_max``).

After the sweep, A is drawn from its Gaussian conditional and sigma_a^2 | A (active
rows), sigma_x^2 | X, Z, A and alpha | Z ~ Gamma(a + K+, b + H_N) from their conjugate
conditionals; A is then discarded (a data-augmentation step that leaves the collapsed
posterior invariant).
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, cho_solve, solve_triangular
from jax.scipy.special import gammaln
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core import mcmc, sampling, validation
from bayeskit.core.mcmc import VectorisedKernel, run_chains
from bayeskit.core.notices import warn
from bayeskit.core.scaling import check_products_in_range
from bayeskit.relational.ibp import prior


class Hyperparams(eqx.Module):
    """Settings and hyperpriors of the linear-Gaussian IBP model.

    Parameters
    ----------
    k_max : int
        Columns of Z (static): the largest number of features a draw can hold.
    k_new_max : int
        Largest number of new features one row takes in one sweep (the probability of
        more is reported as ``lost_births``).
    alpha_prior : (shape, rate) of the Gamma prior on alpha.
    sigma_x_prior, sigma_a_prior : (shape, scale) of the inverse-Gamma priors on
        sigma_x^2 and sigma_a^2.
    sample_alpha, sample_sigmas : bool
        Resample alpha, and sigma_x and sigma_a (otherwise they stay at their initial
        values).
    """

    k_max: int = eqx.field(static=True, default=20)
    k_new_max: int = eqx.field(static=True, default=4)
    sample_alpha: bool = eqx.field(static=True, default=True)
    sample_sigmas: bool = eqx.field(static=True, default=True)
    alpha_prior: tuple = (1.0, 1.0)
    sigma_x_prior: tuple = (1.0, 1.0)
    sigma_a_prior: tuple = (1.0, 1.0)


class State(eqx.Module):
    """One state of the chain: Z (N, k_max), the hyperparameters, the key for the next
    sweep, the log joint log p(X, [Z], alpha, sigma_x, sigma_a) and the probability of
    births lost to ``k_max`` or ``k_new_max`` in the last sweep."""

    Z: Float[Array, "n k"]
    alpha: Array
    sigma_x: Array
    sigma_a: Array
    rng_key: PRNGKeyArray
    log_joint: Array
    lost_births: Array

    @property
    def sample(self) -> dict[str, Array]:
        """What a draw records: Z (int8) and the scalars (leading chain axes kept)."""
        return {"Z": self.Z.astype(jnp.int8), "alpha": self.alpha, "sigma_x": self.sigma_x, "sigma_a": self.sigma_a,
                "n_features": jnp.sum(jnp.any(self.Z != 0, axis=-2), axis=-1), "log_joint": self.log_joint, "lost_births": self.lost_births}


# ----------------------------------------------------------------------- densities


def _gram(Z, sigma_x, sigma_a):
    return Z.T @ Z + (sigma_x / sigma_a) ** 2 * jnp.eye(Z.shape[1], dtype=Z.dtype)


def log_likelihood(X: Float[Array, "n d"], Z: Float[Array, "n k"], sigma_x, sigma_a) -> Array:
    """log p(X | Z, sigma_x, sigma_a) with A integrated out (eq. 26)."""
    n, d = X.shape
    k = Z.shape[1]
    L, _ = cho_factor(_gram(Z, sigma_x, sigma_a), lower=True)
    half = solve_triangular(L, Z.T @ X, lower=True)
    quad = jnp.sum(X * X) - jnp.sum(half * half)
    log_det = 2 * jnp.sum(jnp.log(jnp.diag(L)))
    return (-0.5 * n * d * math.log(2 * math.pi) - (n - k) * d * jnp.log(sigma_x) - k * d * jnp.log(sigma_a)
            - 0.5 * d * log_det - 0.5 * quad / sigma_x**2)


def feature_means(X: Float[Array, "n d"], Z: Float[Array, "n k"], sigma_x, sigma_a) -> Float[Array, "k d"]:
    """E[A | X, Z] = (Z'Z + sigma_x^2 / sigma_a^2 I)^-1 Z'X; rows of unused features are 0."""
    return cho_solve(cho_factor(_gram(Z, sigma_x, sigma_a), lower=True), Z.T @ X)


def _log_gamma_pdf(x, shape, rate):
    return shape * jnp.log(rate) - gammaln(shape) + (shape - 1) * jnp.log(x) - rate * x


def log_joint(X, Z, alpha, sigma_x, sigma_a, hparams: Hyperparams) -> Array:
    """log p(X, [Z], alpha, sigma_x^2, sigma_a^2): the likelihood, the IBP probability of
    Z's left-ordered class and the hyperpriors (densities of the variances)."""
    def log_inv_gamma(v, shape, scale):
        return _log_gamma_pdf(1 / v, shape, scale) - 2 * jnp.log(v)

    alpha_prior, sigma_x_prior, sigma_a_prior = _priors(hparams, X.dtype)
    return (log_likelihood(X, Z, sigma_x, sigma_a) + prior.log_prob(Z, alpha)
            + _log_gamma_pdf(alpha, *alpha_prior)
            + log_inv_gamma(sigma_x**2, *sigma_x_prior) + log_inv_gamma(sigma_a**2, *sigma_a_prior))


def _priors(hparams: Hyperparams, dtype) -> tuple:
    """The three priors' (shape, rate or scale) in the data's dtype: inside the samplers'
    compiled programs they are traced arrays (float64 with ``jax_enable_x64``), which would
    otherwise carry float32 data's draws into float64."""
    return tuple(tuple(jnp.asarray(v, dtype) for v in pair)
                 for pair in (hparams.alpha_prior, hparams.sigma_x_prior, hparams.sigma_a_prior))


def _row_loglik(z, P, M, x, var_x, extra_var=0.0):
    """log p(x_i | z_i, X_-i) with ``extra_var`` added to each coordinate's variance."""
    var = var_x * (1 + z @ P @ z) + extra_var
    r = x - z @ M
    return -0.5 * x.shape[0] * jnp.log(2 * math.pi * var) - 0.5 * (r @ r) / var


# ----------------------------------------------------------------------- the sweep


def _row_posterior(i, Z, G, H, X, sigma_x, sigma_a):
    """What row i is scored against: the other rows' counts m_-i and statistics, and the
    posterior of A given them, P = G_-i^-1 and M = P Z_-i' X_-i."""
    z = Z[i]
    G_o, H_o = G - jnp.outer(z, z), H - jnp.outer(z, X[i])
    P = cho_solve(cho_factor(G_o, lower=True), jnp.eye(Z.shape[1], dtype=Z.dtype))
    return Z.sum(0) - z, G_o, H_o, P, P @ H_o


def _flip_log_odds(z, k, m_o, P, M, x, var_x, n):
    """log p(z_ik = 1 | .) - log p(z_ik = 0 | .) for a feature other rows use."""
    one, zero = z.at[k].set(1.0), z.at[k].set(0.0)
    return (jnp.log(jnp.maximum(m_o[k], 1.0)) - jnp.log(n - m_o[k])
            + _row_loglik(one, P, M, x, var_x) - _row_loglik(zero, P, M, x, var_x))


def _birth_log_probs(z, P, M, x, var_x, alpha, sigma_a, n, largest):
    """Unnormalised log p(K_new = c | .), c = 0..largest: Poisson(c | alpha / N) times
    the likelihood of x_i with c new features of its own (each adds sigma_a^2 of variance)."""
    counts = jnp.arange(largest + 1, dtype=z.dtype)
    rate = alpha / n
    return (counts * jnp.log(rate) - rate - gammaln(counts + 1)
            + jax.vmap(lambda c: _row_loglik(z, P, M, x, var_x, c * sigma_a**2))(counts))


def _update_row(key, i, Z, G, H, X, alpha, sigma_x, sigma_a, hparams: Hyperparams):
    """Gibbs update of row i given the others; returns (Z, G, H, lost birth mass)."""
    n, k_max = Z.shape
    x, var_x = X[i], sigma_x**2
    m_o, G_o, H_o, P, M = _row_posterior(i, Z, G, H, X, sigma_x, sigma_a)
    k_flip, k_new = jax.random.split(key)
    shared = m_o > 0

    def flip(k, z):  # given the rest of the row, its singletons included
        p_one = jax.nn.sigmoid(_flip_log_odds(z, k, m_o, P, M, x, var_x, n))
        draw = jax.random.bernoulli(jax.random.fold_in(k_flip, k), p_one).astype(z.dtype)
        return jnp.where(shared[k], z.at[k].set(draw), z)

    z = jax.lax.fori_loop(0, k_max, flip, Z[i]) * shared  # then the singletons are redrawn as K_new
    log_p = _birth_log_probs(z, P, M, x, var_x, alpha, sigma_a, n, k_max + 1)
    free = ~shared
    fits = jnp.arange(k_max + 2) <= jnp.minimum(free.sum(), hparams.k_new_max)
    lost = jnp.sum(jnp.where(fits, 0.0, jax.nn.softmax(log_p)))
    n_new = jax.random.categorical(k_new, jnp.where(fits, log_p, -jnp.inf))
    z = z + (free & (jnp.cumsum(free) <= n_new)).astype(z.dtype)
    return Z.at[i].set(z), G_o + jnp.outer(z, z), H_o + jnp.outer(z, x), lost


def sweep_z(key, Z, X, alpha, sigma_x, sigma_a, hparams: Hyperparams):
    """One Gibbs sweep over the rows of Z in a random order; returns (Z, lost births)."""
    n = Z.shape[0]
    k_perm, k_rows = jax.random.split(key)
    order = jax.random.permutation(k_perm, n)
    G, H = _gram(Z, sigma_x, sigma_a), Z.T @ X

    def body(t, carry):
        Z, G, H, lost = carry
        Z, G, H, l = _update_row(jax.random.fold_in(k_rows, t), order[t], Z, G, H, X, alpha, sigma_x, sigma_a, hparams)
        return Z, G, H, lost + l

    Z, _, _, lost = jax.lax.fori_loop(0, n, body, (Z, G, H, jnp.zeros((), Z.dtype)))
    return Z, lost


def sample_hyperparameters(key, Z, X, alpha, sigma_x, sigma_a, hparams: Hyperparams):
    """alpha | Z, then (A | X, Z) -> sigma_a^2 | A and sigma_x^2 | X, Z, A, A discarded."""
    n, d = X.shape
    k_alpha, k_a, k_sa, k_sx = jax.random.split(key, 4)
    active = Z.sum(0) > 0
    k_plus = active.sum()
    (shape, rate), (x_shape, x_scale), (a_shape, a_scale) = _priors(hparams, X.dtype)
    if hparams.sample_alpha:
        alpha = sampling.gamma(k_alpha, shape + k_plus, dtype=X.dtype) / (rate + prior.harmonic(n).astype(X.dtype))
    if hparams.sample_sigmas:
        # A = L'^-1 (L^-1 Z'X + sigma_x eps): the posterior mean plus sigma_x L'^-1 eps, by two
        # triangular solves one after the other, not side by side (bayeskit.core.xla)
        L, _ = cho_factor(_gram(Z, sigma_x, sigma_a), lower=True)
        eps = sampling.flat(jax.random.normal, k_a, (Z.shape[1], d), X.dtype)
        A = solve_triangular(L.T, solve_triangular(L, Z.T @ X, lower=True) + sigma_x * eps, lower=False)
        ss_a = jnp.sum(jnp.where(active[:, None], A * A, 0.0))
        sigma_a = jnp.sqrt((a_scale + 0.5 * ss_a) / sampling.gamma(k_sa, a_shape + 0.5 * k_plus * d, dtype=X.dtype))
        resid = X - Z @ A
        sigma_x = jnp.sqrt((x_scale + 0.5 * jnp.sum(resid * resid)) / sampling.gamma(k_sx, x_shape + 0.5 * n * d, dtype=X.dtype))
    return alpha, sigma_x, sigma_a


# ----------------------------------------------------------------------- functional core


def init(key: PRNGKeyArray, X: Float[Array, "n d"], hparams: Hyperparams, Z=None, alpha=1.0, sigma_x=1.0, sigma_a=1.0) -> State:
    """The paper's start: one feature, z_i1 = 1 with probability 1/2; alpha = sigma_x =
    sigma_a = 1. ``Z`` (N, <= k_max) overrides the start."""
    n = X.shape[0]
    k_z, k_next = jax.random.split(key)
    if Z is None:
        Z = jnp.zeros((n, hparams.k_max), X.dtype).at[:, 0].set(jax.random.bernoulli(k_z, 0.5, (n,)).astype(X.dtype))
    else:
        Z = jnp.zeros((n, hparams.k_max), X.dtype).at[:, : Z.shape[1]].set(jnp.asarray(Z, X.dtype))
    alpha, sigma_x, sigma_a = (jnp.asarray(v, X.dtype) for v in (alpha, sigma_x, sigma_a))
    return State(Z, alpha, sigma_x, sigma_a, k_next, log_joint(X, Z, alpha, sigma_x, sigma_a, hparams), jnp.zeros((), X.dtype))


def step(state: State, X: Float[Array, "n d"], hparams: Hyperparams) -> State:
    """One Gibbs sweep over Z followed by the hyperparameters (pure; the key is in the
    state, as numpyro's kernels keep it)."""
    X = jnp.asarray(X)  # a NumPy X cannot be indexed by the sweep's traced row
    k_next, k_z, k_h = jax.random.split(state.rng_key, 3)
    Z, lost = sweep_z(k_z, state.Z, X, state.alpha, state.sigma_x, state.sigma_a, hparams)
    alpha, sigma_x, sigma_a = sample_hyperparameters(k_h, Z, X, state.alpha, state.sigma_x, state.sigma_a, hparams)
    return State(Z, alpha, sigma_x, sigma_a, k_next, log_joint(X, Z, alpha, sigma_x, sigma_a, hparams), lost)


class CollapsedGibbs(VectorisedKernel):
    """The sampler as a numpyro kernel: ``MCMC(CollapsedGibbs(hparams), ...).run(key, X)``
    gives numpyro's driver, progress bar, thinning and vectorised chains
    (``chain_method="vectorized"``). ``init_params`` may be a starting Z."""

    sample_stats = ("lost_births",)

    def __init__(self, hparams: Hyperparams | None = None, data_per_chain: bool = False):
        super().__init__(Hyperparams() if hparams is None else hparams, data_per_chain)

    def init_one(self, key, init_params, X):
        return init(key, X, self.hparams, Z=init_params)

    def step_one(self, state, X):
        return step(state, X, self.hparams)


def _check(X, hparams: Hyperparams):
    X = jnp.asarray(X)
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-D array (n_objects, n_dims); got shape {X.shape}.")
    if validation.is_concrete(X):
        if not np.isfinite(np.asarray(X)).all():
            raise ValueError("X has non-finite entries.")
        check_products_in_range("X", X, X.dtype, "divide X by a constant near its scale (the priors of sigma_x and sigma_a "
                                "are in X's units)")  # in float32 X at 1e20 ran to NaN draws
    if hparams.k_max < 1 or hparams.k_new_max < 1:
        raise ValueError(f"k_max and k_new_max must be at least 1; got {hparams.k_max} and {hparams.k_new_max}.")
    for name in ("alpha_prior", "sigma_x_prior", "sigma_a_prior"):
        if not all(float(v) > 0 for v in getattr(hparams, name)):
            raise ValueError(f"{name} must be two positive numbers (shape, rate or scale); got {getattr(hparams, name)}.")
    return X


def sample_posterior(key: PRNGKeyArray, X, hparams: Hyperparams | None = None, *, num_warmup: int = 200,
                     num_samples: int = 800, num_chains: int = 1, thinning: int = 1, init_Z=None,
                     progress: bool = False) -> dict[str, Array]:
    """Run ``num_chains`` vectorised chains of the collapsed Gibbs sampler.

    Returns the draws laid out (chain, draw, ...): ``Z`` (int8, N x k_max), ``alpha``,
    ``sigma_x``, ``sigma_a``, ``n_features`` (K+), ``log_joint`` and ``lost_births``
    (probability of births beyond ``k_new_max`` or the free columns of ``k_max``; a warning is raised if any
    draw has a noticeable one). ``progress`` shows a bar over the sweeps (off under the
    ``CI`` environment variable).
    """

    hparams = hparams or Hyperparams()
    X = _check(X, hparams)
    samples = run_chains(CollapsedGibbs(hparams), key, X, num_warmup=num_warmup, num_samples=num_samples,
                         num_chains=num_chains, thinning=thinning, init_params=init_Z, progress=progress)
    if float(jnp.max(samples["lost_births"])) > 1e-3:
        warn(f"k_max = {hparams.k_max} or k_new_max = {hparams.k_new_max} was too small: some rows could not take "
             "as many new features as were likely (see 'lost_births'); raise them.", RuntimeWarning)
    return samples


def to_inference_data(samples: dict):
    """ArviZ ``InferenceData`` of the draws of :func:`sample_posterior` (chain, draw, ...),
    with CollapsedGibbs's sampler statistics apart; needs ``arviz``."""
    return mcmc.to_inference_data(samples, CollapsedGibbs.sample_stats)

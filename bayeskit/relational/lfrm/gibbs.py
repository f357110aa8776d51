"""MCMC for the LFRM (paper, Section 3): a Gibbs sweep over the rows of Z with births of
new features, an HMC update of the weights and biases, and conjugate updates of alpha
and sigma_w, wired as a numpyro ``MCMCKernel``.

* Row i is the last customer. A feature other objects have (m_-ik > 0) is flipped with
  Pr(z_ik = 1 | .) proportional to m_-ik Pr(Y | z_ik = 1), and N - m_-ik times
  Pr(Y | z_ik = 0); only row i's and column i's cells change, so each candidate costs
  O(R K N).
* The row's own features (singletons) are renewed by a birth-death move: a number of
  features ~ Poisson(alpha / N) with fresh weights N(0, sigma_w^2) in the free columns,
  accepted with the likelihood ratio of row i's cells (an independence Metropolis-
  Hastings step whose proposal is the prior, so the move is exact; the paper instead
  weights each count by a Monte Carlo average of the likelihood over prior draws). With
  ``births="fitted"`` the weights between a new feature and the features other objects
  have come instead from a Gaussian fitted to row i's and column i's cells
  (:func:`fitted_weights`), the same for the features proposed and the features removed,
  and the ratio gains prior / proposal densities of both: with many relations a prior
  draw moves every cell of the row at random and is rejected (on the 56 relations of the
  countries data no birth was accepted in 200 sweeps), a fitted one can be accepted.
  The fitted Gaussian is computed only for a row that proposes or holds a feature of its
  own (in any of the vectorised chains: :func:`bayeskit.core.control.cond_any`), its
  draws only for one that proposes one; for the others the move is the prior's.
* W and the regression terms (bias, covariate coefficients, offsets) jointly by
  Hamiltonian Monte Carlo (``hmc_steps`` leapfrog steps, a diagonal mass from the
  expected Fisher information given Z, the step size adapted to ``target_accept`` during
  warm-up); the paper uses one random-walk Metropolis step per weight.
* alpha | Z ~ Gamma(a + K+, b + H_N); sigma_w^2 | W ~ inverse-Gamma over the weights
  between used features, after which the weights of unused columns are redrawn from
  their prior.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from jax.scipy.special import gammaln

from bayeskit.core.control import cond_any
from bayeskit.core.mcmc import VectorisedKernel
from bayeskit.core.sampling import categorical_from_uniform, flat, gamma, normal_from_uniform
from bayeskit.relational.data import Covariates, Data, no_covariates
from bayeskit.relational.ibp import prior as ibp_prior
from bayeskit.relational.lfrm.model import (
    REGRESSION_TERMS,
    Hyperparams,
    Regression,
    State,
    link_prob,
    log_joint,
    log_lik_cell,
    log_likelihood,
    log_prior_regression,
    logits,
    offset,
    symmetrise,
    weight_entries,
    zero_regression,
)


def _row_etas(z, i, Zo, Wf, O):
    """eta of the cells in row i and in column i, (R, N) each, when row i of Z is ``z``;
    ``Zo`` is Z with row i zeroed, ``Wf`` the full (symmetrised) weights, ``O`` (R, N, N)
    the rest of eta (bias, covariates, offsets). The diagonal cell sits in the row."""
    zW = jnp.einsum("k,rkl->rl", z, Wf)
    row = jnp.einsum("rl,jl->rj", zW, Zo) + O[:, i, :]
    col = jnp.einsum("jk,rkl,l->rj", Zo, Wf, z) + O[:, :, i]
    return row.at[:, i].set(jnp.einsum("rk,k->r", zW, z) + O[:, i, i]), col


def _cells_loglik(row, col, i, data: Data, link: str):
    """Log-likelihood of row i's and column i's observed cells from their etas."""
    not_i = jnp.arange(row.shape[-1]) != i
    ll_row = jnp.where(data.mask[:, i, :], log_lik_cell(data.Y[:, i, :], row, link), 0.0)
    ll_col = jnp.where(data.mask[:, :, i] & not_i, log_lik_cell(data.Y[:, :, i], col, link), 0.0)
    return ll_row.sum() + ll_col.sum()


def _row_loglik(z, i, Zo, Wf, O, data: Data, link: str):
    """Log-likelihood of the cells in row i and column i when row i of Z is ``z``."""
    return _cells_loglik(*_row_etas(z, i, Zo, Wf, O), i, data, link)


def _flip(z, k, i, m_o, etas, loglik, row_gain, col_gain, Wf, O, data: Data, link: str):
    """The other value of z_ik for a feature other objects have, by incremental etas:
    flipping z_ik by delta = +-1 moves row i's etas by delta (W_r Zo')[k] and column i's by
    delta (Zo W_r)[:, k] (``row_gain``, ``col_gain``, (R, K, N)); the diagonal cell is
    recomputed. Returns (log Pr(z_ik = 1 | .) - log Pr(z_ik = 0 | .), the flipped z, its
    etas and its log-likelihood)."""
    n = O.shape[-1]
    delta = 1.0 - 2.0 * z[k]
    z_flip = z.at[k].set(1.0 - z[k])
    row = (etas[0] + delta * row_gain[:, k]).at[:, i].set(jnp.einsum("k,rkl,l->r", z_flip, Wf, z_flip) + O[:, i, i])
    col = etas[1] + delta * col_gain[:, k]
    loglik_flip = _cells_loglik(row, col, i, data, link)
    gain = delta * (loglik_flip - loglik)  # log-lik of z_ik = 1 minus that of z_ik = 0
    log_odds = jnp.log(jnp.maximum(m_o[k], 1.0)) - jnp.log(n - m_o[k]) + gain
    return log_odds, z_flip, (row, col), loglik_flip


def _flip_log_odds(z, k, i, Zo, m_o, Wf, O, data: Data, link: str):
    """log Pr(z_ik = 1 | .) - log Pr(z_ik = 0 | .) for a feature other objects have."""
    etas = _row_etas(z, i, Zo, Wf, O)
    gains = jnp.einsum("rkl,jl->rkj", Wf, Zo), jnp.einsum("jl,rlk->rkj", Zo, Wf)
    return _flip(z, k, i, m_o, etas, _cells_loglik(*etas, i, data, link), *gains, Wf, O, data, link)[0]


def fitted_weights(etas, i, Zo, shared, sigma_w, data: Data, hparams: Hyperparams):
    """The proposal of a birth's weights under ``births="fitted"``: for a new feature k of
    object i alone, the weights a_r = W_r[k, l] (row i's cells) and b_r = W_r[l, k] (column
    i's) over the features l others have get N(m, F^-1) per relation, F = A' V A + I /
    sigma_w^2 and m = F^-1 A' s: one Fisher-scoring step from zero for the cells of row
    and column i (off the diagonal), where A = Zo (the others' features), s and V are the
    score and expected Fisher information of each cell at ``etas`` (row i without its own
    features). Returns the Cholesky factors L of F (G, R, K, K) and the whitened scores
    c = L^-1 A' s (G, R, K), so that m = L'^-1 c; G = 2 (a, then b), or G = 1 undirected
    (one vector a = b over both cell sets). Entries outside ``shared`` are left to the
    prior.

    a and b are factorised and solved together, and nothing else in a row's update calls
    LAPACK, so its LAPACK calls run one after another (see :func:`_draw_fitted`)."""
    row, col = etas
    not_i = jnp.arange(row.shape[-1]) != i

    def score_fisher(y, eta, seen):
        s = jax.grad(lambda e: jnp.sum(log_lik_cell(y, e, hparams.link)))(eta)
        v = _fisher_scale(link_prob(eta, hparams.link), hparams.link)
        seen = (seen & not_i).astype(eta.dtype)
        return s * seen, v * seen

    s_row, v_row = score_fisher(data.Y[:, i, :], row, data.mask[:, i, :])
    s_col, v_col = score_fisher(data.Y[:, :, i], col, data.mask[:, :, i])
    s, v = ((s_row + s_col)[None], (v_row + v_col)[None]) if hparams.symmetric else (jnp.stack([s_row, s_col]),
                                                                                        jnp.stack([v_row, v_col]))
    eye = jnp.eye(Zo.shape[1], dtype=Zo.dtype)
    F = jnp.einsum("jk,grj,jl->grkl", Zo, v, Zo) + eye / sigma_w**2
    F = jnp.where(shared[:, None] & shared[None, :], F, eye)  # others: a unit normal, not used
    L = jnp.linalg.cholesky(F)
    c = jax.scipy.linalg.solve_triangular(L, jnp.where(shared, s @ Zo, 0.0)[..., None], lower=True)[..., 0]
    return L, c


def _draw_fitted(keys, L, c, n_cols):
    """``n_cols`` draws (G, R, n_cols, K) of N(L'^-1 c, (L L')^-1) per proposal (one key
    each) and relation: L'^-1 (c + eps) with eps standard normal, one triangular solve that
    follows the one giving c, not one beside a solve for the mean (two LAPACK calls that
    can run at once can stop the program for good: :mod:`bayeskit.core.xla`)."""
    eps = jnp.stack([flat(jax.random.normal, k, L.shape[1:2] + (n_cols, L.shape[-1]), L.dtype) for k in keys])
    u = jax.scipy.linalg.solve_triangular(L, jnp.swapaxes(c[..., None, :] + eps, -1, -2), lower=True, trans="T")
    return jnp.swapaxes(u, -1, -2)


def _log_ratio_fitted(w, L, c, sigma_w, shared):
    """sum over relations of log N(w_S | 0, sigma_w^2) - log q(w_S) on the entries S =
    ``shared`` (q's marginal there: F is block diagonal between S and the rest), for
    each of the rows of ``w`` (R, C, K), with q = N(m, (L L')^-1) and m = L'^-1 c, so that
    L'(w - m) = L'w - c."""
    w = jnp.where(shared, w, 0.0)
    d = jnp.einsum("rkl,rcl->rck", jnp.swapaxes(L, -1, -2), w) - c[:, None, :]
    half_logdet = jnp.sum(jnp.where(shared, jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), 0.0), -1)
    log_q = -0.5 * jnp.sum(jnp.where(shared, d * d, 0.0), -1) + half_logdet[:, None]
    log_p = jnp.sum(jnp.where(shared, -0.5 * (w / sigma_w) ** 2 - jnp.log(sigma_w), 0.0), -1)
    return jnp.sum(log_p - log_q, 0)  # (C,): the 2 pi terms cancel


def _fitted_birth(k_fit, i, z, Zo, Wf, O, shared, born, own, W, W_new, sigma_w, data: Data, hparams: Hyperparams):
    """Under ``births="fitted"``: the proposal ``W_new`` with the weights between the row's
    proposed features ``born`` and the features others have drawn from
    :func:`fitted_weights`, and the log of prior over proposal for the weights of ``born``
    in ``W_new`` less that for the current features ``own`` in ``W``."""
    k_max = W.shape[-1]
    L, c = fitted_weights(_row_etas(z * shared, i, Zo, Wf, O), i, Zo, shared, sigma_w, data, hparams)
    k_a, k_b = jax.random.split(k_fit)
    keys = (k_a,) if hparams.symmetric else (k_a, k_b)
    draws = cond_any(born.any(), lambda L, c, keys: _draw_fitted(keys, L, c, k_max),  # a death needs no draws
                     lambda L, c, keys: jnp.zeros(L.shape[:2] + (k_max, k_max), L.dtype), L, c, keys)
    a = draws[0]  # (R, k', l): W_r[k', l] for a new column k'
    to_row, to_col = born[None, :, None] & shared[None, None, :], shared[None, :, None] & born[None, None, :]
    if hparams.symmetric:  # the upper triangle holds the weights; the lower stays the prior's auxiliary draws
        upper = weight_entries(k_max, True)
        W_new = jnp.where(to_row & upper, a, jnp.where(to_col & upper, jnp.swapaxes(a, -1, -2), W_new))
        ratio = lambda Wx, cols: jnp.sum(jnp.where(cols, _log_ratio_fitted(symmetrise(Wx, True), L[0], c[0], sigma_w, shared), 0.0))
    else:
        b = draws[1]  # (R, k', l): W_r[l, k']
        W_new = jnp.where(to_row, a, jnp.where(to_col, jnp.swapaxes(b, -1, -2), W_new))
        ratio = lambda Wx, cols: jnp.sum(jnp.where(cols, _log_ratio_fitted(Wx, L[0], c[0], sigma_w, shared)
                                                   + _log_ratio_fitted(jnp.swapaxes(Wx, -1, -2), L[1], c[1], sigma_w, shared), 0.0))
    return W_new, ratio(W_new, born) - ratio(W, own)


def _update_row(key, i, Z, W, O, alpha, sigma_w, data: Data, hparams: Hyperparams):
    """Row i's flips, then its birth-death move. Its random numbers come from one block of
    uniforms (:func:`bayeskit.core.sampling.normal_from_uniform`): one per flip, the
    number of new features (by the inverse CDF), the acceptance, and the new weights;
    under ``births="fitted"`` the fitted proposal draws from a key of its own."""
    n, k_max = Z.shape
    key, k_fit = jax.random.split(key) if hparams.births == "fitted" else (key, None)
    u = jax.random.uniform(key, (k_max + 2 + W.size,), W.dtype)
    u_flip, u_count, u_acc = u[:k_max], u[k_max], u[k_max + 1]
    z, Zo = Z[i], Z.at[i].set(0.0)
    m_o = Zo.sum(0)
    shared = m_o > 0
    Wf = symmetrise(W, hparams.symmetric)

    row_gain, col_gain = jnp.einsum("rkl,jl->rkj", Wf, Zo), jnp.einsum("jl,rlk->rkj", Zo, Wf)

    def flip(k, carry):
        z, etas, loglik = carry
        log_odds, z_flip, etas_flip, loglik_flip = _flip(z, k, i, m_o, etas, loglik, row_gain, col_gain, Wf, O, data,
                                                         hparams.link)
        one = u_flip[k] < jax.nn.sigmoid(log_odds)
        move = shared[k] & (one != (z[k] > 0))
        pick = lambda a, b: jax.tree.map(lambda x, y: jnp.where(move, x, y), a, b)
        return pick((z_flip, etas_flip, loglik_flip), (z, etas, loglik))

    etas = _row_etas(z, i, Zo, Wf, O)
    z, etas, loglik = jax.lax.fori_loop(0, k_max, flip, (z, etas, _cells_loglik(*etas, i, data, hparams.link)))
    # Birth-death of the row's own features: count ~ Poisson(alpha / N) on the free
    # columns (the truncation is the same both ways), weights from the prior.
    free = ~shared
    counts = jnp.arange(k_max + 1)
    rate = alpha / n
    log_pois = jnp.where(counts <= free.sum(), counts * jnp.log(rate) - gammaln(counts + 1.0), -jnp.inf)
    n_new = categorical_from_uniform(u_count, log_pois)
    z_new = z * shared + (free & (jnp.cumsum(free) <= n_new)).astype(z.dtype)
    touches_free = (free[:, None] | free[None, :]) & weight_entries(k_max, hparams.symmetric)
    W_new = jnp.where(touches_free, sigma_w * normal_from_uniform(u[k_max + 2:]).reshape(W.shape), W)
    log_ratio = jnp.zeros((), W.dtype)
    if hparams.births == "fitted":
        born, own = (z_new > 0) & free, (z > 0) & free  # the proposed and the current features of row i alone
        fitted = lambda *operands: _fitted_birth(*operands, hparams)
        unchanged = lambda k_fit, i, z, Zo, Wf, O, shared, born, own, W, W_new, sigma_w, data: (W_new, jnp.zeros((), W.dtype))
        # without a proposed or a current feature of its own the row's proposal is the prior's
        W_new, log_ratio = cond_any(born.any() | own.any(), fitted, unchanged, k_fit, i, z, Zo, Wf, O, shared, born, own, W,
                                    W_new, sigma_w, data)
    log_ratio += _row_loglik(z_new, i, Zo, symmetrise(W_new, hparams.symmetric), O, data, hparams.link) - loglik
    accept = jnp.log(u_acc) < log_ratio
    z, W = jnp.where(accept, z_new, z), jnp.where(accept, W_new, W)
    return Z.at[i].set(z), W, accept & (n_new > 0)


def sweep_z(key, Z, W, reg: Regression, alpha, sigma_w, data: Data, hparams: Hyperparams):
    """Gibbs sweep over the rows of Z in a random order; returns (Z, W, the number of
    rows given at least one new feature)."""
    n = Z.shape[0]
    O = offset(reg, data.covariates, hparams.symmetric)
    k_perm, k_rows = jax.random.split(key)
    order = jax.random.permutation(k_perm, n)

    def body(t, carry):
        Z, W, births = carry
        Z, W, accepted = _update_row(jax.random.fold_in(k_rows, t), order[t], Z, W, O, alpha, sigma_w, data, hparams)
        return Z, W, births + accepted

    return jax.lax.fori_loop(0, n, body, (Z, W, jnp.zeros((), jnp.int32)))


def _fisher_scale(p, link: str):
    """Expected Fisher information of eta for one cell at probability p."""
    p = jnp.clip(p, 1e-3, 1 - 1e-3)
    if link == "logistic":
        return p * (1 - p)
    return jax.scipy.stats.norm.pdf(jax.scipy.stats.norm.ppf(p)) ** 2 / (p * (1 - p))


def _mass(Z, reg: Regression, sigma_w, data: Data, hparams: Hyperparams):
    """Diagonal HMC mass of (W, regression terms): the expected Fisher information at the
    relation's base rate given Z, sum over cells of v_r (d eta / d theta)^2, plus the
    prior precision. eta is linear in the regression terms, so their part is the
    transpose of ``offset`` with squared covariates applied to the cell weights."""
    cells = data.mask.sum((1, 2))
    rate = jnp.sum(data.Y, (1, 2)) / jnp.maximum(cells, 1)
    v = _fisher_scale(rate, hparams.link)
    weights = v[:, None, None] * data.mask.astype(Z.dtype)
    touched = jnp.einsum("ik,rij,jl->rkl", Z, weights, Z)
    if hparams.symmetric:
        touched = touched + jnp.swapaxes(touched, 1, 2) - jnp.eye(Z.shape[1]) * touched
    squared = jax.tree.map(jnp.square, data.covariates)
    (fisher,) = jax.linear_transpose(lambda r: offset(r, squared, hparams.symmetric), reg)(weights)
    if hparams.symmetric:  # sender terms enter both ends: (x_i + x_j)^2 has a cross term
        X = data.covariates.sender
        cross_beta = 2 * jnp.einsum("rij,id,jd->rd", weights, X, X)
        cross_a = 2 * jnp.diagonal(weights, axis1=1, axis2=2) if reg.a.shape[-1] else reg.a
        fisher = eqx.tree_at(lambda f: (f.beta_p, f.a), fisher, (fisher.beta_p + cross_beta, fisher.a + cross_a))
    prior = Regression(hparams.bias_scale, *(hparams.coefficient_scale,) * 3, *(hparams.offset_scale,) * 2)
    return touched + 1 / sigma_w**2, jax.tree.map(lambda f, s: f + 1 / s**2, fisher, prior)


def hmc_weights(key, Z, W, reg: Regression, sigma_w, step_size, data: Data, hparams: Hyperparams):
    """One HMC transition of (W, regression terms) given Z; returns (W, reg, acceptance
    probability)."""
    def potential(q):
        W, reg = q
        return 0.5 * jnp.sum((W / sigma_w) ** 2) - log_prior_regression(reg, hparams) - log_likelihood(data, Z, W, reg, hparams)

    mass = _mass(Z, reg, sigma_w, data, hparams)
    flat_mass, unflatten = ravel_pytree(mass)
    u = jax.random.uniform(key, (2 + flat_mass.size,), W.dtype)  # the step's jitter, the acceptance, the momenta
    p0 = unflatten(normal_from_uniform(u[2:]) * jnp.sqrt(flat_mass))
    eps = step_size * (0.8 + 0.4 * u[0])
    kinetic = lambda p: 0.5 * jnp.sum(ravel_pytree(p)[0] ** 2 / flat_mass)
    value_and_grad = jax.value_and_grad(potential)
    axpy = lambda a, x, y: jax.tree.map(lambda xi, yi: yi + a * xi, x, y)
    pick = lambda c, x, y: jax.tree.map(lambda xi, yi: jnp.where(c, xi, yi), x, y)

    def leapfrog(t, carry):
        """Pass t of hmc_steps + 1: the potential and its gradient at q_t (one traced copy
        for the whole trajectory), the half step that closes step t - 1, and the half and
        full steps that open step t."""
        q, p, u_start, _ = carry
        u, g = value_and_grad(q)
        p = pick(t > 0, axpy(-eps / 2, g, p), p)
        opened = axpy(-eps / 2, g, p)
        moved = jax.tree.map(lambda qi, pi, mi: qi + eps * pi / mi, q, opened, mass)
        last = t == hparams.hmc_steps
        return pick(last, q, moved), pick(last, p, opened), jnp.where(t == 0, u, u_start), u

    q0 = (W, reg)
    zero = jnp.zeros((), W.dtype)
    q1, p1, u0, u1 = jax.lax.fori_loop(0, hparams.hmc_steps + 1, leapfrog, (q0, p0, zero, zero))
    log_ratio = u0 + kinetic(p0) - u1 - kinetic(p1)
    log_ratio = jnp.where(jnp.isfinite(log_ratio), log_ratio, -jnp.inf)
    accept = jnp.log(u[1]) < log_ratio
    W, reg = jax.tree.map(lambda a, b: jnp.where(accept, a, b), q1, q0)
    return W, reg, jnp.exp(jnp.minimum(log_ratio, 0.0))


def sample_hyperparameters(key, Z, W, data: Data, hparams: Hyperparams):
    """alpha | Z; sigma_w^2 | weights of used features; unused weights from the prior."""
    n, k_max = Z.shape
    k_gamma, k_w = jax.random.split(key)
    active = Z.sum(0) > 0
    used = weight_entries(k_max, hparams.symmetric) & active[:, None] & active[None, :]
    used = jnp.broadcast_to(used, W.shape)
    (a, b), (sa, sb) = hparams.alpha_prior, hparams.sigma_w_prior
    g_alpha, g_sigma = gamma(k_gamma, jnp.stack([a + active.sum(), sa + 0.5 * used.sum()]), dtype=W.dtype)
    alpha = g_alpha / (b + ibp_prior.harmonic(n))
    sigma_w = jnp.sqrt((sb + 0.5 * jnp.sum(jnp.where(used, W * W, 0.0))) / g_sigma)
    W = jnp.where(used, W, sigma_w * flat(jax.random.normal, k_w, W.shape, W.dtype))
    return alpha, sigma_w, W


def random_start(n: int, k_max: int):
    """The ``Z`` that asks :func:`init` for the random start (every entry below 0)."""
    return -np.ones((n, k_max))


def init(key, data: Data, hparams: Hyperparams, Z=None, alpha=1.0, sigma_w=1.0) -> State:
    """Start (paper's random initialisation as refined in the notes): W = 0, c_r at the
    relation's base rate on the link scale, and, unless ``Z`` is given, three quarters of
    the ``k_max`` columns in use with each entry on with probability 0.2. Entries of a
    given ``Z`` below 0 are taken from that random start (:func:`random_start` marks them
    all), so that given and random starts run one compiled program."""
    r, n, _ = data.Y.shape
    dtype = data.Y.dtype
    k_z, k_next = jax.random.split(key)
    n_on = max(1, (3 * hparams.k_max) // 4)
    on = flat(lambda k, shape: jax.random.bernoulli(k, 0.2, shape), k_z, (n, n_on))
    drawn = jnp.zeros((n, hparams.k_max), dtype).at[:, :n_on].set(on.astype(dtype))
    if Z is None:
        Z = drawn
    else:
        Z = jnp.zeros((n, hparams.k_max), dtype).at[:, : Z.shape[1]].set(jnp.asarray(Z, dtype))
        Z = jnp.where(Z < 0, drawn, Z)
    rate = jnp.clip(jnp.sum(data.Y, (1, 2)) / jnp.maximum(data.mask.sum((1, 2)), 1), 1e-3, 1 - 1e-3)
    c = jnp.log(rate / (1 - rate)) if hparams.link == "logistic" else jax.scipy.stats.norm.ppf(rate)
    reg = zero_regression(r, data.covariates, hparams, c)
    W = jnp.zeros((r, hparams.k_max, hparams.k_max), dtype)
    alpha, sigma_w = jnp.asarray(alpha, dtype), jnp.asarray(sigma_w, dtype)
    step_size = jnp.asarray(0.5 / max(hparams.hmc_steps, 1) ** 0.5, dtype)
    return State(Z, W, reg, alpha, sigma_w, k_next, step_size, jnp.zeros((), jnp.int32), jnp.zeros((), dtype),
                 jnp.zeros((), jnp.int32), log_joint(data, Z, W, reg, alpha, sigma_w, hparams))


def step(state: State, data: Data, hparams: Hyperparams, num_warmup: int = 0) -> State:
    """One sweep: Z (with births), (W, c) by HMC, alpha and sigma_w; during the first
    ``num_warmup`` sweeps the HMC step size is adapted (Robbins-Monro on its log)."""
    k_next, k_z, k_w, k_h = jax.random.split(state.rng_key, 4)
    Z, W, births = sweep_z(k_z, state.Z, state.W, state.reg, state.alpha, state.sigma_w, data, hparams)
    W, reg, accept = hmc_weights(k_w, Z, W, state.reg, state.sigma_w, state.step_size, data, hparams)
    alpha, sigma_w, W = sample_hyperparameters(k_h, Z, W, data, hparams)
    warm = state.iteration < num_warmup
    gain = (state.iteration + 1.0) ** -0.6
    step_size = jnp.where(warm, state.step_size * jnp.exp(gain * (accept - hparams.target_accept)), state.step_size)
    return State(Z, W, reg, alpha, sigma_w, k_next, step_size, state.iteration + 1, accept, births,
                 log_joint(data, Z, W, reg, alpha, sigma_w, hparams))


@partial(jax.jit, static_argnames="chunk_size")
def predict_proba(samples: dict, hparams: Hyperparams, covariates: Covariates | None = None, chunk_size: int = 16):
    """Posterior predictive Pr(y_rij = 1) averaged over draws laid out (chain, draw, ...),
    or (relation, chain, draw, ...) for separate per-relation models; ``covariates`` as
    in the fit. One compiled program per shapes."""
    if jnp.ndim(samples["W"]) == 6:  # one program run for each relation in turn, not one traced copy per relation
        per_relation = jax.lax.map(lambda s: predict_proba(s, hparams, covariates, chunk_size), samples)
        return per_relation.reshape((-1,) + per_relation.shape[2:])
    flat = lambda a: jnp.asarray(a).reshape((a.shape[0] * a.shape[1],) + a.shape[2:])
    W = flat(samples["W"])
    Z = flat(samples["Z"]).astype(W.dtype)
    reg = Regression(*(flat(samples[k]).astype(W.dtype) for k in REGRESSION_TERMS))
    covariates = covariates if covariates is not None else no_covariates(Z.shape[1], W.dtype)

    def one(args):
        z, w, reg = args
        return link_prob(logits(z, w, reg, covariates, hparams.symmetric), hparams.link)

    probs = jax.lax.map(one, (Z, W, reg), batch_size=chunk_size)
    out = probs.mean(0)
    return (out + jnp.swapaxes(out, 1, 2)) / 2 if hparams.symmetric else out


class LFRMGibbs(VectorisedKernel):
    """The LFRM sampler as a numpyro kernel: ``MCMC(LFRMGibbs(hparams), ...).run(key,
    data)`` with ``data`` from ``as_data``; ``init_params`` may be a starting Z."""

    sample_stats = ("accept", "births", "saturated")

    def __init__(self, hparams: Hyperparams | None = None, data_per_chain: bool = False):
        super().__init__(Hyperparams() if hparams is None else hparams, data_per_chain)

    def init_one(self, key, init_params, data):
        return init(key, data, self.hparams, Z=init_params)

    def step_one(self, state, data):
        return step(state, data, self.hparams, self.num_warmup)


__all__ = ["LFRMGibbs", "hmc_weights", "init", "predict_proba", "random_start", "sample_hyperparameters", "step", "sweep_z"]

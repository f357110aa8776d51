"""The mixed membership stochastic blockmodel (Airoldi, Blei, Fienberg & Xing, JMLR 2008)
by variational EM, the second baseline of the LFRM paper's link-prediction table.

Model for R relations on N objects, K blocks: each object p has a membership vector
pi_p ~ Dirichlet(alpha 1_K), shared by all relations. For every observed cell (r, p, q)
the sender draws a block z_{p->q} ~ Mult(pi_p), the receiver z_{p<-q} ~ Mult(pi_q), and

    y_rpq ~ Bernoulli(B_r[z_{p->q}, z_{p<-q}]).

Mean-field posterior q(pi_p) = Dirichlet(gamma_p), q(z_{p->q}) = Mult(phi_s), q(z_{p<-q})
= Mult(phi_r) per observed cell. One sweep of ``update`` is coordinate ascent on the
bound (each step maximises it exactly in its block, so it never decreases):

* phi_s[r,p,q,g] propto exp(E log pi_pg + sum_h phi_r[r,p,q,h] (y log B_rgh + (1 - y) log(1 - B_rgh)))
  (the paper's Eq. for phi_{p->q}), then phi_r likewise with the roles of g, h swapped;
* gamma_pk = alpha + sum over p's observed cells of phi_s[., p, ., k] + phi_r[., ., p, k];
* B_rgh = (n1 + a - 1) / (n + a + b - 2), with n1 and n the phi-weighted counts of ones
  and cells: the MAP M-step under a Beta(a, b) prior (``block_prior``, a, b > 1). The
  paper's maximum-likelihood M-step is its limit a = b = 1, which puts a block without
  links at B = 0 and an empty block at 0 / 0, whose logarithms the next E-step cannot
  take: a, b must exceed 1 (the default 1.1 stays near the paper's estimates);
* alpha by Newton's method on log alpha (the empirical-Bayes M-step), kept only if it
  raises the bound.

Only observed cells enter the model (held-out and missing cells have no indicators). An
undirected network counts each unordered pair once (the mask keeps i < j) and has
symmetric B_r. Predictions are E[pi_p]' B_r E[pi_q] (the paper's Section 5). The
paper's sparsity parameter rho is not modelled: a sparse network is explained by B.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.special import digamma, gammaln, polygamma
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core import executables
from bayeskit.core import loop as _loop
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.core.validation import is_concrete
from bayeskit.relational.data import Data, as_data, check_relations


class Hyperparams(eqx.Module):
    """n_blocks: K (static); symmetric: undirected relations (symmetric B, i < j
    counted); alpha: the initial Dirichlet concentration, re-estimated when
    ``estimate_alpha``; block_prior: (a, b) of the Beta prior of each B_rgh."""

    n_blocks: int = eqx.field(static=True, default=8)
    symmetric: bool = eqx.field(static=True, default=False)
    estimate_alpha: bool = eqx.field(static=True, default=True)
    alpha: Float[Array, ""] | float = 0.1
    block_prior: tuple = (1.1, 1.1)


class State(eqx.Module):
    """gamma (N, K) Dirichlet parameters; phi_s, phi_r (R, N, N, K) sender and receiver
    block responsibilities per cell (meaningful on observed cells only); B (R, K, K)."""

    gamma: Float[Array, "n k"]
    phi_s: Float[Array, "r n n k"]
    phi_r: Float[Array, "r n n k"]
    B: Float[Array, "r k k"]
    alpha: Array


def _expected_log_pi(gamma):
    return digamma(gamma) - digamma(gamma.sum(-1, keepdims=True))


def _cell_scores(data: Data, B, phi, spec: str):
    """sum_h phi_h (y log B_gh + (1 - y) log(1 - B_gh)) per cell and block g, where phi
    is the partner's responsibilities and ``spec`` the einsum that contracts them with B."""
    y = data.Y[..., None]
    return y * jnp.einsum(spec, phi, jnp.log(B)) + (1 - y) * jnp.einsum(spec, phi, jnp.log1p(-B))


_TO_SENDER, _TO_RECEIVER = "rpqh,rgh->rpqg", "rpqg,rgh->rpqh"


def _update_phi(state: State, data: Data) -> State:
    Elog = _expected_log_pi(state.gamma)
    phi_s = jax.nn.softmax(Elog[None, :, None, :] + _cell_scores(data, state.B, state.phi_r, _TO_SENDER), axis=-1)
    phi_r = jax.nn.softmax(Elog[None, None, :, :] + _cell_scores(data, state.B, phi_s, _TO_RECEIVER), axis=-1)
    return eqx.tree_at(lambda s: (s.phi_s, s.phi_r), state, (phi_s, phi_r))


def _update_gamma(state: State, data: Data) -> State:
    m = data.mask[..., None].astype(state.phi_s.dtype)
    gamma = state.alpha + jnp.sum(m * state.phi_s, axis=(0, 2)) + jnp.sum(m * state.phi_r, axis=(0, 1))
    return eqx.tree_at(lambda s: s.gamma, state, gamma)


def _update_B(state: State, data: Data, hparams: Hyperparams) -> State:
    m = data.mask.astype(state.phi_s.dtype)
    ones = jnp.einsum("rpq,rpqg,rpqh->rgh", m * data.Y, state.phi_s, state.phi_r)
    cells = jnp.einsum("rpq,rpqg,rpqh->rgh", m, state.phi_s, state.phi_r)
    if hparams.symmetric:  # B_gh = B_hg pools the blocks (g, h) and (h, g); the diagonal once
        off = ~jnp.eye(hparams.n_blocks, dtype=bool)
        ones, cells = (x + jnp.where(off, jnp.swapaxes(x, 1, 2), 0.0) for x in (ones, cells))
    a, b = hparams.block_prior
    return eqx.tree_at(lambda s: s.B, state, (ones + a - 1) / (cells + a + b - 2))


def _alpha_term(alpha, sum_Elog, n, k):
    """The bound's terms in alpha: sum_p log Dirichlet(pi_p | alpha) in expectation."""
    return n * (gammaln(k * alpha) - k * gammaln(alpha)) + (alpha - 1) * sum_Elog


def _update_alpha(state: State, n_newton: int = 20) -> State:
    n, k = state.gamma.shape
    s = _expected_log_pi(state.gamma).sum()

    def newton(_, log_a):  # the term is concave in alpha; Newton on log alpha stays positive
        a = jnp.exp(log_a)
        g = n * (k * digamma(k * a) - k * digamma(a)) + s
        h = n * (k**2 * polygamma(1, k * a) - k * polygamma(1, a))
        return jnp.clip(log_a - (g * a) / (h * a**2 + g * a), -12.0, 6.0)

    new = jnp.exp(jax.lax.fori_loop(0, n_newton, newton, jnp.log(state.alpha)))
    better = _alpha_term(new, s, n, k) > _alpha_term(state.alpha, s, n, k)
    return eqx.tree_at(lambda st: st.alpha, state, jnp.where(better, new, state.alpha))


def update(state: State, data: Data, hparams: Hyperparams) -> State:
    """One sweep: phi (sender, then receiver), gamma, B and alpha."""
    state = _update_B(_update_gamma(_update_phi(state, data), data), data, hparams)
    return _update_alpha(state) if hparams.estimate_alpha else state


def _xlogx(p):
    return jnp.where(p > 0, p * jnp.log(jnp.where(p > 0, p, 1.0)), 0.0)


def objective(state: State, data: Data, hparams: Hyperparams) -> Array:
    """The evidence lower bound plus the log Beta prior of B (the bound is maximised over
    B by a MAP step, so this is what every sweep raises)."""
    n, k = state.gamma.shape
    m = data.mask.astype(state.phi_s.dtype)
    Elog = _expected_log_pi(state.gamma)
    cell = _cell_scores(data, state.B, state.phi_r, _TO_SENDER)
    loglik = jnp.sum(m[..., None] * state.phi_s * cell)
    log_p_z = jnp.sum(m[..., None] * (state.phi_s * Elog[None, :, None] + state.phi_r * Elog[None, None]))
    entropy_z = -jnp.sum(m[..., None] * (_xlogx(state.phi_s) + _xlogx(state.phi_r)))
    log_p_pi = _alpha_term(state.alpha, Elog.sum(), n, k)
    entropy_pi = -jnp.sum(gammaln(state.gamma.sum(-1)) - gammaln(state.gamma).sum(-1) + ((state.gamma - 1) * Elog).sum(-1))
    a, b = hparams.block_prior
    B = state.B
    if hparams.symmetric:
        B = jnp.where(jnp.triu(jnp.ones((k, k), bool)), B, 0.5)  # one prior term per unordered block
    used = jnp.triu(jnp.ones((k, k), bool)) if hparams.symmetric else jnp.ones((k, k), bool)
    log_p_B = jnp.sum(jnp.where(used, (a - 1) * jnp.log(B) + (b - 1) * jnp.log1p(-B), 0.0))
    return loglik + log_p_z + entropy_z + log_p_pi + entropy_pi + log_p_B


def _spectral_blocks(key: PRNGKeyArray, data: Data, k: int, symmetric: bool, n_lloyd: int = 25) -> Array:
    """Hard blocks (N,) by k-means (Lloyd's iterations from k random objects) on the
    objects' leading k left singular vectors of their link profiles, scaled by the
    singular values. An object's profile is its row of every relation (the cells it sends)
    and its column (the cells it receives), centred at the relation's observed density;
    unobserved cells are 0. An undirected relation is observed for i < j only: its row and
    column are added, giving the row of the mirrored relation."""
    m = data.mask.astype(data.Y.dtype)
    density = jnp.sum(m * data.Y, axis=(1, 2)) / jnp.maximum(jnp.sum(m, axis=(1, 2)), 1)
    yc = m * (data.Y - density[:, None, None])  # (R, N, N)
    n = yc.shape[1]
    sent = jnp.transpose(yc, (1, 0, 2)).reshape(n, -1)  # object p's row of every relation
    received = jnp.transpose(yc, (2, 0, 1)).reshape(n, -1)  # and its column
    profiles = sent + received if symmetric else jnp.concatenate([sent, received], axis=1)
    values, vectors = jnp.linalg.eigh(profiles @ profiles.T)
    kk = min(k, values.shape[0])
    points = vectors[:, ::-1][:, :kk] * jnp.sqrt(jnp.maximum(values[::-1][:kk], 0))
    centres = points[jax.random.choice(key, n, (k,), replace=k > n)]
    nearest = lambda centres: jnp.argmin(jnp.sum((points[:, None] - centres[None]) ** 2, -1), axis=1)  # noqa: E731

    def lloyd(_, centres):
        onehot = jax.nn.one_hot(nearest(centres), k, dtype=points.dtype)
        count = onehot.sum(0)
        mean = (onehot.T @ points) / jnp.maximum(count, 1)[:, None]
        return jnp.where(count[:, None] > 0, mean, centres)

    return nearest(jax.lax.fori_loop(0, n_lloyd, lloyd, centres))


_INIT_SPREAD = 0.25  # the share of each starting membership drawn at random over the blocks


def init(key: PRNGKeyArray, data: Data, hparams: Hyperparams) -> State:
    """Starting memberships from the data: k-means (from random objects) on a spectral
    embedding of the objects' link profiles (:func:`_spectral_blocks`), each object's
    membership its block with weight 0.75 and a Dirichlet(1) draw with weight 0.25 (so that
    restarts differ even where k-means agrees); every cell's sender and receiver
    responsibilities are the objects' memberships, then gamma and B follow from them. The
    paper leaves the start
    open; random memberships (Dirichlet draws) give a flat first B, from which the
    coordinate ascent settles at the uniform fixed point (every membership 1/K) even on
    plainly blocked data."""
    r, n, _ = data.Y.shape
    k = hparams.n_blocks
    dtype = data.Y.dtype
    k_blocks, k_spread = jax.random.split(key)
    blocks = _spectral_blocks(k_blocks, data, k, hparams.symmetric)
    spread = jax.random.dirichlet(k_spread, jnp.ones(k, dtype), (n,)).astype(dtype)
    pi = (1 - _INIT_SPREAD) * jax.nn.one_hot(blocks, k, dtype=dtype) + _INIT_SPREAD * spread
    phi_s = jnp.broadcast_to(pi[None, :, None, :], (r, n, n, k))
    phi_r = jnp.broadcast_to(pi[None, None, :, :], (r, n, n, k))
    state = State(jnp.ones((n, k), dtype), phi_s, phi_r, jnp.full((r, k, k), 0.5, dtype), jnp.asarray(hparams.alpha, dtype))
    return _update_B(_update_gamma(state, data), data, hparams)


@jax.jit
def predict_proba(state: State) -> Float[Array, "r n n"]:
    """E[pi_p]' B_r E[pi_q] for every pair (link probabilities, also for unobserved cells)."""
    mean_pi = state.gamma / state.gamma.sum(-1, keepdims=True)
    return jnp.einsum("pg,rgh,qh->rpq", mean_pi, state.B, mean_pi)


def check_hparams(hparams: Hyperparams):
    if hparams.n_blocks < 1:
        raise ValueError(f"n_blocks must be at least 1; got {hparams.n_blocks}.")
    if not is_concrete(hparams):  # traced by an enclosing vmap over a value: the caller's to check
        return
    if not float(hparams.alpha) > 0:
        raise ValueError(f"alpha must be positive; got {hparams.alpha}.")
    if not all(float(v) > 1 for v in hparams.block_prior):
        raise ValueError(f"block_prior must be two numbers above 1 (at 1, a block without links or without cells has "
                         f"B = 0 or 0 / 0, and its log is not finite); got {hparams.block_prior}.")


@readable_failure
def fit(key: PRNGKeyArray, Y, mask=None, hparams: Hyperparams | None = None, *, max_iter: int = 500, tol: float = 1e-6,
        progress: bool | None = None, throw: bool = True) -> FitResult:
    """Fit the MMSB to Y (R, N, N) or (N, N) by variational EM.

    ``mask`` (same shape, or (N, N) for all relations) marks the training cells (default
    every off-diagonal cell); held-out cells are left out, never read as zeros.
    Vmappable over keys (restarts): ``jax.vmap(lambda k: fit(k, Y, mask, hp, throw=False))``
    after validating once, or :func:`fit_restarts`, which also keeps the compiler options
    of loop programs (a fit under a transformation runs without them). Returns a ``FitResult`` whose state is a :class:`State` and
    whose trace is the bound after every sweep.
    """
    _loop.check_throw(throw)
    data, hparams, tol = _checked(Y, mask, hparams, tol)
    return _fit(key, data, hparams, max_iter=max_iter, tol=tol, progress=progress, throw=throw)


def _checked(Y, mask, hparams: Hyperparams | None, tol):
    """The data, the hyperparameters as arrays and ``tol`` in the data's dtype; the host
    checks of the data run unless Y or the mask is traced, those of the hyperparameters'
    values unless one is (the caller validated already)."""
    _loop.check_tol(tol)
    hparams = hparams or Hyperparams()
    check_hparams(hparams)
    if is_concrete(Y, mask):
        Y, mask = check_relations(Y, mask, hparams.symmetric)
    else:  # the layout check_relations gives: (R, N, N), every off-diagonal cell by default
        Y = jnp.asarray(Y)
        Y = Y[None] if Y.ndim == 2 else Y
        if Y.ndim != 3 or Y.shape[1] != Y.shape[2]:  # static: checked inside jit too
            raise ValueError(f"Y must be (N, N) or (n_relations, N, N); got shape {jnp.shape(Y)}.")
        mask = ~jnp.eye(Y.shape[-1], dtype=bool) if mask is None else mask
        if jnp.shape(mask) not in (Y.shape, Y.shape[1:]):
            raise ValueError(f"mask must have Y's shape {Y.shape} (or {Y.shape[1:]}, for every relation); got {jnp.shape(mask)}.")
        mask = jnp.broadcast_to(mask, Y.shape)
    data = as_data(Y, mask, hparams.symmetric)
    return data, _loop.as_arrays(hparams, data.Y.dtype), _loop.tolerance(tol, data.Y.dtype)


def _fit(key, data: Data, hparams: Hyperparams, *, max_iter, tol, progress, throw) -> FitResult:
    return _fit_program(key, data, hparams, max_iter=max_iter, tol=tol, progress=progress, throw=throw)


def _fit_loop(key, data: Data, hparams: Hyperparams, *, max_iter, tol, progress, throw) -> FitResult:
    return _loop.run(lambda s: update(s, data, hparams), lambda s: objective(s, data, hparams), init(key, data, hparams),
                     max_iter=max_iter, tol=tol, progress=progress, throw=throw)


def fit_restarts(keys: PRNGKeyArray, Y, mask=None, hparams: Hyperparams | None = None, *, max_iter: int = 500,
                 tol: float = 1e-6) -> FitResult:
    """:func:`fit` from each key of a batch (random restarts) as one vmapped program, with
    ``throw=False``; every field of the result gains a leading restart axis. The program
    is kept whole on disk (:mod:`bayeskit.core.executables`), so a new process runs it
    without tracing it again."""
    data, hparams, tol = _checked(Y, mask, hparams, tol)
    return _restarts_program(keys, data, hparams, max_iter=max_iter, tol=tol)


def _fit_restarts(keys, data: Data, hparams: Hyperparams, *, max_iter, tol) -> FitResult:
    one = lambda key: _fit_loop(key, data, hparams, max_iter=max_iter, tol=tol, progress=False, throw=False)
    return jax.vmap(one)(keys)


# The EM sweeps are a loop of small steps, which run a little faster under the loop-program
# options and compile in less time (two vmapped restarts on one core: nations, K = 5, 100
# sweeps, 0.42 -> 0.39 s, compiling 3.9 -> 3.0 s; NIPS-234, K = 8, 25 sweeps, 1.57 -> 1.44 s).
_fit_program = executables.loop_jit(_fit_loop, static_argnames=("max_iter", "progress", "throw"))
_restarts_program = executables.loop_jit(_fit_restarts, static_argnames=("max_iter",))


__all__ = ["Hyperparams", "State", "fit", "fit_restarts", "init", "objective", "predict_proba", "update"]

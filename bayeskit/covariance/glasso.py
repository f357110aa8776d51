"""The graphical lasso (Friedman, Hastie & Tibshirani, Biostatistics 2008), the M-step of
EM/RCA, by QUIC's proximal Newton method (Hsieh, Sustik, Dhillon & Ravikumar, JMLR 15, 2014).

Given a covariance ``S`` (p, p) and a penalty ``alpha`` >= 0, the precision Theta solves

    minimise  F(Theta) = g(Theta) + ||Theta||_1,L ,   g(Theta) = -log det Theta + tr(S Theta)    (1)

over positive-definite Theta, where ||Theta||_1,L = sum_ij L_ij |Theta_ij| and L_ij = alpha
on the penalised entries: the off-diagonal ones (scikit-learn's convention, our default)
or all of them (``penalize_diagonal=True``, R glasso's default and the RCA authors').
W = Theta^-1 is the covariance estimate. With G = S - W the gradient of g, Theta is
optimal iff (KKT)

    G_ij + L_ij sign(Theta_ij) = 0  where Theta_ij != 0,    |G_ij| <= L_ij  where Theta_ij = 0.   (2)

One Newton step (``update``) minimises the quadratic model of g plus the penalty,

    D = argmin_D tr(G D) + 1/2 tr(W D W D) + ||Theta + D||_1,L,                                (3)

by coordinate descent over the free set {i <= j : Theta_ij != 0 or |G_ij| > L_ij} (the
other entries stay 0 at the solution of (3)), moving D_ij = D_ji together: with U = D W,

    a = W_ij^2 + W_ii W_jj (a = W_ii^2 on the diagonal),  b = G_ij + W_i. U_.j,  c = Theta_ij + D_ij,
    mu = -c + soft(c - b / a, L_ij / a),                                                       (4)

sweeping until no entry moves by more than 1e-2 of D's largest, at most 1 + t sweeps at
Newton iteration t (QUIC's fixed 1 + t/3 sweeps left ill-conditioned problems converging
slowly; a fixed inner tolerance alone made easy ones sweep needlessly). Then Armijo's line search takes the largest beta in
{1, 1/2, 1/4, ...} with Theta + beta D positive definite (its Cholesky factor exists) and

    F(Theta + beta D) <= F(Theta) + sigma beta delta,  delta = tr(G D) + ||Theta + D||_1,L - ||Theta||_1,L,   (5)

sigma = 1e-3, so F never increases.

The second solver, ``solver="bcd"``, is Friedman et al.'s block coordinate descent on W
((6)-(8) below, in the sweep's own docstring): each column's lasso (6) is solved exactly
on its current sign pattern by feature-sign search (Lee, Battle, Raina & Ng, NIPS 2007;
:mod:`bayeskit.covariance.glasso_columns`), a few small Cholesky solves instead of R
glasso's coordinate-by-coordinate passes, and Theta follows from the coefficients by (8).
Its iterate W keeps the diagonal S_ii + L_ii and each column step raises log det W (the
dual of (1)); F(Theta) is not monotone.

Both solvers run on the correlation scale: with d_i = sqrt(S_ii) and D = diag(d),

    Theta solves (1) for S and L  iff  D Theta D solves it for R = D^-1 S D^-1 and L_ij / (d_i d_j),   (9)

and F differs by sum_i log S_ii (a variance that is not positive, possible only in a traced
S, keeps d_i = 1). Variables whose variances lie 1e9 apart (raw data in
mixed units) then converge as a correlation matrix does; tolerances in units of the mean
variance had left the small variables unsolved (on the raw covariance of scikit-learn's
breast-cancer data the sweeps stopped at 100 with an indefinite Theta; now 3-14). Either fit
stops when the largest violation of (2) on this scale, |violation_ij| / (d_i d_j), is at
most ``tol``. Which solver: the Newton steps converge in about ten iterations where
proximal-gradient steps (G-ISTA) needed thousands on n ~ p covariances, and a step costs
one Cholesky factorisation and inverse plus O(p) per free coordinate, far less than a
column sweep's p lasso problems when p is large and Theta sparse. On small,
ill-conditioned problems the Hessian W (x) W of (3) has condition number cond(W)^2 and the
inner coordinate descent crawls (the breast-cancer correlation matrix, p = 30 and
cond 1e5: 63-138 Newton steps, 0.1-1.7 s), while the column sweeps converge in 6-11 sweeps
and a few milliseconds. ``solver="auto"`` (the default) sweeps columns up to
``BCD_MAX_P`` = 100 variables and takes Newton steps above: on the sparse problems of
``benchmarks/bench_glasso.py`` the sweeps took 14 and 61 ms at p = 100 (alpha 0.1 and
0.03) against the Newton steps' 38 and 104 ms, and 317 against 174 ms at p = 128, alpha 0.03,
where the columns' faces outgrow the gathered systems of
:data:`bayeskit.covariance.glasso_columns.FACE_SIZES`.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from jaxtyping import Array, Float

from bayeskit.core import loop
from bayeskit.core.device import as_array, batch_axis_in_front, call_arg, float_arg
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.core.validation import check_choice, check_square_shape, is_concrete, is_symmetric
from bayeskit.core.xla import host_blas
from bayeskit.covariance.glasso_columns import column_lasso

_MAX_HALVINGS = 50
_SIGMA = 1e-3
_INNER_TOL = 1e-2


SOLVERS = ("auto", "bcd", "quic")
BCD_MAX_P = 100  # "auto" sweeps columns (bcd) up to this many variables and takes Newton steps (quic) above


class Hyperparams(eqx.Module):
    """``alpha``: the penalty (an array leaf, so it vmaps); ``penalize_diagonal``: whether
    the diagonal of Theta is penalised too (static); ``solver``: "bcd" (block coordinate
    descent, (6)-(8)), "quic" (Newton steps, (3)-(5)) or "auto" (bcd for p <= BCD_MAX_P)."""

    alpha: Float[Array, ""] | float = 0.1
    penalize_diagonal: bool = eqx.field(static=True, default=False)
    solver: str = eqx.field(static=True, default="auto")

    def uses_bcd(self, p: int) -> bool:
        return self.solver == "bcd" or (self.solver == "auto" and p <= BCD_MAX_P)


class State(eqx.Module):
    """``precision`` Theta, ``covariance`` W = Theta^-1, ``logdet`` = log det Theta, the
    relative KKT residual ``kkt`` of (2) (:func:`kkt_residual`) and the iteration count ``t``."""

    precision: Float[Array, "p p"]
    covariance: Float[Array, "p p"]
    logdet: Float[Array, ""]
    kkt: Float[Array, ""]
    t: Array


class SweepState(State):
    """The block-coordinate solver's state: also its iterate ``working``, the covariance W of
    (6)-(8), whose diagonal stays S_ii + L_ii and which equals Theta^-1 at the optimum.
    ``covariance`` is Theta^-1 whenever Theta is positive definite; in an early sweep that
    left Theta indefinite, ``covariance`` and ``logdet`` are the working W's and ``kkt`` is
    infinite."""

    working: Float[Array, "p p"]


def penalty_weights(p: int, alpha, penalize_diagonal: bool, dtype) -> Array:
    """L of (1): alpha on the penalised entries, 0 elsewhere."""
    off = 1.0 - jnp.eye(p, dtype=dtype)
    return jnp.asarray(alpha, dtype) * (jnp.ones((p, p), dtype) if penalize_diagonal else off)


def soft_threshold(x: Array, t: Array) -> Array:
    return jnp.sign(x) * jnp.maximum(jnp.abs(x) - t, 0.0)


def kkt_residual(precision, covariance, S, hparams: Hyperparams) -> Array:
    """The largest violation of the optimality conditions (2), entry (i, j) divided by
    sqrt(S_ii S_jj): the violation on the correlation scale (9), free of the variables' units."""
    L = penalty_weights(S.shape[-1], hparams.alpha, hparams.penalize_diagonal, S.dtype)
    G = S - covariance
    violation = jnp.where(precision != 0, jnp.abs(G + L * jnp.sign(precision)), jnp.maximum(jnp.abs(G) - L, 0.0))
    d = _scales(S)
    return jnp.max(violation / (d[:, None] * d[None, :]))


def _scales(S) -> Array:
    """d_i = sqrt(S_ii) of (9); 1 for a variance that is not positive (a traced S skips the
    checks: its variable is then fitted on its own scale, as before (9))."""
    diagonal = jnp.diagonal(S)
    return jnp.sqrt(jnp.where(diagonal > 0, diagonal, 1.0))


def _unit_problem(S, hparams: Hyperparams):
    """(1) on the correlation scale (9): R = S / sqrt(S_ii S_jj), the penalty alpha /
    sqrt(S_ii S_jj) (a matrix) and the outer product ``scale`` = sqrt(S_ii S_jj)."""
    d = _scales(S)
    scale = d[:, None] * d[None, :]
    return S / scale, Hyperparams(jnp.asarray(hparams.alpha, S.dtype) / scale, hparams.penalize_diagonal, hparams.solver), scale


def _rescaled(state: State, scale, power: int) -> State:
    """``state`` carried between S's coordinates and the correlation scale (9): Theta times
    ``scale ** power``, W (and the sweeps' working W) divided by it, log det Theta plus
    ``power`` sum_i log (scale_ii); the relative KKT residual is the same on both scales."""
    factor = scale**power
    moved = eqx.tree_at(lambda s: (s.precision, s.covariance, s.logdet), state,
                        (state.precision * factor, state.covariance / factor,
                         state.logdet + power * jnp.sum(jnp.log(jnp.diagonal(scale)))))
    return eqx.tree_at(lambda s: s.working, moved, state.working / factor) if isinstance(state, SweepState) else moved


def objective_of(precision, logdet, S, hparams: Hyperparams) -> Array:
    """F(Theta) of (1) given log det Theta."""
    L = penalty_weights(S.shape[-1], hparams.alpha, hparams.penalize_diagonal, S.dtype)
    return -logdet + jnp.sum(S * precision) + jnp.sum(L * jnp.abs(precision))


def objective(state: State, S, hparams: Hyperparams) -> Array:
    return objective_of(state.precision, state.logdet, S, hparams)


def _factor(precision):
    """Cholesky factor, log det and whether Theta is (numerically) positive definite."""
    L = jnp.linalg.cholesky(precision)
    d = jnp.diagonal(L)
    return L, 2.0 * jnp.sum(jnp.log(d)), jnp.all(jnp.isfinite(d) & (d > 0))


def _inverse(L):
    W = cho_solve((L, True), jnp.eye(L.shape[-1], dtype=L.dtype))
    return 0.5 * (W + W.T)


def _diagonal_fixed(W, S, hparams: Hyperparams):
    """W with its diagonal set to S_ii + L_ii, the optimum's (KKT (2) on the diagonal)."""
    L = penalty_weights(S.shape[-1], hparams.alpha, hparams.penalize_diagonal, S.dtype)
    return W - jnp.diag(jnp.diagonal(W)) + jnp.diag(jnp.diagonal(S) + jnp.diagonal(L))


def state_from_precision(precision, S, hparams: Hyperparams) -> State:
    """The state at a positive-definite ``precision`` (a warm start)."""
    L, logdet, _ = _factor(precision)
    W = _inverse(L)
    parts = (precision, W, logdet, kkt_residual(precision, W, S, hparams), jnp.asarray(0))
    return SweepState(*parts, working=_diagonal_fixed(W, S, hparams)) if hparams.uses_bcd(S.shape[-1]) else State(*parts)


def init(S, hparams: Hyperparams) -> State:
    """Theta = diag(1 / (S_ii + L_ii)): the optimum of (1) among diagonal matrices; the
    block-coordinate solver starts from R glasso's W = S + diag(L) (S symmetrised, as in
    :func:`update`)."""
    S = 0.5 * (S + S.T)
    w = jnp.diagonal(S) + jnp.diagonal(penalty_weights(S.shape[-1], hparams.alpha, hparams.penalize_diagonal, S.dtype))
    precision, W = jnp.diag(1.0 / w), jnp.diag(w)
    parts = (precision, W, -jnp.sum(jnp.log(w)), kkt_residual(precision, W, S, hparams), jnp.asarray(0))
    return SweepState(*parts, working=_diagonal_fixed(S, S, hparams)) if hparams.uses_bcd(S.shape[-1]) else State(*parts)


def newton_direction(state: State, S, L, inner_tol, max_sweeps) -> Array:
    """Approximate solution D of (3): coordinate-descent sweeps (4) over the free set, from
    D = 0, until a sweep moves no entry by more than ``inner_tol`` times the largest entry
    of D, at most ``max_sweeps`` sweeps."""
    return _direction(state.precision, state.covariance, S, L, jnp.asarray(inner_tol, S.dtype), max_sweeps)


@jax.custom_batching.custom_vmap
def _direction(theta, W, S, L, inner_tol, max_sweeps):
    p = S.shape[-1]
    G = S - W
    upper = jnp.triu(jnp.ones((p, p), bool))
    free = upper & ((theta != 0) | (jnp.abs(G) > L))
    n_free = jnp.sum(free)
    rows, cols = jnp.nonzero(free, size=p * (p + 1) // 2, fill_value=0)
    columns = jnp.arange(p)

    def coordinate(k, carry):
        D, U, largest = carry
        i, j = rows[k], cols[k]
        w_i, w_j = W[i], W[j]
        a = jnp.where(i == j, w_i[i] ** 2, w_i[j] ** 2 + w_i[i] * w_j[j])
        b = G[i, j] + w_i @ U[:, j]
        # D_ij as row i times e_j: a scalar gather from the carried D makes XLA copy D every step
        c = theta[i, j] + jnp.sum(jnp.where(columns == j, D[i], 0.0))
        mu = -c + soft_threshold(c - b / a, L[i, j] / a)
        mu_ji = jnp.where(i == j, 0.0, mu)
        D = D.at[i, j].add(mu).at[j, i].add(mu_ji)
        U = U.at[i].add(mu * w_j).at[j].add(mu_ji * w_i)
        return D, U, jnp.maximum(largest, jnp.abs(mu))

    def cond(carry):
        k, D, _, moved = carry
        return (k < max_sweeps) & ((k == 0) | (moved > inner_tol * jnp.max(jnp.abs(D))))

    def sweep(carry):
        k, D, U, _ = carry
        D, U, moved = jax.lax.fori_loop(0, n_free, coordinate, (D, U, jnp.zeros((), S.dtype)))
        return k + 1, D, U, moved

    zero = jnp.zeros_like(S)
    return jax.lax.while_loop(cond, sweep, (jnp.asarray(0), zero, zero, jnp.zeros((), S.dtype)))[1]


@_direction.def_vmap
def _direction_batched(axis_size, in_batched, theta, W, S, L, inner_tol, max_sweeps):
    """Under ``vmap`` the problems sweep in lockstep over the union of their free sets, so
    that every step updates one shared coordinate (i, j) of all of them: in-place slices
    rather than per-problem scatters (which made XLA copy D and U at every coordinate), and
    the per-coordinate overhead is paid once per batch. Optimising a coordinate outside a
    problem's own free set still gives a valid (more exact) direction for (3). Each problem
    stops sweeping at its own inner tolerance or sweep limit."""
    theta, W, S, L, inner_tol, max_sweeps = batch_axis_in_front(axis_size, in_batched, (theta, W, S, L, inner_tol, max_sweeps))
    p = S.shape[-1]
    G = S - W
    upper = jnp.triu(jnp.ones((p, p), bool))
    free = jnp.any(upper & ((theta != 0) | (jnp.abs(G) > L)), 0)
    n_free = jnp.sum(free)
    rows, cols = jnp.nonzero(free, size=p * (p + 1) // 2, fill_value=0)
    columns = jnp.arange(p)

    def coordinate(k, carry):
        D, U, largest, active = carry
        i, j = rows[k], cols[k]
        w_i, w_j = W[:, i], W[:, j]
        a = jnp.where(i == j, w_i[:, i] ** 2, w_i[:, j] ** 2 + w_i[:, i] * w_j[:, j])
        b = G[:, i, j] + jnp.sum(w_i * U[:, :, j], -1)
        c = theta[:, i, j] + jnp.sum(jnp.where(columns == j, D[:, i], 0.0), -1)
        mu = jnp.where(active, -c + soft_threshold(c - b / a, L[:, i, j] / a), 0.0)
        mu_ji = jnp.where(i == j, 0.0, mu)
        D = D.at[:, i, j].add(mu).at[:, j, i].add(mu_ji)
        U = U.at[:, i].add(mu[:, None] * w_j).at[:, j].add(mu_ji[:, None] * w_i)
        return D, U, jnp.maximum(largest, jnp.abs(mu)), active

    def sweeping(k, D, moved):
        return (k < max_sweeps) & ((k == 0) | (moved > inner_tol * jnp.max(jnp.abs(D), (1, 2))))

    def sweep(carry):
        k, D, U, moved = carry
        active = sweeping(k, D, moved)
        D, U, now, _ = jax.lax.fori_loop(0, n_free, coordinate, (D, U, jnp.zeros_like(moved), active))
        return k + 1, D, U, jnp.where(active, now, moved)

    zero = jnp.zeros_like(S)
    carry = (jnp.asarray(0), zero, zero, jnp.zeros(axis_size, S.dtype))
    return jax.lax.while_loop(lambda c: jnp.any(sweeping(c[0], c[1], c[3])), sweep, carry)[1], True


def update(state: State, S, hparams: Hyperparams) -> State:
    """One step of the state's solver: a sweep over the columns (6)-(8) for a
    :class:`SweepState`, else a Newton step (3)-(5), taken on the correlation scale (9) as in
    :func:`fit`. ``S`` is symmetrised (the sweeps read its rows as its columns)."""
    S = as_array(S)
    R, unit, scale = _unit_problem(0.5 * (S + S.T), hparams)
    return _rescaled(_step(_rescaled(state, scale, 1), R, unit), scale, -1)


def _step(state: State, S, hparams: Hyperparams) -> State:
    """:func:`update` for a symmetric ``S`` on the correlation scale (unit diagonal)."""
    if isinstance(state, SweepState):
        return _sweep_update(state, S, hparams)
    return _newton_update(state, S, hparams)


def _sweep_update(state: SweepState, S, hparams: Hyperparams) -> SweepState:
    """One sweep of block coordinate descent over the columns (Friedman, Hastie &
    Tibshirani 2008), warm-started from Theta: for each j, with W11 = W without row and
    column j and s12 = S's column j without S_jj,

        beta = argmin_b 1/2 b' W11 b - s12' b + sum_i L_ij |b_i|,                              (6)
        optimal iff (W11 beta - s12)_i + L_ij sign(beta_i) = 0 where beta_i != 0, |.| <= L_ij elsewhere,  (7)

    then w12 = W11 beta replaces W's row and column j. After the sweep

        Theta_jj = 1 / (W_jj - w12' beta_j),   Theta_ij = -beta_j,i Theta_jj,                 (8)

    symmetrised. Each lasso is solved to 1e-3 of the previous state's KKT residual (at most
    1e-4; S has a unit diagonal here): looser solves stalled the sweeps on ill-conditioned S."""
    p = S.shape[-1]
    L = penalty_weights(p, hparams.alpha, hparams.penalize_diagonal, S.dtype)
    tol = jnp.clip(1e-3 * state.kkt, 100 * jnp.finfo(S.dtype).eps, 1e-4)
    off = 1.0 - jnp.eye(p, dtype=S.dtype)
    B = -state.precision / jnp.diagonal(state.precision)[:, None] * off  # row j: the beta of (8)

    def column(j, carry):  # S, L and W are symmetric: row j is column j
        W, B = carry
        beta, g = column_lasso(W, S[j], L[j], B[j], j, tol, 4 * p)
        w = jnp.where(jnp.arange(p) == j, W[j, j], g + S[j])  # W beta
        return W.at[:, j].set(w).at[j, :].set(w), B.at[j].set(beta)

    W, B = jax.lax.fori_loop(0, p, column, (state.working, B))
    d = 1.0 / (jnp.diagonal(W) - jnp.sum(W * B, axis=1))
    theta = jnp.diag(d) - B.T * d[None, :]
    theta = 0.5 * (theta + theta.T)
    chol, logdet, pd = _factor(theta)
    inverse = _inverse(jnp.where(pd, chol, jnp.eye(p, dtype=S.dtype)))
    working_logdet = -jnp.linalg.slogdet(W)[1]
    covariance = jnp.where(pd, inverse, W)
    logdet = jnp.where(pd, logdet, working_logdet)
    kkt = jnp.where(pd, kkt_residual(theta, covariance, S, hparams), jnp.inf)
    return SweepState(theta, covariance, logdet, kkt, state.t + 1, working=W)


def _newton_update(state: State, S, hparams: Hyperparams) -> State:
    """One Newton step: the direction (3)-(4), then the line search (5)."""
    L = penalty_weights(S.shape[-1], hparams.alpha, hparams.penalize_diagonal, S.dtype)
    theta = state.precision
    D = newton_direction(state, S, L, _INNER_TOL, 1 + state.t)
    F = objective(state, S, hparams)
    delta = jnp.sum((S - state.covariance) * D) + jnp.sum(L * jnp.abs(theta + D)) - jnp.sum(L * jnp.abs(theta))
    slack = 10 * jnp.finfo(S.dtype).eps * (jnp.abs(F) + jnp.sum(jnp.abs(S * theta)))

    def attempt(beta):
        new = theta + beta * D
        chol, logdet, pd = _factor(new)
        accept = pd & (objective_of(new, logdet, S, hparams) <= F + _SIGMA * beta * delta + slack)
        return new, chol, logdet, accept

    def cond(carry):
        k, *_, accept = carry
        return ~accept & (k < _MAX_HALVINGS)

    def body(carry):
        k = carry[0]
        return (k + 1, *attempt(0.5**k))

    _, new, chol, logdet, accept = jax.lax.while_loop(cond, body, (jnp.asarray(1), *attempt(jnp.asarray(1.0, S.dtype))))
    W = _inverse(chol)
    moved = State(new, W, logdet, kkt_residual(new, W, S, hparams), state.t + 1)
    kept = eqx.tree_at(lambda s: s.t, state, state.t + 1)
    return jax.tree.map(lambda a, b: jnp.where(accept, a, b), moved, kept)


@readable_failure
def fit(S, hparams: Hyperparams, *, init_state: State | None = None, max_iter: int = 100, tol: float = 1e-4,
        progress: bool | None = None, throw: bool = True) -> FitResult:
    """Solve (1) for one covariance ``S``; ``result.state.precision`` is Theta and
    ``result.trace`` the objective F after each step (non-increasing for the Newton steps).
    Runs on the correlation scale (9) and stops when the relative KKT residual
    (:func:`kkt_residual`) is at most ``tol``. ``init_state`` warm-starts (see
    :func:`state_from_precision`). Vmappable over ``S`` and ``hparams.alpha``."""
    loop.check_tol(tol)
    loop.check_throw(throw)
    check_choice("solver", hparams.solver, SOLVERS)
    if is_concrete(S, hparams.alpha):
        check_alpha(hparams.alpha)
        check_covariance(S, hparams.alpha)
    else:  # traced: the values are the caller's to check, the shape is static
        check_square_shape(S, "S")
    S = float_arg(S)
    return _fit(S, loop.as_arrays(hparams, S.dtype), init_state, max_iter=max_iter, tol=loop.tolerance(tol, S.dtype),
                progress=progress, throw=throw)


@partial(jax.jit, static_argnames=("max_iter", "progress", "throw"))
def _fit(S, hparams: Hyperparams, init_state: State | None, *, max_iter, tol, progress, throw) -> FitResult:
    S = 0.5 * (S + S.T)
    R, unit, scale = _unit_problem(S, hparams)
    state = init(R, unit) if init_state is None else _rescaled(init_state, scale, 1)
    shift = jnp.sum(jnp.log(jnp.diagonal(scale)))  # F on S's scale minus F on the correlation scale
    result = loop.run(lambda s: _step(s, R, unit), lambda s: objective(s, R, unit) + shift, state, max_iter=max_iter,
                      tol=0.0, progress=progress, throw=throw, done=lambda s: s.kkt <= tol)
    return eqx.tree_at(lambda r: r.state, result, _rescaled(result.state, scale, -1))


def path(S, alphas, *, penalize_diagonal: bool = False, solver: str = "auto", max_iter: int = 100,
         tol: float = 1e-4) -> FitResult:
    """Solutions of (1) along ``alphas`` (give them in decreasing order), each step
    warm-started from the previous solution; a :class:`FitResult` whose leaves have a
    leading axis over ``alphas``. One compiled program per shape and setting: new S or
    alphas compile nothing."""
    check_choice("solver", solver, SOLVERS)
    loop.check_tol(tol)
    if is_concrete(S, alphas):
        check_alpha(alphas)
        check_covariance(S, alphas)
    S = float_arg(S)
    return _path(S, call_arg(alphas, S.dtype), loop.tolerance(tol, S.dtype), penalize_diagonal=penalize_diagonal, solver=solver,
                 max_iter=max_iter)


@partial(jax.jit, static_argnames=("penalize_diagonal", "solver", "max_iter"))
def _path(S, alphas, tol, *, penalize_diagonal, solver, max_iter) -> FitResult:
    first = init(S, Hyperparams(alphas[0], penalize_diagonal, solver))

    def one(state, alpha):
        hp = Hyperparams(alpha, penalize_diagonal, solver)
        warm = state_from_precision(state.precision, S, hp)
        result = fit(S, hp, init_state=warm, max_iter=max_iter, tol=tol, throw=False)
        return result.state, result

    return jax.lax.scan(one, first, alphas)[1]


def check_alpha(alpha) -> None:
    a = np.asarray(alpha, dtype=float)
    if not np.all(np.isfinite(a)) or np.any(a < 0):
        raise ValueError(f"alpha must be finite and >= 0; got {alpha!r}.")


@host_blas()
def check_covariance(S, alpha=None) -> None:
    """A finite, real, symmetric, positive semidefinite (p, p) matrix with a positive
    diagonal, and positive definite where ``alpha`` is 0: without a penalty (1) has a
    solution only for a positive definite S. The tolerances are relative to S's largest
    entry and its dtype."""
    S = np.asarray(S)
    if S.dtype == object or np.iscomplexobj(S) or not (np.issubdtype(S.dtype, np.number) or S.dtype == bool):
        raise ValueError(f"S must be a real covariance matrix; got dtype {S.dtype}.")
    if S.ndim != 2 or S.shape[0] != S.shape[1] or S.shape[0] == 0:
        raise ValueError(f"S must be a square (p, p) covariance matrix with p >= 1; got shape {S.shape}.")
    if not np.all(np.isfinite(S)):
        raise ValueError(f"S has {int(np.sum(~np.isfinite(S)))} non-finite entries.")
    if not is_symmetric(S):
        raise ValueError("S must be symmetric.")
    if np.any(np.diagonal(S) <= 0):
        j = int(np.argmin(np.diagonal(S)))
        raise ValueError(f"S must have a positive diagonal; S[{j}, {j}] = {S[j, j]!r} (a constant variable?).")
    sd = np.sqrt(np.diagonal(S).astype(np.float64))
    R = S / np.outer(sd, sd)  # the correlations: definiteness on a unit scale
    eps = np.finfo(S.dtype if np.issubdtype(S.dtype, np.floating) else np.float64).eps
    floor = 10 * len(R) * eps
    definite = alpha is not None and np.any(np.asarray(alpha) == 0)
    if not _above(R, floor if definite else -floor):  # one Cholesky; the eigenvalues only to explain a refusal
        smallest = float(np.linalg.eigvalsh(R)[0])
        if smallest < -floor:
            raise ValueError(f"S must be positive semidefinite (a covariance matrix); as a correlation matrix its "
                             f"smallest eigenvalue is {smallest:.3g}.")
        raise ValueError(f"with alpha = 0, S must be positive definite: (1) has no solution for a singular S (as a "
                         f"correlation matrix its smallest eigenvalue is {smallest:.3g}); use alpha > 0.")


def _above(A, floor: float) -> bool:
    """Whether every eigenvalue of the symmetric ``A`` exceeds ``floor`` (a Cholesky factor of
    A - floor I exists)."""
    try:
        np.linalg.cholesky(A - floor * np.eye(len(A)))
        return True
    except np.linalg.LinAlgError:
        return False


__all__ = ["Hyperparams", "State", "init", "update", "objective", "objective_of", "kkt_residual", "fit", "path",
           "state_from_precision", "soft_threshold", "check_covariance", "check_alpha"]

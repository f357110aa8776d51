"""One column's lasso of the graphical lasso's block coordinate descent, equations (6)-(7)
of the column sweep in :mod:`bayeskit.covariance.glasso` (``_sweep_update``), by
feature-sign search (Lee, Battle, Raina & Ng, NIPS 2007), and the face systems its steps
solve:

    beta = argmin_b 1/2 b' W11 b - s12' b + sum_i L_ij |b_i|                                   (6)

with W11 = W without row and column j (here: all of W with beta_j held at 0), s12 = S's
column j without S_jj and L the penalty weights. At p = 10-100 XLA's cost per operation,
not arithmetic, sets the time of a step, so a step is written as few operations as it can
be, and its face's system is gathered into ``FACE_SIZES`` entries when the face fits.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve

from bayeskit.core.device import batch_axis_in_front

FACE_SIZES = (16, 32)  # the sizes a feature-sign step's face system is gathered into


def _solve_on(A, keep, rhs):
    """x with A_KK x_K = rhs_K on the entries ``keep`` (K) and x = rhs elsewhere: one Cholesky
    factor of A_KK padded with the identity (A symmetric)."""
    M = jnp.where(keep[:, None] & keep[None, :], A, 0.0) + jnp.diag((~keep).astype(A.dtype))
    return cho_solve((jax.lax.linalg.cholesky(M, symmetrize_input=False), True), rhs)


def _full_solve(W, face, rhs):
    """The solution of W_FF x_F = rhs_F on the face F, x = 0 off F where ``rhs`` is 0, at
    full size."""
    return _solve_on(W.T, face, rhs)  # W.T: W stays row-major for W @ b (LAPACK reads M column-major), not copied per step


def _compact_solve(k: int, W, face, rhs):
    """:func:`_full_solve` for a face of at most ``k`` entries, gathered into a k x k system
    (the padding repeats index 0 and adds 0 there)."""
    idx = jnp.nonzero(face, size=k, fill_value=0)[0]
    valid = jnp.arange(k) < jnp.sum(face)
    x = _solve_on(W[idx][:, idx], valid, jnp.where(valid, rhs[idx], 0.0))
    return jnp.zeros_like(rhs).at[idx].add(jnp.where(valid, x, 0.0))


@jax.custom_batching.custom_vmap
def face_solve(W, face, rhs):
    """The face's system of a feature-sign step, in the smallest of ``FACE_SIZES`` that holds
    the face (the face is usually a few entries, and a p x p factor cost most of a step at
    p = 61 and most of a sweep above), else at full size."""
    sizes = [k for k in FACE_SIZES if k < W.shape[-1]]
    if not sizes:
        return _full_solve(W, face, rhs)
    n = jnp.sum(face)
    branches = [partial(_compact_solve, k) for k in sizes] + [_full_solve]
    return jax.lax.switch(sum((n > k).astype(jnp.int32) for k in sizes), branches, W, face, rhs)


@face_solve.def_vmap
def _face_solve_batched(axis_size, in_batched, W, face, rhs):
    """Under ``vmap`` a switch would run every branch for every problem: the full size only."""
    return jax.vmap(_full_solve)(*batch_axis_in_front(axis_size, in_batched, (W, face, rhs))), True


def column_lasso(W, s, lam, beta, j, tol, max_steps: int):
    """Column j's lasso (6), from ``beta`` (with beta_j = 0), by feature-sign search: solve
    the quadratic on the current face (the nonzero coefficients and their signs; once the
    face is optimal, with the violators of (7) added at the sign that lowers the
    objective), then keep the best of the face's optimum and the points on the way where
    a coefficient crosses zero. Violators enter together (those within half of the
    worst) until such a step fails to lower the objective, then one at a time as in Lee et
    al. The objective falls at every step (up to rounding); it stops when (7) holds to
    ``tol``. Returns beta and the gradient g = W beta - s of (7) (whose entry j is not part
    of (7)).

    At p = 10-100 XLA's cost per operation, not arithmetic, sets the time, so a step is a
    handful of operations around one Cholesky factor: with sigma the signs on the face F,
    the curvature d'Wd of a step d comes from the face's equations, (W target)_F =
    s_F - lam_F sigma_F; the objective at every candidate point is one product; the sums and
    the maxima each step needs are one reduction each; and the gradient and conditions (7)
    at the new point are carried to the next step."""
    p = W.shape[-1]
    index = jnp.arange(p)
    others = index != j

    def conditions(b, previous):
        """g = W b - s, the violations of (7) off the face, and the largest change from
        ``previous``, violation of (7) on the face and violation off it."""
        g = W @ b - s
        on = b != 0
        violation = jnp.where(on | ~others, -jnp.inf, jnp.abs(g) - lam)
        largest = jnp.max(jnp.stack([jnp.abs(b - previous), jnp.where(on, jnp.abs(g + lam * jnp.sign(b)), 0.0), violation]),
                          axis=1)
        return g, violation, largest

    def step(carry):
        b, g, face_ok, violation, worst, k, _, batch = carry
        on = b != 0
        entering = jnp.where(batch, violation >= 0.5 * worst, violation == worst) & (violation > tol)
        new = face_ok & entering
        face = on | new
        sigma = jnp.where(new, -jnp.sign(g), jnp.sign(b))
        rhs = jnp.where(face, s - lam * sigma, 0.0)
        target = face_solve(W, face, rhs)
        d = target - b
        crossing = on & (b * target < 0)
        # (W d)_F = (W target)_F - (W b)_F and d = 0 off F
        dg, dWd, sb, st = jnp.sum(jnp.stack([d * g, d * (rhs - jnp.where(face, g + s, 0.0)), s * b, s * target]), axis=1)
        t = jnp.concatenate([jnp.where(crossing, b / (b - target), 1.0), jnp.array([1.0, 0.0], W.dtype)])
        value = t * dg + 0.5 * t**2 * dWd + jnp.abs(b + t[:, None] * d) @ lam  # the last: t = 0, the start
        start = value[-1]
        value = jnp.where(jnp.append(crossing, jnp.array([True, False])) & jnp.isfinite(value), value, jnp.inf)
        best = jnp.argmin(value)
        slack = 10 * jnp.finfo(W.dtype).eps * (start + jnp.abs(sb) + jnp.abs(st))  # near the optimum
        moved = jnp.where(index == best, 0.0, b + t[best] * d)  # the coefficient that crossed is exactly 0
        g_moved, violation_moved, (change, face_error, worst_moved) = conditions(moved, b)
        better = (value[best] <= start + slack) & (change > 0)
        retry = ~better & batch & (jnp.sum(new) > 1)  # a failed group step: add one at a time from here
        kept = (b, g, face_ok, violation, worst)
        b, g, face_ok, violation, worst = jax.tree.map(lambda m, o: jnp.where(better, m, o), (
            moved, g_moved, face_error <= tol, violation_moved, worst_moved), kept)
        return b, g, face_ok, violation, worst, k + 1, better | retry, batch & ~retry

    def cond(carry):
        _, _, face_ok, _, worst, k, going, _ = carry
        return going & (k < max_steps) & ~(face_ok & (worst <= tol))

    g, violation, (_, face_error, worst) = conditions(beta, beta)
    carry = (beta, g, face_error <= tol, violation, worst, jnp.asarray(0), jnp.asarray(True), jnp.asarray(True))
    b, g, *_ = jax.lax.while_loop(cond, step, carry)
    return b, g


__all__ = ["FACE_SIZES", "face_solve", "column_lasso"]

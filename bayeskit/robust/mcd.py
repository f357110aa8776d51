"""The Minimum Covariance Determinant (MCD) estimator by FAST-MCD (Rousseeuw & Van Driessen,
Technometrics 41, 1999), with the exact univariate MCD and the consistency factors of Croux
& Haesbroeck (J. Multivariate Anal. 71, 1999).

Notation. X (n, p) holds the data; h, with (n + p + 1)/2 <= h <= n, the size of the subset
whose covariance determinant is minimised. For a subset H, T_H and S_H are its mean and
covariance (divisor |H|), and d_i^2(T, S) = (x_i - T)' S^-1 (x_i - T).

C-step (the paper's Theorem 1): with H_new the h points of smallest d^2(T_H, S_H),

    det S_{H_new} <= det S_H.                                                                 (1)

FAST-MCD: ``n_starts`` elemental starts, each a random (p + 1)-subset J extended by further
random points while S_J is singular, whose h closest points start two C-steps; the
``n_best`` subsets of smallest determinant are C-stepped until the determinant no longer
falls; the best is the raw MCD subset H. For n > 600 the starts run in the paper's nested
subsets: up to five disjoint subsets of about 300 of at most 1500 random points, two C-steps
there, the ten best per subset two more C-steps on the 1500 points, and the ``n_best`` best
C-stepped on all the data.

The starts' C-steps are many (three per start) on subsets that only compete for the
``n_best`` places, so for p <= 16 they take a quick form: the data centred at their
coordinatewise median, each subset's moments from one product with the rows' x x'
(E[x x'] - T T') and its distances likewise (x'P x - 2 x'P T + T'P T, P = S^-1), and the
distances ranked in single precision. The ``n_best`` subsets'
moments are then recomputed exactly, and every later C-step ranks exactly, so (1) holds for
the refinement and the result is the exact criterion of the subset found.

The raw and the reweighted estimates (consistent at the normal):

    T_raw = T_H,  S_raw = c(h/n) S_H,   c(a) = a / F_{chi2_{p+2}}(chi2_{p,a}),                 (2)
    w_i = [d_i^2(T_raw, S_raw) <= chi2_{p,0.975}],  T = mean of the w_i = 1 points,
    S = c(0.975) times their covariance,                                                       (3)

chi2_{p,a} the a-quantile of chi-square with p degrees of freedom (the factors of
scikit-learn's ``MinCovDet``).

Conventions. ``conventions="bayeskit"`` is (2)-(3) as written. ``conventions="robustbase"``
follows R's ``robustbase::covMcd`` so that the two can be compared number for number:

    h = h(alpha; n, p) = floor(2 n_2 - n + 2 (n - n_2) alpha),  n_2 = floor((n + p + 1) / 2),
    S_raw = c(h/n) f_raw(p, n, alpha) S_H h / (h - 1),
    w_i = [d_i^2(T_raw, S_raw) < chi2_{p,0.975}],  m = sum_i w_i,
    S = c(m/n) f_rew(p, n, alpha) (covariance of the w_i = 1 points) m / (m - 1),            (4)

f_raw, f_rew the small-sample correction factors of Pison, Van Aelst & Willems (Metrika 55,
2002), interpolated in alpha between their fits at alpha = 0.5 and 0.875 (f_rew is 1 when
m = n). At alpha = 0.5 with p <= 9 and n below about 60, robustbase replaces f_raw and
f_rew by simulated values from a table; (4) keeps the fitted formula there. The subset H,
and with it log det S_H (divisor h), is the same under both conventions; robustbase's
``crit`` is log det S_H + p log(h / (h - 1)).

Exact fit: if S_H is singular, at least h points lie on the hyperplane a'(x - T_H) = 0, a
the eigenvector of S_H's smallest eigenvalue: the fit reports ``exact_fit`` with a, and the
raw estimates are those of H (no reweighting: the distances are undefined).

Exchanges. A C-step's fixed point can still be improved by exchanging one point i of H for
one point j outside it. With d = x - T_H and g_ab = d_a' S_H^-1 d_b / h,

    h S_H' = h S_H - d_i d_i' + d_j d_j' - (d_j - d_i)(d_j - d_i)' / h,
    det S_H' / det S_H = det(I_2 + C G),  C = [[-1 - 1/h, 1/h], [1/h, 1 - 1/h]],
    G = [[g_ii, g_ij], [g_ij, g_jj]],                                                         (6)

which expands (u = 1/h) to (1 - (1 + u) g_ii)(1 + (1 - u) g_jj) - u^2 g_ii g_jj + g_ij (g_ij + 2u).

For n <= 600 the refinement runs C-steps to a fixed point, then the best exchange, and
again C-steps after each exchange that lowers the determinant, until neither does
(Hawkins's feasible solution algorithm combined with C-steps): the ten
candidates then end at subsets no single exchange improves, which on rugged data (R's milk
data, alpha = 0.5) reaches lower determinants than C-steps alone from thousands of starts.

For p = 1 the MCD subset is h consecutive order statistics, found exactly by the window of
smallest variance among the n - h + 1 windows (``univariate_mcd``).

h and the factors of (2) and (4) are computed in :mod:`bayeskit.robust.mcd_factors`, the
random elemental starts drawn by :mod:`bayeskit.robust.floyd`; this module re-exports
their public names.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float
from scipy import stats

from bayeskit.core.device import call_arg
from bayeskit.core.scaling import median, unit_scale
from bayeskit.core.special import chi2_quantile
from bayeskit.core.status import FitResult, all_finite, solved
from bayeskit.core.validation import check_int_in, check_matrix, is_concrete
from bayeskit.robust.floyd import floyd_draws, floyd_subset, start_draws
from bayeskit.robust.mcd_factors import consistency_factor, default_h, h_alpha_n, h_from_alpha, robustbase_factors, small_sample_factor

REWEIGHT_QUANTILE = 0.975
CONVENTIONS = ("bayeskit", "robustbase")
SINGULAR = 1e-6  # S is singular when a Cholesky pivot is below this times the largest standard deviation
NESTED_ABOVE, MERGED_SIZE, SUBSET_SIZE, MAX_SUBSETS = 600, 1500, 300, 5  # the paper's nested scheme
EXCHANGES_UP_TO = 600  # exchanges (6) cost O(n^2) per step
QUICK_MAX_P = 16  # the starts' quick C-steps (see c_step) up to this p
SWEEP_MAX_P = 8  # up to this p the quick form inverts S by sweeps (see _swept_inverse)


class MCD(eqx.Module):
    """An MCD fit. ``location``/``covariance``: the reweighted estimates (3); ``raw_location``/
    ``raw_covariance``: (2); ``support``: the points with weight 1 in (3); ``raw_support``:
    the subset H; ``distances``: d^2 under (3) (under (2) in an exact fit); ``log_det``:
    log det S_H; ``exact_fit``: whether S_H is singular; ``hyperplane``: its normal a, or 0;
    ``n_on_hyperplane``: the points within rounding of that hyperplane."""

    location: Float[Array, " p"]
    covariance: Float[Array, "p p"]
    raw_location: Float[Array, " p"]
    raw_covariance: Float[Array, "p p"]
    support: Bool[Array, " n"]
    raw_support: Bool[Array, " n"]
    distances: Float[Array, " n"]
    log_det: Float[Array, ""]
    exact_fit: Bool[Array, ""]
    hyperplane: Float[Array, " p"]
    n_on_hyperplane: Array


def weighted_moments(X: Float[Array, "n p"], w: Float[Array, " n"]) -> tuple[Array, Array]:
    """Mean and covariance (divisor sum w) of the points weighted by ``w``."""
    total = jnp.sum(w)
    T = w @ X / total
    Z = X - T
    return T, (Z * w[:, None]).T @ Z / total


def _inverse_factor(S):
    """(log det S, L^-1, whether S is regular) for S = L L': L^-1 from one p x p triangular
    solve (cheaper for many small S than solving for the n points); log det S is -inf
    when S is singular."""
    L = jnp.linalg.cholesky(S)
    d = jnp.diagonal(L)
    ok = jnp.all(jnp.isfinite(d) & (d > SINGULAR * jnp.sqrt(jnp.max(jnp.diagonal(S)))))
    L_inv = jax.scipy.linalg.solve_triangular(L, jnp.eye(S.shape[0], dtype=S.dtype), lower=True)
    return jnp.where(ok, 2 * jnp.sum(jnp.log(jnp.where(ok, d, 1.0))), -jnp.inf), L_inv, ok


def _swept_inverse(S):
    """(log det S, S^-1, whether S is regular) by sweeping S on each pivot in turn (Goodnight,
    Am. Stat. 33, 1979): on pivot k with d = A_kk, A_ij <- A_ij - A_ik A_kj / d off row and
    column k, A_kj <- A_kj / d, A_kk <- -1 / d; after all p pivots A = -S^-1. The pivots are
    the squared diagonal of S's Cholesky factor, so S is regular under the test of
    :func:`_inverse_factor`. Elementwise on p x p, without a LAPACK call per matrix: under
    ``vmap`` over many subsets several times faster than the factor for p <= SWEEP_MAX_P."""
    p = S.shape[0]
    floor = SINGULAR**2 * jnp.max(jnp.diagonal(S))
    pivot = jnp.arange(p)

    def sweep(k, carry):
        A, log_det, ok = carry
        d = A[k, k]
        ok = ok & (d > floor)
        d = jnp.where(ok, d, 1.0)
        swept = jnp.where(pivot == k, -1.0, A[k]) / d  # row and column k after the sweep
        A = A - jnp.outer(A[k], A[k]) / d
        A = jnp.where(pivot[:, None] == k, swept[None, :], jnp.where(pivot[None, :] == k, swept[:, None], A))
        return A, log_det + jnp.log(d), ok

    A, log_det, ok = jax.lax.fori_loop(0, p, sweep, (S, jnp.zeros((), S.dtype), jnp.isfinite(floor)))
    return jnp.where(ok, log_det, -jnp.inf), -A, ok


def _logdet_and_distances(X, T, S):
    """log det S (-inf when S is singular) and d^2(T, S) = |L^-1 (x - T)|^2 for every row
    of X (inf when S is singular)."""
    log_det, L_inv, ok = _inverse_factor(S)
    d2 = jnp.sum(((X - T) @ L_inv.T) ** 2, 1)
    return log_det, jnp.where(ok, d2, jnp.inf)


def closest(d2: Float[Array, " n"], h) -> Bool[Array, " n"]:
    """The indicator of the h smallest of the non-negative ``d2`` (ties by index). The h-th
    smallest value is found by bisection on the floats' bit patterns (which order
    non-negative floats as their values), one comparison of all n values per bit: on the
    CPU several times faster than a sort or ``top_k``."""
    int_type = jnp.int64 if d2.dtype == jnp.float64 else jnp.int32
    bits = jax.lax.bitcast_convert_type(d2, int_type)

    def halve(_, bounds):  # the smallest t with #{bits <= t} >= h lies in [low, high]
        low, high = bounds
        mid = low + (high - low) // 2
        enough = jnp.sum(bits <= mid) >= h
        return jnp.where(enough, low, mid + 1), jnp.where(enough, mid, high)

    _, t = jax.lax.fori_loop(0, 8 * d2.dtype.itemsize, halve, (jnp.zeros((), int_type), jnp.max(bits)))
    below, tied = bits < t, bits == t
    return below | (tied & (jnp.cumsum(tied) <= h - jnp.sum(below)))


class Subset(eqx.Module):
    """A C-step state: the subset ``H`` (indicator), its mean ``T``, covariance ``S``,
    ``log_det`` = log det S (-inf when singular) and every point's ``d2`` under (T, S)
    (inf when singular)."""

    H: Bool[Array, " n"]
    T: Float[Array, " p"]
    S: Float[Array, "p p"]
    log_det: Float[Array, ""]
    d2: Float[Array, " n"]


def subset(X, H, outer=None) -> Subset:
    """The :class:`Subset` of the points ``H``. With ``outer`` (the rows' x x', n x p^2, of
    centred X) the moments come from one product each, E[x x'] - T T', and the distances
    from two, x'P x - 2 x'P T + T'P T with P = S^-1 (the starts' quick form: many subsets,
    and rounding that grows far from the data's centre and with the condition number of S,
    which only ranks the starts: their best are recomputed exactly)."""
    if outer is None:
        T, S = weighted_moments(X, H.astype(X.dtype))
        return Subset(H, T, S, *_logdet_and_distances(X, T, S))
    w = H.astype(X.dtype) / jnp.sum(H)
    T = w @ X
    S = (w @ outer).reshape(T.shape[0], -1) - jnp.outer(T, T)
    # d^2 = x' P x - 2 x' P T + T' P T with P = S^-1: products with the rows' x x' and x,
    # which many subsets at once take as two matrix products
    if T.shape[0] <= SWEEP_MAX_P:
        log_det, P, ok = _swept_inverse(S)
    else:
        log_det, L_inv, ok = _inverse_factor(S)
        P = L_inv.T @ L_inv
    PT = P @ T
    d2 = jnp.maximum(outer @ P.reshape(-1) - 2 * (X @ PT) + T @ PT, 0.0)
    return Subset(H, T, S, log_det, jnp.where(ok, d2, jnp.inf))


def c_step(X, state: Subset, h: int, outer=None) -> Subset:
    """One C-step (1): the h points closest to the current (T, S). A singular S (an exact
    fit) is kept as it is. With ``outer``, the starts' quick form: :func:`subset`'s, and the
    distances ranked in single precision (half the bisection steps of :func:`closest`)."""
    d2 = state.d2 if outer is None else state.d2.astype(jnp.float32)
    new = subset(X, closest(d2, h), outer)
    return jax.tree.map(lambda a, b: jnp.where(jnp.isfinite(state.log_det), a, b), new, state)


def elemental_start(key, X, h: int | None, outer=None) -> Subset:
    """A random (p + 1)-subset, extended by one random point outside it at a time while its
    covariance is singular, then its h closest points (that subset itself when ``h`` is
    None; ``outer``: :func:`c_step`'s quick form)."""
    n, p = X.shape
    return _elemental_start(X, *start_draws(key, n, min(p + 1, n)), h, outer)


def _elemental_start(X, draws, order, h, outer) -> Subset:
    """:func:`elemental_start` from its random numbers (:func:`start_draws`): Floyd's
    ``draws`` and ``order``, whose smallest value outside the subset names the point a
    singular subset takes next."""
    n = X.shape[0]
    taken = jnp.asarray(jnp.iinfo(order.dtype).max, order.dtype)  # above every order >> 1

    def grow(carry):
        m, s = carry
        return m + 1, subset(X, s.H.at[jnp.argmin(jnp.where(s.H, taken, order >> 1))].set(True), outer)

    def singular(carry):
        m, s = carry
        return ~jnp.isfinite(s.log_det) & (m < n)

    start = subset(X, floyd_subset(draws, n), outer)
    _, start = jax.lax.while_loop(singular, grow, (jnp.asarray(draws.shape[0]), start))
    return start if h is None else c_step(X, start, h, outer)


def swap_ratios(X, state: Subset, h) -> Array:
    """det S_H' / det S_H for every exchange (6) of a point i of H for a point j outside it
    (n x n; 1 where i is not in H or j is), from the Cholesky factor of S_H alone."""
    L = jnp.linalg.cholesky(state.S)
    Z = jax.scipy.linalg.solve_triangular(L, (X - state.T).T, lower=True)
    G = Z.T @ Z / h
    g, u = jnp.diagonal(G), 1.0 / h
    ratio = jnp.outer(1 - (1 + u) * g, 1 + (1 - u) * g) - u**2 * jnp.outer(g, g) + G * (G + 2 * u)
    return jnp.where(state.H[:, None] & ~state.H[None, :], ratio, 1.0)


def best_swap(X, state: Subset, h) -> Subset:
    """The exchange (6) that lowers det S_H most (Hawkins's feasible solution algorithm,
    Comput. Stat. Data Anal. 17, 1994), or ``state`` when none lowers it by more than rounding."""
    ratios = swap_ratios(X, state, h)
    i = jnp.argmin(jnp.min(ratios, 1))  # the first smallest in row-major order, by rows (one n x n argmin is slow)
    j = jnp.argmin(ratios[i])
    new = subset(X, state.H.at[i].set(False).at[j].set(True))
    better = (ratios[i, j] < 1 - 1e3 * jnp.finfo(X.dtype).eps) & jnp.isfinite(state.log_det)
    return jax.tree.map(lambda a, b: jnp.where(better, a, b), new, state)


def refine(X, state: Subset, h: int, max_steps: int, swaps: bool = False) -> Subset:
    """C-steps until the determinant no longer falls (or ``max_steps`` steps in all); with
    ``swaps``, then the best exchange (6), and again C-steps after every exchange that
    lowers it, until neither does: a subset that no single exchange improves (O(n^2) per
    exchange, so exchanges only where C-steps are stuck)."""

    def running(carry):
        k, s, fell = carry
        return fell & (k < max_steps) & jnp.isfinite(s.log_det)

    def c_steps(k, s):
        def body(carry):
            k, s, _ = carry
            new = c_step(X, s, h)
            return k + 1, new, new.log_det < s.log_det

        return jax.lax.while_loop(running, body, (k, s, jnp.asarray(True)))[:2]

    if not swaps:
        return c_steps(jnp.asarray(0), state)[1]

    def exchange(carry):  # the first pass skips its exchange: the C-step loop is traced once
        k, s, _ = carry
        new = best_swap(X, s, h)
        new = jax.tree.map(lambda a, b: jnp.where(k > 0, a, b), new, s)
        fell = (new.log_det < s.log_det) | (k == 0)
        k, new = c_steps(k + 1, new)
        return k, new, fell

    return jax.lax.while_loop(running, exchange, (jnp.asarray(0), state, jnp.asarray(True)))[1]


def univariate_mcd(x: Float[Array, " n"], h) -> tuple[Array, Array, Array]:
    """The exact univariate MCD (5): the mean and variance (divisor h) of the window of h
    consecutive order statistics of smallest variance, and that window's indicator. The
    window sums are taken about the median, and a window of equal values has variance 0.
    ``h`` may be traced: the n - h + 1 windows are the first of n, the rest masked."""
    n = x.shape[0]
    s, order = jax.lax.sort_key_val(x, jnp.arange(n))  # a caller without the window sorts values alone
    z = s - s[(n - 1) // 2]
    c1 = jnp.concatenate([jnp.zeros(1, x.dtype), jnp.cumsum(z)])
    c2 = jnp.concatenate([jnp.zeros(1, x.dtype), jnp.cumsum(z**2)])
    start = jnp.arange(n)
    valid = start <= n - h
    end = jnp.where(valid, start + h, n)
    sums, squares = c1[end] - c1[start], c2[end] - c2[start]
    variance = jnp.maximum(squares / h - (sums / h) ** 2, 0.0)
    variance = jnp.where(s[end - 1] == s[start], 0.0, variance)
    j = jnp.argmin(jnp.where(valid, variance, jnp.inf))
    location = sums[j] / h + s[(n - 1) // 2]
    window = jnp.zeros(n, bool).at[order].set((start >= j) & (start < j + h))
    return location, variance[j], window


def _best(states: Subset, count: int) -> Subset:
    """The ``count`` states of smallest determinant."""
    _, idx = jax.lax.top_k(-states.log_det, min(count, states.log_det.shape[0]))
    return jax.tree.map(lambda a: a[idx], states)


def moved_to(X, state: Subset, h: int, outer=None) -> Subset:
    """A C-step into the data ``X`` (another set of points than the one ``state`` came from):
    the h points of X closest to its (T, S) (``outer``: :func:`c_step`'s quick form)."""
    d2 = _logdet_and_distances(X, state.T, state.S)[1]
    return subset(X, closest(d2 if outer is None else d2.astype(jnp.float32), h), outer)


def quick_form(X) -> Array | None:
    """:func:`c_step`'s ``outer`` for the starts in X: the rows' x x', flattened (n x p^2),
    for p <= QUICK_MAX_P; None (the exact form) above, where those products grow large."""
    if X.shape[1] > QUICK_MAX_P:
        return None
    return (X[:, :, None] * X[:, None, :]).reshape(X.shape[0], -1)


def _c_steps(X, h: int, count: int):
    """``count`` C-steps, in the quick form where it applies; a loop, so that the C-step is
    traced and compiled once."""
    outer = quick_form(X)
    return lambda state: jax.lax.fori_loop(0, count, lambda _, s: c_step(X, s, h, outer), state)


def _best_starts(key, X, h, count: int, n_best: int) -> Subset:
    """The ``n_best`` best of ``count`` elemental starts in X, each its h closest points and
    two C-steps (:func:`c_step`'s quick form where it applies)."""
    n, p = X.shape
    outer = quick_form(X)
    start = lambda draws, order: _c_steps(X, h, 3)(_elemental_start(X, draws, order, None, outer))
    return _best(jax.vmap(start)(*start_draws(key, n, min(p + 1, n), (count,))), n_best)


def _candidates(key, X, h: int, n_starts: int, n_best: int) -> Bool[Array, "n_best n"]:
    """The subsets ``H`` of the ``n_best`` best of ``n_starts`` elemental starts after two
    C-steps (in :func:`c_step`'s quick form for p <= QUICK_MAX_P, with X centred at its
    coordinatewise median; the candidates' moments are then recomputed exactly); for n >
    600 the paper's nested scheme: the starts run in up to five disjoint subsets of about
    300 of at most 1500 random points, 10 best per subset are moved to those 1500 points
    for two more C-steps, and the ``n_best`` best are moved to all the data."""
    n = X.shape[0]
    X = X - median(X, 0)
    if n <= NESTED_ABOVE:
        return _best_starts(key, X, h, n_starts, n_best).H
    k_start, k_split = jax.random.split(key)
    n_merged = min(n, MERGED_SIZE)
    n_sub = max(1, min(MAX_SUBSETS, n_merged // SUBSET_SIZE))
    size = n_merged // n_sub
    merged = X[jax.random.permutation(k_split, n)[:n_merged]]
    parts = merged[: n_sub * size].reshape(n_sub, size, -1)
    h_part, h_merged = -(-size * h // n), -(-n_merged * h // n)
    in_part = lambda key, part: _best_starts(key, part, h_part, max(1, n_starts // n_sub), n_best)
    found = jax.vmap(in_part)(jax.random.split(k_start, n_sub), parts)
    found = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), found)
    outer = quick_form(merged)
    pooled = jax.vmap(lambda s: _c_steps(merged, h_merged, 2)(moved_to(merged, s, h_merged, outer)))(found)
    return jax.vmap(lambda s: closest(_logdet_and_distances(X, s.T, s.S)[1], h))(_best(pooled, n_best))


def _raw_subset(key, X, h, n_starts: int, n_best: int, max_steps: int, initial) -> Subset:
    """The best subset of h points (h may be traced; h = n ends at all points)."""
    n, p = X.shape
    if p == 1:
        return subset(X, univariate_mcd(X[:, 0], h)[2])
    H = _candidates(key, X, h, n_starts, n_best)
    if initial is not None:
        H = jnp.concatenate([H, initial[None]])
    # exact moments from here on; one candidate at a time, each refined until it stops (under
    # vmap every candidate would step until the last stops, and the loops compile batched):
    # chosen on the CPU, where the candidates' small products gain little from a batch
    refined = jax.lax.map(lambda H: refine(X, subset(X, H), h, max_steps, swaps=n <= EXCHANGES_UP_TO), H)
    return jax.tree.map(lambda a: a[jnp.argmin(refined.log_det)], refined)


def fit(key, X: Float[Array, "n p"], h: int | None = None, *, n_starts: int = 500, n_best: int = 10,
        max_steps: int = 100, initial: Bool[Array, " n"] | None = None, conventions: str = "bayeskit",
        alpha: float | None = None) -> FitResult:
    """FAST-MCD (2)-(3) of the rows of ``X`` with subsets of ``h`` points (default
    (n + p + 1) // 2), from ``n_starts`` random elemental starts drawn from ``key``, and
    from the subset ``initial`` (h points) when given. Jittable with ``n_starts``,
    ``n_best``, ``max_steps``, ``conventions`` and ``alpha`` static; vmappable over keys,
    stacked data sets and (under ``conventions="bayeskit"``) h.

    ``conventions="robustbase"`` gives covMcd's estimates (4) for its ``alpha`` (default 0.5),
    which sets h; h and alpha are not both given.

    ``h`` enters as a traced value: a new h (a new support fraction) compiles nothing, and
    a traced h (inside the caller's ``jit`` or ``vmap``) is the caller's to keep within
    [(n + p + 1) // 2, n].
    Returns a :class:`~bayeskit.core.status.FitResult` whose state is the :class:`MCD`
    and whose objective is the criterion log det S_H of the best subset (-inf in an exact
    fit, which is a valid outcome: the status is nonfinite only when the estimates are)."""
    if is_concrete(X):
        X = check_matrix(X, min_rows=2)
    n, p = np.shape(X)
    if n <= p:
        raise ValueError(f"the MCD needs more samples than variables; X is {n} x {p}, and every covariance of p "
                         f"variables from at most n points is singular. For n <= p use ROBPCA.")
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {CONVENTIONS}, got {conventions!r}.")
    if alpha is not None and h is not None:
        raise ValueError("give h or alpha, not both.")
    if alpha is not None and not 0.5 <= alpha <= 1:
        raise ValueError(f"alpha must be in [0.5, 1], got {alpha!r}.")
    if conventions == "robustbase":
        if h is None:
            alpha = 0.5 if alpha is None else alpha
            h = h_alpha_n(alpha, n, p)
        elif not is_concrete(h):
            raise ValueError('conventions="robustbase" computes its small-sample factors from h on the host: give a '
                             "concrete h (or alpha), not a traced one.")
        else:  # the alpha whose small-sample factors apply to this h
            alpha = h / n
        factors = robustbase_factors(p, n, alpha)
    else:
        h = h_from_alpha(alpha, n, p) if alpha is not None else default_h(n, p) if h is None else h
        factors = (1.0, 1.0)
    if is_concrete(h):  # n and p are static: checked inside jit too
        check_int_in("h", h, default_h(n, p), n)
    check_int_in("n_starts", n_starts, 1)
    X = call_arg(X)
    if is_concrete(X):
        scale = unit_scale(np.asarray(X))[1]
        if scale * scale < np.finfo(X.dtype).tiny:  # the covariance, s^2 times that of X / s, would be 0
            raise ValueError(f"the covariance of data at scale {scale:.3g} would be at {scale:.3g}^2, below what {X.dtype} "
                             "holds; multiply the data by a constant nearer their scale (the estimates scale with it), "
                             "or fit in float64 (jax_enable_x64).")
    return fit_core(key, X, call_arg(h, jnp.int32), call_arg(factors, X.dtype), n_starts, n_best, max_steps,
                    conventions, initial)


@partial(jax.jit, static_argnums=(4, 5, 6, 7))
def fit_core(key, X, h, factors, n_starts, n_best, max_steps, conventions, initial) -> FitResult:
    """:func:`fit` without its checks, for use inside other jitted code: ``h`` (int32) and
    ``factors`` = (f_raw, f_rew) of (4) as traced values (1, 1 under ``"bayeskit"``)."""
    X, s = unit_scale(X)  # affine equivariance: fit X / s, then put s back
    estimate = in_units(_fit_unit(key, X, h, factors, n_starts, n_best, max_steps, conventions, initial), s)
    return solved(estimate, estimate.log_det, all_finite(estimate.location, estimate.covariance))


def in_units(m: MCD, s) -> MCD:
    """The MCD of s X from the MCD ``m`` of X (affine equivariance): locations times s,
    covariances times s^2, log det plus 2 p log s; subsets, distances and the hyperplane's
    normal unchanged. ``s`` a Python float (host, NumPy fields) or a scalar array."""
    p = m.location.shape[-1]
    log = np.log if isinstance(s, float) else jnp.log
    return eqx.tree_at(lambda t: (t.location, t.covariance, t.raw_location, t.raw_covariance, t.log_det), m,
                       (m.location * s, m.covariance * s * s, m.raw_location * s, m.raw_covariance * s * s,
                        m.log_det + 2 * p * log(s)))


def _fit_unit(key, X, h, factors, n_starts, n_best, max_steps, conventions, initial) -> MCD:
    n, p = X.shape
    raw = _raw_subset(key, X, h, n_starts, n_best, max_steps, initial)
    exact = ~jnp.isfinite(raw.log_det)
    quantile = stats.chi2.ppf(REWEIGHT_QUANTILE, p)
    h = jnp.asarray(h, X.dtype)  # an int32 h divides in float32
    if conventions == "robustbase":  # (4)
        c = consistency_factor(p, h / n, X.dtype) * factors[0] * h / (h - 1)
        weights = (raw.d2 / c < quantile) & ~exact
        m = jnp.sum(weights, dtype=X.dtype)
        T, S = weighted_moments(X, jnp.where(exact, raw.H, weights).astype(X.dtype))
        S = S * jnp.where(m < n, consistency_factor(p, m / n, X.dtype) * factors[1], 1.0) * m / jnp.maximum(m - 1, 1)
    else:  # (2)-(3)
        c = consistency_factor(p, h / n, X.dtype)
        weights = (raw.d2 / c <= quantile) & ~exact
        T, S = weighted_moments(X, jnp.where(exact, raw.H, weights).astype(X.dtype))
        S = consistency_factor(p, REWEIGHT_QUANTILE, X.dtype) * S
    S_raw = c * raw.S
    S = jnp.where(exact, S_raw, S)
    T = jnp.where(exact, raw.T, T)
    _, d2 = _logdet_and_distances(X, T, S)
    eigenvalues, eigenvectors = jnp.linalg.eigh(raw.S)
    normal = jnp.where(exact, eigenvectors[:, 0], 0.0)
    offsets = jnp.abs((X - raw.T) @ normal)
    on_plane = jnp.sum(offsets <= SINGULAR * jnp.sqrt(eigenvalues[-1]))
    return MCD(T, S, raw.T, S_raw, jnp.where(exact, raw.H, weights), raw.H, jnp.where(exact, jnp.nan, d2),
               raw.log_det, exact, normal, jnp.where(exact, on_plane, 0))


__all__ = ["MCD", "Subset", "fit", "fit_core", "in_units", "c_step", "subset", "refine", "elemental_start", "start_draws", "floyd_draws",
           "floyd_subset", "quick_form", "univariate_mcd", "closest", "weighted_moments", "consistency_factor",
           "chi2_quantile", "default_h", "h_from_alpha", "h_alpha_n", "small_sample_factor", "robustbase_factors",
           "REWEIGHT_QUANTILE", "CONVENTIONS"]

"""ROBPCA: robust principal components by projection pursuit and the MCD (Hubert, Rousseeuw &
Vanden Branden, Technometrics 47, 2005), with its outlier diagnostics.

Notation. X (n, p) holds the data, k the number of components, k_max its upper bound,
alpha in [0.5, 1] the coverage, and

    h = max(floor(alpha n), floor((n + k_max + 1) / 2)).                                      (1)

Step 1 (affine span). With mu_0 the mean and X - 1 mu_0' = U D V' (thin SVD), the rows of
Z = U D (n, r), r = min(n - 1, p), hold the data in the span's coordinates.

Step 2 (projection pursuit). For directions v through pairs of points (all pairs when
there are at most ``n_directions``, otherwise that many random pairs),

    outl(z_i) = max_v |z_i'v - t_MCD(v)| / s_MCD(v),                                        (2)

t_MCD, s_MCD the univariate MCD location and scale of the projections z_j'v (h points). A
direction with s_MCD = 0 has h points on a hyperplane z'v = t_MCD(v): Z is projected onto
that hyperplane (one dimension fewer), (2) recomputed, and the steps below work with the
projected Z (the distances (3)-(4) are those of the original points). The h points of smallest
outlyingness, H_0, give a mean and covariance S_0; its eigenvalues l_j choose k when it is
not given (as rrcov's PcaHubert: up to the first l_j / l_1 <= 1e-3, at most k_max, and
fewer when k' components already explain 80% of sum_j l_j). The orthogonal distances to the
k-dimensional subspace of S_0's leading eigenvectors are cut at (4); the points within, H_1,
give a mean mu_2 and covariance S_1, and X* = (Z - 1 mu_2') V_1 (n, k), V_1 the leading k
eigenvectors of S_1.

Step 3 (MCD). The reweighted FAST-MCD of X* (:mod:`bayeskit.robust.mcd`, h points; besides its
random starts, a candidate from the h points closest to 0 under diag(l_1, ..., l_k) of S_1,
as in the authors' LIBRA code) gives a centre
m and a scatter with eigenvectors P (k, k) and eigenvalues l_1 >= ... >= l_k: the loadings
are V V_1 P (p, k), the centre mu = mu_0 + V (mu_2 + V_1 m), the scores T = (X - 1 mu') V V_1 P.
If S_0's subspace has fewer than k dimensions of spread, the MCD is an exact fit and the fit
reports it. When r <= min(floor(n / 5), k_max) (and ``use_mcd``), the data are
low-dimensional: Step 2 is skipped and the MCD runs on Z itself (the rule of the authors'
LIBRA code and rrcov).

Conventions. ``conventions="bayeskit"`` is the algorithm above. ``conventions="rrcov"``
follows rrcov's ``PcaHubert(x, k, kmax, alpha)`` (explicit alpha) where the two differ, so
that the results can be compared number for number:

- h = h(alpha; n, k) of :func:`bayeskit.robust.mcd.h_alpha_n` for a given k, and
  h(alpha; n, min(k_max, rank)) when k is chosen;
- the directions are rrcov's deterministic ones (a congruential generator started at 0
  draws the pairs), so the fit does not depend on the key when there are more pairs than
  ``n_directions`` (fewer: all pairs under both conventions);
- t_MCD and s_MCD in (2), and the cutoff of Step 2's orthogonal distances, are the
  reweighted univariate MCD (rrcov's ``unimcd``): with the raw window's mean t_0 and
  r_i = (y_i - t_0)^2, the points with r_i < r_(h) chi2_{1,0.975} / chi2_{1,h/n} give the
  mean and standard deviation (divisor m - 1);
- Step 2's reweighting (H_1) is skipped when k equals the rank;
- the MCD in Step 3 (and in the low-dimensional branch) takes robustbase's conventions
  (4) of :mod:`bayeskit.robust.mcd` with the same alpha, i.e. h(alpha; n, k);
- the OD cutoff (4) of the outlier map takes the median and MAD of OD^{2/3} instead of the
  univariate MCD;
- k is chosen up to and including the first l_j / l_1 <= 1e-3.

The MCD keeps the extra candidate above and its exchange steps: it reaches at least the
determinant robustbase's random starts reach. Exact-fit directions are projected out under
both conventions (rrcov ignores them).

Diagnostics. The score and orthogonal distances

    SD_i = sqrt(sum_j t_ij^2 / l_j),   cutoff sqrt(chi2_{k,0.975});                          (3)
    OD_i = |x_i - mu - P t_i|,         cutoff (m + s z_0.975)^{3/2},                            (4)

m, s the univariate MCD location and (consistent) scale of the OD_i^{2/3} (the Wilson-Hilferty
approximation), classify each point: regular, good leverage (SD only), orthogonal outlier
(OD only), bad leverage (both). When k equals the rank the OD are rounding errors: they are
set to 0 and never flag.

The outlyingness (2) and its directions are computed in :mod:`bayeskit.robust.outlyingness`;
this module re-exports the names its ``__all__`` lists.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int
from scipy import stats

from bayeskit.core import executables
from bayeskit.core.device import as_array, call_arg
from bayeskit.core.linalg import descending_eigh
from bayeskit.core.scaling import median, unit_scale
from bayeskit.core.status import FitResult, all_finite, solved
from bayeskit.core.validation import check_int_in, check_matrix, is_concrete
from bayeskit.robust import mcd
from bayeskit.robust.outlyingness import (
    ALL_PAIRS,
    default_directions,
    least_outlying,
    outlyingness,
    pairs,
    reweighted_univariate_mcd,
    rrcov_pairs,
)

LABELS = ("regular", "good_leverage", "orthogonal", "bad_leverage")
CRITERION = 0.975
EIGEN_RATIO = 1e-3
EXPLAINED = 0.8


class Diagnostics(eqx.Module):
    """The outlier map of a PCA fit: ``scores``, the distances (3)-(4), their cutoffs and the
    ``labels`` (indices into ``LABELS``)."""

    center: Float[Array, " p"]
    components: Float[Array, "p k"]
    scores: Float[Array, "n k"]
    score_distances: Float[Array, " n"]
    orthogonal_distances: Float[Array, " n"]
    sd_cutoff: Float[Array, ""]
    od_cutoff: Float[Array, ""]
    labels: Int[Array, " n"]


class Solution(Diagnostics):
    """A ROBPCA solution: the outlier map of :class:`Diagnostics` with the robust ``eigenvalues``
    (k,), the ``outlyingness`` (2) (zero in the low-dimensional branch), ``h``, ``rank``
    (numerical rank of the centred data), ``n_reductions`` (dimensions removed by exact-fit
    directions in Step 2) and ``exact_fit`` (the MCD in Step 3 was an exact fit)."""

    eigenvalues: Float[Array, " k"]
    outlyingness: Float[Array, " n"]
    h: Int[Array, ""]
    rank: Int[Array, ""]
    n_reductions: Int[Array, ""]
    exact_fit: Bool[Array, ""]


def coverage(n: int, alpha: float, k_max: int) -> int:
    """h of (1), at most n."""
    return min(max(int(np.floor(alpha * n)), (n + k_max + 1) // 2), n)


def affine_span(X: Float[Array, "n p"]) -> tuple[Array, Array, Array, Array]:
    """Step 1: mu_0, Z (n, r), V (p, r) and the numerical rank of X - 1 mu_0'."""
    n, p = X.shape
    r = min(n - 1, p)
    mu0 = jnp.mean(X, 0)
    U, d, Vt = jnp.linalg.svd(X - mu0, full_matrices=False)
    rank = jnp.sum(d > max(n, p) * jnp.finfo(X.dtype).eps * d[0])
    return mu0, U[:, :r] * d[:r], Vt[:r].T, rank


def choose_k(eigenvalues, k_max: int, rank: int, conventions: str = "bayeskit") -> int:
    """k from S_0's eigenvalues (the MCD scatter's in the low-dimensional branch) as rrcov's
    PcaHubert: stop before the first l_j / l_1 <= 1e-3 (at it under ``conventions="rrcov"``),
    at most min(rank, k_max), then the fewest components that explain 80% of sum_j l_j if
    those do."""
    ev = np.asarray(eigenvalues, dtype=float)
    small = np.nonzero(ev / ev[0] <= EIGEN_RATIO)[0]
    first_small = int(small[0]) + (conventions == "rrcov") if small.size else len(ev)
    k = min(rank, k_max, first_small)
    k = max(k, 1)
    cumulative = np.cumsum(ev[:k]) / ev[ev > 0].sum()
    if cumulative[-1] > EXPLAINED:
        k = int(np.argmax(cumulative >= EXPLAINED)) + 1
    return k


def _wilson_hilferty_cutoff(od, h: int, rule: str = "umcd"):
    """(4): (m + s z)^{3/2}, m and s from OD^{2/3}: its univariate MCD (``"umcd"``, with
    the consistency factor), rrcov's reweighted one (``"unimcd"``) or the median and the
    normal-consistent MAD (``"medmad"``)."""
    y = od ** (2.0 / 3.0)
    if rule == "medmad":
        m = median(y)
        s = stats.norm.ppf(0.75) ** -1 * median(jnp.abs(y - m))
    elif rule == "unimcd":
        m, s = reweighted_univariate_mcd(y, h)
    else:
        m, var, _ = mcd.univariate_mcd(y, h)
        s = jnp.sqrt(mcd.consistency_factor(1, jnp.asarray(h, od.dtype) / od.shape[0], od.dtype) * var)
    return (m + s * stats.norm.ppf(CRITERION)) ** 1.5


def _orthogonal_distances(Z, center, basis):
    """|z_i - c - B B'(z_i - c)| for an orthonormal basis B."""
    R = Z - center
    return jnp.linalg.norm(R - (R @ basis) @ basis.T, axis=1)


def low_dimensional(n: int, p: int, k_max: int) -> bool:
    """Whether Step 2 is skipped: r <= min(floor(n / 5), k_max)."""
    return min(n - 1, p) <= min(n // 5, k_max)


CONVENTIONS = ("bayeskit", "rrcov")


def _plan(n: int, p: int, alpha: float, k_max: int, k_for_h: int, k: int, use_mcd: bool, conventions: str):
    """(h, the MCD's h, the MCD's small-sample factors): ROBPCA's coverage from ``k_for_h`` (rrcov:
    h(alpha; n, k_for_h)) and that of the MCD of Step 3 (k dimensions) or of the
    low-dimensional branch (r = min(n - 1, p) dimensions)."""
    if conventions not in CONVENTIONS:
        raise ValueError(f"conventions must be one of {CONVENTIONS}, got {conventions!r}.")
    if conventions == "bayeskit":
        h = coverage(n, alpha, k_max)
        return h, h, (1.0, 1.0)
    low = use_mcd and low_dimensional(n, p, k_max)
    d = min(n - 1, p) if low else k
    h_mcd = min(mcd.h_alpha_n(alpha, n, d), n)
    return (h_mcd if low else min(mcd.h_alpha_n(alpha, n, k_for_h), n)), h_mcd, mcd.robustbase_factors(d, n, alpha)


def _rank(X) -> int:
    """The numerical rank of the centred data (host)."""
    Xc = np.asarray(X, np.float64) - np.mean(X, 0)
    return int(np.linalg.matrix_rank(Xc)) if Xc.any() else 0


def provisional(key, X, alpha: float = 0.75, k_max: int = 10, n_directions: int = 250, n_starts: int = 500,
                use_mcd: bool = True, conventions: str = "bayeskit"):
    """The eigenvalues that choose k, from the same directions and starts as :func:`fit`
    with this key: S_0's (Step 2), or the MCD scatter's in the low-dimensional branch; and
    the numerical rank. ``alpha`` enters through traced values only, so a new alpha
    compiles nothing."""
    return _provisional_planned(key, X, alpha, k_max, n_directions, n_starts, use_mcd, conventions)[:2]


def _provisional_planned(key, X, alpha, k_max, n_directions, n_starts, use_mcd, conventions):
    """:func:`provisional`'s eigenvalues and rank, and the MCD of the low-dimensional branch
    (None outside it), which does not depend on k: the fit at the chosen k reuses it."""
    n, p = np.shape(X)
    k_for_h = min(k_max, _rank(X)) if conventions == "rrcov" else k_max
    h, h_mcd, factors = _plan(n, p, alpha, k_max, max(k_for_h, 1), 1, use_mcd, conventions)
    X = call_arg(X)
    return _provisional(key, X, call_arg(h, jnp.int32), call_arg(h_mcd, jnp.int32), call_arg(factors, X.dtype),
                        k_max, n_directions, n_starts, use_mcd, conventions)


@partial(executables.jit, static_argnums=(5, 6, 7, 8, 9))
def _provisional(key, X, h, h_mcd, factors, k_max, n_directions, n_starts, use_mcd, conventions):
    n, p = X.shape
    X, s = unit_scale(X)
    k_dir, k_mcd = jax.random.split(key)
    mu0, Z, V, rank = affine_span(X)
    if use_mcd and low_dimensional(n, p, k_max):
        fitted = _mcd(k_mcd, Z, h_mcd, factors, n_starts, conventions, None)
        S = fitted.state.covariance
    else:
        fitted = None
        H0, _, _, Z = least_outlying(Z, *pairs(k_dir, n, n_directions, conventions), h, conventions)
        _, S = mcd.weighted_moments(Z, H0.astype(Z.dtype))
    return descending_eigh(S)[0] * s * s, rank, fitted


def _mcd(key, X, h, factors, n_starts, conventions, initial):
    return mcd.fit_core(key, X, h, factors, n_starts, 10, 100, "robustbase" if conventions == "rrcov" else "bayeskit",
                        initial)


def fit(key, X: Float[Array, "n p"], k: int, alpha: float = 0.75, k_max: int = 10, *, n_directions: int = 250,
        n_starts: int = 500, use_mcd: bool = True, conventions: str = "bayeskit") -> FitResult:
    """ROBPCA with ``k`` components (static; see :func:`choose_k` and :func:`provisional`
    for rrcov's choice). Jittable with k, alpha, k_max, n_directions, n_starts, use_mcd and
    conventions static, and vmappable over keys and stacked data sets. alpha enters the
    compiled fit only through h and the MCD's factors, traced values: a new alpha compiles
    nothing. ``conventions="rrcov"``: rrcov's ``PcaHubert(X, k, k_max, alpha)`` (see the
    module's docstring).

    Returns a :class:`~bayeskit.core.status.FitResult` whose state is the
    :class:`Solution` and whose objective is the criterion log det of the MCD in Step 3
    (-inf when it is an exact fit; the status is nonfinite only when the estimates are)."""
    n, p = np.shape(X)
    if is_concrete(X):
        X = check_matrix(X, min_rows=2)
    check_int_in("k", k, 1, min(n - 1, p))  # static, like the shape: checked inside jit too
    check_int_in("k_max", k_max, 1)
    check_int_in("n_directions", n_directions, 1)
    if is_concrete(alpha) and not 0.5 <= float(alpha) <= 1:  # above 1, h exceeded n and the fit ran as plain PCA
        raise ValueError(f"alpha must be in [0.5, 1], got {alpha!r}.")
    return _fit_planned(key, X, k, alpha, k_max, k, n_directions, n_starts, use_mcd, conventions)


def _fit_planned(key, X, k, alpha, k_max, k_for_h, n_directions, n_starts, use_mcd, conventions,
                 low_mcd=None) -> FitResult:
    n, p = np.shape(X)
    h, h_mcd, factors = _plan(n, p, alpha, k_max, k_for_h, k, use_mcd, conventions)
    X = call_arg(X)
    return _fit(key, X, k, call_arg(h, jnp.int32), call_arg(h_mcd, jnp.int32), call_arg(factors, X.dtype), k_max,
                n_directions, n_starts, use_mcd, conventions, low_mcd)


def fit_auto(key, X: Float[Array, "n p"], n_components: int | None = None, alpha: float = 0.75, k_max: int = 10, *,
             n_directions: int = 250, n_starts: int = 500, use_mcd: bool = True, conventions: str = "bayeskit") -> FitResult:
    """ROBPCA as a user runs it: k from ``n_components``, or chosen as rrcov's PcaHubert
    does (:func:`provisional` then :func:`choose_k`); after an exact fit (at least h points
    on a (k-1)-dimensional subspace of the k components) refit with k - 1 until the fit is
    not exact or k = 1. The result's ``n_iter`` counts those refits, so the k first fitted
    is ``state.eigenvalues.shape[-1] + n_iter``. Host-side: k is a shape."""
    X = check_matrix(X, min_rows=2)
    if np.all(X == X[0]):
        raise ValueError("all rows of X are equal: there is no spread to find components in.")
    options = dict(n_directions=n_directions, n_starts=n_starts, use_mcd=use_mcd, conventions=conventions)
    low_mcd = None  # the low-dimensional branch's MCD, the same at every k: computed once
    if n_components is None:
        eigenvalues, rank, low_mcd = _provisional_planned(key, X, alpha, k_max, **options)
        k = choose_k(np.asarray(eigenvalues), k_max, int(rank), conventions)
        # rrcov's coverage of a chosen k stays that of min(k_max, rank)
        k_for_h = min(k_max, int(rank)) if conventions == "rrcov" else k
    else:  # the rank of the centred data is at most min(n - 1, p); the fit computes it (Step 1)
        k = check_int_in("n_components", n_components, 1, min(X.shape[0] - 1, X.shape[1]))
        k_for_h = k
    first = k
    result = _fit_planned(key, X, k, alpha, k_max, k_for_h, **options, low_mcd=low_mcd)
    if k > int(result.state.rank):
        raise ValueError(f"n_components must be at most {int(result.state.rank)}, the rank of the centred data; got {k}.")
    while bool(result.state.exact_fit) and k > 1:
        k -= 1
        result = _fit_planned(key, X, k, alpha, k_max, min(k_for_h, k), **options, low_mcd=low_mcd)
    return eqx.tree_at(lambda r: r.n_iter, result, as_array(first - k, jnp.int32))


@partial(executables.jit, static_argnums=(2, 6, 7, 8, 9, 10))
def _fit(key, X, k, h, h_mcd, factors, k_max, n_directions, n_starts, use_mcd, conventions, low_mcd) -> FitResult:
    X, s = unit_scale(X)  # scale equivariance: fit X / s, then put s back
    solution, log_det = _fit_unit(key, X, k, h, h_mcd, factors, k_max, n_directions, n_starts, use_mcd, conventions,
                                  low_mcd)
    solution = in_units(solution, s)
    return solved(solution, log_det + 2 * k * jnp.log(s),
                  all_finite(solution.center, solution.components, solution.eigenvalues))


def in_units(solution: Solution, s) -> Solution:
    """The ROBPCA of s X from the ``solution`` for X: centre, scores, orthogonal distances
    and their cutoff times s, eigenvalues times s^2; the rest unchanged. ``s`` a Python
    float (host, NumPy fields) or a scalar array."""
    r = solution
    return eqx.tree_at(lambda t: (t.center, t.scores, t.orthogonal_distances, t.od_cutoff, t.eigenvalues), r,
                       (r.center * s, r.scores * s, r.orthogonal_distances * s, r.od_cutoff * s, r.eigenvalues * s * s))


def _fit_unit(key, X, k, h, h_mcd, factors, k_max, n_directions, n_starts, use_mcd, conventions,
              low_mcd=None) -> tuple[Solution, Array]:
    """ROBPCA of the unit-scaled X; ``low_mcd``: the low-dimensional branch's MCD of this X
    with this key when already computed (by :func:`_provisional`), else None."""
    n, p = X.shape
    rrcov = conventions == "rrcov"
    k_dir, k_mcd = jax.random.split(key)
    mu0, Z, V, rank = affine_span(X)
    if use_mcd and low_dimensional(n, p, k_max):
        fitted = _mcd(k_mcd, Z, h_mcd, factors, n_starts, conventions, None) if low_mcd is None else low_mcd
        m = fitted.state
        values, vectors = descending_eigh(m.covariance)
        basis, centre = vectors[:, :k], m.location
        outl, reductions, exact = jnp.zeros(n, X.dtype), jnp.asarray(0), m.exact_fit
        values = values[:k]
    else:
        H0, outl, reductions, Z = least_outlying(Z, *pairs(k_dir, n, n_directions, conventions), h, conventions)
        mu1, S0 = mcd.weighted_moments(Z, H0.astype(Z.dtype))
        E0 = descending_eigh(S0)[1][:, :k]
        od0 = _orthogonal_distances(Z, mu1, E0)
        H1 = od0 <= _wilson_hilferty_cutoff(od0, h, "unimcd" if rrcov else "umcd")
        if rrcov:  # rrcov reweights only when k is below the rank
            H1 = jnp.where(k == rank, H0, H1)
        mu2, S1 = mcd.weighted_moments(Z, H1.astype(Z.dtype))
        S1_values, S1_vectors = descending_eigh(S1)
        V1 = S1_vectors[:, :k]
        Xk = (Z - mu2) @ V1
        # LIBRA's extra MCD candidate: the h points closest to 0 under diag(l_1..l_k) of S_1
        initial = mcd.closest(jnp.sum(Xk**2 / jnp.maximum(S1_values[:k], jnp.finfo(X.dtype).tiny), 1), h_mcd)
        fitted = _mcd(k_mcd, Xk, h_mcd, factors, n_starts, conventions, initial)
        m = fitted.state
        values, P = descending_eigh(m.covariance)
        basis, centre, exact = V1 @ P, mu2 + V1 @ m.location, m.exact_fit
    basis = basis * _sign_flip(V @ basis)
    d = diagnostics(X, mu0 + V @ centre, V @ basis, values, h, rank, "medmad" if rrcov else "umcd")
    solution = Solution(**{f: getattr(d, f) for f in Diagnostics.__dataclass_fields__}, eigenvalues=values,
                        outlyingness=outl, h=h, rank=rank, n_reductions=reductions, exact_fit=exact)
    return solution, fitted.objective


def diagnostics(X, center, components, eigenvalues, h: int, rank, od_rule: str = "umcd") -> Diagnostics:
    """(3)-(4) for the rows of X under a PCA fit (``center``, orthonormal ``components`` (p,
    k), ``eigenvalues`` (k,)), any PCA method's; the OD cutoff from h points (``od_rule``:
    see :func:`_wilson_hilferty_cutoff`). With k >= the rank of the centred data the OD are
    0 and never flag."""
    k = components.shape[1]
    R = X - center
    scores = R @ components
    sd = jnp.sqrt(jnp.sum(scores**2 / eigenvalues, 1))
    full_rank = rank <= k
    od = jnp.where(full_rank, 0.0, _orthogonal_distances(X, center, components))
    od_cutoff = jnp.where(full_rank, 0.0, _wilson_hilferty_cutoff(od, h, od_rule))
    sd_cutoff = jnp.sqrt(stats.chi2.ppf(CRITERION, k)).astype(X.dtype)
    labels = (sd > sd_cutoff).astype(jnp.int32) + 2 * (od > od_cutoff).astype(jnp.int32)
    return Diagnostics(center, components, scores, sd, od, sd_cutoff, od_cutoff, labels)


def _sign_flip(basis):
    """Signs that make each column's entry of largest magnitude positive (rrcov's signflip)."""
    return jnp.sign(basis[jnp.argmax(jnp.abs(basis), 0), jnp.arange(basis.shape[1])])


__all__ = ["Solution", "Diagnostics", "LABELS", "CONVENTIONS", "ALL_PAIRS", "fit", "fit_auto", "in_units", "diagnostics",
           "provisional", "choose_k", "coverage", "affine_span", "pairs", "rrcov_pairs", "default_directions", "outlyingness",
           "reweighted_univariate_mcd", "least_outlying", "low_dimensional"]

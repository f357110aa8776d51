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

Diagnostics. The score and orthogonal distances

    SD_i = sqrt(sum_j t_ij^2 / l_j),   cutoff sqrt(chi2_{k,0.975});                          (3)
    OD_i = |x_i - mu - P t_i|,         cutoff (m + s z_0.975)^{3/2},                            (4)

m, s the univariate MCD location and (consistent) scale of the OD_i^{2/3} (the Wilson-Hilferty
approximation), classify each point: regular, good leverage (SD only), orthogonal outlier
(OD only), bad leverage (both). When k equals the rank the OD are rounding errors: they are
set to 0 and never flag.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int
from scipy import stats

from bayeskit.core.linalg import descending_eigh
from bayeskit.core.scaling import unit_scale
from bayeskit.core.status import FitResult, all_finite, solved
from bayeskit.core.validation import check_int_in, check_matrix, is_concrete
from bayeskit.robust import mcd

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


def pairs(key, n: int, n_directions: int) -> tuple[Array, Array]:
    """Index pairs (i, j), i != j: all of them when n(n - 1)/2 <= ``n_directions``, else
    ``n_directions`` random ones."""
    if n * (n - 1) // 2 <= n_directions:
        i, j = np.triu_indices(n, 1)
        return jnp.asarray(i), jnp.asarray(j)
    k1, k2 = jax.random.split(key)
    i = jax.random.randint(k1, (n_directions,), 0, n)
    return i, (i + jax.random.randint(k2, (n_directions,), 1, n)) % n


def unit_rows(v):
    """Each row scaled to unit length; zero rows stay zero."""
    norm = jnp.linalg.norm(v, axis=-1, keepdims=True)
    return jnp.where(norm > 0, v / jnp.where(norm > 0, norm, 1), 0.0)


def outlyingness(Z: Float[Array, "n r"], i: Array, j: Array, h: int) -> tuple[Array, Array, Array, Array]:
    """(2) over the directions through the pairs (i, j): the outlyingness of every point, and
    whether some direction has s_MCD = 0, with the first such direction v and t_MCD(v) (its
    h points lie on the hyperplane z'v = t_MCD(v))."""
    V = unit_rows(Z[i] - Z[j])
    scale = jnp.sqrt(jnp.sum(Z**2, 1).max())
    proj = Z @ V.T
    t, var, _ = jax.vmap(lambda y: mcd.univariate_mcd(y, h), in_axes=1)(proj)
    s = jnp.sqrt(var)
    real = jnp.any(V != 0, 1)
    flat = real & (s <= mcd.SINGULAR * scale)
    usable = real & ~flat
    ratio = jnp.abs(proj - t) / jnp.where(usable, s, 1.0)
    first = jnp.argmax(flat)
    return jnp.max(jnp.where(usable, ratio, 0.0), 1), jnp.any(flat), V[first], t[first]


def least_outlying(Z, i, j, h: int) -> tuple[Array, Array, Array, Array]:
    """Step 2's H_0 (indicator), the outlyingness, the number of exact-fit projections, and
    Z projected onto the hyperplanes z'v = t of the exact-fit directions (the rest of the
    algorithm works in that lower-dimensional space)."""

    def cond(carry):
        k, _, flat, *_ = carry
        return flat & (k < Z.shape[1])

    def body(carry):
        k, Z, _, v, t, _ = carry
        Z = Z - jnp.outer(Z @ v - t, v)
        outl, flat, v, t = outlyingness(Z, i, j, h)
        return k + 1, Z, flat, v, t, outl

    outl, flat, v, t = outlyingness(Z, i, j, h)
    k, Z, _, _, _, outl = jax.lax.while_loop(cond, body, (jnp.asarray(0), Z, flat, v, t, outl))
    return mcd.closest(outl, h), outl, k, Z


def choose_k(eigenvalues, k_max: int, rank: int) -> int:
    """k from S_0's eigenvalues as rrcov's PcaHubert: stop before the first l_j / l_1 <= 1e-3
    (at most min(rank, k_max)), then the fewest components that explain 80% of sum_j l_j if
    those do. (In its low-dimensional branch rrcov keeps all components; the same rule
    applies there here, on the MCD scatter's eigenvalues.)"""
    ev = np.asarray(eigenvalues, dtype=float)
    small = np.nonzero(ev / ev[0] <= EIGEN_RATIO)[0]
    k = min(rank, k_max, int(small[0]) if small.size else len(ev))
    k = max(k, 1)
    cumulative = np.cumsum(ev[:k]) / ev[ev > 0].sum()
    if cumulative[-1] > EXPLAINED:
        k = int(np.argmax(cumulative >= EXPLAINED)) + 1
    return k


def _wilson_hilferty_cutoff(od, h: int):
    """(4): (m + s z)^{3/2} from the univariate MCD of OD^{2/3}."""
    y = od ** (2.0 / 3.0)
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


def provisional(key, X, alpha: float = 0.75, k_max: int = 10, n_directions: int = 250, n_starts: int = 500,
                use_mcd: bool = True):
    """The eigenvalues that choose k, from the same random directions and starts as
    :func:`fit` with this key: S_0's (Step 2), or the MCD scatter's in the low-dimensional
    branch; and the numerical rank. ``alpha`` enters through the traced h only, so a new
    alpha compiles nothing."""
    n, _ = np.shape(X)
    return _provisional(key, jnp.asarray(X), jnp.asarray(coverage(n, alpha, k_max), jnp.int32), k_max, n_directions,
                        n_starts, use_mcd)


@partial(jax.jit, static_argnums=(3, 4, 5, 6))
def _provisional(key, X, h, k_max, n_directions, n_starts, use_mcd):
    n, p = X.shape
    X, s = unit_scale(X)
    k_dir, k_mcd = jax.random.split(key)
    mu0, Z, V, rank = affine_span(X)
    if use_mcd and low_dimensional(n, p, k_max):
        S = mcd.fit(k_mcd, Z, h, n_starts=n_starts).state.covariance
    else:
        H0, _, _, Z = least_outlying(Z, *pairs(k_dir, n, n_directions), h)
        _, S = mcd.weighted_moments(Z, H0.astype(Z.dtype))
    return descending_eigh(S)[0] * s * s, rank


def fit(key, X: Float[Array, "n p"], k: int, alpha: float = 0.75, k_max: int = 10, *, n_directions: int = 250,
        n_starts: int = 500, use_mcd: bool = True) -> FitResult:
    """ROBPCA with ``k`` components (static; see :func:`choose_k` and :func:`provisional`
    for rrcov's choice). Jittable with k, alpha, k_max, n_directions, n_starts and use_mcd
    static, and vmappable over keys and stacked data sets. alpha enters the compiled fit
    only through h, a traced value: a new alpha compiles nothing.

    Returns a :class:`~bayeskit.core.status.FitResult` whose state is the
    :class:`Solution` and whose objective is the criterion log det of the MCD in Step 3
    (-inf when it is an exact fit; the status is nonfinite only when the estimates are)."""
    n, p = np.shape(X)
    if is_concrete(X):
        X = check_matrix(X, min_rows=2)
        check_int_in("k", k, 1, min(n - 1, p))
        check_int_in("k_max", k_max, 1)
        check_int_in("n_directions", n_directions, 1)
    h = jnp.asarray(coverage(n, alpha, k_max), jnp.int32)
    return _fit(key, jnp.asarray(X), k, h, k_max, n_directions, n_starts, use_mcd)


def fit_auto(key, X: Float[Array, "n p"], n_components: int | None = None, alpha: float = 0.75, k_max: int = 10, *,
             n_directions: int = 250, n_starts: int = 500, use_mcd: bool = True) -> FitResult:
    """ROBPCA as a user runs it: k from ``n_components``, or chosen as rrcov's PcaHubert
    does (:func:`provisional` then :func:`choose_k`); after an exact fit (at least h points
    on a (k-1)-dimensional subspace of the k components) refit with k - 1 until the fit is
    not exact or k = 1. The result's ``n_iter`` counts those refits, so the k first fitted
    is ``state.eigenvalues.shape[-1] + n_iter``. Host-side: k is a shape."""
    X = check_matrix(X, min_rows=2)
    if np.all(X == X[0]):
        raise ValueError("all rows of X are equal: there is no spread to find components in.")
    options = dict(n_directions=n_directions, n_starts=n_starts, use_mcd=use_mcd)
    if n_components is None:
        eigenvalues, rank = provisional(key, X, alpha, k_max, **options)
        k = choose_k(np.asarray(eigenvalues), k_max, int(rank))
    else:  # the rank of the centred data is at most min(n - 1, p); the fit computes it (Step 1)
        k = check_int_in("n_components", n_components, 1, min(X.shape[0] - 1, X.shape[1]))
    first = k
    result = fit(key, X, k, alpha, k_max, **options)
    if k > int(result.state.rank):
        raise ValueError(f"n_components must be at most {int(result.state.rank)}, the rank of the centred data; got {k}.")
    while bool(result.state.exact_fit) and k > 1:
        k -= 1
        result = fit(key, X, k, alpha, k_max, **options)
    return eqx.tree_at(lambda r: r.n_iter, result, jnp.asarray(first - k, jnp.int32))


@partial(jax.jit, static_argnums=(2, 4, 5, 6, 7))
def _fit(key, X, k, h, k_max, n_directions, n_starts, use_mcd) -> FitResult:
    X, s = unit_scale(X)  # scale equivariance: fit X / s, then put s back
    solution, log_det = _fit_unit(key, X, k, h, k_max, n_directions, n_starts, use_mcd)
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


def _fit_unit(key, X, k, h, k_max, n_directions, n_starts, use_mcd) -> tuple[Solution, Array]:
    n, p = X.shape
    k_dir, k_mcd = jax.random.split(key)
    mu0, Z, V, rank = affine_span(X)
    if use_mcd and low_dimensional(n, p, k_max):
        fitted = mcd.fit(k_mcd, Z, h, n_starts=n_starts)
        m = fitted.state
        values, vectors = descending_eigh(m.covariance)
        basis, centre = vectors[:, :k], m.location
        outl, reductions, exact = jnp.zeros(n, X.dtype), jnp.asarray(0), m.exact_fit
        values = values[:k]
    else:
        H0, outl, reductions, Z = least_outlying(Z, *pairs(k_dir, n, n_directions), h)
        mu1, S0 = mcd.weighted_moments(Z, H0.astype(Z.dtype))
        E0 = descending_eigh(S0)[1][:, :k]
        od0 = _orthogonal_distances(Z, mu1, E0)
        H1 = od0 <= _wilson_hilferty_cutoff(od0, h)
        mu2, S1 = mcd.weighted_moments(Z, H1.astype(Z.dtype))
        S1_values, S1_vectors = descending_eigh(S1)
        V1 = S1_vectors[:, :k]
        Xk = (Z - mu2) @ V1
        # LIBRA's extra MCD candidate: the h points closest to 0 under diag(l_1..l_k) of S_1
        initial = mcd.closest(jnp.sum(Xk**2 / jnp.maximum(S1_values[:k], jnp.finfo(X.dtype).tiny), 1), h)
        fitted = mcd.fit(k_mcd, Xk, h, n_starts=n_starts, initial=initial)
        m = fitted.state
        values, P = descending_eigh(m.covariance)
        basis, centre, exact = V1 @ P, mu2 + V1 @ m.location, m.exact_fit
    basis = basis * _sign_flip(V @ basis)
    d = diagnostics(X, mu0 + V @ centre, V @ basis, values, h, rank)
    solution = Solution(**{f: getattr(d, f) for f in Diagnostics.__dataclass_fields__}, eigenvalues=values,
                        outlyingness=outl, h=h, rank=rank, n_reductions=reductions, exact_fit=exact)
    return solution, fitted.objective


def diagnostics(X, center, components, eigenvalues, h: int, rank) -> Diagnostics:
    """(3)-(4) for the rows of X under a PCA fit (``center``, orthonormal ``components`` (p,
    k), ``eigenvalues`` (k,)), any PCA method's; the OD cutoff from h points. With k >= the
    rank of the centred data the OD are 0 and never flag."""
    k = components.shape[1]
    R = X - center
    scores = R @ components
    sd = jnp.sqrt(jnp.sum(scores**2 / eigenvalues, 1))
    full_rank = rank <= k
    od = jnp.where(full_rank, 0.0, _orthogonal_distances(X, center, components))
    od_cutoff = jnp.where(full_rank, 0.0, _wilson_hilferty_cutoff(od, h))
    sd_cutoff = jnp.sqrt(stats.chi2.ppf(CRITERION, k)).astype(X.dtype)
    labels = (sd > sd_cutoff).astype(jnp.int32) + 2 * (od > od_cutoff).astype(jnp.int32)
    return Diagnostics(center, components, scores, sd, od, sd_cutoff, od_cutoff, labels)


def _sign_flip(basis):
    """Signs that make each column's entry of largest magnitude positive (rrcov's signflip)."""
    return jnp.sign(basis[jnp.argmax(jnp.abs(basis), 0), jnp.arange(basis.shape[1])])


__all__ = ["Solution", "Diagnostics", "LABELS", "fit", "fit_auto", "in_units", "diagnostics", "provisional", "choose_k", "coverage", "affine_span",
           "pairs", "outlyingness",           "least_outlying", "low_dimensional"]

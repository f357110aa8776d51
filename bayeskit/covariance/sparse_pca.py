"""Large-scale sparse PCA: the DSPCA relaxation solved by block coordinate ascent, after safe
feature elimination (Zhang & El Ghaoui, NIPS 2011; d'Aspremont et al., SIAM Review 2007).

Notation. Sigma (n, n) is a covariance, lambda >= 0 the sparsity penalty. The relaxation of
max_x x'Sigma x - lambda |x|_0 over unit x is

    phi = max_Z Tr(Sigma Z) - lambda |Z|_1   subject to Z >= 0 (PSD), Tr Z = 1,           (1)

and, with X = phi Z, (1) is equivalent to phi^2 / 2 = max_{X >= 0} Tr(Sigma X) - lambda
|X|_1 - (Tr X)^2 / 2 (2). Block coordinate ascent (BCA) maximises its log-barrier version

    F(X) = Tr(Sigma X) - lambda |X|_1 - (Tr X)^2 / 2 + beta log det X                        (3)

one row and column at a time. With X partitioned into Y (the other rows and columns), y
and x, Sigma into S, s and sigma, and t = Tr Y, c = sigma - lambda - t, the row's update is

    u = argmin_{|u - s|_inf <= lambda} u'Y u   (a box-constrained QP; R^2 its value),        (4)
    r > 0 the root of r^3 + c r^2 - beta r - R^2 = 0 (the minimiser of R^2/r - beta log r + (c + r)^2 / 2),
    y = Y u / r,   x = c + r.                                                                (5)

Each update raises F over its row and column: (4) by at most 50 sweeps of coordinate ascent
from the row's current value (on an ill-conditioned Y a few digits short of the QP's optimum:
F 1.1683373 against 1.1683425 on one row of a small example), (5) exactly, so F never
decreases. ``beta`` is
small (the barrier keeps X positive definite); the fit sweeps all rows ``max_iter`` times
or until F changes by less than ``tol`` relative. ``Hyperparams`` holds lambda and beta.

Safe feature elimination (the paper's Theorem 2.1): a feature with Sigma_ii < lambda is removed
before solving; ties at lambda stay. As the paper does, the elimination is applied to (1),
although Theorem 2.1 proves it for the l0 problem, whose optimum never uses such a feature.
The relaxation's optimum can: Sigma = [[10, 2.5], [2.5, 1]] and lambda = 1.5 give phi = 8.61
with Z_22 = 0.012 on both features, against 8.5 with the second removed. The components are
therefore those of (1) on the features that Theorem 2.1 keeps. The sparse
component is the leading eigenvector of the solution, its entries below ``threshold`` times
the largest set to zero, renormalised.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import scipy.sparse
from jaxtyping import Array, Float

from bayeskit.core import loop
from bayeskit.core.device import as_array, float_arg
from bayeskit.core.scaling import power_of_two
from bayeskit.core.status import FitResult, Status, readable_failure
from bayeskit.core.validation import check_int_in, check_square_shape, is_concrete
from bayeskit.core.xla import host_blas
from bayeskit.covariance.rca import check_covariance

MIN_BLOCK = 16  # blocks of up to 16 features share one compiled solve


class Hyperparams(eqx.Module):
    """``lam``: the sparsity penalty lambda of (1)-(3); ``beta``: the log-barrier weight of (3)."""

    lam: Float[Array, ""] | float = 0.1
    beta: Float[Array, ""] | float = 1e-4


class State(eqx.Module):
    """BCA state: the matrix ``X`` of (2)-(3)."""

    X: Float[Array, "n n"]


def objective(state: State, Sigma, hparams: Hyperparams) -> Array:
    """F(X) of (3)."""
    X, lam, beta = state.X, hparams.lam, hparams.beta
    _, logdet = jnp.linalg.slogdet(X)
    return jnp.sum(Sigma * X) - lam * jnp.sum(jnp.abs(X)) - 0.5 * jnp.trace(X) ** 2 + beta * logdet


def init(Sigma, hparams: Hyperparams) -> State:
    """X = x0 I with x0 maximising (3) among multiples of I without the barrier, at least a
    small positive value: x0 = max(mean(diag Sigma) - lambda, 0) / n + 1e-3."""
    n = Sigma.shape[0]
    x0 = jnp.maximum(jnp.mean(jnp.diagonal(Sigma)) - hparams.lam, 0.0) / n + 1e-3
    return State(x0 * jnp.eye(n, dtype=Sigma.dtype))


def box_qp(Y, s, lam, u0, n_sweeps: int = 50, tol: float = 1e-10) -> Array:
    """(4) by coordinate descent from ``u0`` (projected onto the box; ``lam`` a scalar or
    per-coordinate half-widths): each coordinate
    u_i = clip(-(sum_{j != i} Y_ij u_j) / Y_ii, s_i - lambda, s_i + lambda), until a sweep
    moves no coordinate by more than ``tol`` times the box width or ``n_sweeps`` sweeps.
    ``tol`` is raised to 16 ulps of the dtype: below that a float32 sweep never stops moving
    by rounding alone, and every call would run all ``n_sweeps``."""
    tol = max(tol, 16 * float(jnp.finfo(jnp.result_type(Y)).eps))
    lo, hi = s - lam, s + lam
    u = jnp.clip(u0, lo, hi)
    n = s.shape[0]

    def coordinate(i, carry):
        u, g, moved = carry  # g = Y u
        d = Y[i, i]
        target = jnp.where(d > 0, -(g[i] - d * u[i]) / jnp.where(d > 0, d, 1.0), jnp.where(g[i] - d * u[i] > 0, lo[i], hi[i]))
        new = jnp.clip(target, lo[i], hi[i])
        step = new - u[i]
        return u.at[i].set(new), g + step * Y[:, i], jnp.maximum(moved, jnp.abs(step))

    def cond(carry):
        k, _, _, moved = carry
        return (k < n_sweeps) & (moved > tol * (2 * jnp.max(lam) + 1e-300))

    def sweep(carry):
        k, u, g, _ = carry
        u, g, moved = jax.lax.fori_loop(0, n, coordinate, (u, g, jnp.zeros((), u.dtype)))
        return k + 1, u, g, moved

    return jax.lax.while_loop(cond, sweep, (0, u, Y @ u, jnp.asarray(jnp.inf, u.dtype)))[1]


def cubic_root(c, beta, R2) -> Array:
    """The positive root of r^3 + c r^2 - beta r - R^2 = 0 (unique for beta > 0 or R^2 > 0),
    by Newton's method from an upper bound (the cubic is convex beyond its positive root)."""
    r = jnp.maximum(1.0, jnp.abs(c) + jnp.sqrt(beta) + jnp.cbrt(R2)) * 2.0

    def step(_, r):
        f = r**3 + c * r**2 - beta * r - R2
        df = 3 * r**2 + 2 * c * r - beta
        return jnp.maximum(r - f / df, 0.5 * r)

    return jax.lax.fori_loop(0, 100, step, r)


def row_update(X, j, Sigma, lam, beta) -> Array:
    """The update (4)-(5) of (3) over row and column ``j`` (module docstring: (4) by at most 50
    coordinate sweeps)."""
    X, Sigma = jnp.asarray(X), jnp.asarray(Sigma)  # NumPy arrays have no .at, nor traced indexing
    n = X.shape[0]
    others = jnp.arange(n) != j
    Y = jnp.where(others[:, None] & others[None, :], X, 0.0)
    s = jnp.where(others, Sigma[:, j], 0.0)
    t = jnp.trace(X) - X[j, j]
    c = Sigma[j, j] - lam - t
    u0 = jnp.where(others, X[:, j], 0.0)
    u = box_qp(Y, s, jnp.where(others, lam, 0.0), u0)
    R2 = u @ Y @ u
    r = cubic_root(c, beta, R2)
    y = Y @ u / r
    X = X.at[:, j].set(y).at[j, :].set(y)
    return X.at[j, j].set(c + r)


def update(state: State, Sigma, hparams: Hyperparams) -> State:
    """One sweep of (4)-(5) over all rows."""
    Sigma = jnp.asarray(Sigma)
    step = lambda j, X: row_update(X, j, Sigma, hparams.lam, hparams.beta)
    X = jax.lax.fori_loop(0, Sigma.shape[0], step, state.X)
    return State(X)


@readable_failure
def fit(Sigma, hparams: Hyperparams, *, max_iter: int = 20, tol: float = 1e-9, init_state: State | None = None,
        throw: bool = False) -> FitResult:
    """BCA on (3) for the covariance ``Sigma`` (n, n); ``result.state.X`` is X and
    ``result.trace`` F after each sweep (non-decreasing). Jitted once per shape and
    ``max_iter``: new penalties and data compile nothing; vmappable over both."""
    loop.check_tol(tol)
    loop.check_throw(throw)
    if is_concrete(Sigma, hparams):
        check_problem(Sigma, hparams)
    else:  # traced: the values are the caller's to check, the shape is static
        check_square_shape(Sigma, "Sigma")
    Sigma = float_arg(Sigma)
    return _fit(Sigma, loop.as_arrays(hparams, Sigma.dtype), init_state, max_iter=max_iter, tol=loop.tolerance(tol, Sigma.dtype),
                throw=throw)


@eqx.filter_jit
def _fit(Sigma, hparams: Hyperparams, init_state, *, max_iter, tol, throw) -> FitResult:
    state = init(Sigma, hparams) if init_state is None else init_state
    return loop.run(lambda s: update(s, Sigma, hparams), lambda s: objective(s, Sigma, hparams), state,
                    max_iter=max_iter, tol=tol, progress=False, throw=throw)


def leading_component(X, threshold: float = 1e-3) -> Array:
    """The unit leading eigenvector of X, entries below ``threshold`` times its largest set
    to zero, renormalised, the largest entry positive."""
    v = jnp.linalg.eigh(X)[1][:, -1]
    v = jnp.where(jnp.abs(v) >= threshold * jnp.max(jnp.abs(v)), v, 0.0)
    v = v / jnp.linalg.norm(v)
    return v * jnp.sign(v[jnp.argmax(jnp.abs(v))])


def safe_features(variances, lam) -> np.ndarray:
    """Indices of the features that survive safe elimination: Sigma_ii >= lambda (ties stay)."""
    return np.nonzero(np.asarray(variances) >= lam)[0]


def feature_variances(X) -> np.ndarray:
    """Per-feature variances E[x^2] - E[x]^2 (divisor n) of a dense array or a scipy.sparse
    matrix, without densifying or centring it."""
    n = X.shape[0]
    if scipy.sparse.issparse(X):
        mean = np.asarray(X.mean(0)).ravel()
        square = np.asarray(X.multiply(X).sum(0)).ravel() / n
    else:
        X = np.asarray(X)
        mean, square = X.mean(0), (X**2).mean(0)
    return np.maximum(square - mean**2, 0.0)


def data_scale(X) -> float:
    """s = sqrt(mean feature variance) of a dense array or a scipy.sparse matrix (1 when every
    feature is constant), from one pass over the stored values divided by a power of two
    near max |X| (so that the squares of data at 1e300 cannot overflow). X / s has unit
    mean variance whatever X's scale or offset, so the components of X / s do not depend on
    them (the barrier weight beta and the tolerances are absolute)."""
    n, p = X.shape
    values = (X.data if scipy.sparse.issparse(X) else np.asarray(X)).ravel()
    power = float(power_of_two(np.asarray(np.max(np.abs(values)) if values.size else 0.0)))
    unit = values / power
    means = np.asarray(X.sum(0), dtype=np.float64).ravel() / (n * power)
    variance = (unit @ unit / n - means @ means) / p
    return power * float(np.sqrt(variance)) if variance > 0 else power


class Moments:
    """The covariance of the columns of a dense or scipy.sparse data matrix (n, p), never
    formed whole: its diagonal, blocks Sigma_SS of chosen features, and products with
    dense (p, k) matrices, from the raw data and its column means (centring only the small
    pieces)."""

    def __init__(self, data):
        self.data = data.tocsc() if hasattr(data, "tocsc") else np.asarray(data, dtype=float)
        self.n = data.shape[0]
        self.mean = np.asarray(self.data.mean(0)).ravel()
        self.variances = feature_variances(self.data)

    def block(self, S) -> np.ndarray:
        """Sigma_SS for the feature indices S."""
        D = self.data[:, S]
        G = D.T @ D
        G = G.toarray() if hasattr(G, "toarray") else np.asarray(G)
        return G / self.n - np.outer(self.mean[S], self.mean[S])

    def times(self, V) -> np.ndarray:
        """Sigma V (p, k) for a dense V (p, k)."""
        XV = np.asarray(self.data @ V)
        return np.asarray(self.data.T @ XV) / self.n - np.outer(self.mean, self.mean @ V)


class Deflated:
    """Projection deflation (Mackey, NIPS 2008): after components v_1..v_k the covariance is
    Sigma_k = P_k ... P_1 Sigma P_1 ... P_k, P_i = I - v_i v_i'. Column j of P_1 ... P_k is
    e_j + V a_j, so Sigma_k's entries are Sigma_ij + a_i'B_j + B_i'a_j + a_i'(B V) a_j with
    B = V'Sigma: its diagonal and blocks cost O(p k^2) beyond Sigma's."""

    def __init__(self, moments: Moments, V: np.ndarray):
        self.moments, self.V = moments, V
        k, p = V.shape[1], V.shape[0]
        self.B = moments.times(V).T if k else np.zeros((0, p))
        self.BV = self.B @ V
        G = V.T @ V
        A = np.zeros((k, p))
        for i in range(k - 1, -1, -1):  # P_k is applied first
            A[i] -= V[:, i] + G[i] @ A
        self.A = A
        self._variances = moments.variances + 2 * np.sum(A * self.B, 0) + np.sum(A * (self.BV @ A), 0)

    def variances(self) -> np.ndarray:
        """diag(Sigma_k) (computed once)."""
        return self._variances

    def block(self, S) -> np.ndarray:
        A, B = self.A[:, S], self.B[:, S]
        return self.moments.block(S) + A.T @ B + B.T @ A + A.T @ self.BV @ A


def component_at(deflated: Deflated, lam: float, *, max_features: int, beta: float, max_iter: int,
                 threshold: float) -> tuple[np.ndarray, int]:
    """The sparse component (p,) of the deflated covariance at penalty ``lam`` and the number
    of features that survive safe elimination (the solve uses at most ``max_features`` of
    them, those of largest variance). The support is that of the solution's thresholded
    leading eigenvector; the loadings are then the leading eigenvector of the covariance
    block of that support (the most variance any unit vector on it explains)."""
    variances = deflated.variances()
    kept = safe_features(variances, lam)
    if kept.size == 0:
        return np.zeros(variances.shape[0]), 0
    solved = kept[np.argsort(-variances[kept], kind="stable")[:max_features]]
    Sigma = deflated.block(solved)
    size = 1 << int(np.ceil(np.log2(max(len(solved), MIN_BLOCK))))  # padded to a power of two: few compiled shapes
    padded = np.zeros((size, size))
    padded[: len(solved), : len(solved)] = Sigma
    on = _solve(as_array(padded), Hyperparams(lam, beta), threshold, max_iter)
    support = solved[np.nonzero(np.asarray(on)[: len(solved)])[0]]
    v = np.zeros(variances.shape[0])
    if support.size:  # the loadings on the support: the leading eigenvector of its block (the most variance there)
        w = np.linalg.eigh(deflated.block(support))[1][:, -1]
        v[support] = w * np.sign(w[np.argmax(np.abs(w))])
    return v, int(kept.size)


@partial(jax.jit, static_argnames=("max_iter",))
def _solve(Sigma, hparams: Hyperparams, threshold, max_iter):
    """BCA on a padded block, then the support of its thresholded leading component: the
    zero rows of the padding have variance 0 < lambda, so safe elimination makes them zero
    at the optimum and the solution on the real block is the unpadded one. One compiled
    program per padded size (powers of two); penalties and data are values."""
    X = fit(Sigma, hparams, max_iter=max_iter, tol=1e-9).state.X
    return leading_component(X, threshold) != 0


def search_penalty(deflated: Deflated, cardinality: int, *, max_features: int, beta: float, max_iter: int,
                   threshold: float, max_steps: int = 40):
    """Bisection on lambda for a component with ``cardinality`` non-zeros, between 0 (or the
    variance of rank ``max_features``) and the variance of rank ``cardinality`` (above it,
    fewer features survive elimination): (component, lambda, features kept). The
    cardinality falls as lambda grows; the closest found is returned if none hits it."""
    ranked = np.sort(deflated.variances())[::-1]
    low = ranked[max_features] if ranked.size > max_features else 0.0
    high = ranked[cardinality - 1]
    best = None
    for _ in range(max_steps):
        lam = 0.5 * (low + high)
        v, kept = component_at(deflated, lam, max_features=max_features, beta=beta, max_iter=max_iter,
                               threshold=threshold)
        card = int(np.count_nonzero(v))
        if best is None or abs(card - cardinality) < abs(best[3] - cardinality):
            best = (v, lam, kept, card)
        if card == cardinality:
            break
        low, high = (lam, high) if card > cardinality else (low, lam)
    return best[:3]


class Components(eqx.Module):
    """Sparse principal components: ``components`` (n_components, p) unit loadings, mostly
    zeros; ``alphas`` the penalty of each; ``n_features_kept`` the features that survived
    safe elimination; ``explained_variance`` v' Sigma_k v in the deflated covariance;
    ``mean`` (p,) the feature means."""

    components: np.ndarray
    alphas: np.ndarray
    n_features_kept: np.ndarray
    explained_variance: np.ndarray
    mean: np.ndarray


def check_problem(Sigma, hparams: Hyperparams) -> None:
    """A covariance (:func:`bayeskit.covariance.rca.check_covariance`: finite, symmetric,
    non-empty, positive semidefinite) and a penalty that is finite and >= 0."""
    check_covariance(Sigma, "Sigma", definite=False)
    lam = np.asarray(hparams.lam, dtype=float)
    if not (np.all(np.isfinite(lam)) and np.all(lam >= 0)):
        raise ValueError(f"lam must be finite and >= 0; got {hparams.lam!r}.")


@host_blas()
def fit_components(data, n_components: int, *, cardinality: int | None = None, alpha: float | None = None,
                   max_features: int = 2000, beta: float = 1e-4, max_iter: int = 20, threshold: float = 1e-3) -> FitResult:
    """``n_components`` sparse components of a dense or scipy.sparse data matrix (n, p),
    each of the covariance deflated by the ones before (projection deflation), at the fixed
    penalty ``alpha`` or at the penalty found by bisection for ``cardinality`` non-zeros
    (give exactly one). Host-driven: the sizes of the surviving blocks are data-dependent,
    so each solve runs on a block padded to a power of two (few compiled shapes).

    The solves run on the data divided by s = :func:`data_scale` (unit mean variance: the
    barrier weight ``beta`` and the tolerances are absolute, so the same data in other units
    found other, or empty, components); ``alpha`` is in the data's units, and so are the
    penalties, explained variances and mean returned. The status judges the solution on the
    unit scale: explained variances beyond float64 in the data's units come back inf (the
    caller says so; :class:`~bayeskit.estimators.SparsePCA` does).

    Returns a :class:`~bayeskit.core.status.FitResult` (NumPy leaves) whose state is the
    :class:`Components` and whose objective is their total explained variance."""
    if (cardinality is None) == (alpha is None):
        raise ValueError("give exactly one of cardinality and alpha.")
    for name, value in (("n_components", n_components), ("max_features", max_features), ("max_iter", max_iter)):
        check_int_in(name, value, 1)
    if not (np.isscalar(threshold) and np.isfinite(threshold) and 0 <= threshold < 1):
        raise ValueError(f"threshold must be in [0, 1) (loadings below threshold times the largest are set to 0), "
                         f"got {threshold!r}.")
    if not scipy.sparse.issparse(data):
        data = np.asarray(data)  # a DataFrame too
    if len(data.shape) != 2:
        raise ValueError(f"data must be a matrix (n_samples, n_features), got shape {data.shape}.")
    p = data.shape[1]
    if cardinality is not None:
        check_int_in("cardinality", cardinality, 1, p)
        if cardinality > max_features:
            raise ValueError(f"cardinality={cardinality} exceeds max_features={max_features}, the features each solve "
                             "keeps: raise max_features or lower the cardinality.")
    elif not (np.ndim(alpha) == 0 and np.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be finite and >= 0; got {alpha!r}.")
    alpha = None if alpha is None else float(alpha)
    values = data.data if scipy.sparse.issparse(data) else data
    if not np.all(np.isfinite(values)):
        raise ValueError(f"data has {int(np.sum(~np.isfinite(values)))} non-finite values.")
    s = data_scale(data)
    moments = Moments(data / s)
    alpha = None if alpha is None else alpha / s / s
    options = dict(max_features=int(max_features), beta=float(beta), max_iter=int(max_iter), threshold=float(threshold))
    V, alphas, kept, explained = np.zeros((p, 0)), [], [], []
    for _ in range(n_components):
        deflated = Deflated(moments, V)
        if cardinality is not None:
            v, lam, n_kept = search_penalty(deflated, int(cardinality), **options)
        else:
            lam = float(alpha)
            v, n_kept = component_at(deflated, lam, **options)
        support = np.nonzero(v)[0]
        explained.append(float(v[support] @ deflated.block(support) @ v[support]) if support.size else 0.0)
        V = np.c_[V, v]
        alphas.append(lam)
        kept.append(n_kept)
    explained = np.array(explained)
    status = Status.successful if np.all(np.isfinite(explained)) and np.all(np.isfinite(V)) else Status.nonfinite
    with np.errstate(over="ignore"):  # beyond float64 in the data's units: the caller says so (SparsePCA does)
        components = Components(V.T, np.array(alphas) * s * s, np.array(kept), explained * s * s, moments.mean * s)
    return FitResult(components, np.array([np.sum(components.explained_variance)]), np.asarray(0), status)


__all__ = ["Hyperparams", "Components", "fit_components", "Moments", "Deflated", "component_at", "search_penalty", "State", "init", "update",
           "objective", "fit", "row_update", "box_qp", "cubic_root", "leading_component", "safe_features", "feature_variances"]

"""Residual component analysis (Kalaitzis & Lawrence, ICML 2012) and its EM/RCA hybrid
for a low-rank plus sparse-inverse covariance.

Notation. Draws y (length p) are independent N(0, K), K = W W' + Sigma, with Sigma (p, p)
positive definite and given: the covariance already "explained". C = (1/n) sum y y' is
their second moment. W (p, q) holds the residual components.

ML RCA (the paper's Theorem). The maximiser of the log-likelihood

    L(W) = -(n/2) [p log 2 pi + log|K| + tr(K^-1 C)]                                     (1)

is W = Sigma S (D - I)^{1/2}, where S, D solve the symmetric-definite generalised
eigenproblem

    C S = Sigma S D,   S' Sigma S = I,                                                    (2)

keeping the q largest eigenvalues d_i > 1 (none may exceed 1: then W is empty). With a
Cholesky factor Sigma = L L', (2) is the ordinary eigenproblem of L^-1 C L^-T = U D U'
and S = L^-T U, which is Sigma-normalised by construction. At the solution
log|K| = log|Sigma| + sum_{i<=q} log d_i and tr(K^-1 C) = q + sum_{i>q} d_i. For
Sigma = s2 I this is probabilistic PCA: W = U_q (Lambda_q - s2 I)^{1/2}.

The primal form has the draws as rows of Y (n, p), C = Y'Y/n and Sigma over features;
the dual form has the draws as columns, C = YY'/p and Sigma (n, n) over samples
(e.g. a temporal kernel), and then W is the latent coordinates X. Both are (2).

Posterior of the latent coordinates (primal): x | y ~ N(M W' Sigma^-1 y, M) with
M = (W' Sigma^-1 W + I)^-1                                                                  (3)

EM/RCA. The model y = W x + z + e, x ~ N(0, I), z ~ N(0, Lambda^-1), e ~ N(0, s2 I) with
a sparse precision Lambda under the prior exp(-(n alpha / 2) ||Lambda||_1), so
K = W W' + Lambda^-1 + s2 I. It maximises the penalised log marginal likelihood per draw

    B = -(1/2) [p log 2 pi + log|K| + tr(K^-1 C)] - (alpha / 2) ||Lambda||_1              (4)

by iterating (with s2 fixed, as the authors do):

- E-step, z | y with R = W W' + s2 I:  V = (R^-1 + Lambda)^-1,  E[z | y] = V R^-1 y, so
  <z z'> = V + V R^-1 C R^-1 V                                                              (5)
- M-step: Lambda lowers the graphical-lasso objective of <z z'> with penalty alpha        (6)
- RCA step: W from (2) with Sigma = Lambda^-1 + s2 I.                                     (7)

The M-step takes at most ``glasso_max_iter`` (default 3) of the graphical lasso's Newton
steps from the current Lambda, each with a line search that never raises its objective:
a generalised EM step, which still cannot lower (4), and far cheaper than solving (6) to
convergence at every iteration (at small alpha the full solve cost 450 ms an iteration
on the 11-protein Sachs data, three steps 1 ms, with the same fixed points). The RCA step
is exact. The fit records the largest decrease of (4) it saw (``State.max_decrease``,
rounding only) instead of hiding it.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_solve
from jaxtyping import Array, Float

from bayeskit.core import loop
from bayeskit.core.device import call_arg, float_arg
from bayeskit.core.linalg import generalized_eigh, spd_inverse, symmetrize
from bayeskit.core.status import FitResult, all_finite, readable_failure, solved
from bayeskit.core.validation import check_square_shape, is_concrete, is_symmetric
from bayeskit.core.xla import host_blas
from bayeskit.covariance import glasso

_LOG_2PI = float(np.log(2 * np.pi))


# ----------------------------------------------------------------------------- ML RCA


class Solution(eqx.Module):
    """The ML RCA solution of (2).

    Attributes
    ----------
    components : (p, k) W = Sigma S_k (D_k - I)^{1/2}; columns whose eigenvalue is <= 1 are 0
    eigenvalues : (p,) all generalised eigenvalues d, in decreasing order
    eigenvectors : (p, p) S, Sigma-normalised (S' Sigma S = I), columns in the same order
    n_components : number of the k leading eigenvalues above 1 (the nonzero columns of W)
    """

    components: Float[Array, "p k"]
    eigenvalues: Float[Array, " p"]
    eigenvectors: Float[Array, "p p"]
    n_components: Array


def fit(C, Sigma, n_components: int | None = None, *, check: bool = True) -> FitResult:
    """ML RCA (2) for a second-moment matrix ``C`` and explained covariance ``Sigma``: a
    :class:`~bayeskit.core.status.FitResult` whose state is the :class:`Solution` and
    whose objective is the log-likelihood (1) per draw at it (nonfinite status when it is
    not finite).

    ``n_components`` (static) fixes k, the width of W; ``None`` keeps all p columns, of
    which those with eigenvalues above 1 are nonzero (the data choose q). Jittable and
    vmappable over ``C`` and ``Sigma``. ``check=False`` skips the host checks of C and
    Sigma (their eigenvalues), for a caller that has made them."""
    if check and is_concrete(C, Sigma):
        check_covariance(Sigma, "Sigma")
        check_covariance(C, "C", definite=False)
    check_square_shape(C, "C")  # static: checked inside jit too
    check_same_shape(C, Sigma)
    check_components(n_components, np.shape(C)[-1])  # static: checked under any transformation
    return _fit(float_arg(C), float_arg(Sigma), n_components)


@functools.partial(jax.jit, static_argnames="n_components")
def _fit(C, Sigma, n_components: int | None) -> FitResult:
    C, Sigma = symmetrize(C), symmetrize(Sigma)
    solution = solve(C, Sigma, n_components)
    ll = log_likelihood(C, solution.components, Sigma)
    return solved(solution, ll, jnp.isfinite(ll) & all_finite(solution.components, solution.eigenvalues))


def solve(C, Sigma, n_components: int | None = None) -> Solution:
    """The :class:`Solution` of (2) for symmetric ``C`` and ``Sigma``, unchecked (the
    closed form inside :func:`fit` and the EM's M-step for W)."""
    k = C.shape[0] if n_components is None else n_components
    d, S = generalized_eigh(C, Sigma)
    d, S = d[::-1], S[:, ::-1]  # decreasing
    W = Sigma @ S[:, :k] * jnp.sqrt(jnp.maximum(d[:k] - 1, 0))
    return Solution(W, d, S, jnp.sum(d[:k] > 1))


@jax.jit
def log_likelihood(C, W, Sigma) -> Array:
    """Log-likelihood (1) per draw, -(1/2)[p log 2 pi + log|K| + tr(K^-1 C)], K = WW' + Sigma."""
    K = W @ W.T + Sigma
    L = jnp.linalg.cholesky(K)
    logdet = 2 * jnp.sum(jnp.log(jnp.diagonal(L)))
    return -0.5 * (C.shape[0] * _LOG_2PI + logdet + jnp.trace(cho_solve((L, True), C)))


@jax.jit
def posterior(Y, W, Sigma) -> tuple[Array, Array]:
    """Posterior (3) of the latent coordinates of each row of ``Y``: means (n, k) and the
    shared covariance (k, k)."""
    L = jnp.linalg.cholesky(Sigma)
    SiW = cho_solve((L, True), W)
    M = jnp.linalg.inv(W.T @ SiW + jnp.eye(W.shape[1], dtype=W.dtype))
    M = symmetrize(M)
    return Y @ SiW @ M, M


def paired_time_kernel(times, *, lengthscale: float = 20.0, jitter: float = 1e-4) -> Array:
    """Sigma for paired time series (the authors' gene-expression experiment): an RBF
    kernel exp(-(t - t')^2 / (2 lengthscale^2)) + jitter I over the stacked time points of
    both series (e.g. treatment then control), so that both series are explained as one
    shared smooth function and RCA's residual components carry their difference."""
    t = jnp.asarray(times, dtype=jnp.result_type(float)).reshape(-1)
    return jnp.exp(-0.5 * (t[:, None] - t[None, :]) ** 2 / lengthscale**2) + jitter * jnp.eye(t.shape[0])


# ----------------------------------------------------------------------------- EM/RCA


class EMHyperparams(eqx.Module):
    """alpha: the graphical-lasso penalty in (4); noise_variance: s2 (fixed);
    penalize_diagonal: whether ||Lambda||_1 includes the diagonal (the authors' code and R
    glasso do); n_components: the width of W (``None``: p, with the data choosing q)."""

    alpha: Float[Array, ""] | float = 0.1
    noise_variance: Float[Array, ""] | float = 1.0
    penalize_diagonal: bool = eqx.field(static=True, default=True)
    n_components: int | None = eqx.field(static=True, default=None)


class EMState(eqx.Module):
    """W (p, k); the graphical-lasso state of Lambda (precision, its inverse, ...);
    bound: (4) at this state; max_decrease: the largest drop of (4) seen so far (0 when
    monotone); t: iterations."""

    W: Float[Array, "p k"]
    sparse: glasso.State
    bound: Float[Array, ""]
    max_decrease: Float[Array, ""]
    t: Array


def _glasso_hp(hp: EMHyperparams) -> glasso.Hyperparams:
    """The M-step's graphical lasso: Newton steps, warm-started by the previous M-step's
    precision. The column sweeps were barely faster here (the ten EM/RCA fits of the quick
    simulated network: 9.3 s against 10.3 s) and would change the EM paths behind the
    committed results."""
    return glasso.Hyperparams(hp.alpha, hp.penalize_diagonal, "quic")


def bound(W, precision, covariance, C, hp: EMHyperparams) -> Array:
    """The penalised log marginal likelihood (4) per draw."""
    p = C.shape[0]
    Sigma = covariance + hp.noise_variance * jnp.eye(p, dtype=C.dtype)
    weights = glasso.penalty_weights(p, hp.alpha, hp.penalize_diagonal, C.dtype)
    return log_likelihood(C, W, Sigma) - 0.5 * jnp.sum(weights * jnp.abs(precision))


def em_init(C, hp: EMHyperparams, precision=None) -> EMState:
    """W from probabilistic PCA with noise s2 (eigenvalues of C above s2, as the authors
    do) and Lambda = ``precision``, by default I / m, m the mean variance tr(C) / p: the
    authors' start Lambda = I on standardised data (m = 1), in proportion to C otherwise,
    so that the whole EM is equivariant under X -> a X (with alpha and s2 times a^2). The
    authors' own start on data that is not standardised is ``precision=I``: on their
    simulated network (m = 18) the EM from I reached higher bounds at the penalties tried
    (the rca_simulation experiment starts there). ``precision`` is not checked here
    (:func:`em_fit` checks it)."""
    C = jnp.asarray(C)
    p = C.shape[0]
    k = p if hp.n_components is None else hp.n_components
    lam, U = jnp.linalg.eigh(C)
    lam, U = lam[::-1][:k], U[:, ::-1][:, :k]
    W = U * jnp.sqrt(jnp.maximum(lam - hp.noise_variance, 0))
    if precision is None:
        mean_variance = jnp.trace(C) / p
        precision = jnp.eye(p, dtype=C.dtype) / jnp.where(mean_variance > 0, mean_variance, 1.0)
    sparse = glasso.state_from_precision(jnp.asarray(precision, C.dtype), C, _glasso_hp(hp))
    b = bound(W, sparse.precision, sparse.covariance, C, hp)
    return EMState(W, sparse, b, jnp.zeros((), C.dtype), jnp.zeros((), jnp.int32))


def expected_second_moment(W, precision, C, noise_variance) -> Array:
    """E-step (5): <z z'> averaged over the draws."""
    p = C.shape[0]
    R = W @ W.T + noise_variance * jnp.eye(p, dtype=C.dtype)
    R_inv = spd_inverse(R)
    V = spd_inverse(R_inv + precision)
    VRi = V @ R_inv
    return symmetrize(V + VRi @ C @ VRi.T)


def em_update(state: EMState, C, hp: EMHyperparams, *, glasso_tol: float = 1e-6,
              glasso_max_iter: int = 3) -> EMState:
    """One E-step (5), M-step (6) and RCA step (7)."""
    p = C.shape[0]
    ghp = _glasso_hp(hp)
    Ezz = expected_second_moment(state.W, state.sparse.precision, C, hp.noise_variance)
    warm = glasso.state_from_precision(state.sparse.precision, Ezz, ghp)
    sparse = glasso.fit(Ezz, ghp, init_state=warm, max_iter=glasso_max_iter, tol=glasso_tol, throw=False).state
    Sigma = sparse.covariance + hp.noise_variance * jnp.eye(p, dtype=C.dtype)
    W = solve(symmetrize(C), symmetrize(Sigma), state.W.shape[1]).components
    b = bound(W, sparse.precision, sparse.covariance, C, hp)
    drop = jnp.maximum(state.bound - b, 0)
    return EMState(W, sparse, b, jnp.maximum(state.max_decrease, drop), state.t + 1)


@readable_failure
def em_fit(C, hp: EMHyperparams, *, init_state: EMState | None = None, precision_init=None, max_iter: int = 1000,
           tol: float = 1e-7, glasso_tol: float = 1e-6, glasso_max_iter: int = 3, progress: bool | None = None,
           throw: bool = True) -> FitResult:
    """EM/RCA on a second-moment matrix ``C``: iterates (5)-(7) until the relative rise of
    (4) is below ``tol``, from ``init_state`` or else from :func:`em_init` with
    ``precision_init`` (a symmetric positive-definite start of Lambda; None: I / m). Each
    M-step runs at most ``glasso_max_iter`` Newton steps of the graphical lasso, to its
    relative KKT residual ``glasso_tol`` (see
    :func:`bayeskit.covariance.glasso.kkt_residual`). ``result.trace`` is (4) after each
    iteration (non-decreasing up to the graphical lasso's tolerance; see
    ``state.max_decrease``). Jittable; vmappable over ``C`` and the hyperparameters' arrays."""
    loop.check_tol(tol)
    loop.check_throw(throw)
    if is_concrete(C, hp.alpha, hp.noise_variance):
        check_covariance(C, "C", definite=False)
        glasso.check_alpha(hp.alpha)
        check_noise_variance(hp.noise_variance)
    check_square_shape(C, "C")  # static, like n_components: checked inside jit too
    check_components(hp.n_components, np.shape(C)[0])
    if precision_init is not None:
        if is_concrete(precision_init):
            check_covariance(precision_init, "precision_init")
        check_same_shape(C, precision_init, "precision_init")
    C = float_arg(C)
    start = None if precision_init is None else call_arg(precision_init, C.dtype)
    return _em_fit(C, loop.as_arrays(hp, C.dtype), init_state, start, max_iter=max_iter, tol=loop.tolerance(tol, C.dtype),
                   glasso_tol=call_arg(glasso_tol, C.dtype), glasso_max_iter=glasso_max_iter, progress=progress, throw=throw)


@functools.partial(jax.jit, static_argnames=("max_iter", "glasso_max_iter", "progress", "throw"))
def _em_fit(C, hp: EMHyperparams, init_state: EMState | None, precision_init, *, max_iter, tol, glasso_tol,
            glasso_max_iter, progress, throw) -> FitResult:
    C = symmetrize(C)
    start = None if precision_init is None else symmetrize(precision_init)
    state = em_init(C, hp, start) if init_state is None else init_state
    step = lambda s: em_update(s, C, hp, glasso_tol=glasso_tol, glasso_max_iter=glasso_max_iter)
    return loop.run(step, lambda s: s.bound, state, max_iter=max_iter, tol=tol, progress=progress, throw=throw)


def em_path(C, alphas, *, noise_variance, penalize_diagonal: bool = True, n_components: int | None = None,
            max_iter: int = 1000, tol: float = 1e-7, glasso_tol: float = 1e-6) -> FitResult:
    """EM/RCA along ``alphas``, each fit warm-started from the previous solution (give
    the penalties in decreasing order, from sparse to dense); leaves of the result have a
    leading axis over ``alphas``. One compiled program per shape and setting: new C, alphas
    or noise variance compile nothing."""
    loop.check_tol(tol)
    if is_concrete(C, alphas):
        check_covariance(C, "C", definite=False)
        glasso.check_alpha(alphas)
        check_noise_variance(noise_variance)
        check_components(n_components, np.shape(C)[0])
    C = float_arg(C)
    dtype = C.dtype
    return _em_path(C, call_arg(alphas, dtype), call_arg(noise_variance, dtype), loop.tolerance(tol, dtype),
                    call_arg(glasso_tol, dtype), penalize_diagonal=penalize_diagonal, n_components=n_components, max_iter=max_iter)


@functools.partial(jax.jit, static_argnames=("penalize_diagonal", "n_components", "max_iter"))
def _em_path(C, alphas, noise_variance, tol, glasso_tol, *, penalize_diagonal, n_components, max_iter) -> FitResult:
    C = symmetrize(C)

    def hparams(alpha):
        return EMHyperparams(alpha, noise_variance, penalize_diagonal, n_components)

    def one(state, alpha):
        hp = hparams(alpha)
        sparse = glasso.state_from_precision(state.sparse.precision, C, _glasso_hp(hp))
        warm = EMState(state.W, sparse, bound(state.W, sparse.precision, sparse.covariance, C, hp),
                       jnp.zeros((), C.dtype), jnp.zeros((), jnp.int32))
        result = em_fit(C, hp, init_state=warm, max_iter=max_iter, tol=tol, glasso_tol=glasso_tol, throw=False)
        return result.state, result

    return jax.lax.scan(one, em_init(C, hparams(alphas[0])), alphas)[1]


# ----------------------------------------------------------------------------- helpers


@host_blas()
def check_covariance(A, name: str, *, definite: bool = True) -> None:
    """A finite symmetric (p, p) matrix, positive definite (or semidefinite, up to the
    rounding of its own dtype: a second moment of fewer draws than variables, formed in
    float32, has eigenvalues of -1e-7 times its scale)."""
    A = np.asarray(A)
    eps = np.finfo(A.dtype if np.issubdtype(A.dtype, np.floating) else np.float64).eps
    A = A.astype(np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix; got shape {A.shape}.")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} has {int(np.sum(~np.isfinite(A)))} non-finite entries.")
    scale = max(float(np.abs(A).max()), np.finfo(float).tiny)
    if not is_symmetric(A):
        raise ValueError(f"{name} must be symmetric.")
    A = 0.5 * (A + A.T)
    # the smallest eigenvalue must exceed this
    floor = 1e-12 * scale if definite else -10 * max(A.shape[0], 10) * eps * scale
    try:  # a Cholesky factor of A - floor I exists iff every eigenvalue exceeds the floor
        np.linalg.cholesky(A - floor * np.eye(A.shape[0]))
    except np.linalg.LinAlgError:
        smallest = float(np.linalg.eigvalsh(A)[0])
        kind = "definite" if definite else "semidefinite"
        raise ValueError(f"{name} must be positive {kind}; its smallest eigenvalue is {smallest:.3g}.") from None


def check_same_shape(C, Sigma, name: str = "Sigma") -> None:
    if np.shape(C) != np.shape(Sigma):
        raise ValueError(f"{name} must match the data's second moment: {name} is {np.shape(Sigma)}, "
                         f"C is {np.shape(C)}.")


def check_noise_variance(s2) -> None:
    given = s2
    s2 = np.asarray(s2, dtype=float)
    if not np.all(np.isfinite(s2)) or np.any(s2 <= 0):
        raise ValueError(f"noise_variance must be positive and finite; got {given!r}.")


def check_components(k, p: int) -> None:
    if k is not None and not (isinstance(k, (int, np.integer)) and 1 <= k <= p):
        raise ValueError(f"n_components must be an int in [1, {p}] or None; got {k!r}.")


__all__ = ["Solution", "fit", "solve", "log_likelihood", "posterior", "paired_time_kernel", "EMHyperparams", "EMState",
           "bound", "em_init", "expected_second_moment", "em_update", "em_fit", "em_path", "check_covariance"]

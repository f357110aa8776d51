"""Gaussian-process regression with an ARD squared-exponential kernel, fitted by
evidence maximisation: the SBMoE paper's second baseline.

    k(x, x') = sigma^2 exp(-sum_i w_i (x_i - x'_i)^2) + noise^2 [x = x'],

one independent GP per output column (on standardised inputs and outputs), the log
marginal likelihood maximised over (log sigma^2, log w, log noise^2) by L-BFGS-B (as
GPy, the paper's implementation). The
predictive of each output is N(mean, var + noise^2); with several outputs the density
is the product of the marginals.
"""

from __future__ import annotations

import functools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.core import validation
from bayeskit.core.chunks import map_blocks
from bayeskit.core.linalg import pairwise_sqdist
from bayeskit.core.status import FitResult, Status, all_finite
from bayeskit.density.mixture import Mixture


class GP(eqx.Module):
    """Fitted GPs: log parameters per output (Dy, Dx + 2), the training data and the
    Cholesky factors and weights of the posterior."""

    log_params: Float[Array, "dy p"]
    X: Float[Array, "n dx"]
    chol: Float[Array, "dy n n"]
    alpha: Float[Array, "dy n"]
    x_shift: Array
    x_scale: Array
    y_shift: Array
    y_scale: Array


def _kernel(log_params: Array, A: Array, B: Array) -> Array:
    amp, root_w = jnp.exp(log_params[0]), jnp.exp(0.5 * log_params[1:-1])
    return amp * jnp.exp(-pairwise_sqdist(A * root_w, B * root_w))


def _neg_evidence(log_params: Array, X: Array, y: Array) -> Array:
    n = X.shape[0]
    K = _kernel(log_params, X, X) + (jnp.exp(log_params[-1]) + 1e-8) * jnp.eye(n, dtype=X.dtype)
    L = jnp.linalg.cholesky(K)
    a = jax.scipy.linalg.cho_solve((L, True), y)
    return 0.5 * y @ a + jnp.sum(jnp.log(jnp.diagonal(L))) + 0.5 * n * math.log(2 * math.pi)


@jax.jit
def _value_and_grad(log_params: Array, X: Array, y: Array):
    return jax.value_and_grad(_neg_evidence)(log_params, X, y)


def _optimise(X: Array, y: Array, max_iter: int):
    """Maximise the evidence by L-BFGS-B on the host, with a jitted value and gradient
    (SciPy's ``OptimizeResult``)."""
    from scipy.optimize import minimize

    dx = X.shape[1]
    start = np.concatenate([[0.0], np.full(dx, -math.log(2.0 * dx)), [math.log(0.1)]])

    def f(p):
        value, grad = _value_and_grad(jnp.asarray(p, X.dtype), X, y)
        return float(value), np.asarray(grad, np.float64)

    bounds = [(-10.0, 10.0)] + [(-25.0, 10.0)] * dx + [(-12.0, 5.0)]
    return minimize(f, start, jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": max_iter})


@jax.jit
def _posterior(log_params: Array, X: Array, Y: Array):
    n = X.shape[0]

    def one(p, y):
        K = _kernel(p, X, X) + (jnp.exp(p[-1]) + 1e-8) * jnp.eye(n, dtype=X.dtype)
        L = jnp.linalg.cholesky(K)
        return L, jax.scipy.linalg.cho_solve((L, True), y)

    return jax.vmap(one, in_axes=(0, 1))(log_params, Y)


def fit(X, Y, *, max_iter: int = 200) -> FitResult:
    """Fit one ARD GP per output column by L-BFGS-B on the log evidence (at most
    ``max_iter`` iterations each; log amplitude in [-10, 10], log ARD weights in
    [-25, 10] so that an irrelevant input can be switched off, log noise in [-12, 5]).

    Returns a :class:`~bayeskit.core.status.FitResult` whose state is the :class:`GP`,
    whose objective is the summed log evidence of the standardised outputs and whose
    ``n_iter`` is the most L-BFGS-B iterations any output took; the status is
    ``max_iter_reached`` when an output's search stopped before converging."""
    X = validation.check_matrix(X, "X", min_rows=2)
    Y = np.asarray(Y)
    Y = validation.check_matrix(Y[:, None] if Y.ndim == 1 else Y, "Y", min_rows=2)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must have the same number of rows, got {len(X)} and {len(Y)}.")
    xs, xsd = X.mean(0), X.std(0)
    ys, ysd = Y.mean(0), Y.std(0)
    xsd, ysd = np.where(xsd > 0, xsd, 1.0), np.where(ysd > 0, ysd, 1.0)
    Xs, Ys = jnp.asarray((X - xs) / xsd), jnp.asarray((Y - ys) / ysd)
    searches = [_optimise(Xs, Ys[:, j], max_iter) for j in range(Ys.shape[1])]
    log_params = jnp.asarray(np.stack([r.x for r in searches]), Xs.dtype)
    chol, alpha = _posterior(log_params, Xs, Ys)
    f = lambda a: jnp.asarray(a, Xs.dtype)
    model = GP(log_params, Xs, chol, alpha, f(xs), f(xsd), f(ys), f(ysd))
    evidence = -sum(float(r.fun) for r in searches)
    if not (np.isfinite(evidence) and all_finite(chol, alpha)):
        status = Status.nonfinite
    else:
        status = Status.successful if all(r.success for r in searches) else Status.max_iter_reached
    return FitResult(model, jnp.asarray([evidence], Xs.dtype), jnp.asarray(max(r.nit for r in searches)), status)


@functools.partial(jax.jit, static_argnames="chunk_size")
def predictive(model: GP, X: Float[Array, "m dx"], chunk_size: int | None = None) -> Mixture:
    """The product of the per-output Gaussian predictives at the rows of X, as a
    one-component :class:`~bayeskit.density.mixture.Mixture` with diagonal covariance,
    ``chunk_size`` rows at a time."""
    xs = (jnp.asarray(X, model.X.dtype) - model.x_shift) / model.x_scale
    return map_blocks(lambda x: _predictive_rows(model, x), xs, chunk_size)


def _predictive_rows(model: GP, xs: Float[Array, "m dx"]) -> Mixture:
    """:func:`predictive` at standardised rows ``xs``."""

    def one(p, L, a):
        Ks = _kernel(p, xs, model.X)
        v = jax.scipy.linalg.solve_triangular(L, Ks.T, lower=True)
        var = jnp.exp(p[0]) - jnp.sum(v**2, axis=0) + jnp.exp(p[-1])
        return Ks @ a, jnp.maximum(var, 1e-12)

    mean, var = jax.vmap(one)(model.log_params, model.chol, model.alpha)  # (Dy, M)
    sd = jnp.sqrt(var.T) * model.y_scale
    m = xs.shape[0]
    return Mixture(
        log_weights=jnp.zeros((m, 1), xs.dtype),
        means=(model.y_shift + model.y_scale * mean.T)[:, None, :],
        scale_tril=jax.vmap(jnp.diag)(sd)[:, None, :, :],
    )

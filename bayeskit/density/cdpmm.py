"""The conditional Dirichlet-process mixture (C-DPMM), the SBMoE paper's first baseline.

A DP Gaussian mixture (stick-breaking prior, concentration alpha = 1, conjugate NIW base
measure) is fitted by mean-field VB to the joint vectors v = (x, y) (scikit-learn's
``BayesianGaussianMixture``, standardised columns), and conditioned on x: component k of
the plug-in mixture at its variational means gives, for an input x*,

    weight  ∝ pi_k N(x* | mu_k^x, S_k^xx)
    mean    = mu_k^y + S_k^yx (S_k^xx)^-1 (x* - mu_k^x)
    cov     = S_k^yy - S_k^yx (S_k^xx)^-1 S_k^xy

a Gaussian mixture in y per input. Constant input columns carry nothing and are dropped;
the joint covariance is kept finite by ``reg_covar`` (scikit-learn's covariance
regulariser), raised tenfold (up to 1e-2) when scikit-learn reports an ill-defined
covariance, as with inputs of lower rank than their dimension; the value used is kept.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.core import validation
from bayeskit.core.chunks import map_blocks
from bayeskit.core.status import FitResult, Status
from bayeskit.density.mixture import Mixture


class CDPMM(eqx.Module):
    """A fitted joint mixture over standardised (x, y) and the standardisation."""

    weights: Float[Array, " k"]
    means: Float[Array, "k d"]
    covariances: Float[Array, "k d d"]
    dx: int = eqx.field(static=True)
    keep: tuple = eqx.field(static=True)
    reg_covar: float = eqx.field(static=True)
    shift: Float[Array, " d"]
    scale: Float[Array, " d"]


def fit(key, X, Y, n_components: int, *, max_iter: int = 1000, reg_covar: float = 1e-6) -> FitResult:
    """Fit the DP mixture (alpha = 1, truncation ``n_components``) to the joint (x, y) by
    scikit-learn's variational ``BayesianGaussianMixture``, seeded from ``key``.

    Returns a :class:`~bayeskit.core.status.FitResult` whose state is the :class:`CDPMM`,
    whose objective is scikit-learn's final lower bound and ``n_iter`` its iterations;
    the status is ``max_iter_reached`` when it did not converge. ``reg_covar`` grows
    tenfold (up to 1e-2) while the empirical covariance of a component is ill-defined."""
    from sklearn.mixture import BayesianGaussianMixture

    X = validation.check_matrix(X, "X", min_rows=2)
    Y = np.asarray(Y)
    Y = validation.check_matrix(Y[:, None] if Y.ndim == 1 else Y, "Y", min_rows=2)
    if len(X) != len(Y):
        raise ValueError(f"X and Y must have the same number of rows, got {len(X)} and {len(Y)}.")
    validation.check_int_in("n_components", n_components, 1)
    keep = tuple(int(j) for j in np.flatnonzero(X.std(0) > 0))
    V = np.hstack([X[:, list(keep)], Y]).astype(np.float64)
    shift, sd = V.mean(0), V.std(0)
    scale = np.where(sd > 0, sd, 1.0)
    seed = int(jax.random.randint(key, (), 0, np.iinfo(np.int32).max))
    while True:
        try:
            model = BayesianGaussianMixture(
                n_components=n_components,
                weight_concentration_prior_type="dirichlet_process",
                weight_concentration_prior=1.0,
                covariance_type="full",
                max_iter=max_iter,
                reg_covar=reg_covar,
                random_state=seed,
            ).fit((V - shift) / scale)
            break
        except ValueError as err:
            if "ill-defined empirical covariance" not in str(err) or reg_covar >= 1e-2:
                raise
            reg_covar *= 10
    state = CDPMM(
        weights=jnp.asarray(model.weights_),
        means=jnp.asarray(model.means_),
        covariances=jnp.asarray(model.covariances_),
        dx=len(keep),
        keep=keep,
        reg_covar=reg_covar,
        shift=jnp.asarray(shift),
        scale=jnp.asarray(scale),
    )
    status = Status.successful if model.converged_ else Status.max_iter_reached
    return FitResult(state, jnp.asarray([model.lower_bound_]), jnp.asarray(model.n_iter_), status)


@functools.partial(jax.jit, static_argnames="chunk_size")
def predictive(model: CDPMM, X: Float[Array, "m dx"], chunk_size: int | None = None) -> Mixture:
    """The conditional mixture p(y | x) at the rows of X (caller's units), its weights and
    means computed ``chunk_size`` rows at a time."""
    dx = model.dx
    xs = (jnp.asarray(X, model.means.dtype)[:, list(model.keep)] - model.shift[:dx]) / model.scale[:dx]
    S = model.covariances
    Sxx, Syx, Syy = S[:, :dx, :dx], S[:, dx:, :dx], S[:, dx:, dx:]
    chol_xx = jnp.linalg.cholesky(Sxx)
    gain = jnp.swapaxes(jax.scipy.linalg.cho_solve((chol_xx, True), jnp.swapaxes(Syx, -1, -2)), -1, -2)  # S_yx S_xx^-1

    def rows(x):
        diff = x[:, None, :] - model.means[None, :, :dx]  # (M, K, Dx)
        white = jax.scipy.linalg.solve_triangular(chol_xx[None], diff[..., None], lower=True)[..., 0]
        log_px = -0.5 * jnp.sum(white**2, -1) - jnp.sum(jnp.log(jnp.diagonal(chol_xx, axis1=-2, axis2=-1)), -1)
        log_w = jnp.log(model.weights) + log_px
        return log_w - jax.nn.logsumexp(log_w, axis=1, keepdims=True), model.means[None, :, dx:] + jnp.einsum("kij,mkj->mki", gain, diff)

    log_w, means = map_blocks(rows, xs, chunk_size)
    cond = Syy - gain @ jnp.swapaxes(Syx, -1, -2)
    chol = jnp.linalg.cholesky(0.5 * (cond + jnp.swapaxes(cond, -1, -2)))
    y_scale = model.scale[dx:]
    return Mixture(
        log_weights=log_w,
        means=model.shift[dx:] + y_scale * means,
        scale_tril=y_scale[:, None] * chol,
    )

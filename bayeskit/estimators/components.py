"""Covariance and component models: the graphical lasso of :mod:`bayeskit.glasso`."""

from __future__ import annotations

import warnings

import jax.numpy as jnp
import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted, validate_data

from .. import glasso
from ..core import validation
from ..core.status import Status, is_failure


class GraphicalLasso(BaseEstimator):
    """Sparse inverse covariance by the graphical lasso (QUIC's Newton method, see
    :mod:`bayeskit.glasso`): minimises -log det Theta + tr(S Theta) + alpha sum |Theta_ij|,
    the sum over the off-diagonal entries (scikit-learn's convention) or, with
    ``penalize_diagonal=True``, over all entries (R glasso's default).

    ``fit(X)`` uses the empirical covariance of X (rows are samples; centred unless
    ``assume_centered``), ``fit_covariance(S)`` a given covariance.

    Attributes
    ----------
    covariance_ : (p, p) W = Theta^-1
    precision_ : (p, p) Theta, with exact zeros
    location_ : (p,) the mean that was removed (zeros for ``fit_covariance``)
    n_iter_ : Newton iterations run
    kkt_ : the largest violation of the optimality conditions at the solution
    objective_ : the objective after each iteration (non-increasing)
    """

    def __init__(self, alpha=0.01, *, penalize_diagonal=False, tol=1e-4, max_iter=100, assume_centered=False):
        self.alpha = alpha
        self.penalize_diagonal = penalize_diagonal
        self.tol = tol
        self.max_iter = max_iter
        self.assume_centered = assume_centered

    def fit(self, X, y=None):
        """Fit on the empirical covariance of X (n_samples, n_features)."""
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2, ensure_min_features=2)
        self.location_ = np.zeros(X.shape[1], X.dtype) if self.assume_centered else X.mean(0)
        Xc = X - self.location_
        return self._fit(Xc.T @ Xc / X.shape[0], self.location_)

    def fit_covariance(self, S):
        """Fit on a given covariance matrix S (p, p)."""
        S = validation.check_matrix(S, "S", min_rows=2, min_cols=2)
        self.n_features_in_ = S.shape[0]
        return self._fit(S, np.zeros(S.shape[0], S.dtype))

    def _fit(self, S, location):
        validation.check_positive(tol=self.tol)
        validation.check_int_in("max_iter", self.max_iter, 1)
        hp = glasso.Hyperparams(float(self.alpha), bool(self.penalize_diagonal))
        # glasso.fit checks S and alpha on the host before compiling
        result = glasso.fit(jnp.asarray(S), hp, max_iter=int(self.max_iter), tol=float(self.tol), throw=False)
        if bool(is_failure(result.status)):
            raise RuntimeError(f"GraphicalLasso failed: {Status[result.status]}")
        if result.status == Status.max_iter_reached:
            warnings.warn(f"GraphicalLasso stopped at max_iter={self.max_iter} with KKT residual "
                          f"{float(result.state.kkt):.3g}; raise max_iter or tol.", ConvergenceWarning, stacklevel=3)
        self.location_ = location
        self.precision_ = np.asarray(result.state.precision)
        self.covariance_ = np.asarray(result.state.covariance)
        self.n_iter_ = int(result.n_iter)
        self.kkt_ = float(result.state.kkt)
        self.objective_ = np.asarray(result.trace)[: self.n_iter_]
        return self

    def score(self, X, y=None):
        """Mean Gaussian log-likelihood of the rows of X under N(location_, covariance_)."""
        check_is_fitted(self, "precision_")
        X = validate_data(self, X, reset=False, dtype=[np.float64, np.float32])
        Xc = X - self.location_
        _, logdet = np.linalg.slogdet(self.precision_)
        quad = np.einsum("ij,jk,ik->i", Xc, self.precision_, Xc)
        return float(np.mean(0.5 * (logdet - quad - X.shape[1] * np.log(2 * np.pi))))


__all__ = ["GraphicalLasso"]

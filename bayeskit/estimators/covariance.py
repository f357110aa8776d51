"""Covariance and component models: the graphical lasso of :mod:`bayeskit.covariance.glasso`,
residual component analysis and EM/RCA of :mod:`bayeskit.covariance.rca`, sparse PCA of
:mod:`bayeskit.covariance.sparse_pca`."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from bayeskit.core import validation
from bayeskit.core.notices import warn
from bayeskit.core.scaling import check_representable, out_of_range, squared_scale, unit_scale
from bayeskit.core.xla import host_blas
from bayeskit.covariance import glasso, rca, sparse_pca
from bayeskit.estimators._common import OneCallAtATime, finish, gaussian_score, validate


class GraphicalLasso(OneCallAtATime, BaseEstimator):
    """Sparse inverse covariance by the graphical lasso (column sweeps for p <= 100, QUIC's
    Newton steps above, or as ``solver`` says; see :mod:`bayeskit.covariance.glasso`):
    minimises -log det Theta + tr(S Theta) + alpha sum |Theta_ij|, the sum over the
    off-diagonal entries (scikit-learn's convention) or, with ``penalize_diagonal=True``,
    over all entries (R glasso's default).

    ``fit(X)`` uses the empirical covariance of X (rows are samples; centred unless
    ``assume_centered``), ``fit_covariance(S)`` a given covariance.

    Attributes
    ----------
    covariance_ : (p, p) W = Theta^-1
    precision_ : (p, p) Theta, with exact zeros
    location_ : (p,) the mean that was removed (zeros for ``fit_covariance``)
    n_iter_ : iterations run (column sweeps or Newton steps)
    kkt_ : the largest violation of the optimality conditions at the solution, entry (i, j)
        divided by sqrt(S_ii S_jj) (free of the data's units; the fit stops at ``tol``)
    objective_ : the objective after each iteration (non-increasing for the Newton steps)

    The fit runs on S / v with alpha / v (v a power of two near the median variance) and
    puts v back, so data at 1e20 fit in float32; the floating attributes are float64.
    """

    def __init__(self, alpha=0.01, *, penalize_diagonal=False, solver="auto", tol=1e-4, max_iter=100, assume_centered=False):
        self.alpha = alpha
        self.penalize_diagonal = penalize_diagonal
        self.solver = solver
        self.tol = tol
        self.max_iter = max_iter
        self.assume_centered = assume_centered

    def fit(self, X, y=None):
        """Fit on the empirical covariance of X (n_samples, n_features)."""
        X = validate(self, X, min_rows=2, dtype=[np.float64, np.float32], ensure_min_features=2)
        X_unit, s = unit_scale(X)  # a power of two: S of data at 1e20 (1e40) would overflow float32
        _, S_unit = _second_moment(self, X_unit, False)
        self.location_ = self.location_ * s
        constant = np.flatnonzero(np.diagonal(S_unit) <= 0)
        if constant.size:
            raise ValueError(f"column(s) {constant[:5].tolist()} of X are constant: a variance of 0 leaves the precision "
                             f"undefined; drop them.")
        return self._fit(S_unit, squared_scale(s, "the covariance"), self.location_)

    def fit_covariance(self, S):
        """Fit on a given covariance matrix S (p, p)."""
        S = validation.check_matrix(S, "S", min_rows=2, min_cols=2)
        self.n_features_in_ = S.shape[0]
        vars(self).pop("feature_names_in_", None)  # an earlier fit's columns; S has none
        v = _variance_scale(S)
        return self._fit(S / v, v, np.zeros(S.shape[0], S.dtype))

    def _fit(self, S_unit, v, location):
        """Solve (1) for S = v S_unit: (1) for S_unit and alpha / v has the solution v Theta, and
        fitting there (v a power of two) keeps data at 1e+-20 clear of float32's range."""
        validation.check_positive(tol=self.tol)
        validation.check_int_in("max_iter", self.max_iter, 1)
        glasso.check_alpha(self.alpha)
        check_representable("alpha", float(self.alpha) / v, np.sqrt(v), S_unit.dtype)
        hp = glasso.Hyperparams(float(self.alpha) / v, bool(self.penalize_diagonal), self.solver)
        # glasso.fit checks S and alpha on the host before compiling
        result = glasso.fit(S_unit, hp, max_iter=int(self.max_iter), tol=float(self.tol), throw=False)
        finish(result, "GraphicalLasso", detail=f" (max_iter={self.max_iter}, KKT residual {float(result.state.kkt):.3g})")
        self.location_ = location
        self.precision_ = np.asarray(result.state.precision, np.float64) / v
        self.covariance_ = np.asarray(result.state.covariance, np.float64) * v
        self.n_iter_ = int(result.n_iter)
        self.kkt_ = float(result.state.kkt)
        # F = -log det Theta + tr(S Theta) + alpha |Theta|_1 gains p log v
        self.objective_ = np.asarray(result.trace, np.float64)[: self.n_iter_] + S_unit.shape[0] * np.log(v)
        return self

    def score(self, X, y=None):
        """Mean Gaussian log-likelihood of the rows of X under N(location_, covariance_)."""
        check_is_fitted(self, "precision_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        return gaussian_score(X, self.location_, self.covariance_)


def _variance_scale(S) -> float:
    """The power of two nearest the median of the diagonal of a given ``S`` (1 when that is
    not a positive finite number: the checks of S explain why)."""
    median = float(np.median(np.diagonal(S)))
    return float(np.ldexp(1.0, int(np.round(np.log2(median))))) if np.isfinite(median) and median > 0 else 1.0


@host_blas()
def _second_moment(estimator, Y, dual: bool):
    """Centre the draws (rows of Y, or columns when ``dual``) unless ``assume_centered``;
    return the draws as rows and their second moment."""
    Z = Y.T if dual else Y
    estimator.location_ = np.zeros(Z.shape[1], Z.dtype) if estimator.assume_centered else Z.mean(0)
    Zc = Z - estimator.location_
    return Zc, Zc.T @ Zc / Z.shape[0]


class RCA(OneCallAtATime, TransformerMixin, BaseEstimator):
    """Maximum-likelihood residual component analysis (Kalaitzis & Lawrence 2012; see
    :mod:`bayeskit.covariance.rca`): y ~ N(0, W W' + Sigma) with Sigma given, W from the generalised
    eigenproblem C S = Sigma S D.

    Parameters
    ----------
    n_components : int or None
        Number of components. ``None`` keeps the generalised eigenvalues above 1, which may
        be none; an int keeps the leading ones (a component whose eigenvalue is <= 1 is 0).
    dual : bool
        False (primal): the rows of Y are the draws and Sigma is (n_features, n_features).
        True (dual): the columns are the draws, Sigma is (n_samples, n_samples) (for
        example a kernel over time points), and ``components_`` holds the latent
        coordinates X of the samples.
    assume_centered : bool
        Do not subtract the mean draw.

    Attributes
    ----------
    components_ : (d, q) W = Sigma S (D - I)^{1/2}, d the dimension Sigma lives on
    eigenvalues_ : (d,) all generalised eigenvalues, decreasing
    eigenvectors_ : (d, d) S, Sigma-normalised
    n_components_ : q
    location_ : the mean draw that was removed
    log_likelihood_ : mean log-likelihood per draw at the solution
    scale_ : s, the power of two divided out of Y (and s^2 out of Sigma) before the fit

    The solution is equivariant: Y / s with Sigma / s^2 has the same eigenvalues, W / s and
    S s. Fitting there keeps data at 1e+-20 clear of float32's range (where Sigma would
    overflow in float32, pass it in float64).
    """

    def __init__(self, n_components=None, *, dual=False, assume_centered=False):
        self.n_components = n_components
        self.dual = dual
        self.assume_centered = assume_centered

    def fit(self, Y, Sigma):
        """Fit on data Y (n_samples, n_features) and explained covariance Sigma."""
        Y = validate(self, Y, x_name="Y", min_rows=2, dtype=[np.float64, np.float32])
        Y_unit, s = unit_scale(Y)
        Z, C = _second_moment(self, Y_unit, bool(self.dual))
        self.location_ = self.location_ * s
        Sigma = validation.check_matrix(Sigma, "Sigma")
        rca.check_covariance(Sigma, "Sigma")
        rca.check_same_shape(C, Sigma)
        Sigma_unit = np.asarray(Sigma, np.float64) / (s * s)
        check_representable("Sigma", Sigma_unit, s, C.dtype)
        rank = min(C.shape[0], Z.shape[0] - (0 if self.assume_centered else 1))
        if self.n_components is not None:
            validation.check_int_in("n_components", self.n_components, 1, rank)
        # Sigma is checked above and C = Z'Z / n is PSD by construction; host arrays, which rca.fit's call puts on the device
        result = finish(rca.fit(C, Sigma_unit.astype(C.dtype), self.n_components, check=False), "RCA")
        solution = result.state
        q = int(solution.n_components)
        self.scale_ = s
        self.components_ = np.asarray(solution.components)[:, :q] * C.dtype.type(s)
        self.eigenvalues_ = np.asarray(solution.eigenvalues)
        self.eigenvectors_ = np.asarray(solution.eigenvectors) / C.dtype.type(s)
        self.n_components_ = q
        self.sigma_ = np.array(Sigma)  # a copy: the caller may overwrite Sigma
        self.log_likelihood_ = float(result.objective) - C.shape[0] * np.log(s)  # the density of Y = s Y_unit
        return self

    def _draws(self, Y):
        check_is_fitted(self, "components_")
        if self.dual:  # new draws are new columns, so the column count may differ from fit's
            Z = validation.check_matrix(Y, "Y").T
        else:
            Z = validate(self, Y, x_name="Y", reset=False, dtype=[np.float64, np.float32])
        if Z.shape[1] != self.components_.shape[0]:
            raise ValueError(f"each draw must have length {self.components_.shape[0]}; got {Z.shape[1]}.")
        return Z

    def transform(self, Y):
        """Posterior means (3) of the latent coordinates: one row per draw (per sample, or
        per feature when ``dual``)."""
        Z = self._draws(Y)
        s = self.scale_  # the latent coordinates are scale-free: computed on the unit scale
        unit = lambda A, power: (np.asarray(A, np.float64) / s**power).astype(Z.dtype)  # host arrays, cast before the jitted call
        mean, _ = rca.posterior(unit(Z - self.location_, 1), unit(self.components_, 1), unit(self.sigma_, 2))
        return np.asarray(mean)

    def residual_scores(self, Y):
        """||S_q' y||^2 per draw: the squared length of each draw's projection on the q
        residual generalised eigenvectors (chi-square with q degrees of freedom when y ~
        N(0, Sigma)). With ``dual=True`` and a temporal kernel Sigma this ranks genes by
        how far their treatment and control profiles depart from one shared function."""
        Z = self._draws(Y)
        coordinates = (Z - self.location_) @ self.eigenvectors_[:, : self.n_components_]
        return np.sum(coordinates**2, axis=1)

    def score(self, Y, y=None):
        """Mean log-likelihood per draw under N(location_, W W' + Sigma)."""
        Z = self._draws(Y)
        W = self.components_.astype(np.float64)  # W W' of data at 1e20 overflows float32
        return gaussian_score(Z, self.location_, W @ W.T + self.sigma_)


class EMRCA(OneCallAtATime, BaseEstimator):
    """Low rank plus sparse inverse plus isotropic noise by EM/RCA (Kalaitzis & Lawrence
    2012; see :mod:`bayeskit.covariance.rca`): y ~ N(0, W W' + Lambda^-1 + s2 I) with a sparse
    precision Lambda (graphical-lasso M-step) and residual components W (RCA step).

    Parameters
    ----------
    alpha : float
        The L1 penalty on Lambda, as in :class:`GraphicalLasso`.
    noise_variance : float or None
        s2, held fixed; ``None`` takes 0.5 tr(C) / p, the authors' choice.
    n_components : int or None
        Width of W; ``None`` lets each RCA step keep the eigenvalues above 1.
    penalize_diagonal : bool
        Penalise Lambda's diagonal too (default True, the authors' and R glasso's choice).
    tol, max_iter
        Stop when the relative rise of the penalised bound is below ``tol``.
    precision_init : (p, p) array or None
        Where Lambda starts, in the data's units; ``None`` takes I / m, m the mean variance
        (the authors' I on standardised data, and a fit free of the data's units). The
        authors start at I whatever the units: ``np.eye(p)`` reproduces their EM on data
        that is not standardised (their simulated network, m = 18, where it reached higher
        bounds at the penalties tried).

    Attributes
    ----------
    precision_ : (p, p) Lambda, with exact zeros
    components_ : (p, q) W, its nonzero columns
    covariance_ : (p, p) W W' + Lambda^-1 + s2 I
    noise_variance_ : s2
    bound_ : the penalised log marginal likelihood per draw after each iteration
    max_decrease_ : the largest drop of the bound between iterations (0 when monotone)
    n_iter_, location_

    The fit runs on X / s with alpha / s^2, s2 / s^2 and precision_init times s^2 (s a power
    of two near the data's scale; the solution is equivariant) and puts s back, so data at
    1e+-20 fit in float32; the floating attributes are float64.
    """

    def __init__(self, alpha=0.1, *, noise_variance=None, n_components=None, penalize_diagonal=True, tol=1e-7,
                 max_iter=1000, assume_centered=False, precision_init=None):
        self.alpha = alpha
        self.noise_variance = noise_variance
        self.n_components = n_components
        self.penalize_diagonal = penalize_diagonal
        self.tol = tol
        self.max_iter = max_iter
        self.assume_centered = assume_centered
        self.precision_init = precision_init

    def fit(self, X, y=None):
        """Fit on data X (n_samples, n_features); rows are the draws."""
        X = validate(self, X, min_rows=2, dtype=[np.float64, np.float32], ensure_min_features=2)
        X_unit, s = unit_scale(X)
        _, C = _second_moment(self, X_unit, False)
        self.location_ = np.asarray(self.location_, np.float64) * s
        v = squared_scale(s, "the covariance")
        validation.check_positive(tol=self.tol)
        validation.check_int_in("max_iter", self.max_iter, 1)
        glasso.check_alpha(self.alpha)
        if self.noise_variance is None:
            s2 = 0.5 * np.trace(C) / C.shape[0]
            if not s2 > 0:
                raise ValueError("every column of X is constant: noise_variance=None takes half the mean variance, 0 "
                                 "here; give a positive noise_variance or data that vary.")
        else:
            rca.check_noise_variance(self.noise_variance)
            s2 = float(self.noise_variance) / v
        check_representable("alpha", float(self.alpha) / v, s, C.dtype)
        check_representable("noise_variance", s2, s, C.dtype)
        hp = rca.EMHyperparams(float(self.alpha) / v, s2, bool(self.penalize_diagonal), self.n_components)
        start = None if self.precision_init is None else _precision_init(self.precision_init, C, s)
        # rca.em_fit checks C, n_components and the start on the host before compiling
        result = rca.em_fit(C, hp, precision_init=start, max_iter=int(self.max_iter), tol=float(self.tol),
                            throw=False)
        finish(result, "EMRCA", detail=f" (max_iter={self.max_iter})")
        state = result.state
        self.n_iter_ = int(result.n_iter)
        shift = C.shape[0] * np.log(s)  # (4) of X = s X_unit: log|K| gains p log s^2
        self.bound_ = np.asarray(result.trace, np.float64)[: self.n_iter_] - shift
        self.max_decrease_ = float(state.max_decrease)
        rounding = 16 * C.shape[0] * float(np.finfo(state.bound.dtype).eps)  # of (4)'s p x p log determinants in the fit's dtype
        if self.max_decrease_ > (1e-8 + rounding) * (1 + abs(float(state.bound))):
            warn(f"the EM/RCA bound fell by {self.max_decrease_:.3g} between two iterations (the "
                 "graphical-lasso M-step is solved to a tolerance).", RuntimeWarning)
        W = np.asarray(state.W, np.float64)
        self.components_ = W[:, np.linalg.norm(W, axis=0) > 0] * s
        self.precision_ = np.asarray(state.sparse.precision, np.float64) / v
        self.noise_variance_ = float(s2) * v
        sparse_cov = np.asarray(state.sparse.covariance, np.float64) * v
        self.covariance_ = self.components_ @ self.components_.T + sparse_cov + self.noise_variance_ * np.eye(C.shape[0])
        return self

    def score(self, X, y=None):
        """Mean Gaussian log-likelihood of the rows of X under N(location_, covariance_)."""
        check_is_fitted(self, "precision_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        return gaussian_score(X, self.location_, self.covariance_)


def _precision_init(precision, C, s) -> np.ndarray:
    """EMRCA's ``precision_init`` on the fit's unit scale: Lambda times s^2, for C divided by
    s^2 (em_fit checks its shape and that it is symmetric and positive definite)."""
    unit = validation.check_matrix(precision, "precision_init", min_rows=1) * (s * s)
    check_representable("precision_init", unit, s, C.dtype, fix="give precision_init on the scale of 1 / the data's variance")
    return unit.astype(C.dtype)


__all__ = ["GraphicalLasso", "RCA", "EMRCA"]


class SparsePCA(OneCallAtATime, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Sparse principal components by the DSPCA relaxation, solved by block coordinate ascent
    after safe feature elimination (Zhang & El Ghaoui 2011; :mod:`bayeskit.covariance.sparse_pca`).

    Works from a dense array or a scipy.sparse matrix (rows are samples) without forming the
    full covariance: only the variances and the block of the features that survive
    elimination are computed. Later components come from projection deflation of the
    covariance (Mackey 2008).

    Parameters
    ----------
    n_components : int
    cardinality : int, optional
        Target number of non-zero loadings per component; the penalty is searched by
        bisection. Give this or ``alpha``; with neither, ``min(5, p)``, the paper's target.
    alpha : float, optional
        The penalty lambda, fixed for every component.
    max_features : int
        At most this many surviving features (those of largest variance) enter a solve.
    beta, max_iter, threshold
        The log-barrier weight, the most BCA sweeps per solve, and the relative size below which a loading
        of the leading eigenvector is set to zero.

    Attributes
    ----------
    components_ : (n_components, p) unit loadings, mostly zeros
    alphas_ : (n_components,) the penalty of each component
    n_features_kept_ : (n_components,) features that survived safe elimination
    explained_variance_ : (n_components,) v' Sigma_k v, the variance of each component's
        scores in the deflated covariance
    mean_ : (p,) feature means
    scale_ : s, the root mean feature variance divided out of X before the fit

    The components are those of X / s with the penalty alpha / s^2, so they do not change
    with X's units; ``alphas_`` and ``explained_variance_`` are put back in X's units (a
    variance beyond float64, of data at 1e300, is refused).

    The fit runs in float64 whatever JAX's default dtype (its results are NumPy float64
    arrays): in float32 the thresholded support of a solution near the critical penalty
    flips between none and a whole block of features, so the penalty search for a
    cardinality never settles (five components of a 500 x 2000 corpus took minutes
    instead of seconds).
    """

    def __init__(self, n_components=1, *, cardinality=None, alpha=None, max_features=2000, beta=1e-4, max_iter=20,
                 threshold=1e-3):
        self.n_components = n_components
        self.cardinality = cardinality
        self.alpha = alpha
        self.max_features = max_features
        self.beta = beta
        self.max_iter = max_iter
        self.threshold = threshold

    def fit(self, X, y=None):
        X = self._check(X, reset=True)
        n, p = X.shape
        validation.check_int_in("n_components", self.n_components, 1, p)
        validation.check_int_in("max_features", self.max_features, 1)
        validation.check_int_in("max_iter", self.max_iter, 1)
        validation.check_positive(beta=self.beta)
        cardinality = self.cardinality
        if cardinality is not None:
            validation.check_int_in("cardinality", cardinality, 1, p)
        elif self.alpha is not None:
            glasso.check_alpha(self.alpha)
        else:
            cardinality = min(5, p)
        alpha = None if self.alpha is None else float(self.alpha)
        with jax.enable_x64(True):  # fit_components works on X / data_scale(X)
            result = sparse_pca.fit_components(X, self.n_components, cardinality=cardinality, alpha=alpha,
                                               max_features=self.max_features, beta=self.beta, max_iter=self.max_iter,
                                               threshold=self.threshold)
        r = finish(result, "SparsePCA").state
        s = sparse_pca.data_scale(X)
        out_of_range(r.explained_variance, s, np.float64, "the explained variance")
        self.components_, self.n_features_kept_ = r.components, r.n_features_kept
        self.alphas_, self.explained_variance_, self.mean_ = r.alphas, r.explained_variance, r.mean
        self.scale_ = s
        return self

    def _check(self, X, *, reset: bool):
        """X through scikit-learn's checks, which keep and compare a DataFrame's column names
        and the number of features: a dense X by :func:`validate` (named messages), a
        scipy.sparse X (CSR or CSC) by ``validate_data`` directly. A fit needs two rows, a
        transform one."""
        min_rows = 2 if reset else 1
        if not hasattr(X, "tocsr"):
            return validate(self, X, reset=reset, min_rows=min_rows, dtype=[np.float64, np.float32])
        return validate_data(self, X, reset=reset, accept_sparse=["csr", "csc"], ensure_min_samples=min_rows,
                             dtype=[np.float64, np.float32])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True  # scipy.sparse X is fitted without densifying it
        return tags

    @property
    def _n_features_out(self):
        """The columns of ``transform``'s output (``get_feature_names_out``: sparsepca0, ...)."""
        return self.components_.shape[0]

    def transform(self, X):
        """Scores (X - mean_) components_' (dense)."""
        check_is_fitted(self, "components_")
        X = self._check(X, reset=False)
        return np.asarray(X @ self.components_.T) - self.mean_ @ self.components_.T

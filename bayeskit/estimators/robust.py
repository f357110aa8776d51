"""Robust location, scatter and components: FAST-MCD of :mod:`bayeskit.robust.mcd` and ROBPCA of
:mod:`bayeskit.robust.robpca`."""

from __future__ import annotations

import jax
import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from bayeskit.core import validation
from bayeskit.core.notices import warn
from bayeskit.core.scaling import out_of_range, unit_scale
from bayeskit.core.xla import host_blas
from bayeskit.estimators._common import OneCallAtATime, _key, finish, gaussian_score, validate
from bayeskit.robust import mcd, robpca


def _check_fraction(name: str, value, low: float = 0.5) -> None:
    if value is not None and not (np.isfinite(value) and low <= value <= 1):
        raise ValueError(f"{name} must be in [{low}, 1] (or None), got {value!r}.")


class MinCovDet(OneCallAtATime, BaseEstimator):
    """Minimum Covariance Determinant location and scatter by FAST-MCD (:mod:`bayeskit.robust.mcd`),
    raw (consistency-corrected) and reweighted at the 97.5% chi-square quantile.

    Parameters
    ----------
    support_fraction : float in [0.5, 1] or None
        h = max(floor(support_fraction n), (n + p + 1) // 2); None: (n + p + 1) // 2. Under
        ``conventions="robustbase"`` it is covMcd's alpha (None: 0.5) and h = h(alpha; n, p).
    n_starts : int
        Random elemental starts (vmapped).
    conventions : "bayeskit" or "robustbase"
        "robustbase": R's ``covMcd(X, alpha)`` number for number: its h, its small-sample
        correction factors and divisors (:mod:`bayeskit.robust.mcd`, (4)).
    random_state : int, numpy RandomState or None

    Attributes
    ----------
    location_, covariance_ : the reweighted estimates
    raw_location_, raw_covariance_, raw_support_ : the raw MCD subset's estimates and indicator
    support_ : the points kept by the reweighting
    dist_ : squared Mahalanobis distances of the training points under the final estimates
    exact_fit_, hyperplane_, n_on_hyperplane_ : whether at least h points lie on a hyperplane
        (then a ``UserWarning``; the estimates are those of the h points), its normal and how
        many points lie on it

    The data are divided by a robust scale before the fit and the estimates multiplied back
    (:mod:`bayeskit.core.scaling`), so data at 1e-20 or 1e20 fit in float32; the floating
    attributes are float64. A covariance beyond float64's range is refused.
    """

    def __init__(self, *, support_fraction=None, n_starts=500, conventions="bayeskit", random_state=None):
        self.support_fraction = support_fraction
        self.n_starts = n_starts
        self.conventions = conventions
        self.random_state = random_state

    def fit(self, X, y=None):
        X = validate(self, X, min_rows=2, dtype=[np.float64, np.float32])
        _check_fraction("support_fraction", self.support_fraction)
        validation.check_int_in("n_starts", self.n_starts, 1)
        validation.check_choice("conventions", self.conventions, mcd.CONVENTIONS)
        n, p = X.shape
        if self.conventions == "robustbase":
            alpha = 0.5 if self.support_fraction is None else float(self.support_fraction)
            h = mcd.h_alpha_n(alpha, n, p)
        else:
            alpha = None
            h = mcd.default_h(n, p) if self.support_fraction is None else mcd.h_from_alpha(self.support_fraction, n, p)
        X_unit, scale = unit_scale(X)  # on the host, before the cast to JAX's dtype can overflow
        result = finish(mcd.fit(_key(self.random_state), X_unit, None if alpha is not None else h, alpha=alpha,
                                n_starts=int(self.n_starts), conventions=self.conventions), "MinCovDet")
        with np.errstate(over="ignore"):
            r = mcd.in_units(_host(result.state), scale)
        out_of_range(r.covariance, scale, np.float64, "the covariance")
        self.location_, self.covariance_ = np.asarray(r.location), np.asarray(r.covariance)
        self.raw_location_, self.raw_covariance_ = np.asarray(r.raw_location), np.asarray(r.raw_covariance)
        self.support_, self.raw_support_ = np.asarray(r.support), np.asarray(r.raw_support)
        self.exact_fit_ = bool(r.exact_fit)
        self.hyperplane_, self.n_on_hyperplane_ = np.asarray(r.hyperplane), int(r.n_on_hyperplane)
        self.h_ = h
        if self.exact_fit_:
            warn(f"exact fit: {self.n_on_hyperplane_} of {n} points (at least h = {h}) lie on the hyperplane "
                 f"a'(x - location_) = 0 with a = hyperplane_; the covariance is singular.", UserWarning)
        self.dist_ = np.asarray(r.distances)  # NaN in an exact fit
        return self

    def mahalanobis(self, X):
        """Squared Mahalanobis distances of the rows of X under ``location_``, ``covariance_``."""
        check_is_fitted(self, "covariance_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        Z = X - self.location_
        with host_blas():
            return np.sum(Z * np.linalg.solve(self.covariance_, Z.T).T, 1)

    def score(self, X, y=None):
        """Mean Gaussian log-likelihood of the rows of X under N(location_, covariance_), as
        scikit-learn's covariance estimators score (for ``GridSearchCV``)."""
        check_is_fitted(self, "covariance_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        if self.exact_fit_:
            raise ValueError("the covariance of an exact fit is singular (exact_fit_): the Gaussian log-likelihood "
                             "is undefined.")
        return gaussian_score(X, self.location_, self.covariance_)


def _host(state):
    """A fit's state as NumPy arrays, the floating ones in float64: put back into the data's
    scale, a covariance of float32 data at 1e20 (1e40) lies beyond float32's range."""
    floating = lambda a: np.issubdtype(a.dtype, np.floating)
    return jax.tree.map(lambda a: np.asarray(a, np.float64) if floating(a) else np.asarray(a), jax.device_get(state))


class ROBPCA(OneCallAtATime, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Robust principal components (ROBPCA, :mod:`bayeskit.robust.robpca`) with the outlier map.

    Parameters
    ----------
    n_components : int or None
        k; None chooses it as rrcov's PcaHubert does (:func:`bayeskit.robust.robpca.choose_k`), from a
        first pass through Steps 1-2 (k is static, so the fit then runs once more with it).
    alpha : float in [0.5, 1]
        Coverage: h = max(floor(alpha n), floor((n + k_max + 1) / 2)) (rrcov's h(alpha; n, k)
        under ``conventions="rrcov"``).
    k_max : int
        The largest k considered.
    n_directions : int or None
        Directions through pairs of points for the outlyingness (all pairs when fewer). None:
        all pairs when there are at most 20000 (n <= 200), which makes the fit the same for
        every ``random_state`` there; else 250 (rrcov's number).
    n_starts : int
        FAST-MCD's random starts.
    use_mcd : bool
        Low-dimensional data (rank at most min(n / 5, k_max)) go straight to the MCD.
    conventions : "bayeskit" or "rrcov"
        "rrcov": rrcov's ``PcaHubert(X, k, k_max, alpha)`` number for number (its fixed
        directions, reweighted univariate MCD, coverage h(alpha; n, k), robustbase's MCD
        factors and the MAD cutoff of the OD; :mod:`bayeskit.robust.robpca`).
    random_state : int, numpy RandomState or None

    Attributes
    ----------
    components_ : (p, k) robust loadings
    center_ : (p,) robust centre
    eigenvalues_ : (k,) robust eigenvalues
    scores_ : (n, k) scores of the training points
    score_distances_, orthogonal_distances_ : (n,) the outlier map's coordinates
    sd_cutoff_, od_cutoff_ : their cutoffs (chi-square and Wilson-Hilferty, 97.5%)
    labels_ : (n,) "regular", "good_leverage", "orthogonal" or "bad_leverage"
    n_components_, h_, rank_ : k, the coverage and the rank of the centred data
    outlyingness_ : (n,) the projection-pursuit outlyingness (0 in the low-dimensional branch)

    The data are divided by a robust scale before the fit and the results multiplied back
    (:mod:`bayeskit.core.scaling`), so data at 1e-20 or 1e20 fit in float32. ``center_`` and
    ``components_`` keep the input's dtype (``transform`` does too); the other floating
    attributes are float64.
    """

    def __init__(self, n_components=None, *, alpha=0.75, k_max=10, n_directions=None, n_starts=500, use_mcd=True,
                 conventions="bayeskit", random_state=None):
        self.n_components = n_components
        self.alpha = alpha
        self.k_max = k_max
        self.n_directions = n_directions
        self.n_starts = n_starts
        self.use_mcd = use_mcd
        self.conventions = conventions
        self.random_state = random_state

    def fit(self, X, y=None):
        X = validate(self, X, min_rows=2, dtype=[np.float64, np.float32])
        _check_fraction("alpha", self.alpha)
        k_max = validation.check_int_in("k_max", self.k_max, 1)
        n_directions = (robpca.default_directions(X.shape[0]) if self.n_directions is None
                        else validation.check_int_in("n_directions", self.n_directions, 1))
        validation.check_int_in("n_starts", self.n_starts, 1)
        validation.check_choice("conventions", self.conventions, robpca.CONVENTIONS)
        X_unit, scale = unit_scale(X)  # on the host, before the cast to JAX's dtype can overflow
        result = robpca.fit_auto(_key(self.random_state), X_unit, self.n_components, float(self.alpha), k_max,
                                 n_directions=n_directions, n_starts=int(self.n_starts), use_mcd=bool(self.use_mcd),
                                 conventions=self.conventions)
        with np.errstate(over="ignore"):
            r = robpca.in_units(_host(finish(result, "ROBPCA").state), scale)
        out_of_range(r.eigenvalues, scale, np.float64, "the eigenvalues")
        k = r.eigenvalues.shape[-1]
        first = k + int(result.n_iter)
        if k < first:
            warn(f"exact fit: at least h = {int(r.h)} points lie on a subspace of fewer than {first} robust "
                 f"components; refitted with n_components = {k}.", UserWarning)
        self.n_components_, self.h_, self.rank_ = k, int(r.h), int(r.rank)
        # in X's dtype, so that transform keeps it; the eigenvalues (scale^2) stay float64
        self.components_, self.center_ = r.components.astype(X.dtype), r.center.astype(X.dtype)
        self.eigenvalues_, self.scores_ = np.asarray(r.eigenvalues), np.asarray(r.scores)
        self.score_distances_ = np.asarray(r.score_distances)
        self.orthogonal_distances_ = np.asarray(r.orthogonal_distances)
        self.sd_cutoff_, self.od_cutoff_ = float(r.sd_cutoff), float(r.od_cutoff)
        self.labels_ = np.asarray(robpca.LABELS)[np.asarray(r.labels)]
        self.outlyingness_ = np.asarray(r.outlyingness)
        return self

    @property
    def _n_features_out(self):
        """The columns of ``transform``'s output (``get_feature_names_out``: robpca0, ...)."""
        return self.components_.shape[1]

    def transform(self, X):
        """Scores (X - center_) components_."""
        check_is_fitted(self, "components_")
        X = validate(self, X, reset=False, dtype=[np.float64, np.float32])
        return (X - self.center_) @ self.components_

"""Linear projections used as dimensionality-reduction baselines for multilabel data.

Gönen (2014, Pattern Recognition Letters 38) compares BSML with PCA, MDDM, MLLS and
MLDA, each followed by a probit classifier. Every function here returns a
:class:`Projection`, ``transform(X) = (X - mean) @ components``; samples are rows, ``Y``
is an (n_samples, n_labels) 0/1 matrix. The dtype follows ``X``; the eigenproblems are
solved with ``eigh`` and Cholesky factors, never explicit inverses.

Shape checks on ``n_components`` raise a ``ValueError`` before anything is traced; value
checks (NaN/inf, labels outside {0, 1}) run whenever the inputs are concrete, so every
function can also be wrapped in ``jax.jit(..., static_argnames="n_components")``.

References
----------
Pearson (1901); Zhang & Zhou (2010) ACM TKDD 4(3):14; Ji, Tang, Yu & Ye (2010) ACM TKDD
4(2):8; Wang, Ding & Huang (2010) ECCV, LNCS 6316:126-139. Full citations in each
function's docstring.
"""

from __future__ import annotations

import operator

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.core import validation
from bayeskit.core.linalg import fix_signs, generalized_eigh

__all__ = ["Projection", "pca", "mddm", "mlls", "mlda"]


class Projection(eqx.Module):
    """A linear projection ``Z = (X - mean) @ components``.

    Attributes
    ----------
    mean : array of shape (n_features,)
        The centring vector (zeros for a method that does not centre).
    components : array of shape (n_features, n_components)
        The projection matrix; column ``r`` is the ``r``-th direction, ordered by the
        method's criterion (largest first).
    """

    mean: Float[Array, " d"]
    components: Float[Array, "d r"]

    def transform(self, X: Float[Array, "n d"]) -> Float[Array, "n r"]:
        """Project the rows of ``X``: array of shape (n_samples, n_components)."""
        return (jnp.asarray(X, self.components.dtype) - self.mean) @ self.components


# ---------------------------------------------------------------------------- checks


def _check_X(X) -> Array:
    """``X`` as a 2-D floating array (integers become the default float type)."""
    X = jnp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features); got shape {X.shape}.")
    if X.shape[0] < 2 or X.shape[1] < 1:
        raise ValueError(f"X needs at least 2 samples and 1 feature; got shape {X.shape}.")
    if not jnp.issubdtype(X.dtype, jnp.floating):
        X = X.astype(jnp.result_type(float))
    if validation.is_concrete(X):
        bad = np.argwhere(~np.isfinite(np.asarray(X)))
        if bad.size:
            raise ValueError(
                f"X has {len(bad)} non-finite entries, the first at (row, col) {tuple(bad[0])}."
            )
    return X


def _check_Y(Y, n_samples: int, allowed=(0, 1)) -> Array:
    """``Y`` as a 2-D array of shape (n_samples, n_labels) with values in ``allowed``."""
    Y = jnp.asarray(Y)
    if Y.ndim != 2:
        raise ValueError(f"Y must be 2-D (n_samples, n_labels); got shape {Y.shape}.")
    if Y.shape[0] != n_samples:
        raise ValueError(f"X has {n_samples} samples but Y has {Y.shape[0]} rows.")
    if validation.is_concrete(Y):
        Yn = np.asarray(Y)
        ok = np.isin(Yn, allowed)
        if not ok.all():
            where = tuple(np.argwhere(~ok)[0])
            raise ValueError(f"Y must have entries in {set(allowed)}; found {Yn[where]!r} at (row, col) {where}.")
    return Y


def _check_n_components(n_components, limit: int, why: str) -> int:
    try:
        r = operator.index(n_components)
    except TypeError:
        raise ValueError(f"n_components must be a Python int, got {n_components!r}.") from None
    if r < 1:
        raise ValueError(f"n_components must be at least 1, got {r}.")
    if r > limit:
        raise ValueError(f"n_components={r} exceeds what the method allows: {why} = {limit}.")
    return r


def _check_scalar(value, name: str, low: float, high: float = np.inf, low_open: bool = False):
    if validation.is_concrete(value):
        v = float(value)
        if not (v > low if low_open else v >= low) or v > high:
            lo = "(" if low_open else "["
            raise ValueError(f"{name} must lie in {lo}{low}, {high}]; got {v}.")
    return value


# ---------------------------------------------------------------------------- helpers


def _leading(w: Array, V: Array, r: int) -> tuple[Array, Array]:
    """The ``r`` eigenpairs with the largest eigenvalues (``eigh`` sorts ascending)."""
    return w[::-1][:r], V[:, ::-1][:, :r]


def _centre(X: Array) -> tuple[Array, Array]:
    mean = jnp.mean(X, axis=0)
    return mean, X - mean


# ---------------------------------------------------------------------------- PCA


@eqx.filter_jit
def _pca(X, n_components):
    mean, Xc = _centre(X)
    w, V = jnp.linalg.eigh(Xc.T @ Xc / (X.shape[0] - 1))
    return Projection(mean, fix_signs(_leading(w, V, n_components)[1]))


def pca(X: Float[Array, "n d"], n_components: int) -> Projection:
    """Principal component analysis (Pearson, 1901).

    The components are the leading eigenvectors of the sample covariance
    ``S = Xc^T Xc / (N - 1)`` of the centred data ``Xc = X - mean(X)``; they maximise
    ``tr(P^T S P)`` subject to ``P^T P = I``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    n_components : int
        Number of directions R, at most ``min(n_samples, n_features)``.

    Returns
    -------
    Projection
        ``mean`` is the sample mean; ``components`` are orthonormal, ordered by variance.

    Raises
    ------
    ValueError
        If ``n_components > min(n_samples, n_features)`` or ``X`` has NaN/inf.

    References
    ----------
    K. Pearson (1901). On lines and planes of closest fit to systems of points in space.
    Philosophical Magazine 2(11):559-572.

    Examples
    --------
    >>> import jax
    >>> X = jax.random.normal(jax.random.key(0), (50, 4))
    >>> pca(X, 2).transform(X).shape
    (50, 2)
    """
    X = _check_X(X)
    r = _check_n_components(n_components, min(X.shape), "min(n_samples, n_features)")
    return _pca(X, r)


# ---------------------------------------------------------------------------- MDDM


@eqx.filter_jit
def _mddm(X, Y, n_components, variant, mu):
    mean, Xc = _centre(X)
    Yc = Y - jnp.mean(Y, axis=0)
    Sxy = Xc.T @ Yc  # = X^T H Y, with H the centring matrix
    A = Sxy @ Sxy.T  # = X^T H Y Y^T H X, the HSIC numerator with a linear label kernel
    if variant == "projection":
        w, V = jnp.linalg.eigh(A)
    else:
        w, V = generalized_eigh(A, (1 - mu) * (Xc.T @ Xc) + mu * jnp.eye(X.shape[1], dtype=X.dtype))
    return Projection(mean, fix_signs(_leading(w, V, n_components)[1]))


def mddm(
    X: Float[Array, "n d"],
    Y: Array,
    n_components: int,
    *,
    variant: str = "projection",
    mu: float = 0.5,
) -> Projection:
    r"""Multilabel dimensionality reduction via dependence maximisation (MDDM).

    MDDM maximises the Hilbert-Schmidt independence criterion between the projected
    features and the labels. With a linear kernel on the labels (``L = Y Y^T``, the
    paper's default) and ``H = I - 11^T/N``,

    .. math:: \max_P \operatorname{tr}(P^T X^T H Y Y^T H X P),

    and up to the constant ``(N-1)^{-2}`` this is ``HSIC(XP, Y)``. Two constraints give
    the two variants of Zhang & Zhou (2010):

    - ``variant="projection"`` (MDDMp, the default): orthonormal directions
      ``P^T P = I``; ``P`` holds the leading eigenvectors of ``X^T H Y Y^T H X``.
    - ``variant="features"`` (MDDMf): uncorrelated projected features. The constraint
      ``P^T X^T H X P = I`` is regularised as
      ``P^T ((1 - mu) Xc^T Xc + mu I) P = I`` with ``mu`` in [0, 1] (``mu = 1`` gives
      MDDMp, ``mu = 0`` pure whitening); ``P`` solves the generalised eigenproblem
      ``X^T H Y Y^T H X p = lambda ((1 - mu) Xc^T Xc + mu I) p`` and is normalised by the
      constraint.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    Y : array of shape (n_samples, n_labels), entries in {0, 1}
    n_components : int
        At most ``min(n_labels, n_features)``: the objective has rank at most
        ``n_labels``, so further directions would be arbitrary.
    variant : {"projection", "features"}
    mu : float in [0, 1]
        MDDMf regulariser (ignored by MDDMp).

    Returns
    -------
    Projection
        ``mean`` is the sample mean of ``X``.

    Raises
    ------
    ValueError
        If ``n_components > min(n_labels, n_features)``, ``variant`` is unknown, ``mu`` is
        outside [0, 1] or the inputs are malformed.

    Notes
    -----
    The regularised MDDMf constraint ``(1 - mu) X X^T + mu I`` is the form we recall from
    Zhang & Zhou (2010, Sec. 3), with ``X X^T`` taken as the centred scatter matrix
    ``Xc^T Xc`` (not divided by ``N``), so the balance set by ``mu`` depends on the scale
    of ``X``. We could not verify the authors' default ``mu``; 0.5 is our choice. Gönen
    (2014) uses MDDM with the authors' defaults, which we take to be MDDMp.

    References
    ----------
    Y. Zhang, Z.-H. Zhou (2010). Multilabel dimensionality reduction via dependence
    maximization. ACM Trans. Knowl. Discov. Data 4(3):14 (AAAI 2008 short version).

    Examples
    --------
    >>> import jax
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> X = jax.random.normal(k1, (60, 5))
    >>> Y = (jax.random.uniform(k2, (60, 3)) < 0.5).astype(int)
    >>> mddm(X, Y, 2).components.shape
    (5, 2)
    """
    if variant not in ("projection", "features"):
        raise ValueError(f"variant must be 'projection' (MDDMp) or 'features' (MDDMf); got {variant!r}.")
    X = _check_X(X)
    Y = _check_Y(Y, X.shape[0])
    r = _check_n_components(n_components, min(Y.shape[1], X.shape[1]), "min(n_labels, n_features)")
    mu = _check_scalar(mu, "mu", 0.0, 1.0)
    return _mddm(X, Y.astype(X.dtype), r, variant, jnp.asarray(mu, X.dtype))


# ---------------------------------------------------------------------------- MLLS


@eqx.filter_jit
def _mlls(X, Y, n_components, alpha, beta):
    n = X.shape[0]
    mean, Xc = _centre(X)
    Cxy = Xc.T @ (Y - jnp.mean(Y, axis=0)) / n
    lam, Q = jnp.linalg.eigh(Xc.T @ Xc / n)
    lam = jnp.maximum(lam, 0)
    # B^{-1/2} S B^{-1/2} = G G^T in the eigenbasis of X^T X / n (see the docstring)
    G = Q @ ((Q.T @ Cxy) / jnp.sqrt((lam + beta) * (lam + alpha + beta))[:, None])
    U = _leading(*jnp.linalg.eigh(G @ G.T), n_components)[1]
    Z = Q @ ((Q.T @ U) * jnp.sqrt((lam + alpha + beta) / (lam + beta))[:, None])  # B^{-1/2} U
    Theta_T, R = jnp.linalg.qr(Z)  # orthonormal basis of span(Z), nested in order
    return Projection(mean, Theta_T * jnp.where(jnp.diagonal(R) < 0, -1, 1).astype(X.dtype))


def mlls(
    X: Float[Array, "n d"],
    Y: Array,
    n_components: int,
    *,
    alpha: float = 1.0,
    beta: float = 1.0,
) -> Projection:
    r"""Multilabel least squares (MLLS): the shared subspace of Ji, Tang, Yu & Ye (2010).

    Each label ``l`` has a linear predictor ``f_l(x) = u_l^T x`` with
    ``u_l = w_l + Theta^T v_l``, where the rows of ``Theta`` (R x D, ``Theta Theta^T = I``)
    span a subspace shared by all labels. With the squared loss on centred data,

    .. math:: \min_{U, V, \Theta} \frac1N \|X_c U - Y_c\|_F^2 + \alpha \|U - \Theta^T V\|_F^2
              + \beta \|U\|_F^2 \quad \text{s.t. } \Theta \Theta^T = I.

    Eliminating ``V = Theta U`` and then ``U`` leaves
    ``max tr(Y_c^T X_c M^{-1} X_c^T Y_c)`` with ``M = A - alpha Theta^T Theta`` and
    ``A = X_c^T X_c / N + (alpha + beta) I``; by the Woodbury identity this equals, up to
    a constant, ``tr((Theta B Theta^T)^{-1} Theta S Theta^T)`` with
    ``B = I - alpha A^{-1}`` and ``S = A^{-1} X_c^T Y_c Y_c^T X_c A^{-1}`` — the
    generalised eigenproblem ``S z = lambda B z`` of Ji et al. (Theorem 3.1). Its leading
    ``R`` eigenvectors span the optimal ``Theta^T``, returned orthonormalised.

    ``A``, ``B`` and ``X^T X`` share eigenvectors (``X_c^T X_c / N = Q diag(l) Q^T``),
    so ``B^{-1/2} S B^{-1/2} = G G^T`` with
    ``G = Q diag(((l + beta)(l + alpha + beta))^{-1/2}) Q^T X_c^T Y_c / N``, and
    ``z = B^{-1/2} u``: one ``eigh`` of ``X^T X`` and one of ``G G^T``, no inverse.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    Y : array of shape (n_samples, n_labels), entries in {0, 1}
    n_components : int
        Shared-subspace dimension R, at most ``min(n_labels, n_features)`` (``S`` has
        rank at most ``n_labels``).
    alpha : float > 0
        Weight of the shared-structure term; with ``alpha = 0`` the objective does not
        depend on ``Theta``.
    beta : float > 0
        Ridge on the full predictors ``u_l``.

    Returns
    -------
    Projection
        ``mean`` is the sample mean; ``components`` is ``Theta^T`` (orthonormal columns).

    Raises
    ------
    ValueError
        If ``n_components > min(n_labels, n_features)``, ``alpha <= 0``, ``beta <= 0`` or
        the inputs are malformed.

    Notes
    -----
    Centring ``X`` and ``Y`` stands in for unpenalised intercepts. We could not find the
    defaults of the authors' code (the paper tunes ``alpha`` and ``beta``);
    ``alpha = beta = 1`` is our choice.

    References
    ----------
    S. Ji, L. Tang, S. Yu, J. Ye (2010). A shared-subspace learning framework for
    multi-label classification. ACM Trans. Knowl. Discov. Data 4(2):8 (KDD 2008:
    Extracting shared subspace for multi-label classification).

    Examples
    --------
    >>> import jax
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> X = jax.random.normal(k1, (60, 5))
    >>> Y = (jax.random.uniform(k2, (60, 3)) < 0.5).astype(int)
    >>> P = mlls(X, Y, 2).components
    >>> bool(jax.numpy.allclose(P.T @ P, jax.numpy.eye(2), atol=1e-5))
    True
    """
    X = _check_X(X)
    Y = _check_Y(Y, X.shape[0])
    r = _check_n_components(n_components, min(Y.shape[1], X.shape[1]), "min(n_labels, n_features)")
    alpha = _check_scalar(alpha, "alpha", 0.0, low_open=True)
    beta = _check_scalar(beta, "beta", 0.0, low_open=True)
    return _mlls(X, Y.astype(X.dtype), r, jnp.asarray(alpha, X.dtype), jnp.asarray(beta, X.dtype))


# ---------------------------------------------------------------------------- MLDA


def _mlda_scatter(X: Array, Y: Array) -> tuple[Array, Array, Array]:
    r"""The MLDA weighted mean and between/within-class scatter matrices.

    See :func:`mlda` for the definitions. Returns ``(m, S_b, S_w)``.
    """
    Yf = Y.astype(X.dtype)
    norms = jnp.sqrt(jnp.sum(Yf * Yf, axis=0))
    outer = norms[:, None] * norms[None, :]
    C = jnp.where(outer > 0, (Yf.T @ Yf) / jnp.where(outer > 0, outer, 1), 0)
    C = C.at[jnp.diag_indices(C.shape[0])].set(1)  # cosine label correlation, eq. (13)
    count = jnp.sum(Yf, axis=1, keepdims=True)
    Z = jnp.where(count > 0, (Yf @ C) / jnp.where(count > 0, count, 1), 0)  # eqs. (14)-(15)
    n_k = jnp.sum(Z, axis=0)
    z_i = jnp.sum(Z, axis=1)
    m = z_i @ X / jnp.sum(n_k)
    Xm = X - m
    S_k = Z.T @ Xm  # row k = n_k (m_k - m)
    S_b = S_k.T @ (S_k / jnp.where(n_k > 0, n_k, jnp.inf)[:, None])
    S_w = Xm.T @ (Xm * z_i[:, None]) - S_b  # sum_k sum_i Z_ik (x_i - m_k)(x_i - m_k)^T
    return m, 0.5 * (S_b + S_b.T), 0.5 * (S_w + S_w.T)


@eqx.filter_jit
def _mlda(X, Y, n_components, reg):
    m, S_b, S_w = _mlda_scatter(X, Y)
    d = X.shape[1]
    S_w = S_w + reg * jnp.trace(S_w) / d * jnp.eye(d, dtype=X.dtype)
    V = _leading(*generalized_eigh(S_b, S_w), n_components)[1]
    Xc = X - jnp.mean(X, axis=0)
    scale = jnp.sqrt(jnp.sum((Xc @ V) ** 2, axis=0) / (X.shape[0] - 1))  # sd of each component
    return Projection(m, fix_signs(V / scale))


def mlda(X: Float[Array, "n d"], Y: Array, n_components: int, *, reg: float = 0.0) -> Projection:
    r"""Multilabel linear discriminant analysis (MLDA) of Wang, Ding & Huang (2010).

    Labels are correlated by cosine similarity, ``C_kl = y_k^T y_l / (|y_k| |y_l|)``
    (``y_k`` the k-th column of ``Y``; eq. 13); each instance spreads a unit weight over
    the classes, ``Z_i = Y_i C / |Y_i|_1`` (eqs. 14-15: label correlations, corrected for
    over-counting). With ``n_k = sum_i Z_ik``, class means ``m_k = sum_i Z_ik x_i / n_k``
    and global mean ``m = sum_ik Z_ik x_i / sum_k n_k``,

    .. math:: S_b = \sum_k n_k (m_k - m)(m_k - m)^T, \qquad
              S_w = \sum_k \sum_i Z_{ik} (x_i - m_k)(x_i - m_k)^T,

    and the projection ``G`` maximises ``tr((G^T S_w G)^{-1} G^T S_b G)``: the leading
    eigenvectors of ``S_b g = lambda S_w g``. ``S_b`` has rank at most ``L - 1``.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
    Y : array of shape (n_samples, n_labels), entries in {0, 1}
    n_components : int
        At most ``min(n_labels - 1, n_features)``.
    reg : float >= 0
        Ridge ``reg * tr(S_w) / D`` added to ``S_w``. The default 0 solves the published
        eigenproblem; if ``S_w`` is numerically singular (``D`` near or above the
        number of labelled samples, constant features) the Cholesky factorisation adds
        the smallest jitter that succeeds.

    Returns
    -------
    Projection
        ``mean`` is the weighted global mean ``m``; the columns of ``components`` are
        the generalised eigenvectors, ordered by eigenvalue and scaled so that each
        projected feature has unit sample variance on ``X`` (the criterion is invariant
        to their scale; this one suits a downstream classifier with fixed priors).

    Raises
    ------
    ValueError
        If ``n_components > min(n_labels - 1, n_features)``, ``reg < 0`` or the inputs
        are malformed.

    Notes
    -----
    An instance with no label gets zero weight; a label with no positive instance gets
    zero correlation with the others and contributes nothing. The normalisation of
    ``Z`` by the number of labels of the instance follows two independent public
    reimplementations (J. Xu's wMLDA code, "formula (15)", and L. Sun's ML-FSDR); we
    could not verify in the paper itself whether, or how, ``S_w`` is regularised.

    References
    ----------
    H. Wang, C. Ding, H. Huang (2010). Multi-label linear discriminant analysis. ECCV,
    LNCS 6316:126-139.

    Examples
    --------
    >>> import jax
    >>> k1, k2 = jax.random.split(jax.random.key(0))
    >>> X = jax.random.normal(k1, (60, 5))
    >>> Y = (jax.random.uniform(k2, (60, 3)) < 0.5).astype(int)
    >>> mlda(X, Y, 2).transform(X).shape
    (60, 2)
    """
    X = _check_X(X)
    Y = _check_Y(Y, X.shape[0])
    r = _check_n_components(n_components, min(Y.shape[1] - 1, X.shape[1]), "min(n_labels - 1, n_features)")
    reg = _check_scalar(reg, "reg", 0.0)
    return _mlda(X, Y, r, jnp.asarray(reg, X.dtype))

"""SSDRMC: semi-supervised dimension reduction for multilabel classification.

Qian & Davidson (2010) interleave dimension reduction and label inference on labelled and
unlabelled instances together: instances are reconstructed from their neighbours, the
reconstruction weights carry the observed labels to the missing ones, the inferred
labels reshape the projection, and the projection reshapes the neighbourhoods, until
convergence. Gönen (2014) uses it, transductively, as the semi-supervised baseline of
BSSML. With ``F`` (n_samples x n_labels) the label scores (``f_ic = y_ic`` wherever that
label is observed) and ``P`` the projection, one sweep is:

1. ``F``: label propagation along reconstruction weights ``W``: for each label the
   harmonic solution ``F_u = -M_uu^{-1} M_uo Y_o`` of ``min tr(F^T M F)``,
   ``M = (I-W)^T (I-W)``, with the observed entries clamped (missingness may differ
   between labels).
2. ``P``: a projection that preserves the reconstruction of each instance by its
   neighbours in label space: with ``V`` the LLE weights of the rows of ``F``,
   ``min tr(P^T X_c^T (I-V)^T (I-V) X_c P)`` subject to ``P^T S P = I`` (``S`` the
   covariance of ``X``): the ``R`` smallest generalised eigenvectors (neighbourhood
   preserving embedding with label-space neighbourhoods).
3. ``W``: the ``k`` nearest neighbours of every instance in the joint space
   ``z_i = [P^T (x_i - mean); sqrt(beta) f_i]`` (whitened projected features and label
   scores) and their LLE weights ``w_i = argmin |z_i - sum_j w_ij z_j|^2``,
   ``sum_j w_ij = 1``.

LLE weights use the usual regulariser ``reg * tr(G_i)`` on the local Gram matrix
``G_i``. The first ``F`` propagates along the weights of the centred features alone.
The recorded objective is the joint reconstruction error
``|(I - W) [X_c P, sqrt(beta) F]|_F^2 / N``: steps 1 and 3 minimise it over ``F`` and
``W`` (for fixed neighbour sets), but step 2 follows its own criterion and the
neighbour sets change, so it need not be monotone; it serves as the stopping rule.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import cho_factor, cho_solve
from jaxtyping import Array, Bool, Float, Int

from bayeskit.core import validation
from bayeskit.core.linalg import cholesky, fix_signs, generalized_eigh
from bayeskit.core.loop import check_throw, run
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.multilabel.projections import (
    Projection,
    _check_n_components,
    _check_scalar,
    _check_X,
    _check_Y,
)

__all__ = ["State", "fit"]


class State(eqx.Module):
    """The fitted projection and the labels it inferred for every instance (the state of
    the ``FitResult`` that :func:`fit` returns; its trace is the objective ``J``).

    Attributes
    ----------
    projection : Projection
        ``transform(X) = (X - mean) @ components`` with whitened outputs
        (``components^T cov(X) components = I``).
    scores : array of shape (n_samples, n_labels)
        Label scores ``F``: the observed labels where observed, the propagated
        (real-valued, roughly in [0, 1]) values elsewhere.
    labels : int array of shape (n_samples, n_labels)
        Observed labels where observed, ``scores > 0.5`` elsewhere.
    weights : array of shape (n_samples, n_neighbors)
        Final reconstruction weights; row ``i`` sums to one.
    neighbors : int array of shape (n_samples, n_neighbors)
        Indices of the neighbours the weights refer to.
    """

    projection: Projection
    scores: Float[Array, "n l"]
    labels: Int[Array, "n l"]
    weights: Float[Array, "n k"]
    neighbors: Int[Array, "n k"]


class _State(eqx.Module):
    P: Array
    F: Array
    W: Array
    neighbors: Array
    ok: Bool[Array, ""]


def _neighbours_and_weights(z, k, reg):
    """k nearest neighbours (self excluded) and LLE weights of every row of ``z``."""
    sq = jnp.sum(z * z, axis=1)
    d2 = sq[:, None] + sq[None, :] - 2 * z @ z.T
    d2 = d2.at[jnp.diag_indices(z.shape[0])].set(jnp.inf)
    _, nbrs = jax.lax.top_k(-d2, k)

    def local(zi, idx):
        delta = z[idx] - zi
        G = delta @ delta.T
        tr = jnp.trace(G)
        G = G + jnp.where(tr > 0, reg * tr, reg) * jnp.eye(k, dtype=z.dtype)
        w = cho_solve(cho_factor(G, lower=True), jnp.ones(k, z.dtype))
        return w / jnp.sum(w)

    return nbrs, jax.vmap(local)(z, nbrs)


def _residual(V, W, nbrs):
    """``(I - W) V`` for row-sparse ``W`` given as (weights, neighbour indices)."""
    return V - jnp.einsum("nk,nkd->nd", W, V[nbrs])


def _propagate(W, nbrs, Y, observed):
    """Harmonic label scores: ``min tr(F^T M F)`` with observed entries clamped."""
    n = Y.shape[0]
    IW = jnp.eye(n, dtype=W.dtype).at[jnp.arange(n)[:, None], nbrs].add(-W)
    M = IW.T @ IW

    def one_label(args):
        y, o = args
        u = 1 - o
        A = M * u[:, None] * u[None, :] + jnp.diag(o)
        rhs = o * y - u * (M @ (o * y))
        chol = cholesky(A)
        return chol.solve(rhs[:, None])[:, 0], chol.ok

    F, ok = jax.lax.map(one_label, (Y.T, observed.T))
    return F.T, jnp.all(ok)


@eqx.filter_jit
def _fit(X, Y, observed, n_components, k, beta, reg, max_iter, tol, progress, throw):
    n = X.shape[0]
    mean = jnp.mean(X, axis=0)
    Xc = X - mean
    S = Xc.T @ Xc / n

    def projection(F):
        nbrs, V = _neighbours_and_weights(F, k, reg)
        E = _residual(Xc, V, nbrs)
        return fix_signs(generalized_eigh(E.T @ E / n, S)[1][:, :n_components])

    def joint(P, F):
        return jnp.concatenate([Xc @ P, jnp.sqrt(beta) * F], axis=1)

    nbrs, W = _neighbours_and_weights(Xc, k, reg)  # first propagation: features only
    F0, ok0 = _propagate(W, nbrs, Y, observed)
    P0 = projection(F0)
    nbrs0, W0 = _neighbours_and_weights(joint(P0, F0), k, reg)
    state0 = _State(P0, F0, W0, nbrs0, ok0)

    def update(s: _State) -> _State:
        F, ok = _propagate(s.W, s.neighbors, Y, observed)
        P = projection(F)
        nbrs, W = _neighbours_and_weights(joint(P, F), k, reg)
        return _State(P, F, W, nbrs, ok)

    def objective(s: _State) -> Array:
        R = _residual(joint(s.P, s.F), s.W, s.neighbors)
        return jnp.sum(R * R) / n

    res = run(update, objective, state0, max_iter=max_iter, tol=tol, progress=progress,
              throw=throw, failed=lambda s: ~s.ok, inputs=X)
    s = res.state
    labels = jnp.where(observed > 0, Y, s.F > 0.5).astype(jnp.int32)
    return FitResult(State(Projection(mean, s.P), s.F, labels, s.W, s.neighbors), res.trace, res.n_iter, res.status)


@readable_failure
def fit(
    X: Float[Array, "n d"],
    Y: Array,
    n_components: int,
    *,
    n_neighbors: int = 10,
    label_weight: float = 1.0,
    reg: float = 1e-3,
    max_iter: int = 30,
    tol: float = 1e-4,
    progress: bool | None = None,
    throw: bool = True,
) -> FitResult:
    """Fit SSDRMC transductively on all instances, labelled or not.

    See the module docstring for the three alternating steps.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        All instances: training and (transductive) test.
    Y : int array of shape (n_samples, n_labels)
        Entries in {0, 1}, or -1 for an unobserved entry; every label needs at least one
        observed entry.
    n_components : int
        Dimension R of the projection, at most ``min(n_samples, n_features)``.
    n_neighbors : int
        Neighbourhood size ``k`` of all reconstruction weights, below ``n_samples``.
    label_weight : float >= 0
        ``beta``, the weight of the label scores against the whitened projected features
        (unit variance per component) in the joint space of step 3.
    reg : float > 0
        LLE regulariser of the local Gram matrices (needed when ``k`` exceeds their
        rank).
    max_iter : int
        Maximum number of sweeps (a bounded ``lax.while_loop``).
    tol : float
        Stop when ``|J_t - J_{t-1}| <= tol * (1 + |J_t|)``.
    progress : bool, optional
        Show a progress bar.
    throw : bool
        Raise if a label-propagation system cannot be factorised even with jitter; use
        ``False`` under ``vmap`` and read ``status``.

    Returns
    -------
    FitResult
        Its ``state`` is a :class:`State` (projection, scores, labels, weights,
        neighbours); ``trace`` the objective J per sweep.

    Raises
    ------
    ValueError
        If ``n_components > min(n_samples, n_features)``, ``n_neighbors`` is not in
        [1, n_samples - 1], a label has no observed entry, or the inputs are malformed.

    Notes
    -----
    The equations of Qian & Davidson (2010) were not accessible to us; this is our
    reconstruction from the paper's description (instances and labels reconstructed by
    their neighbours, label inference and dimension reduction that improve each other
    iteration by iteration) and from its follow-up, Qian, Wang, Ye & Davidson, "A
    reconstruction error based framework for multi-label and multi-view learning"
    (IEEE TKDE 2015). Two choices are ours and deliberate. The projection step takes its
    neighbourhoods from the labels, not from the projected features: weights fitted to
    the projected features reconstruct them almost exactly, and the projection would
    then just return its own input (from a PCA start it never left the PCA subspace in
    our trials). The first propagation uses feature neighbourhoods only, so that the
    unlabelled instances, whose initial scores would all be equal, do not become each
    other's neighbours. The defaults (``k = 10``, ``beta = 1``, ``reg = 1e-3`` as in LLE)
    are ours, not the authors'. The result depends on the scale of the features
    (Euclidean neighbourhoods); standardise them when their units differ. Each sweep
    factorises one dense ``n_samples x n_samples`` matrix per label: O(L N^3) time and
    O(N^2) memory, which is why Gönen (2014) could not run SSDRMC on TMC2007.

    The alternation need not converge. On Emotions (transductive, R = L = 6) the objective
    oscillates between 0.15 and 0.27 for all 30 sweeps, and a difference of 1e-13 in the
    first label scores (the rounding of a product with one thread or two) grows about
    tenfold per sweep: after 30 sweeps the neighbour sets differ, and the transductive
    Hamming loss reads 0.247 to 0.268 depending on the machine's thread count and load.
    Damping the label scores did not make it converge. Read ``status`` and ``trace``
    before trusting a single run's labels.

    References
    ----------
    B. Qian, I. Davidson (2010). Semi-supervised dimension reduction for multi-label
    classification. AAAI, 569-574.

    Examples
    --------
    >>> import jax, jax.numpy as jnp
    >>> k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    >>> X = jax.random.normal(k1, (40, 5))
    >>> Y = (X[:, :2] > 0).astype(int)
    >>> Y = jnp.where(jax.random.uniform(k3, Y.shape) < 0.5, -1, Y)
    >>> res = fit(X, Y, 2, n_neighbors=5)
    >>> res.state.projection.components.shape, res.state.labels.shape
    ((5, 2), (40, 2))
    """
    X = _check_X(X)
    Y = _check_Y(Y, X.shape[0], allowed=(0, 1, -1))
    n, d = X.shape
    r = _check_n_components(n_components, min(n, d), "min(n_samples, n_features)")
    k = int(n_neighbors)
    if k != n_neighbors or not 1 <= k <= n - 1:
        raise ValueError(f"n_neighbors must be an int in [1, n_samples - 1 = {n - 1}]; got {n_neighbors!r}.")
    if int(max_iter) < 1:
        raise ValueError(f"max_iter must be at least 1, got {max_iter}.")
    label_weight = _check_scalar(label_weight, "label_weight", 0.0)
    reg = _check_scalar(reg, "reg", 0.0, low_open=True)
    tol = _check_scalar(tol, "tol", 0.0)
    check_throw(throw)
    observed = Y >= 0
    if validation.is_concrete(observed):
        empty = np.flatnonzero(~np.asarray(observed).any(axis=0))
        if empty.size:
            raise ValueError(f"labels {empty.tolist()} have no observed entry; SSDRMC cannot infer them.")
    dt = X.dtype
    return _fit(X, jnp.where(observed, Y, 0).astype(dt), observed.astype(dt), r, k,
                jnp.asarray(label_weight, dt), jnp.asarray(reg, dt), int(max_iter),
                jnp.asarray(tol, dt), progress, throw)

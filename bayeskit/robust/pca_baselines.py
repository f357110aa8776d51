"""The robust PCA methods that the ROBPCA paper compares with (Hubert, Rousseeuw & Vanden
Branden 2005, Section 5), each returning (center, components (p, k), eigenvalues (k,)):

- ``classical_pca`` (CPCA): the mean and the eigenvectors of the sample covariance.
- ``spherical_pca`` (SPHER; Locantore et al., Test 8, 1999): the points centred at the
  spatial median and projected onto the unit sphere; their covariance's eigenvectors; the
  eigenvalues Qn^2 of the data projected onto them.
- ``ellipsoidal_pca`` (ELL; ibid.): each variable first divided by its Qn, then SPHER; the
  loadings mapped back and orthonormalised in order; eigenvalues as in SPHER.
- ``rapca`` (RAPCA; Hubert, Rousseeuw & Verboven, Chemom. Intell. Lab. Syst. 60, 2002):
  projection pursuit in the affine span: component j maximises Qn over the directions
  through the spatial median and each (deflated) point; the data are deflated along it.

Qn (Rousseeuw & Croux, JASA 88, 1993) is the k-th smallest of the m(m - 1)/2 distances
|y_i - y_j|, k = C(floor(m/2) + 1, 2), times 2.2219 (consistent at the normal; without the
small-sample factors); the spatial
median minimises sum_i |x_i - mu| (Weiszfeld's iteration).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from bayeskit.core.linalg import descending_eigh
from bayeskit.core.scaling import median
from bayeskit.robust.outlyingness import unit_rows

QN_CONSTANT = 2.2219


def qn_scale(y: Float[Array, " m"]) -> Array:
    """Qn of a sample: the k-th smallest pairwise distance, found without listing the pairs.
    With s the sorted sample, #{i < j : s_j - s_i <= t} = sum_i (#{s <= s_i + t} - i - 1) by
    binary searches, and the k-th smallest distance is the smallest t where that count
    reaches k: a bisection on the bit patterns of t (which order non-negative floats as
    their values). O(m log m) per step, O(m) memory."""
    m = y.shape[0]
    h = m // 2 + 1
    k = h * (h - 1) // 2
    s = jnp.sort(y)
    int_type = jnp.int64 if y.dtype == jnp.float64 else jnp.int32
    as_float = lambda b: jax.lax.bitcast_convert_type(b, y.dtype)  # noqa: E731
    below = jnp.arange(m) + 1

    def halve(_, bounds):
        low, high = bounds
        mid = low + (high - low) // 2
        enough = jnp.sum(jnp.searchsorted(s, s + as_float(mid), side="right") - below) >= k
        return jnp.where(enough, low, mid + 1), jnp.where(enough, mid, high)

    top = jax.lax.bitcast_convert_type(s[-1] - s[0], int_type)
    _, t = jax.lax.fori_loop(0, 8 * y.dtype.itemsize, halve, (jnp.zeros((), int_type), top))
    return QN_CONSTANT * as_float(t)


def spatial_median(X: Float[Array, "n p"], n_iter: int = 200) -> Array:
    """Weiszfeld's fixed point mu = sum_i w_i x_i / sum_i w_i, w_i = 1 / |x_i - mu|, from the
    coordinatewise median (a point at distance 0 gets weight 1 / tiny, which keeps mu there)."""
    tiny = jnp.finfo(X.dtype).eps * (1 + jnp.max(jnp.abs(X)))

    def step(_, mu):
        w = 1.0 / jnp.maximum(jnp.linalg.norm(X - mu, axis=1), tiny)
        return w @ X / jnp.sum(w)

    return jax.lax.fori_loop(0, n_iter, step, median(X, 0))


def classical_pca(X, k: int):
    mu = jnp.mean(X, 0)
    values, vectors = descending_eigh(jnp.cov(X.T))
    return mu, vectors[:, :k], values[:k]


def _qn_eigenvalues(X, mu, components):
    return jax.vmap(qn_scale, in_axes=1)((X - mu) @ components) ** 2


def spherical_pca(X, k: int):
    mu = spatial_median(X)
    Y = unit_rows(X - mu)
    components = descending_eigh(Y.T @ Y)[1][:, :k]
    return mu, components, _qn_eigenvalues(X, mu, components)


def ellipsoidal_pca(X, k: int):
    scale = jax.vmap(qn_scale, in_axes=1)(X)
    scale = jnp.where(scale > 0, scale, 1.0)
    mu_scaled, components, _ = spherical_pca(X / scale, k)
    mu = mu_scaled * scale
    components = jnp.linalg.qr(components * scale[:, None])[0]
    return mu, components, _qn_eigenvalues(X, mu, components)


def rapca(X, k: int):
    n, p = X.shape
    mu0 = jnp.mean(X, 0)
    _, _, Vt = jnp.linalg.svd(X - mu0, full_matrices=False)
    V = Vt[: min(n - 1, p)].T
    Z = (X - mu0) @ V
    median = spatial_median(Z)
    R = Z - median

    def component(R, _):
        candidates = unit_rows(R)
        spread = jax.vmap(lambda v: qn_scale(R @ v))(candidates)
        v = candidates[jnp.argmax(spread)]
        return R - jnp.outer(R @ v, v), (v, jnp.max(spread) ** 2)

    _, (directions, values) = jax.lax.scan(component, R, None, length=k)
    return mu0 + V @ median, V @ directions.T, values


METHODS = {"CPCA": classical_pca, "SPHER": spherical_pca, "ELL": ellipsoidal_pca, "RAPCA": rapca}

__all__ = ["METHODS", "classical_pca", "spherical_pca", "ellipsoidal_pca", "rapca", "qn_scale", "spatial_median"]

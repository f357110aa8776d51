"""Kernels for the HSIC (:mod:`bayeskit.covariance.hsic`): squared distances summed
feature by feature (equal points exactly 0 apart), the median heuristic over all pairs
of points (by bisection for one feature, so m ~ 10^5 points fit in O(m) memory), Gram
matrices, paired kernel values and centring, and the random Fourier features that stand
in for the Gaussian and Laplace kernels on large samples. The kernels, the median
heuristic's convention and the features' use in the test are described in that module's
docstring."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from bayeskit.core.sampling import flat

UNROLL_FEATURES = 16
RFF_SUBSAMPLE = 2000  # points for the sum in (4) of the HSIC test, and for the median of d > 1 inputs, under "rff"


def squared_distances(x: Float[Array, "m d"]) -> Float[Array, "m m"]:
    """|x_i - x_j|^2 summed from differences, so that equal points are exactly 0 apart; one
    feature at a time (written out for up to UNROLL_FEATURES features, which XLA fuses with
    the kernel's exponential; a loop beyond), never an (m, m, d) array."""
    column = lambda k: (x[:, k, None] - x[None, :, k]) ** 2  # noqa: E731
    if x.shape[1] <= UNROLL_FEATURES:
        return sum(column(k) for k in range(1, x.shape[1])) + column(0)
    return jax.lax.fori_loop(1, x.shape[1], lambda k, d2: d2 + column(k), column(0))


def _pair_counts(s: Array, t: Array) -> Array:
    """#{i < j : s_j - s_i <= t} for sorted ``s``, by a binary search per i (s_j - s_i is
    non-decreasing in j, also in floating point)."""
    m = s.shape[0]
    i = jnp.arange(m)

    def halve(_, bounds):
        lo, hi = bounds  # the first j > i with s_j - s_i > t lies in [lo, hi] (hi = m: none)
        mid = (lo + hi) // 2
        above = s[jnp.minimum(mid, m - 1)] - s > t
        active = lo < hi
        return jnp.where(active & ~above, mid + 1, lo), jnp.where(active & above, mid, hi)

    first, _ = jax.lax.fori_loop(0, m.bit_length() + 1, halve, (i + 1, jnp.full(m, m)))
    count_dtype = jnp.int64 if jax.config.jax_enable_x64 else (jnp.int32 if m * (m - 1) // 2 < 2**31 else jnp.float32)
    return jnp.sum(first - i - 1, dtype=count_dtype)


def _kth_pair_difference(s: Array, k: Array) -> Array:
    """The k-th smallest (from 0) of s_j - s_i over i < j, s sorted: a bisection on the bit
    patterns of non-negative floats (ordered like the floats), O(m log m) per step."""
    bits = {2: jnp.int16, 4: jnp.int32, 8: jnp.int64}[s.dtype.itemsize]  # an integer of the float's width (float16 too)
    to_float = partial(jax.lax.bitcast_convert_type, new_dtype=s.dtype)

    def halve(_, bounds):
        lo, hi = bounds
        mid = lo + (hi - lo) // 2
        enough = _pair_counts(s, to_float(mid)) >= k + 1
        return jnp.where(enough, lo, mid + 1), jnp.where(enough, mid, hi)

    hi = jax.lax.bitcast_convert_type(s[-1] - s[0], bits)
    _, hi = jax.lax.fori_loop(0, 8 * s.dtype.itemsize + 1, halve, (jnp.zeros((), bits), hi))
    return to_float(hi)


def middle_squared_distances(x: Float[Array, "m d"]) -> tuple[Array, Array, Array]:
    """The two middle order statistics (ranks (N-1)//2 and N//2) of the N nonzero squared
    distances |x_i - x_j|^2, i < j, and whether N > 0; their mean is the median.

    One feature: sort x and select among the sorted differences by bisection, O(m log m)
    time and O(m) memory per step (about 64 steps), so all m(m-1)/2 pairs count even for
    m ~ 10^5. Several features: sort the m^2 squared distances (O(m^2) memory); in floating
    point a squared distance below (4 eps)^2 sum_k range_k^2 (range_k the spread of feature
    k, so an offset of the data does not matter) counts as 0. Inside a compiled program XLA
    fuses the operations that made ``x`` (the centring of :func:`bayeskit.covariance.hsic.standardised`)
    into the differences and may round x_i differently in its two places, by an ulp, so
    equal points came out 1e-16 apart and the pairs of a repeated point counted as distinct
    (with a third of the points at one value, the bandwidth fell from 0.43 to 0.16). An
    optimisation barrier before the differences does not stop it: XLA removes the barrier.
    """
    m = x.shape[0]
    if x.shape[1] == 1:
        s = jnp.sort(x[:, 0])
        n_zero = _pair_counts(s, jnp.zeros((), s.dtype))
        n_nonzero = m * (m - 1) // 2 - n_zero
        ranks = n_zero + jnp.stack([(n_nonzero - 1) // 2, n_nonzero // 2])
        middle = jax.vmap(lambda k: _kth_pair_difference(s, k))(jnp.maximum(ranks, 0)) ** 2
    else:
        d2 = squared_distances(x)
        ties = 0.0
        if jnp.issubdtype(x.dtype, jnp.inexact):  # integers differ exactly
            ties = (4 * jnp.finfo(x.dtype).eps) ** 2 * jnp.sum((jnp.max(x, axis=0) - jnp.min(x, axis=0)) ** 2)
        nonzero = d2 > ties
        n_nonzero = jnp.sum(nonzero) // 2  # each pair appears twice in the symmetric matrix
        ordered = jnp.sort(jnp.where(nonzero, d2, jnp.inf).ravel())
        middle = ordered[2 * jnp.maximum(jnp.stack([(n_nonzero - 1) // 2, n_nonzero // 2]), 0)]
    return middle[0], middle[1], n_nonzero > 0


def median_bandwidth(x: Float[Array, "m d"], kernel: str = "gaussian") -> Array:
    """The median heuristic over all pairs of points: sigma = sqrt(median(d^2) / 2) for the
    Gaussian kernel, sigma = median(d) for the Laplace kernel, d the nonzero distances
    between rows of ``x``; sigma = 1 when ``x`` is constant (every distance is 0)."""
    x = jnp.asarray(x)
    x = x[:, None] if x.ndim == 1 else x
    a, b, found = middle_squared_distances(x)
    sigma = jnp.sqrt(0.25 * (a + b)) if kernel == "gaussian" else 0.5 * (jnp.sqrt(a) + jnp.sqrt(b))
    return jnp.where(found, sigma, jnp.ones_like(sigma))


def gram(x: Array, kernel: str = "gaussian", bandwidth=None) -> Float[Array, "m m"]:
    """The Gram matrix of the rows of ``x`` (m, d); ``bandwidth`` sigma (None: the median
    heuristic) for the Gaussian and Laplace kernels; ``x`` itself when precomputed."""
    if kernel == "precomputed":
        return x
    if kernel == "linear":
        return x @ x.T
    sigma = median_bandwidth(x, kernel) if bandwidth is None else jnp.asarray(bandwidth, x.dtype)
    return _radial(squared_distances(x), kernel, sigma)


def _radial(d2: Array, kernel: str, sigma) -> Array:
    """The Gaussian or Laplace kernel at squared distances ``d2``."""
    return jnp.exp(-d2 / (2 * sigma**2)) if kernel == "gaussian" else jnp.exp(-jnp.sqrt(d2) / sigma)


def paired_kernel(u: Float[Array, "... d"], v: Float[Array, "... d"], kernel: str, bandwidth) -> Array:
    """k(u, v) between corresponding (broadcast) rows of ``u`` and ``v``, one feature at a
    time as in :func:`squared_distances`; ``bandwidth`` as given (no median heuristic)."""
    features = range(u.shape[-1])
    if kernel == "linear":
        return sum(u[..., k] * v[..., k] for k in features)
    return _radial(sum((u[..., k] - v[..., k]) ** 2 for k in features), kernel, jnp.asarray(bandwidth, u.dtype))


def centre(K: Float[Array, "m m"]) -> Float[Array, "m m"]:
    """K~ = HKH by row and column means."""
    return K - jnp.mean(K, 0, keepdims=True) - jnp.mean(K, 1, keepdims=True) + jnp.mean(K)


def random_features(key, x: Float[Array, "m d"], bandwidth, n_features: int, kernel: str = "gaussian"
                    ) -> Float[Array, "m 2D"]:
    """Phi with rows D^-1/2 [cos(W x_i), sin(W x_i)], D = ``n_features`` frequencies W drawn
    from the spectral density of the Gaussian (normal) or Laplace (multivariate Cauchy)
    kernel of bandwidth sigma, so that E[Phi Phi'] = K and every row has unit norm."""
    k_normal, k_scale = jax.random.split(key)
    W = flat(jax.random.normal, k_normal, (n_features, x.shape[1]), x.dtype)
    if kernel == "laplace":
        W = W / jnp.abs(flat(jax.random.normal, k_scale, (n_features, 1), x.dtype))
    Z = x @ W.T / bandwidth
    return jnp.concatenate([jnp.cos(Z), jnp.sin(Z)], axis=1) / jnp.sqrt(jnp.asarray(n_features, x.dtype))


def rff_bandwidth(key, x, bandwidth, kernel):
    """The given sigma, else the median heuristic: over all pairs for one feature, over a
    random subsample of RFF_SUBSAMPLE points otherwise (all pairs would take m^2 memory)."""
    if bandwidth is not None:
        return jnp.asarray(bandwidth, x.dtype)
    if x.shape[1] > 1 and x.shape[0] > RFF_SUBSAMPLE:
        x = x[jax.random.choice(key, x.shape[0], (RFF_SUBSAMPLE,), replace=False)]
    return median_bandwidth(x, kernel)


def centred_features(key, x, bandwidth, n_features, kernel):
    """Phi~ = Phi - 1 mean(Phi) and muK of (3) in :mod:`bayeskit.covariance.hsic` for the
    feature kernel K = Phi Phi', whose diagonal is 1: muK = (|Phi'1|^2 - m) / (m(m - 1))."""
    k_bandwidth, k_features = jax.random.split(key)
    Phi = random_features(k_features, x, rff_bandwidth(k_bandwidth, x, bandwidth, kernel), n_features, kernel)
    column_mean = jnp.mean(Phi, 0)
    m = x.shape[0]
    return Phi - column_mean, (m * jnp.sum(column_mean**2) - 1) / (m - 1)


def rff_parts(key, x, y, bandwidth_x, bandwidth_y, kernels, n_features):
    """Centred features of x and y, their muK and muL, and T = m^-1 |Phi~' Psi~|_F^2."""
    kx, ky = jax.random.split(key)
    Phi, mu_x = centred_features(kx, x, bandwidth_x, n_features, kernels[0])
    Psi, mu_y = centred_features(ky, y, bandwidth_y, n_features, kernels[1])
    return Phi, Psi, mu_x, mu_y, jnp.sum((Phi.T @ Psi) ** 2) / x.shape[0]

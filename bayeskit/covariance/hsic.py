"""The Hilbert-Schmidt Independence Criterion (HSIC) and its independence tests: Gretton,
Bousquet, Smola & Schoelkopf (ALT 2005); Gretton, Fukumizu, Teo, Song, Schoelkopf & Smola
(NIPS 2007); the unbiased estimator of Song, Smola, Gretton, Bedo & Borgwardt (JMLR 13, 2012).

Notation. m paired samples (x_i, y_i); Gram matrices K_ij = k(x_i, x_j) and L_ij = l(y_i, y_j);
H = I - 11'/m the centring matrix; K~ = HKH (computed by subtracting row and column means,
never by a product with H). The biased estimator and the test statistic are

    HSIC_b = m^-2 tr(K H L H) = m^-2 sum_ij K~_ij L~_ij,        T = m HSIC_b.                 (1)

Gretton et al. (2005) normalise by (m - 1)^-2 instead; we return m^-2, as the NIPS 2007 test
does, so that T is their statistic. With K0, L0 the Gram matrices with zeroed diagonals,

    HSIC_u = [tr(K0 L0) + 1'K0 1 1'L0 1 / ((m-1)(m-2)) - 2/(m-2) 1'K0 L0 1] / (m(m-3))        (2)

is unbiased (Song et al. 2012, eq. 5). Under independence T is approximately Gamma with the
moments of Gretton et al. (2007, Section 3), written here on the scale of T:

    E[T] = (dK - muK)(dL - muL),   dK = mean_i K_ii,   muK = mean_{i != j} K_ij,                 (3)
    Var[T] = 2(m-4)(m-5)/((m-1)(m-2)(m-3)) * sum_{i != j} (K~_ij L~_ij)^2 / (m - 1),              (4)
    shape = E[T]^2 / Var[T],   scale = Var[T] / E[T],   p = Q(shape, T / scale),                  (5)

Q the regularised upper incomplete gamma function. For kernels with k(x, x) = 1 (Gaussian,
Laplace) (3) is the paper's (1 + muK muL - muK - muL) times m. It is the null mean of T to
O(1/m): the mean over all permutations is (m - 1)/m times (3). The permutation test draws B
permutations pi of the y sample and gives

    T*_b = m^-1 sum_ij K~_ij L~_pi(i)pi(j),    p = (1 + #{b : T*_b >= T}) / (1 + B).             (6)

Kernels: Gaussian exp(-|x - x'|^2 / (2 sigma^2)), Laplace exp(-|x - x'| / sigma), linear x'x',
or precomputed Gram matrices. Each variable is first centred and divided by its largest
absolute entry (a given bandwidth likewise): every kernel here is shift-invariant within
HSIC, and the Gaussian and Laplace kernels scale-invariant with their bandwidth, so the
statistics are unchanged (the linear kernel's are multiplied back by s^2), while data far
from unit scale (1e-20 or 1e20 in float32) no longer overflow or underflow the distances.
The median heuristic sets, per variable and over all pairs
of points, sigma^2 = median of the nonzero squared distances / 2 (Gaussian) or sigma = median
of the nonzero distances (Laplace); a constant variable (no nonzero distance) gets sigma = 1,
its Gram matrix is all ones and HSIC is 0. The kernels, the median heuristic and the random
Fourier features below live in :mod:`bayeskit.covariance.hsic_kernels`.

For large m, random Fourier features (Rahimi & Recht, NIPS 2007) replace K by Phi Phi', Phi
(m, 2D) with rows D^-1/2 [cos(W x_i), sin(W x_i)], W's D rows drawn from the kernel's
spectral density (normal with covariance sigma^-2 I for the Gaussian, multivariate Cauchy
with scale 1/sigma for the Laplace kernel); then HSIC_b = m^-2 |Phi~' Psi~|_F^2 with
column-centred features, in O(m D) memory.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import gammaincc
from jaxtyping import Array, Float

from bayeskit.core.device import call_arg
from bayeskit.core.validation import check_choice, check_int_in, check_matrix, check_positive, is_concrete
from bayeskit.covariance.hsic_kernels import (
    RFF_SUBSAMPLE,
    centre,
    gram,
    median_bandwidth,
    middle_squared_distances,
    paired_kernel,
    random_features,
    rff_parts,
    squared_distances,
)

KERNELS = ("gaussian", "laplace", "linear", "precomputed")
ESTIMATORS = ("biased", "unbiased")
METHODS = ("gamma", "permutation")
APPROXIMATIONS = (None, "rff")
MIN_SAMPLES = {"biased": 2, "unbiased": 4, "gamma": 6, "permutation": 2}
# permutation test: recompute l(y_p(i), y_p(j)) for samples of at most this many features
# (a third faster than gathering entries of L at one feature, slower from two), gather otherwise
RECOMPUTE_FEATURES = 1


class IndependenceResult(NamedTuple):
    """An independence test's outcome. ``statistic`` is T = m HSIC_b (1), ``p_value`` its
    p-value, ``null_mean`` and ``null_variance`` the moments of T under independence ((3)-(4)
    for the gamma test, the permutation draws' mean and variance for the permutation
    test), and ``shape``, ``scale`` the Gamma with those moments (5). A constant variable
    makes the null a point mass: then p = 1 and shape, scale are NaN."""

    statistic: Array
    p_value: Array
    null_mean: Array
    null_variance: Array
    shape: Array
    scale: Array


# --- estimators ------------------------------------------------------------------------


def hsic_biased_gram(K: Array, L: Array) -> Array:
    """HSIC_b = m^-2 tr(KHLH) of (1), both Gram matrices centred (exactly 0 when one of them
    is constant)."""
    m = K.shape[0]
    return jnp.sum(centre(K) * centre(L)) / m**2


def hsic_unbiased_gram(K: Array, L: Array) -> Array:
    """HSIC_u of (2); needs m >= 4."""
    m = K.shape[0]
    K0 = K * (1 - jnp.eye(m, dtype=K.dtype))
    L0 = L * (1 - jnp.eye(m, dtype=L.dtype))
    k1, l1 = jnp.sum(K0, 0), jnp.sum(L0, 1)
    total = jnp.sum(K0 * L0.T) + jnp.sum(k1) * jnp.sum(l1) / ((m - 1) * (m - 2)) - 2 * (k1 @ l1) / (m - 2)
    return total / (m * (m - 3))


def _unit_scale(v: Array) -> Array:
    return jnp.where((v > 0) & jnp.isfinite(v), v, jnp.ones_like(v))


def standardised(a: Float[Array, "m d"], kernel: str, bandwidth=None) -> tuple[Array, object, Array]:
    """``a`` centred and divided by its largest absolute entry s, the bandwidth (when given)
    divided by s, and s (1 for a precomputed Gram matrix or a constant variable): the
    module docstring's scale-free form."""
    if kernel == "precomputed":
        return a, bandwidth, jnp.ones((), a.dtype)
    s1 = _unit_scale(jnp.max(jnp.abs(a)))  # first to O(1), so that the mean cannot overflow
    a = a / s1
    a = a - jnp.mean(a, 0)
    s2 = _unit_scale(jnp.max(jnp.abs(a)))
    return a / s2, None if bandwidth is None else bandwidth / s1 / s2, s1 * s2


def _standardised_pair(x, y, bandwidth_x, bandwidth_y, kernels):
    """Both variables standardised, and the factor that takes T (and the null's mean and
    scale) back to the caller's units: s^2 per linear-kernel variable."""
    x, bandwidth_x, sx = standardised(x, kernels[0], bandwidth_x)
    y, bandwidth_y, sy = standardised(y, kernels[1], bandwidth_y)
    factor = (sx**2 if kernels[0] == "linear" else 1.0) * (sy**2 if kernels[1] == "linear" else 1.0)
    return x, y, bandwidth_x, bandwidth_y, jnp.asarray(factor, x.dtype)


def _grams(x, y, bandwidth_x, bandwidth_y, kernels):
    return gram(x, kernels[0], bandwidth_x), gram(y, kernels[1], bandwidth_y)


@partial(jax.jit, static_argnames=("kernels", "estimator"))
def _hsic(x, y, bandwidth_x, bandwidth_y, *, kernels, estimator):
    x, y, bandwidth_x, bandwidth_y, factor = _standardised_pair(x, y, bandwidth_x, bandwidth_y, kernels)
    K, L = _grams(x, y, bandwidth_x, bandwidth_y, kernels)
    return factor * (hsic_biased_gram if estimator == "biased" else hsic_unbiased_gram)(K, L)


def hsic(x, y, kernel: str | tuple[str, str] = "gaussian", estimator: str = "biased", *, bandwidth_x=None,
         bandwidth_y=None) -> Array:
    """The HSIC between paired samples ``x`` and ``y``.

    Parameters
    ----------
    x, y : arrays of shape (m,) or (m, d)
        Paired samples (rows); with ``kernel="precomputed"`` the (m, m) Gram matrices K, L.
    kernel : {"gaussian", "laplace", "linear", "precomputed"} or a pair of them
        One kernel for both variables, or (kernel of x, kernel of y).
    estimator : {"biased", "unbiased"}
        HSIC_b = m^-2 tr(KHLH) of (1) (Gretton et al. 2005 normalise by (m-1)^-2 instead)
        or the unbiased HSIC_u of (2) (Song et al. 2012), which can be negative.
    bandwidth_x, bandwidth_y : float, optional
        sigma of the Gaussian or Laplace kernel; default the median heuristic over all pairs.

    Returns
    -------
    Array, scalar: the estimate, in the dtype of the input.

    Raises
    ------
    ValueError
        Non-finite or non-numeric input, different sample counts, too few samples (2 for
        the biased, 4 for the unbiased estimator), an unknown kernel or estimator, a
        non-positive bandwidth, a precomputed Gram matrix that is not square and symmetric.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.linspace(-1, 1, 50)
    >>> float(hsic(x, x**2, kernel="linear")) < 1e-8  # uncorrelated, but...
    True
    >>> float(hsic(x, x**2)) > 0.01  # ...dependent, which the Gaussian kernel sees
    True
    """
    check_choice("estimator", estimator, ESTIMATORS)
    kernels = _kernel_pair(kernel)
    x, y = _checked_samples(x, y, kernels, (bandwidth_x, bandwidth_y), MIN_SAMPLES[estimator])
    return _hsic(x, y, bandwidth_x, bandwidth_y, kernels=kernels, estimator=estimator)


# --- the tests ---------------------------------------------------------------------------


def gamma_null(K: Array, L: Array, Kc: Array | None = None, Lc: Array | None = None) -> tuple[Array, Array]:
    """Mean (3) and variance (4) of T = m HSIC_b under independence, from the Gram matrices
    (and their centred forms when at hand); needs m >= 6."""
    m = K.shape[0]
    Kc = centre(K) if Kc is None else Kc
    Lc = centre(L) if Lc is None else Lc
    mean = (_diagonal_mean(K) - _off_diagonal_mean(K)) * (_diagonal_mean(L) - _off_diagonal_mean(L))
    pair_sum = jnp.sum((Kc * Lc) ** 2) - jnp.sum((jnp.diagonal(Kc) * jnp.diagonal(Lc)) ** 2)
    return mean, _variance(pair_sum / (m * (m - 1)), m)


def _diagonal_mean(K):
    return jnp.mean(jnp.diagonal(K))


def _off_diagonal_mean(K):
    m = K.shape[0]
    return (jnp.sum(K) - jnp.trace(K)) / (m * (m - 1))


def _variance(pair_mean, m):
    """Var[T] of (4) given the mean of (K~_ij L~_ij)^2 over pairs i != j."""
    return 2.0 * (m - 4) * (m - 5) / ((m - 1) * (m - 2) * (m - 3)) * pair_mean * m


def _gamma_result(statistic, mean, variance, p_value=None) -> IndependenceResult:
    """The Gamma of (5) with the given moments; its survival function at T unless a
    p-value is given. A degenerate null (zero mean or variance) gives p = 1; a statistic
    that is NaN (data with a NaN, inside ``jit`` or ``vmap`` where they are not checked)
    gives p = NaN, not the 1 or the 1 / (B + 1) its comparisons would."""
    proper = (mean > 0) & (variance > 0)
    shape = jnp.where(proper, mean**2 / jnp.where(proper, variance, 1), jnp.nan)
    scale = jnp.where(proper, variance / jnp.where(proper, mean, 1), jnp.nan)
    if p_value is None:
        p_value = jnp.where(proper, gammaincc(jnp.where(proper, shape, 1), statistic / jnp.where(proper, scale, 1)), 1)
    p_value = jnp.where(jnp.isnan(statistic), jnp.nan, p_value)
    return IndependenceResult(statistic, jnp.asarray(p_value, statistic.dtype), mean, variance, shape, scale)


def permutation_null(key, Kc: Array, pair_kernel, sample: Array, n_permutations: int, batch_size: int = 1
                     ) -> Float[Array, " B"]:
    """T*_b of (6) for ``n_permutations`` permutations pi drawn from ``key`` (one key per
    permutation, so the draws do not depend on ``batch_size``), ``batch_size`` at a time.

    With z = ``sample``[pi] (the permuted y sample, or ``jnp.arange(m)`` to index a Gram
    matrix), ``pair_kernel(u, v)`` gives l between corresponding rows of u and v (for a
    Gram matrix L: ``lambda u, v: L[u, v]``). As K~ and L are symmetric, (6) is a sum over
    the first h + 1 = floor(m/2) + 1 cyclic diagonals, half the kernel evaluations:

        m T*_b = sum_{s=0}^{h} w_s sum_i K~_{i,i+s} l(z_i, z_{i+s}),   indices mod m,        (6')

    w_0 = 1, w_s = 2, except w_{m/2} = 1 for even m (that diagonal holds each pair twice).
    K~ is centred, so an uncentred L gives the same T*_b."""
    Kc, sample = jnp.asarray(Kc), jnp.asarray(sample)
    m = Kc.shape[0]
    h = m // 2
    i, s = jnp.arange(m)[None], jnp.arange(h + 1)[:, None]
    band = Kc[i, (i + s) % m] * jnp.where((s == 0) | (2 * s == m), 1.0, 2.0).astype(Kc.dtype)

    def one(k):
        z = sample[jax.random.permutation(k, m)]
        return jnp.sum(band * pair_kernel(z[None], cyclic_diagonals(z, h))) / m

    return jax.lax.map(one, jax.random.split(key, n_permutations), batch_size=batch_size)


def cyclic_diagonals(z: Array, h: int) -> Array:
    """(h + 1, m, ...) with row s = z shifted cyclically by s: z[(i + s) mod m] (slices of
    [z; z], which XLA fuses, where an index gather would not)."""
    zz = jnp.concatenate([z, z])
    return jax.vmap(lambda s: jax.lax.dynamic_slice_in_dim(zz, s, z.shape[0]))(jnp.arange(h + 1))


def permutation_p_value(statistic, null: Array, tie_tolerance=0.0) -> Array:
    """(1 + #{T* >= T - tie_tolerance}) / (1 + B) of (6)."""
    return (1 + jnp.sum(null >= statistic - tie_tolerance)) / (1 + null.shape[0])


def _bandwidth(x, kernel, bandwidth):
    """sigma for a kernel that has one: the given value, else the median heuristic."""
    if kernel in ("gaussian", "laplace") and bandwidth is None:
        return median_bandwidth(x, kernel)
    return bandwidth


@partial(jax.jit, static_argnames=("kernels", "method", "n_permutations", "batch_size"))
def _test_exact(key, x, y, bandwidth_x, bandwidth_y, *, kernels, method, n_permutations, batch_size) -> IndependenceResult:
    x, y, bandwidth_x, bandwidth_y, factor = _standardised_pair(x, y, bandwidth_x, bandwidth_y, kernels)
    return _in_units(_test_standardised(key, x, y, bandwidth_x, bandwidth_y, kernels, method, n_permutations, batch_size),
                     factor)


def _in_units(result: IndependenceResult, factor) -> IndependenceResult:
    """A test's outcome on standardised data in the caller's units: T, the null mean and the
    Gamma scale times ``factor``, the null variance times its square."""
    return result._replace(statistic=factor * result.statistic, null_mean=factor * result.null_mean,
                           null_variance=factor**2 * result.null_variance, scale=factor * result.scale)


def _test_standardised(key, x, y, bandwidth_x, bandwidth_y, kernels, method, n_permutations, batch_size):
    bandwidth_y = _bandwidth(y, kernels[1], bandwidth_y)
    K, L = _grams(x, y, bandwidth_x, bandwidth_y, kernels)
    m = K.shape[0]
    Kc, Lc = centre(K), centre(L)
    statistic = jnp.sum(Kc * Lc) / m
    if method == "gamma":
        return _gamma_result(statistic, *gamma_null(K, L, Kc, Lc))
    if kernels[1] != "precomputed" and y.shape[1] <= RECOMPUTE_FEATURES:
        pair_kernel, sample = partial(paired_kernel, kernel=kernels[1], bandwidth=bandwidth_y), y
    else:
        pair_kernel, sample = (lambda u, v: L[u, v]), jnp.arange(m)
    null = permutation_null(key, Kc, pair_kernel, sample, n_permutations, batch_size)
    # T*_b and T differ by rounding alone when the draws tie (discrete data): count those
    tolerance = 100 * jnp.finfo(K.dtype).eps * jnp.linalg.norm(Kc) * jnp.linalg.norm(L) / m
    return _gamma_result(statistic, jnp.mean(null), jnp.var(null, ddof=1),
                         permutation_p_value(statistic, null, tolerance))


# --- random Fourier features -------------------------------------------------------------


@partial(jax.jit, static_argnames=("kernels", "n_features"))
def _hsic_rff(key, x, y, bandwidth_x, bandwidth_y, *, kernels, n_features):
    x, y, bandwidth_x, bandwidth_y, _ = _standardised_pair(x, y, bandwidth_x, bandwidth_y, kernels)  # radial: no factor
    return rff_parts(key, x, y, bandwidth_x, bandwidth_y, kernels, n_features)[-1] / x.shape[0]


def hsic_rff(key, x, y, n_features: int = 256, kernel: str | tuple[str, str] = "gaussian", *, bandwidth_x=None,
             bandwidth_y=None) -> Array:
    """HSIC_b of (1) with random Fourier features (module docstring): O(m D) memory and
    O(m D^2) time for D = ``n_features`` frequencies per variable. Kernels "gaussian" and
    "laplace"; the rest as in :func:`hsic`. The error shrinks like D^-1/2 (see the tests
    and ``benchmarks/bench_hsic.py`` for measured values)."""
    kernels = _kernel_pair(kernel, rff=True)
    check_int_in("n_features", n_features, 1)
    x, y = _checked_samples(x, y, kernels, (bandwidth_x, bandwidth_y), MIN_SAMPLES["biased"])
    return _hsic_rff(key, x, y, bandwidth_x, bandwidth_y, kernels=kernels, n_features=n_features)


@partial(jax.jit, static_argnames=("kernels", "n_features"))
def _test_rff(key, x, y, bandwidth_x, bandwidth_y, *, kernels, n_features) -> IndependenceResult:
    """The gamma test (3)-(5) on features; the pair mean of (4) over the pairs of a random
    subsample of RFF_SUBSAMPLE points (all m(m - 1) pairs would take O(m^2 D) time)."""
    x, y, bandwidth_x, bandwidth_y, _ = _standardised_pair(x, y, bandwidth_x, bandwidth_y, kernels)  # radial: no factor
    k_features, k_subsample = jax.random.split(key)
    Phi, Psi, mu_x, mu_y, statistic = rff_parts(k_features, x, y, bandwidth_x, bandwidth_y, kernels, n_features)
    m = x.shape[0]
    s = min(m, RFF_SUBSAMPLE)
    idx = jax.random.choice(k_subsample, m, (s,), replace=False)
    pair = ((Phi[idx] @ Phi[idx].T) * (Psi[idx] @ Psi[idx].T)) ** 2
    pair_mean = (jnp.sum(pair) - jnp.trace(pair)) / (s * (s - 1))
    return _gamma_result(statistic, (1 - mu_x) * (1 - mu_y), _variance(pair_mean, m))


# --- the public test and input checks -----------------------------------------------------


def test(key, x, y, method: str = "gamma", n_permutations: int = 1000, kernel: str | tuple[str, str] = "gaussian", *,
         bandwidth_x=None, bandwidth_y=None, approximation: str | None = None, n_features: int = 256,
         batch_size: int = 2) -> IndependenceResult:
    """Test independence of ``x`` and ``y`` with the HSIC statistic T = m HSIC_b.

    Parameters
    ----------
    key : jax.random key
        Draws the permutations, or the random features; unused by the exact gamma test.
    x, y : arrays of shape (m,) or (m, d)
        Paired samples; with ``kernel="precomputed"`` the (m, m) Gram matrices.
    method : {"gamma", "permutation"}
        The moment-matched Gamma null (3)-(5) (Gretton et al. 2007), or ``n_permutations``
        permutations of y with p = (1 + #{T* >= T}) / (1 + B) of (6).
    n_permutations : int
        B, for the permutation test.
    kernel, bandwidth_x, bandwidth_y
        As in :func:`hsic`.
    approximation : {None, "rff"}
        "rff": the gamma test on ``n_features`` random Fourier frequencies per variable
        (Gaussian or Laplace kernels), O(m D) memory; the median heuristic then uses all
        pairs for one feature and RFF_SUBSAMPLE random points for several.
    batch_size : int
        Permutations evaluated together (memory about batch_size m^2 / 2 numbers).

    Returns
    -------
    IndependenceResult
        ``statistic``, ``p_value``, ``null_mean``, ``null_variance``, ``shape``, ``scale``.

    Raises
    ------
    ValueError
        As :func:`hsic`; fewer than 6 samples for the gamma test (the variance (4) needs
        m > 5); an unknown method or approximation; "rff" with a permutation test or a
        kernel other than Gaussian and Laplace.

    Notes
    -----
    Jittable and vmappable over keys and stacked data sets, with ``method``, ``kernel``,
    ``n_permutations``, ``approximation``, ``n_features`` and ``batch_size`` static. The
    exact tests hold the two m x m Gram matrices and their centred forms: about
    4 m^2 numbers (3.2 GB at m = 10^4 in float64). Inputs are checked on the host when
    concrete; inside ``jit`` and ``vmap`` the caller's data are trusted.

    Examples
    --------
    >>> import jax, numpy as np
    >>> x = np.random.default_rng(0).normal(size=200)
    >>> y = x**2 + 0.5 * np.random.default_rng(1).normal(size=200)
    >>> bool(test(jax.random.key(0), x, y).p_value < 1e-6)
    True
    """
    check_choice("method", method, METHODS)
    check_choice("approximation", approximation, APPROXIMATIONS)
    check_int_in("n_permutations", n_permutations, 1)
    check_int_in("batch_size", batch_size, 1)
    kernels = _kernel_pair(kernel, rff=approximation == "rff")
    x, y = _checked_samples(x, y, kernels, (bandwidth_x, bandwidth_y), MIN_SAMPLES[method])
    if approximation == "rff":
        if method != "gamma":
            raise ValueError('approximation="rff" supports method="gamma" only.')
        check_int_in("n_features", n_features, 1)
        return _test_rff(key, x, y, bandwidth_x, bandwidth_y, kernels=kernels, n_features=n_features)
    return _test_exact(key, x, y, bandwidth_x, bandwidth_y, kernels=kernels, method=method,
                       n_permutations=n_permutations, batch_size=batch_size)


test.__test__ = False  # a library function, not a pytest test, wherever it is imported


def _kernel_pair(kernel, rff: bool = False) -> tuple[str, str]:
    kernels = (kernel, kernel) if isinstance(kernel, str) else tuple(kernel)
    if len(kernels) != 2:
        raise ValueError(f"kernel must be a name or a pair of names, got {kernel!r}.")
    for k in kernels:
        check_choice("kernel", k, ("gaussian", "laplace") if rff else KERNELS)
    return kernels


def _checked_samples(x, y, kernels, bandwidths, min_samples: int):
    """x and y as (m, d) arrays of one floating dtype, checked when concrete: finite,
    the same number of samples, at least ``min_samples``, square symmetric Gram matrices
    when precomputed, positive bandwidths where a bandwidth applies and none elsewhere."""
    arrays = []
    for name, a, kernel, bandwidth in zip("xy", (x, y), kernels, bandwidths):
        if not is_concrete(a, bandwidth):
            a = jnp.asarray(a)
            arrays.append(a if kernel == "precomputed" or a.ndim == 2 else a.reshape(a.shape[0], -1))
            continue
        if kernel != "precomputed" and np.ndim(a) == 1:
            a = np.reshape(a, (-1, 1))
        a = check_matrix(a, name)
        if kernel == "precomputed":
            _check_gram(a, name)
        if bandwidth is not None:
            if kernel not in ("gaussian", "laplace"):
                raise ValueError(f"bandwidth_{name} applies to the Gaussian and Laplace kernels only, not {kernel!r}.")
            check_positive(**{f"bandwidth_{name}": bandwidth})
        arrays.append(a)
    x, y = arrays
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x has {x.shape[0]} samples but y has {y.shape[0]}; they must be paired.")
    if x.shape[0] < min_samples:
        raise ValueError(f"{x.shape[0]} samples; at least {min_samples} required.")
    # one floating dtype, canonical before promotion: float64 data with x64 off is float32 without
    # JAX's warning about an unavailable dtype; host data stay NumPy copies, which the jitted test
    # puts on the device (jnp.asarray compiled and ran a program for each)
    dtype = jnp.result_type(jax.dtypes.canonicalize_dtype(x.dtype), jax.dtypes.canonicalize_dtype(y.dtype), float)
    linear = [np.ptp(a, axis=0).max() for a, kernel in zip((x, y), kernels) if kernel == "linear" and is_concrete(a)]
    if linear and np.prod(np.square(np.asarray(linear, np.float64))) > np.finfo(dtype).max / 16:
        raise ValueError(f"HSIC with the linear kernel scales as the squared spread of its variables "
                         f"({' x '.join(f'{v:.3g}^2' for v in linear)}), beyond {np.dtype(dtype).name}; divide the data by a "
                         "constant nearer their scale, or compute in float64 (jax_enable_x64).")
    return call_arg(x, dtype), call_arg(y, dtype)


def _check_gram(K: np.ndarray, name: str) -> None:
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"precomputed {name} must be a square (m, m) Gram matrix, got shape {K.shape}.")
    scale = np.abs(K).max()
    if np.abs(K - K.T).max() > np.sqrt(np.finfo(K.dtype).eps) * scale:
        raise ValueError(f"precomputed {name} must be a symmetric Gram matrix.")


__all__ = ["IndependenceResult", "KERNELS", "ESTIMATORS", "METHODS", "hsic", "hsic_biased_gram", "hsic_unbiased_gram", "test",
           "hsic_rff", "random_features", "standardised", "median_bandwidth", "middle_squared_distances", "squared_distances", "gram",
           "centre", "gamma_null", "permutation_null", "cyclic_diagonals", "paired_kernel", "permutation_p_value"]

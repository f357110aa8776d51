"""The synthetic problems of the SBMoE paper (Sections 4.1 and 4.2) and their true
conditionals y | x, for evaluation.

1-D problem: x ~ LN(0, [[1, .5], [.5, 1]]), tau ~ Be(0.3), zeta | x ~ Gamma(shape x1,
rate x2), y = log(zeta + 0.4 tau + 0.1). The conditional density is a mixture of two
shifted log-gamma densities (closed form below).

2-D problem: e ~ LN(0, [[1, .5], [.5, 1]]); phi(xi) = (N(0.7 i | xi, 4))_{i=0..7};
x = (Re F phi(e1), Im F phi(e1), Re F phi(e2), Im F phi(e2)) in R^32 with F the DFT
(numpy's convention); tau ~ Be(0.5); zeta | e ~ IW(S S', 3), S = [[e1, 0], [0.5, e2]];
y = (log zeta_11, (2 tau - 1) log zeta_22). Four columns of x are identically zero.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln
from jaxtyping import Array, Float, PRNGKeyArray

from bayeskit.core.validation import check_int_in

_LN_COV = jnp.array([[1.0, 0.5], [0.5, 1.0]])


@functools.partial(jax.jit, static_argnames=("n", "dtype"))
def _lognormal_inputs(key: PRNGKeyArray, n: int, dtype) -> Array:
    chol = jnp.linalg.cholesky(_LN_COV.astype(dtype))
    return jnp.exp(jax.random.normal(key, (n, 2), dtype) @ chol.T)


GAMMA_DRAWS = 1 << 17


def _gamma(key: PRNGKeyArray, a: Array) -> Array:
    """``jax.random.gamma(key, a, dtype=a.dtype)``, bit for bit, by one compiled sampler for every shape of
    ``a`` up to ``GAMMA_DRAWS`` entries (one per power of two above): JAX's sampler takes
    about a second to compile, and the generators draw Gamma variates of four shapes. JAX
    gives each variate of a's flattened shape its own key, split from ``key`` by counter, so
    under the partitionable Threefry (see :func:`drawn_rows`) a flat draw padded with ones
    begins with the variates of ``a``."""
    size = max(GAMMA_DRAWS, 1 << max(a.size - 1, 0).bit_length())
    return _unflattened(_gamma_flat(key, _flat_padded(a, size)), a.shape)


@functools.partial(jax.jit, static_argnames="size")
def _flat_padded(a: Array, size: int) -> Array:
    return jnp.pad(a.ravel(), (0, size - a.size), constant_values=1)


@jax.jit
def _gamma_flat(key: PRNGKeyArray, a: Array) -> Array:
    return jax.random.gamma(key, a, dtype=a.dtype)


@functools.partial(jax.jit, static_argnames="shape")
def _unflattened(flat: Array, shape: tuple[int, ...]) -> Array:
    return flat[: math.prod(shape)].reshape(shape)


def sbmoe_conditional_1d(key: PRNGKeyArray, X: Float[Array, "m 2"], n_samples: int) -> Float[Array, "s m 1"]:
    """``n_samples`` draws of y | x for every row of X (1-D problem)."""
    X = _inputs(X, 2, "X")
    n_samples = check_int_in("n_samples", n_samples, 1)
    k_tau, k_zeta = jax.random.split(key)
    return _log_shifted(k_tau, X, _gamma(k_zeta, _gamma_shapes_1d(X, n_samples)))


@functools.partial(jax.jit, static_argnames="n_samples")
def _gamma_shapes_1d(X: Array, n_samples: int) -> Array:
    return jnp.broadcast_to(X[:, 0], (n_samples, X.shape[0]))


@jax.jit
def _log_shifted(k_tau: PRNGKeyArray, X: Array, gamma: Array) -> Array:
    """``y = log(zeta + 0.4 tau + 0.1)`` from Gamma(x1, 1) variates (n_samples, m)."""
    tau = jax.random.bernoulli(k_tau, 0.3, gamma.shape).astype(X.dtype)
    return jnp.log(gamma / X[:, 1] + 0.4 * tau + 0.1)[..., None]


MIN_ROWS = 4096


def drawn_rows(n: int) -> int:
    """How many rows the generators draw for ``n``: a power of two, at least ``MIN_ROWS``,
    so that every size up to it runs the same compiled programs. Each row's draws come from
    its own counter-based key, so the first ``n`` rows are the draws of size ``n`` (bit for
    bit at the experiments' sizes; a matrix product of another shape may round by an ulp).
    That rests on JAX's partitionable Threefry (``jax_threefry_partitionable``, the default,
    with the threefry implementation); under another PRNG the draws of a size are still
    reproducible but differ from a direct draw of it. Keeping the first ``n`` rows runs a
    small slicing program per size."""
    return max(MIN_ROWS, 1 << max(n - 1, 0).bit_length())


def _inputs(X, width: int, name: str) -> Array:
    """X as a JAX array of ``width`` columns, refused otherwise; integers (and booleans) as
    JAX's default float."""
    X = jnp.asarray(X)
    if X.dtype.kind in "biu":
        X = X.astype(jnp.result_type(float))
    if X.ndim != 2 or X.shape[1] != width:
        raise ValueError(f"{name} must have shape (m, {width}), got {X.shape}.")
    return X


def sbmoe_synthetic_1d(key: PRNGKeyArray, n: int, dtype=None) -> tuple[Array, Array]:
    """``n`` pairs (X (n, 2), Y (n, 1)) of the 1-D problem of Section 4.1."""
    n = check_int_in("n", n, 1)
    X, Y = _synthetic_1d(key, drawn_rows(n), dtype or jnp.result_type(float))
    return X[:n], Y[:n]


def _synthetic_1d(key: PRNGKeyArray, n: int, dtype) -> tuple[Array, Array]:
    k_x, k_y = jax.random.split(key)
    X = _lognormal_inputs(k_x, n, dtype)
    return X, sbmoe_conditional_1d(k_y, X, 1)[0]


def sbmoe_logpdf_1d(X: Float[Array, "m 2"], Y: Float[Array, "... m 1"]) -> Float[Array, "... m"]:
    """Exact ``log p(y | x)`` of the 1-D problem::

        p(y | x) = sum_{t in {0,1}} P(tau = t) f_Gamma(e^y - 0.4 t - 0.1; x1, x2) e^y 1{e^y > 0.1 + 0.4 t}

    Y's last axis is the output (of size 1) and the axis before it runs over X's rows (or
    has size 1, shared by every row), as the samples of :func:`sbmoe_conditional_1d`.
    """
    X, Y = _inputs(X, 2, "X"), jnp.asarray(Y)
    if Y.ndim < 2 or Y.shape[-1] != 1 or Y.shape[-2] not in (1, X.shape[0]):
        raise ValueError(f"Y must have shape (..., {X.shape[0]}, 1) for X of {X.shape[0]} rows (the output on the last axis), "
                         f"got {Y.shape}.")
    return _logpdf_1d(X, Y)


@jax.jit
def _logpdf_1d(X: Array, Y: Array) -> Array:
    y = Y[..., 0]
    shape, rate = X[:, 0], X[:, 1]

    def part(t, p):
        z = jnp.exp(y) - 0.4 * t - 0.1
        ok = z > 0
        zs = jnp.where(ok, z, 1.0)
        log_f = shape * jnp.log(rate) + (shape - 1) * jnp.log(zs) - rate * zs - gammaln(shape)
        return jnp.where(ok, math.log(p) + log_f + y, -jnp.inf)

    return jnp.logaddexp(part(0.0, 0.7), part(1.0, 0.3))


def sbmoe_features_2d(E: Float[Array, "n 2"]) -> Float[Array, "n 32"]:
    """The 32 inputs of the 2-D problem from the latent ``e`` (n, 2)."""
    return _features_2d(_inputs(E, 2, "E"))


@jax.jit
def _features_2d(E: Array) -> Array:
    grid = 0.7 * jnp.arange(8, dtype=E.dtype)
    phi = jnp.exp(-0.5 * (grid - E[..., None]) ** 2 / 4) / math.sqrt(2 * math.pi * 4)  # (n, 2, 8)
    F = jnp.fft.fft(phi, axis=-1)
    return jnp.concatenate([F[:, 0].real, F[:, 0].imag, F[:, 1].real, F[:, 1].imag], axis=1).astype(E.dtype)


def _scale_2d(E: Array) -> Array:
    """``S S'`` with ``S = [[e1, 0], [0.5, e2]]``, shape (..., 2, 2)."""
    e1, e2 = E[..., 0], E[..., 1]
    return jnp.stack([jnp.stack([e1**2, 0.5 * e1], -1), jnp.stack([0.5 * e1, 0.25 + e2**2], -1)], -2)


def sbmoe_conditional_2d(key: PRNGKeyArray, E: Float[Array, "m 2"], n_samples: int) -> Float[Array, "s m 2"]:
    """``n_samples`` draws of y | e for every latent row of E (2-D problem)."""
    E = _inputs(E, 2, "E")
    n_samples = check_int_in("n_samples", n_samples, 1)
    k_tau, k_chi, k_norm = jax.random.split(key, 3)
    chi2 = _gamma(k_chi, _bartlett_shapes(E, n_samples))  # halves of the Bartlett diagonals' chi-square variates
    return _log_wishart_2d(k_tau, k_norm, E, chi2)


@functools.partial(jax.jit, static_argnames="n_samples")
def _bartlett_shapes(E: Array, n_samples: int) -> Array:
    return jnp.broadcast_to(jnp.array([1.5, 1.0], E.dtype), (n_samples, E.shape[0], 2))


@jax.jit
def _log_wishart_2d(k_tau: PRNGKeyArray, k_norm: PRNGKeyArray, E: Array, chi2: Array) -> Array:
    """y from zeta^-1 ~ W((S S')^-1, 3) by the Bartlett decomposition, its diagonals'
    Gamma(3/2, 1) and Gamma(1, 1) variates ``chi2`` (n_samples, m, 2) given."""
    n_samples, m, dtype = chi2.shape[0], E.shape[0], E.dtype
    P = jnp.linalg.cholesky(jnp.linalg.inv(_scale_2d(E)))
    chi = jnp.sqrt(2 * chi2)
    low = jax.random.normal(k_norm, (n_samples, m), dtype)
    A = jnp.zeros((n_samples, m, 2, 2), dtype).at[..., 0, 0].set(chi[..., 0]).at[..., 1, 1].set(chi[..., 1]).at[..., 1, 0].set(low)
    factor = P @ A
    zeta = jnp.linalg.inv(factor @ jnp.swapaxes(factor, -1, -2))
    sign = 2 * jax.random.bernoulli(k_tau, 0.5, (n_samples, m)).astype(dtype) - 1
    return jnp.stack([jnp.log(zeta[..., 0, 0]), sign * jnp.log(zeta[..., 1, 1])], axis=-1)


def sbmoe_synthetic_2d(key: PRNGKeyArray, n: int, dtype=None, *, return_latent: bool = False):
    """``n`` pairs (X (n, 32), Y (n, 2)) of the 2-D problem of Section 4.2; with
    ``return_latent`` also the latent ``e`` (n, 2) that the true conditional needs."""
    n = check_int_in("n", n, 1)
    X, Y, E = (a[:n] for a in _synthetic_2d(key, drawn_rows(n), dtype or jnp.result_type(float)))
    return (X, Y, E) if return_latent else (X, Y)


def _synthetic_2d(key: PRNGKeyArray, n: int, dtype):
    k_e, k_y = jax.random.split(key)
    E = _lognormal_inputs(k_e, n, dtype)
    return sbmoe_features_2d(E), sbmoe_conditional_2d(k_y, E, 1)[0], E

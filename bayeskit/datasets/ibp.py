"""The toy data of the IBP review (Griffiths & Ghahramani, JMLR 2011, Section 5): 6 x 6
images, each the sum of some of four binary base images plus Gaussian noise."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.validation import check_int_in

# Four 6 x 6 base images, one pattern per 3 x 3 quadrant (the patterns of the review's
# Figure 7 as distributed with the accelerated-IBP demonstration).
_PATTERNS = (
    ((0, 1, 0), (1, 1, 1), (0, 1, 0)),  # cross, top left
    ((1, 1, 1), (1, 0, 1), (1, 1, 1)),  # ring, top right
    ((1, 0, 0), (1, 1, 0), (1, 1, 1)),  # triangle, bottom left
    ((1, 1, 1), (0, 1, 0), (0, 1, 0)),  # T, bottom right
)


def ibp_toy_features() -> np.ndarray:
    """The four base images as rows of a (4, 36) array of zeros and ones."""
    A = np.zeros((4, 6, 6))
    for k, (pattern, (r, c)) in enumerate(zip(_PATTERNS, ((0, 0), (0, 3), (3, 0), (3, 3)))):
        A[k, r : r + 3, c : c + 3] = pattern
    return A.reshape(4, 36)


def ibp_toy_images(key, n: int = 100, sigma_x: float = 0.5, p: float = 0.5):
    """(X, Z, A): n images (n, 36) = Z A + N(0, sigma_x^2) noise, each base image present
    independently with probability ``p``; Z (n, 4) and A (4, 36) are the truth."""
    n = check_int_in("n", n, 1)
    if not 0 <= p <= 1:
        raise ValueError(f"p must be a probability in [0, 1], got {p!r}.")
    if not (np.isfinite(sigma_x) and sigma_x >= 0):
        raise ValueError(f"sigma_x must be a finite number >= 0, got {sigma_x!r}.")
    k_z, k_e = jax.random.split(key)
    A = jnp.asarray(ibp_toy_features(), jnp.result_type(float))
    Z = jax.random.bernoulli(k_z, p, (n, 4)).astype(A.dtype)
    return Z @ A + sigma_x * jax.random.normal(k_e, (n, 36), A.dtype), Z, A

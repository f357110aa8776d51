"""Checked linear algebra: Cholesky with jitter and status, SPD solves without inverses,
and the eigen-helpers the models share (descending and generalised symmetric
eigenproblems, deterministic signs).

JAX's Cholesky returns NaN instead of raising on a matrix that is not positive definite.
:func:`cholesky` symmetrises, tries, and on failure retries with a jitter
``10 eps * mean|diag| * 100^k``, k = 0, 1, ..., 7, in a bounded ``lax.while_loop``; it reports the jitter
used and whether the factor is usable. Batched inputs (leading axes) are handled
together.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax.scipy.linalg import cho_solve, solve_triangular
from jaxtyping import Array, Bool, Float

_MAX_TRIES = 8


class Cholesky(eqx.Module):
    """A lower Cholesky factor with what it took to get it.

    Attributes
    ----------
    factor : array of shape (..., n, n), lower triangular.
    jitter : array of shape (...), the diagonal jitter added (0 when none was needed).
    ok : bool array of shape (...), False when even the largest jitter failed.
    """

    factor: Float[Array, "... n n"]
    jitter: Float[Array, ...]
    ok: Bool[Array, ...]

    def logdet(self) -> Array:
        """``log det`` of the factored matrix, ``2 sum log diag L``."""
        return 2 * jnp.sum(jnp.log(jnp.diagonal(self.factor, axis1=-2, axis2=-1)), axis=-1)

    def solve(self, b: Array) -> Array:
        """``A^{-1} b`` for ``b`` of shape (..., n, k)."""
        return cho_solve((self.factor, True), b)

    def inverse_factor(self) -> Array:
        """``L^{-1}``; ``A^{-1} = L^{-T} L^{-1}``, so ``diag(A^{-1})`` is its column norms."""
        n = self.factor.shape[-1]
        eye = jnp.broadcast_to(jnp.eye(n, dtype=self.factor.dtype), self.factor.shape)
        return jax.lax.linalg.triangular_solve(self.factor, eye, left_side=True, lower=True)


def _factor_ok(L: Array) -> Array:
    return jnp.all(jnp.isfinite(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


def cholesky(A: Float[Array, "... n n"]) -> Cholesky:
    """Cholesky factor of the symmetric part of ``A``, adding jitter only if needed.

    Parameters
    ----------
    A : array of shape (..., n, n)
        Symmetric positive (semi)definite matrices.

    Returns
    -------
    Cholesky
        The factor, the jitter used per matrix and a success flag per matrix.

    Examples
    --------
    >>> import jax.numpy as jnp
    >>> c = cholesky(jnp.array([[4.0, 2.0], [2.0, 1.0]]))  # singular: needs jitter
    >>> bool(c.ok), bool(c.jitter > 0)
    (True, True)
    """
    A = 0.5 * (A + jnp.swapaxes(A, -1, -2))
    diag = jnp.diagonal(A, axis1=-2, axis2=-1)
    scale = jnp.mean(jnp.abs(diag), axis=-1)
    scale = jnp.where(scale > 0, scale, 1.0)
    eye = jnp.eye(A.shape[-1], dtype=A.dtype)
    L = jnp.linalg.cholesky(A)
    ok = _factor_ok(L)
    jitter = jnp.zeros(A.shape[:-2], A.dtype)

    def cond(carry):
        k, _, ok, _ = carry
        return (k < _MAX_TRIES) & ~jnp.all(ok)

    def body(carry):
        k, L, ok, jitter = carry
        trial = jnp.where(ok, jitter, scale * jnp.finfo(A.dtype).eps * 10.0 ** (2 * k + 1))
        L_new = jnp.linalg.cholesky(A + trial[..., None, None] * eye)
        L = jnp.where(ok[..., None, None], L, L_new)
        return k + 1, L, ok | _factor_ok(L_new), trial

    _, L, ok, jitter = jax.lax.while_loop(cond, body, (0, L, ok, jitter))
    return Cholesky(factor=L, jitter=jnp.where(ok, jitter, jnp.nan), ok=ok)


class GaussianSummary(eqx.Module):
    """What the updates need of ``Sigma = P^{-1}`` for SPD precisions ``P``.

    Attributes
    ----------
    mean : ``Sigma b`` of shape (..., n).
    var : ``diag(Sigma)`` of shape (..., n).
    logdet : ``log det Sigma`` of shape (...).
    jitter : jitter added to the scaled precision, shape (...).
    ok : whether the factorisation succeeded, shape (...).
    """

    mean: Array
    var: Array
    logdet: Array
    jitter: Array
    ok: Array


def _tr(M: Array) -> Array:
    return jnp.swapaxes(M, -1, -2)


def shared_plus_diagonal(K: Float[Array, "n n"], phi: Float[Array, "r n"], b: Float[Array, "r n"], *, block_size: int = 100) -> GaussianSummary:
    """Summaries of ``Sigma_s = (K + diag(phi_s))^{-1}`` for many diagonals ``phi_s``.

    Returns ``Sigma_s b_s``, ``diag(Sigma_s)`` and ``log det Sigma_s`` for s = 1..r, never
    forming ``Sigma_s``. ``K`` (symmetric positive semidefinite) is shared, so it is first
    scaled to unit diagonal once (``K~ = C K C``, ``C = diag(K)^{-1/2}``), which removes
    the effect of features on very different scales. The factorisation is a blocked
    Cholesky that computes ``L^{-1}`` alongside ``L`` block by block, so that nearly all
    the work is batched matrix products: only the ``r`` diagonal blocks carry the
    ``phi_s``; the off-diagonal blocks of ``K~`` are shared by every ``s``.
    ``diag(Sigma_s)`` is read off the column norms of ``L^{-1}``.

    Parameters
    ----------
    K : array of shape (n, n)
    phi : array of shape (r, n), positive.
    b : array of shape (r, n)
    block_size : int
        Size of the diagonal blocks.
    """
    n = K.shape[-1]
    d = jnp.diagonal(K)
    c = jnp.where(d > 0, jax.lax.rsqrt(jnp.where(d > 0, d, 1.0)), 1.0)
    Ks = K * c[:, None] * c[None, :]
    phis, bs = phi * c * c, b * c
    edges = list(range(0, n, block_size)) + [n]
    blocks = [slice(lo, hi) for lo, hi in zip(edges[:-1], edges[1:])]
    nb = len(blocks)
    A = {(i, j): Ks[blocks[i], blocks[j]] for i in range(nb) for j in range(i + 1)}
    for i, sl in enumerate(blocks):
        A[i, i] = A[i, i] + jax.vmap(jnp.diag)(phis[:, sl])
    L, Li, jitter, ok = {}, {}, [], []
    for k in range(nb):
        chol = cholesky(A[k, k])
        L[k, k], Li[k, k] = chol.factor, chol.inverse_factor()
        jitter.append(chol.jitter)
        ok.append(chol.ok)
        for i in range(k + 1, nb):
            L[i, k] = A[i, k] @ _tr(Li[k, k])
        for i in range(k + 1, nb):
            for j in range(k + 1, i + 1):
                A[i, j] = A[i, j] - L[i, k] @ _tr(L[j, k])
    for j in range(nb):
        for i in range(j + 1, nb):
            acc = sum(L[i, k] @ Li[k, j] for k in range(j, i))
            Li[i, j] = -Li[i, i] @ acc
    var = jnp.concatenate([sum(jnp.sum(Li[i, j] ** 2, axis=-2) for i in range(j, nb)) for j in range(nb)], axis=-1)
    # Sigma b = L^{-T} (L^{-1} b), block by block.
    y = [sum((Li[i, j] @ bs[:, blocks[j], None])[..., 0] for j in range(i + 1)) for i in range(nb)]
    x = jnp.concatenate([sum((_tr(Li[i, j]) @ y[i][..., None])[..., 0] for i in range(j, nb)) for j in range(nb)], axis=-1)
    logdet = 2 * sum(jnp.sum(jnp.log(jnp.diagonal(Li[k, k], axis1=-2, axis2=-1)), axis=-1) for k in range(nb))
    return GaussianSummary(
        mean=x * c,
        var=var * c * c,
        logdet=logdet + 2 * jnp.sum(jnp.log(c)),
        jitter=jnp.max(jnp.stack(jitter), axis=0),
        ok=jnp.all(jnp.stack(ok), axis=0),
    )


def low_rank_plus_diagonal(A: Float[Array, "n d"], phi: Float[Array, "r d"], b: Float[Array, "r d"]) -> GaussianSummary:
    """The summaries of :func:`shared_plus_diagonal` for ``K = A'A`` with fewer rows than
    columns (n < d), through n x n factorisations instead of d x d (Woodbury).

    With ``C_s = diag(phi_s)^{-1/2}`` and ``G_s = A C_s``,
    ``Sigma_s = C_s (I_d + G_s'G_s)^{-1} C_s`` and
    ``(I_d + G'G)^{-1} = I_d - H'H``, ``H = L^{-1} G``, ``L L' = I_n + G G'``. So
    ``diag(Sigma_s) = c^2 (1 - sum_n H^2)``, ``Sigma_s b = c (u - H'(H u))`` with ``u = c b``,
    and ``log det Sigma_s = 2 sum log c - log det(I_n + G G')``. The cost per s is
    O(n^2 d) instead of O(d^3).

    Parameters
    ----------
    A : array of shape (n, d)
    phi : array of shape (r, n), positive.
    b : array of shape (r, d)
    """
    c = jax.lax.rsqrt(phi)  # (r, d)
    G = A[None] * c[:, None, :]  # (r, n, d)
    n = A.shape[0]
    chol = cholesky(jnp.eye(n, dtype=A.dtype) + G @ _tr(G))
    H = solve_triangular(chol.factor, G, lower=True)  # (r, n, d)
    u = c * b
    Hu = jnp.einsum("rnd,rd->rn", H, u)
    return GaussianSummary(
        mean=c * (u - jnp.einsum("rnd,rn->rd", H, Hu)),
        var=c * c * (1 - jnp.sum(H * H, axis=-2)),
        logdet=2 * jnp.sum(jnp.log(c), axis=-1) - chol.logdet(),
        jitter=chol.jitter,
        ok=chol.ok,
    )


def sparse_low_rank_plus_diagonal(A: Float[Array, "n d"], pairs, phi: Float[Array, "r d"], b: Float[Array, "r d"]) -> GaussianSummary:
    """:func:`low_rank_plus_diagonal` for a sparse ``A``, through the pairs of its nonzeros
    that share a column (``pairs``, :class:`bayeskit.core.column_pairs.ColumnPairs` of ``A``).

    With ``c^2 = 1/phi_s`` and ``K_s = I_n + A diag(c^2) A'`` (assembled from the pairs),
    ``diag(Sigma_s) = c^2 (1 - c^2 diag(A' K_s^{-1} A))`` (``K_s^{-1}`` read at the pairs),
    ``Sigma_s b = c^2 b - c^2 A' K_s^{-1} A (c^2 b)`` and
    ``log det Sigma_s = sum log c^2 - log det K_s``. The cost per s is the pairs and an
    n x n inverse instead of two dense ``n^2 d`` products. The explicit inverse loses the
    digits that the dense form's ``1 - |L^{-1} g|^2`` keeps when ``K_s`` is ill-conditioned
    (repeated rows, small ``phi``): use it in float64 (:func:`bayeskit.core.column_pairs.pays_off`).
    ``K_s`` has no eigenvalue below 1, so it is factorised without :func:`cholesky`'s
    jitter retries (which cost a fifth of the time here); a factor that fails all the same
    is reported in ``ok``.
    """
    c2 = 1 / phi  # (r, d)
    n = A.shape[0]
    eye = jnp.eye(n, dtype=A.dtype)
    L = jnp.linalg.cholesky(eye + pairs.gram(c2))
    chol = Cholesky(L, jnp.zeros(L.shape[:-2], L.dtype), _factor_ok(L))
    K_inv = chol.solve(jnp.broadcast_to(eye, L.shape))
    v = chol.solve(((c2 * b) @ A.T)[..., None])[..., 0]  # K_s^{-1} A (c^2 b)
    return GaussianSummary(
        mean=c2 * (b - v @ A),
        var=c2 * (1 - c2 * pairs.quadratic_diagonal(K_inv)),
        logdet=jnp.sum(jnp.log(c2), axis=-1) - chol.logdet(),
        jitter=chol.jitter,
        ok=chol.ok,
    )


def pairwise_sqdist(Z: Float[Array, "n k"], W: Float[Array, "m k"] | None = None) -> Float[Array, "n m"]:
    """Squared Euclidean distances by the Gram form, clamped at 0."""
    W = Z if W is None else W
    sq_z, sq_w = jnp.sum(Z * Z, axis=1), jnp.sum(W * W, axis=1)
    gram = jnp.matmul(Z, W.T, precision=jax.lax.Precision.HIGHEST)
    return jnp.maximum(sq_z[:, None] + sq_w[None, :] - 2 * gram, 0.0)


def spd_inverse_loop(A: Float[Array, "k k"], size=None) -> tuple[Float[Array, "k k"], Float[Array, ""]]:
    """(A^-1, log |A|) of a small SPD matrix by a Cholesky factorisation and a forward
    substitution written as ``fori_loop`` s of matrix-vector products, with no LAPACK
    call. Under ``vmap`` inside a ``while_loop``, jaxlib's CPU LAPACK calls can leave
    the computation waiting forever; sparse-Bayes fits of stacked data sets hit this.
    O(k^3) like LAPACK, but k sequential steps each way: use it for k up to a few
    hundred. ``size`` (may be traced): A is the identity outside its leading ``size``
    rows and columns, so the loops stop there. Not positive definite gives NaN."""
    k = A.shape[-1]
    idx = jnp.arange(k)
    size = k if size is None else size
    tail = jnp.diag((idx >= size).astype(A.dtype))  # the identity block past ``size``

    def factor(j, L):  # left-looking: column j from the columns before it
        v = A[:, j] - L @ L[j]
        d = jnp.sqrt(v[j])
        return L.at[:, j].set(jnp.where(idx > j, v / d, jnp.where(idx == j, d, 0.0)))

    L = jax.lax.fori_loop(0, size, factor, jnp.zeros_like(A)) + tail
    eye = jnp.eye(k, dtype=A.dtype)

    def substitute(i, X):  # row i of X = L^-1
        return X.at[i].set((eye[i] - L[i] @ X) / L[i, i])

    X = jax.lax.fori_loop(0, size, substitute, jnp.zeros_like(A)) + tail
    return X.T @ X, 2.0 * jnp.sum(jnp.log(jnp.diagonal(L)))


def symmetrize(A: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """(A + A') / 2."""
    return 0.5 * (A + A.T)


def spd_inverse(A: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """The inverse of an SPD matrix by its Cholesky factor (no jitter), symmetric."""
    L = jnp.linalg.cholesky(A)
    return symmetrize(cho_solve((L, True), jnp.eye(A.shape[0], dtype=A.dtype)))


def descending_eigh(S: Float[Array, "n n"]) -> tuple[Float[Array, " n"], Float[Array, "n n"]]:
    """Eigenvalues in decreasing order and their eigenvectors (columns)."""
    values, vectors = jnp.linalg.eigh(S)
    return values[::-1], vectors[:, ::-1]


def generalized_eigh(A: Float[Array, "n n"], B: Float[Array, "n n"]) -> tuple[Float[Array, " n"], Float[Array, "n n"]]:
    """Solve ``A v = w B v`` for symmetric ``A`` and SPD ``B``: ascending ``w`` and
    B-normalised ``V`` (``V' B V = I``). ``B = L L'`` by the checked :func:`cholesky`
    (jitter only if ``B`` is numerically singular), then the standard problem
    ``L^{-1} A L^{-T} u = w u`` and ``v = L^{-T} u``."""
    L = cholesky(B).factor
    C = solve_triangular(L, solve_triangular(L, A, lower=True).T, lower=True)
    w, U = jnp.linalg.eigh(symmetrize(C))
    return w, solve_triangular(L.T, U, lower=False)


def fix_signs(V: Float[Array, "n k"]) -> Float[Array, "n k"]:
    """Each column with its largest-magnitude entry positive (a deterministic sign)."""
    rows = jnp.argmax(jnp.abs(V), axis=0)
    s = jnp.sign(V[rows, jnp.arange(V.shape[1])])
    return V * jnp.where(s == 0, 1, s).astype(V.dtype)

"""Tests of bayeskit.multilabel.projections against independent numpy/scipy/scikit-learn formulas."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.linalg as sl
from sklearn.decomposition import PCA

from bayeskit.multilabel import projections as pr


@pytest.fixture
def x64():
    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", previous)


def max_angle(A, B):
    """Largest principal angle (degrees) between the column spans of A and B."""
    return np.degrees(sl.subspace_angles(np.asarray(A, np.float64), np.asarray(B, np.float64)).max())


def random_data(seed=0, n=80, d=7, n_labels=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.linspace(1, 3, d) + rng.normal(size=d)
    W = rng.normal(size=(d, n_labels))
    Y = ((X - X.mean(0)) @ W + rng.normal(size=(n, n_labels)) > 0).astype(int)
    return X, Y


def random_orthonormal(rng, d, r):
    return np.linalg.qr(rng.normal(size=(d, r)))[0]


# ------------------------------------------------------------------ PCA


def test_pca_matches_sklearn(x64):
    X, _ = random_data()
    P = pr.pca(X, 3)
    ref = PCA(3).fit(X)
    assert max_angle(P.components, ref.components_.T) < 1e-6
    # each direction, not just the span (the variances are distinct)
    assert np.allclose(np.abs(np.sum(np.asarray(P.components) * ref.components_.T, axis=0)), 1, atol=1e-8)
    assert np.allclose(P.mean, ref.mean_)
    Z = np.asarray(P.transform(X))
    assert np.allclose(np.abs(Z), np.abs(ref.transform(X)), atol=1e-8)


# ------------------------------------------------------------------ MDDM


def hsic_objective(X, Y, P):
    """Biased empirical HSIC of (XP, Y) with linear kernels, written from the definition."""
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    K = (X @ P) @ (X @ P).T
    Lk = Y @ Y.T
    return np.trace(K @ H @ Lk @ H) / (n - 1) ** 2


def test_mddm_projection_maximises_hsic(x64):
    X, Y = random_data(1)
    r = 2
    P = np.asarray(pr.mddm(X, Y, r).components)
    assert np.allclose(P.T @ P, np.eye(r), atol=1e-10)
    best = hsic_objective(X, Y, P)
    # the Ky Fan bound: the largest value over orthonormal P is the sum of the top-r eigenvalues
    n = X.shape[0]
    H = np.eye(n) - np.ones((n, n)) / n
    lam = np.linalg.eigvalsh(X.T @ H @ Y @ Y.T @ H @ X) / (n - 1) ** 2
    assert best == pytest.approx(lam[-r:].sum(), rel=1e-10)
    rng = np.random.default_rng(0)
    others = [hsic_objective(X, Y, random_orthonormal(rng, X.shape[1], r)) for _ in range(300)]
    assert best > max(others)


def test_mddm_features_variant(x64):
    X, Y = random_data(2)
    r, mu = 3, 0.3
    P = np.asarray(pr.mddm(X, Y, r, variant="features", mu=mu).components)
    Xc = X - X.mean(0)
    Yc = Y - Y.mean(0)
    A = Xc.T @ Yc @ Yc.T @ Xc
    B = (1 - mu) * Xc.T @ Xc + mu * np.eye(X.shape[1])
    assert np.allclose(P.T @ B @ P, np.eye(r), atol=1e-8)  # the MDDMf constraint
    w, V = sl.eigh(A, B)
    assert max_angle(P, V[:, ::-1][:, :r]) < 1e-6
    assert np.trace(P.T @ A @ P) == pytest.approx(w[-r:].sum(), rel=1e-8)
    # mu = 1 is MDDMp
    assert max_angle(pr.mddm(X, Y, r, variant="features", mu=1.0).components, pr.mddm(X, Y, r).components) < 1e-6


# ------------------------------------------------------------------ MLLS


def mlls_primal(X, Y, Theta, alpha, beta):
    """min over U, V of (1/n)|Xc U - Yc|^2 + alpha |U - Theta^T V|^2 + beta |U|^2, by a direct solve."""
    n, d = X.shape
    r = Theta.shape[0]
    Xc = X - X.mean(0)
    Yc = Y - Y.mean(0)
    # stationarity of the joint quadratic in [u; v], the same for every label column
    Huu = Xc.T @ Xc / n + (alpha + beta) * np.eye(d)
    Huv = -alpha * Theta.T
    Hvv = alpha * np.eye(r)
    Hmat = np.block([[Huu, Huv], [Huv.T, Hvv]])
    rhs = np.vstack([Xc.T @ Yc / n, np.zeros((r, Y.shape[1]))])
    sol = np.linalg.solve(Hmat, rhs)
    U, V = sol[:d], sol[d:]
    return (np.sum((Xc @ U - Yc) ** 2) / n + alpha * np.sum((U - Theta.T @ V) ** 2)
            + beta * np.sum(U**2))


@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (5.0, 0.1)])
def test_mlls_minimises_its_objective(x64, alpha, beta):
    X, Y = random_data(3, d=6, n_labels=4)
    r = 2
    P = np.asarray(pr.mlls(X, Y, r, alpha=alpha, beta=beta).components)
    assert np.allclose(P.T @ P, np.eye(r), atol=1e-10)
    best = mlls_primal(X, Y, P.T, alpha, beta)
    rng = np.random.default_rng(1)
    d = X.shape[1]
    random = [mlls_primal(X, Y, random_orthonormal(rng, d, r).T, alpha, beta) for _ in range(200)]
    assert best < min(random)
    # local optimality: small rotations of the subspace never help
    for _ in range(50):
        S = rng.normal(size=(d, d))
        R = sl.expm(1e-3 * (S - S.T))
        assert mlls_primal(X, Y, (R @ P).T, alpha, beta) >= best - 1e-12


# ------------------------------------------------------------------ MLDA


def mlda_reference(X, Y):
    """MLDA scatter matrices by their defining sums (Wang, Ding & Huang 2010, eqs. 13-15)."""
    n, n_labels = Y.shape
    C = np.zeros((n_labels, n_labels))
    for k in range(n_labels):
        for l in range(n_labels):
            C[k, l] = Y[:, k] @ Y[:, l] / np.sqrt(Y[:, k].sum() * Y[:, l].sum())
    Z = np.zeros((n, n_labels))
    for i in range(n):
        Z[i] = Y[i] @ C / Y[i].sum()
    m = sum(Z[i, k] * X[i] for i in range(n) for k in range(n_labels)) / Z.sum()
    d = X.shape[1]
    Sb, Sw = np.zeros((d, d)), np.zeros((d, d))
    for k in range(n_labels):
        mk = Z[:, k] @ X / Z[:, k].sum()
        Sb += Z[:, k].sum() * np.outer(mk - m, mk - m)
        for i in range(n):
            Sw += Z[i, k] * np.outer(X[i] - mk, X[i] - mk)
    return m, Sb, Sw


def test_mlda_matches_generalised_eigenproblem(x64):
    X, Y = random_data(4, n=60, d=6, n_labels=4)
    Y[Y.sum(1) == 0, 0] = 1  # the reference divides by each instance's label count
    m, Sb, Sw = mlda_reference(X, Y)
    w, V = sl.eigh(Sb, Sw)
    P = pr.mlda(X, Y, 3)
    assert np.allclose(P.mean, m)
    assert max_angle(P.components, V[:, ::-1][:, :3]) < 1e-6
    # each direction, one at a time (distinct eigenvalues)
    for j in range(3):
        assert max_angle(P.components[:, j : j + 1], V[:, -1 - j : V.shape[1] - j]) < 1e-5


def test_mlda_separates_well_separated_classes():
    rng = np.random.default_rng(5)
    n, d = 300, 10
    label_sets = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0]])
    c = rng.integers(0, 4, n)
    centres = 4.0 * np.array([[1, 1], [1, -1], [-1, 1], [-1, -1]])
    Q = np.linalg.qr(rng.normal(size=(d, d)))[0]
    X = (np.c_[centres[c] + 0.3 * rng.normal(size=(n, 2)), 6 * rng.normal(size=(n, d - 2))]) @ Q.T
    Y = label_sets[c]
    Z = np.asarray(pr.mlda(X.astype(np.float32), Y, 2).transform(X))
    def separation(Z):
        """Nearest-centroid accuracy of the 4 label sets, and total / within-set variance."""
        cent = np.stack([Z[c == j].mean(0) for j in range(4)])
        pred = np.argmin(((Z[:, None] - cent[None]) ** 2).sum(-1), axis=1)
        within = np.mean([Z[c == j].var(0).sum() for j in range(4)])
        return (pred == c).mean(), Z.var(0).sum() / within

    accuracy, ratio = separation(Z)
    assert accuracy > 0.95 and ratio > 5
    # PCA, for contrast, sees only the large-variance noise
    accuracy, ratio = separation(np.asarray(pr.pca(X, 2).transform(X)))
    assert accuracy < 0.6 and ratio < 1.5


# ------------------------------------------------------------------ shared behaviour

METHODS = {
    "pca": lambda X, Y, r: pr.pca(X, r),
    "mddm": lambda X, Y, r: pr.mddm(X, Y, r),
    "mddm_f": lambda X, Y, r: pr.mddm(X, Y, r, variant="features"),
    "mlls": lambda X, Y, r: pr.mlls(X, Y, r),
    "mlda": lambda X, Y, r: pr.mlda(X, Y, r),
}


@pytest.mark.parametrize("name", list(METHODS))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_dtype_preserved(name, dtype, x64):
    X, Y = random_data(6)
    X = X.astype(dtype)
    P = METHODS[name](X, Y, 2)
    assert P.components.dtype == np.dtype(dtype)
    assert P.mean.dtype == np.dtype(dtype)
    Z = P.transform(jnp.asarray(X))
    assert Z.dtype == np.dtype(dtype) and Z.shape == (X.shape[0], 2)
    assert np.all(np.isfinite(Z))


def test_float32_agrees_with_float64(x64):
    X, Y = random_data(7)
    for name, f in METHODS.items():
        a = f(X.astype(np.float32), Y, 2).components
        b = f(X, Y, 2).components
        assert max_angle(a, b) < 0.5, name


def test_jittable(x64):
    X, Y = random_data(8)
    jitted = jax.jit(pr.mddm, static_argnames=("n_components", "variant"))
    a = jitted(jnp.asarray(X), jnp.asarray(Y), n_components=2, variant="features")
    b = pr.mddm(X, Y, 2, variant="features")
    assert np.allclose(a.components, b.components)


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda X, Y: pr.pca(X, 8), "min\\(n_samples, n_features\\)"),
        (lambda X, Y: pr.pca(X[:5], 6), "min\\(n_samples, n_features\\)"),
        (lambda X, Y: pr.mddm(X, Y, 5), "n_labels"),
        (lambda X, Y: pr.mddm(X, Y, 5, variant="features"), "n_labels"),
        (lambda X, Y: pr.mlls(X, Y, 5), "n_labels"),
        (lambda X, Y: pr.mlda(X, Y, 4), "n_labels - 1"),
        (lambda X, Y: pr.mlda(X, Y[:, :1], 1), "n_labels - 1"),
        (lambda X, Y: pr.pca(X, 0), "at least 1"),
        (lambda X, Y: pr.pca(X, 2.5), "Python int"),
        (lambda X, Y: pr.mddm(X, Y, 2, variant="whitened"), "variant"),
        (lambda X, Y: pr.mddm(X, Y, 2, variant="features", mu=1.5), "mu"),
        (lambda X, Y: pr.mlls(X, Y, 2, alpha=0.0), "alpha"),
        (lambda X, Y: pr.mlls(X, Y, 2, beta=-1.0), "beta"),
        (lambda X, Y: pr.mlda(X, Y, 2, reg=-1.0), "reg"),
        (lambda X, Y: pr.mddm(X, Y * 2, 2), "entries in"),
        (lambda X, Y: pr.mlda(X, Y[:-1], 2), "rows"),
        (lambda X, Y: pr.pca(np.where(np.arange(7) == 3, np.nan, X), 2), "non-finite"),
        (lambda X, Y: pr.pca(X[0], 1), "2-D"),
    ],
)
def test_value_errors(call, match):
    X, Y = random_data(9)
    with pytest.raises(ValueError, match=match):
        call(X, Y)

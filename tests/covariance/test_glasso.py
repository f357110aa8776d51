"""The graphical lasso: optimality (KKT), agreement with scikit-learn and with R glasso's
reference values, a non-increasing objective, warm-started paths and vmapped penalties."""

import json
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest
from compilations import count_compilations

from bayeskit.covariance import glasso, glasso_columns
from bayeskit.estimators import GraphicalLasso

REFERENCE = json.loads((Path(__file__).parents[1] / "data" / "r_glasso_reference.json").read_text())


def _sparse_problem(p=12, n=60, seed=0):
    """Empirical covariance of n draws from a sparse, well-conditioned precision."""
    rng = np.random.default_rng(seed)
    theta = np.eye(p)
    for i in range(p - 1):
        theta[i, i + 1] = theta[i + 1, i] = 0.4
    theta[0, p - 1] = theta[p - 1, 0] = -0.3
    X = rng.multivariate_normal(np.zeros(p), np.linalg.inv(theta + 0.2 * np.eye(p)), size=n)
    return np.cov(X.T, bias=True)


SOLVERS = ["bcd", "quic"]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("penalize_diagonal", [False, True])
@pytest.mark.parametrize("alpha", [0.02, 0.1, 0.3])
def test_solution_satisfies_the_kkt_conditions(alpha, penalize_diagonal, solver):
    """Checked independently of the solver's own residual: W = inv(Theta) by numpy, then
    the subgradient conditions entry by entry."""
    S = _sparse_problem()
    r = glasso.fit(S, glasso.Hyperparams(alpha, penalize_diagonal, solver), tol=1e-9)
    assert r.converged
    theta = np.asarray(r.state.precision)
    W = np.linalg.inv(theta)
    L = np.full(S.shape, alpha) if penalize_diagonal else alpha * (1 - np.eye(len(S)))
    G = S - W
    on = theta != 0
    assert np.all(np.abs(G[on] + L[on] * np.sign(theta[on])) < 1e-7)
    assert np.all(np.abs(G[~on]) <= L[~on] + 1e-7)
    assert 0 < (~on).sum()  # the penalty zeroed some entries
    np.testing.assert_allclose(theta, theta.T)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("penalize_diagonal", [False, True])
def test_variables_on_scales_1e9_apart_converge(penalize_diagonal, solver):
    """Raw data in mixed units: variances from 1e-5 to 1e4. The fit converges in a few
    steps, and the conditions (2) hold entry by entry relative to sqrt(S_ii S_jj) (checked
    in numpy); with tolerances in units of the mean variance the small variables were left
    unsolved (an indefinite Theta after 100 sweeps, or a Newton fit stopped at a wrong Theta)."""
    S = _sparse_problem() * np.outer(*2 * [np.logspace(-2.5, 2, 12)])
    alpha = 1e-3
    hp = glasso.Hyperparams(alpha, penalize_diagonal, solver)
    r = glasso.fit(S, hp)  # the default tol, 1e-4
    assert r.converged and int(r.n_iter) <= 30
    theta = np.asarray(r.state.precision)
    np.linalg.cholesky(theta)  # positive definite
    np.testing.assert_array_equal(theta, theta.T)
    W = np.linalg.inv(theta)
    scale = np.sqrt(np.outer(np.diag(S), np.diag(S)))
    np.testing.assert_allclose(np.asarray(r.state.covariance) / scale, W / scale, rtol=0, atol=1e-9)
    L = np.full(S.shape, alpha) if penalize_diagonal else alpha * (1 - np.eye(len(S)))
    G, L, on = (S - W) / scale, L / scale, theta != 0
    assert np.all(np.abs(G[on] + L[on] * np.sign(theta[on])) < 1.01e-4)
    assert np.all(np.abs(G[~on]) <= L[~on] + 1.01e-4)
    assert 0 < (~on).sum() and 12 < on.sum()  # some pairs zeroed, some kept
    F = float(glasso.objective_of(theta, np.linalg.slogdet(theta)[1], S, hp))
    np.testing.assert_allclose(float(r.objective), F, rtol=1e-12)  # the trace is F on S's own scale


@pytest.mark.parametrize("solver", SOLVERS)
def test_agrees_with_scikit_learn(solver):
    from sklearn.covariance import graphical_lasso

    for seed, alpha in ((0, 0.05), (1, 0.15)):
        S = _sparse_problem(p=15, n=80, seed=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cov, prec = graphical_lasso(S, alpha, tol=1e-10, enet_tol=1e-12, max_iter=500)
        r = glasso.fit(S, glasso.Hyperparams(alpha, solver=solver), tol=1e-10)
        np.testing.assert_allclose(r.state.precision, prec, atol=1e-6 * np.abs(prec).max())
        np.testing.assert_allclose(r.state.covariance, cov, atol=1e-7 * np.abs(cov).max())
        assert np.array_equal(np.asarray(r.state.precision) == 0, np.abs(prec) < 1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("case", REFERENCE["cases"], ids=["iris", "iris-singular"])
def test_equals_r_glasso_reference_values(case, solver):
    from sklearn.datasets import load_iris

    X = load_iris().data
    if case["alpha"] == 0.01:
        X = X[10:13]
    S = np.cov(X.T, bias=True)
    est = GraphicalLasso(alpha=case["alpha"], solver=solver, tol=1e-10).fit(X)
    np.testing.assert_allclose(est.covariance_, case["covariance"], atol=1e-6)
    np.testing.assert_allclose(est.precision_, case["precision"], atol=1e-5, rtol=1e-6)
    np.testing.assert_allclose(est.location_, X.mean(0))
    np.testing.assert_allclose(GraphicalLasso(alpha=case["alpha"], solver=solver, tol=1e-10).fit_covariance(S).precision_,
                               est.precision_, rtol=1e-12, atol=1e-12)


def test_newton_objective_never_increases_and_ends_at_the_minimum():
    S = _sparse_problem(p=20, n=30, seed=3)  # n ~ p: an ill-conditioned covariance
    hp = glasso.Hyperparams(0.05, solver="quic")
    r = glasso.fit(S, hp, tol=1e-9)
    trace = np.asarray(r.trace)[: int(r.n_iter)]
    assert r.converged and trace.size > 2
    assert np.all(np.diff(trace) <= 1e-12 * np.abs(trace[:-1]))
    theta = np.asarray(r.state.precision)
    rng = np.random.default_rng(0)
    for _ in range(20):  # symmetric perturbations that keep Theta positive definite do not lower F
        E = rng.standard_normal(S.shape) * 1e-4
        moved = theta + E + E.T
        F = glasso.objective_of(moved, np.linalg.slogdet(moved)[1], S, hp)
        assert F >= trace[-1] - 1e-12


@pytest.mark.parametrize("penalize_diagonal", [False, True])
def test_column_sweeps_raise_the_dual_and_end_at_the_minimum(penalize_diagonal):
    """Block coordinate descent maximises log det W over |W - S| <= L (the dual of (1)):
    log det W rises every sweep, W stays in the box (to the lasso's tolerance) with its
    diagonal S_ii + L_ii, and the end point is the minimum of F (no nearby
    positive-definite Theta is lower)."""
    S = _sparse_problem(p=20, n=30, seed=3)
    hp = glasso.Hyperparams(0.05, penalize_diagonal, "bcd")
    L = np.asarray(glasso.penalty_weights(20, 0.05, penalize_diagonal, S.dtype))
    step = jax.jit(lambda state: glasso.update(state, S, hp))
    state = glasso.init(S, hp)
    duals = [np.linalg.slogdet(np.asarray(state.working))[1]]
    for _ in range(15):
        state = step(state)
        W = np.asarray(state.working)
        duals.append(np.linalg.slogdet(W)[1])
        assert np.all(np.abs(W - S) <= L + 1e-4 * np.sqrt(np.outer(np.diag(S), np.diag(S))))  # each lasso solved to this
        np.testing.assert_allclose(np.diagonal(W), np.diagonal(S + L), rtol=1e-14)
    assert np.all(np.diff(duals) >= -1e-12 * np.abs(duals[1:]))
    assert float(state.kkt) < 1e-10
    theta = np.asarray(state.precision)
    F = float(glasso.objective(state, S, hp))
    np.testing.assert_allclose(F, np.linalg.slogdet(W)[1] + 20, rtol=1e-10)  # no duality gap: F = log det W + p
    rng = np.random.default_rng(0)
    for _ in range(20):
        E = rng.standard_normal(S.shape) * 1e-4
        moved = theta + E + E.T
        assert glasso.objective_of(moved, np.linalg.slogdet(moved)[1], S, hp) >= F - 1e-12


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_step_reads_only_the_symmetric_part_of_s(solver):
    """``update`` on a slightly asymmetric S (rounding in a user's own covariance) takes the
    step of its symmetric part; a column sweep that read S's rows as its columns would not."""
    S = _sparse_problem(p=8, n=30, seed=1)
    skew = np.triu(np.full_like(S, 0.02), 1)
    hp = glasso.Hyperparams(0.05, False, solver)
    state = glasso.init(S, hp)
    lopsided, symmetric = (glasso.update(state, M, hp) for M in (S + skew - skew.T, S))
    np.testing.assert_allclose(np.asarray(lopsided.precision), np.asarray(symmetric.precision), rtol=0, atol=1e-12)


def test_the_face_systems_of_every_size_solve_the_face_equations():
    """A feature-sign step's system W_FF x_F = rhs_F (x = 0 off F, where the step's rhs is 0),
    gathered into 16 or 32 entries or solved at full size, one face at a time and vmapped,
    against numpy."""
    rng = np.random.default_rng(4)
    p = 40
    A = rng.standard_normal((p, 2 * p))
    W = A @ A.T / (2 * p) + 0.1 * np.eye(p)
    faces = [np.isin(np.arange(p), rng.choice(p, k, replace=False)) for k in (0, 5, 16, 17, 32, 33, 40)]
    faces.append(np.isin(np.arange(p), [0, 7, 19]))  # index 0 in the face and in the padding
    rhs = [np.where(face, rng.standard_normal(p), 0.0) for face in faces]
    expected = []
    for face, r in zip(faces, rhs):
        x = np.zeros(p)
        x[face] = np.linalg.solve(W[np.ix_(face, face)], r[face])
        expected.append(x)
        np.testing.assert_allclose(np.asarray(jax.jit(glasso_columns.face_solve)(W, face, r)), x, rtol=1e-10, atol=1e-12)
    batched = jax.jit(jax.vmap(glasso_columns.face_solve, in_axes=(None, 0, 0)))(W, np.stack(faces), np.stack(rhs))
    np.testing.assert_allclose(np.asarray(batched), np.stack(expected), rtol=1e-10, atol=1e-12)


def test_both_solvers_agree_on_an_ill_conditioned_real_correlation_matrix():
    """The breast-cancer correlation matrix (p = 30, condition number 1e5), where the Newton
    steps need 60-140 iterations: both solvers reach the same Theta."""
    from sklearn.datasets import load_breast_cancer

    S = np.corrcoef(load_breast_cancer().data.T)
    for penalize_diagonal in (False, True):
        fits = [glasso.fit(S, glasso.Hyperparams(0.1, penalize_diagonal, solver), tol=1e-8, max_iter=500) for solver in SOLVERS]
        assert all(r.converged for r in fits)
        np.testing.assert_allclose(fits[0].state.precision, fits[1].state.precision, atol=1e-5)
        np.testing.assert_allclose(*(glasso.objective(r.state, S, glasso.Hyperparams(0.1, penalize_diagonal)) for r in fits),
                                   rtol=1e-9)


@pytest.mark.parametrize("solver", SOLVERS)
def test_path_and_vmap_equal_separate_fits(solver):
    S = _sparse_problem(seed=4)
    alphas = np.array([0.3, 0.1, 0.03])
    path = glasso.path(S, alphas, solver=solver, tol=1e-9)
    batched = jax.vmap(lambda a: glasso.fit(S, glasso.Hyperparams(a, solver=solver), tol=1e-9, throw=False))(alphas)
    for k, a in enumerate(alphas):
        single = glasso.fit(S, glasso.Hyperparams(a, solver=solver), tol=1e-9)
        for result in (path, batched):
            np.testing.assert_allclose(result.state.precision[k], single.state.precision, atol=1e-7)
    assert np.all(np.diff([np.sum(np.asarray(path.state.precision[k]) != 0) for k in range(3)]) > 0)
    if solver == "quic":
        assert int(path.n_iter[1:].sum()) < int(batched.n_iter[1:].sum())  # warm starts save Newton steps


@pytest.mark.parametrize("solver", SOLVERS)
def test_float32(solver):
    S = _sparse_problem().astype(np.float32)
    r = glasso.fit(S, glasso.Hyperparams(np.float32(0.1), solver=solver), tol=1e-4)
    r64 = glasso.fit(S.astype(np.float64), glasso.Hyperparams(0.1, solver=solver), tol=1e-9)
    assert r.state.precision.dtype == np.float32 and r.converged
    np.testing.assert_allclose(r.state.precision, r64.state.precision, atol=1e-3)


def test_bad_input_is_refused():
    S = _sparse_problem(p=4)
    with pytest.raises(ValueError, match="symmetric"):
        glasso.fit(S + np.triu(np.ones_like(S), 1), glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match="alpha"):
        glasso.fit(S, glasso.Hyperparams(-0.1))
    with pytest.raises(ValueError, match="solver"):
        glasso.fit(S, glasso.Hyperparams(0.1, solver="newton"))
    with pytest.raises(ValueError, match="square"):
        glasso.fit(S[:3], glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match="non-finite"):
        glasso.fit(np.where(np.eye(4) > 0, np.nan, S), glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match=r"column\(s\) \[2\] of X are constant"):
        GraphicalLasso(alpha=0.1).fit(np.c_[np.random.default_rng(0).standard_normal((10, 2)), np.ones(10)])
    with pytest.raises(ValueError, match="alpha"):
        GraphicalLasso(alpha=-1.0).fit(np.random.default_rng(0).standard_normal((10, 3)))
    with pytest.raises(ValueError, match="NaN|infinity|non-finite"):
        GraphicalLasso().fit(np.full((5, 3), np.nan))


def test_problems_without_a_solution_are_refused_with_the_reason():
    """An indefinite S (eigenvalues -1 and 3) is no covariance; with alpha = 0 a singular S
    (rank 1) has no maximum-likelihood precision; complex, empty and string S are no
    covariance matrices. Each is refused before anything runs."""
    indefinite = np.array([[1.0, 2.0], [2.0, 1.0]])
    assert np.linalg.eigvalsh(indefinite)[0] == pytest.approx(-1.0)
    with pytest.raises(ValueError, match="positive semidefinite.*smallest eigenvalue is -1"):
        glasso.fit(indefinite, glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match="positive semidefinite"):
        GraphicalLasso(alpha=0.1).fit_covariance(indefinite)
    v = np.array([1.0, 2.0, -1.0])
    rank_one = np.outer(v, v)
    with pytest.raises(ValueError, match="with alpha = 0, S must be positive definite"):
        glasso.fit(rank_one, glasso.Hyperparams(0.0))
    with pytest.raises(ValueError, match="with alpha = 0"):
        glasso.path(rank_one, np.array([0.1, 0.0]))
    assert bool(glasso.fit(rank_one, glasso.Hyperparams(0.1)).converged)  # a penalty makes it solvable
    with pytest.raises(ValueError, match="real covariance"):
        glasso.fit(np.eye(2) * (1 + 1j), glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match="real covariance"):
        glasso.fit(np.array([["1", "0"], ["0", "1"]]), glasso.Hyperparams(0.1))
    with pytest.raises(ValueError, match="p >= 1"):
        glasso.fit(np.zeros((0, 0)), glasso.Hyperparams(0.1))


def test_estimator_score_is_the_gaussian_log_likelihood():
    from scipy import stats

    rng = np.random.default_rng(5)
    X = rng.standard_normal((40, 5)) @ (np.eye(5) + 0.3 * rng.standard_normal((5, 5)))
    est = GraphicalLasso(alpha=0.1).fit(X)
    expected = stats.multivariate_normal(est.location_, est.covariance_).logpdf(X).mean()
    assert abs(est.score(X) - expected) < 1e-8
    assert est.n_iter_ == len(est.objective_) and est.kkt_ <= 1e-4  # relative: free of the units


@pytest.mark.parametrize("a", [2.0**-66, 2.0**66])
def test_estimator_is_equivariant_far_from_unit_scale_in_float32(a):
    """(1) for (a X, a^2 alpha) has the solution Theta / a^2: the same zeros, precision times
    a^-2, covariance times a^2, in float32 where S of data at 1e20 (1e40) would overflow."""
    rng = np.random.default_rng(3)
    X = (rng.standard_normal((200, 6)) @ np.linalg.cholesky(_sparse_problem(p=6)).T).astype(np.float32)
    ref = GraphicalLasso(alpha=0.1).fit(X)
    got = GraphicalLasso(alpha=0.1 * a * a).fit(X * np.float32(a))
    np.testing.assert_array_equal(got.precision_ == 0, ref.precision_ == 0)
    np.testing.assert_allclose(got.precision_ * a * a, ref.precision_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.covariance_ / a / a, ref.covariance_, rtol=1e-5)
    assert got.score(X * np.float32(a)) == pytest.approx(ref.score(X) - 6 * np.log(a), rel=1e-5)


def test_an_integer_or_boolean_covariance_fits_as_its_float_copy():
    """Counts or 0/1 data fit in the default float dtype, the penalty with them: an integer S
    had made alpha = 0.5 an integer 0 (no penalty)."""
    S = np.array([[4, 2, 1], [2, 3, 1], [1, 1, 2]])
    for data in (S, S.astype(np.int8)):
        got = glasso.fit(data, glasso.Hyperparams(0.5)).state.precision
        np.testing.assert_allclose(np.asarray(got), np.asarray(glasso.fit(S.astype(float), glasso.Hyperparams(0.5)).state.precision),
                                   rtol=1e-6)
    unpenalised = np.linalg.inv(S)
    assert abs(float(got[0, 1]) - unpenalised[0, 1]) > 0.05  # the penalty acted


def test_a_second_path_on_new_data_compiles_nothing():
    """glasso.path is one compiled program per shape and setting: new S and penalties compile
    nothing (a lax.scan staged at the top level had compiled again at every call)."""
    glasso.path(_sparse_problem(seed=5), np.array([0.3, 0.1]))
    with count_compilations() as seen:
        jax.block_until_ready(glasso.path(_sparse_problem(seed=6), np.array([0.25, 0.05])))
    assert seen["compiles"] == 0, seen

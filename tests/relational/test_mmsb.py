"""The MMSB's variational EM: every closed-form update is a stationary point of the bound
(checked with autodiff of the bound written from its definition), the bound never
decreases, masked cells have no effect, and planted blocks are recovered."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, homogeneity_score, roc_auc_score

from bayeskit.estimators import MMSBLinkPredictor
from bayeskit.relational import mmsb
from bayeskit.relational.data import as_data


def _problem(symmetric, seed=0, n=7, r=2):
    rng = np.random.default_rng(seed)
    Y = rng.integers(0, 2, (r, n, n)).astype(np.int8)
    mask = (rng.random((r, n, n)) < 0.8) & ~np.eye(n, dtype=bool)
    if symmetric:
        Y = np.triu(Y, 1) | np.triu(Y, 1).transpose(0, 2, 1)
        mask = mask & mask.transpose(0, 2, 1)
    return Y, mask


def _stepped_state(symmetric, hp):
    Y, mask = _problem(symmetric)
    data = as_data(Y, mask, symmetric)
    state = mmsb.init(jax.random.key(1), data, hp)
    for _ in range(3):
        state = mmsb.update(state, data, hp)
    return state, data


@pytest.mark.parametrize("symmetric", [False, True])
def test_each_update_is_a_stationary_point_of_the_bound(symmetric):
    hp = mmsb.Hyperparams(n_blocks=3, symmetric=symmetric, block_prior=(1.5, 2.0))
    state, data = _stepped_state(symmetric, hp)
    f = lambda s: mmsb.objective(s, data, hp)

    # gamma: the bound's gradient vanishes after the gamma update
    s = mmsb._update_gamma(state, data)
    np.testing.assert_allclose(jax.grad(lambda g: f(mmsb.State(g, s.phi_s, s.phi_r, s.B, s.alpha)))(s.gamma), 0, atol=1e-8)

    # B: the gradient over the free entries vanishes (symmetric B: upper triangle mirrored)
    s = mmsb._update_B(state, data, hp)
    def with_B(b):
        B = jnp.triu(b) + jnp.swapaxes(jnp.triu(b, 1), 1, 2) if symmetric else b
        return f(mmsb.State(s.gamma, s.phi_s, s.phi_r, B, s.alpha))
    np.testing.assert_allclose(jax.grad(with_B)(s.B), 0, atol=1e-8)

    # phi: stationary on each observed cell's simplex (gradient in softmax coordinates).
    # The receiver step comes last; the sender step is exact given the old receiver phi.
    s = mmsb._update_phi(state, data)
    softmax_grad = lambda make: jax.grad(lambda l: f(make(jax.nn.softmax(l, -1))))
    grad_r = softmax_grad(lambda p: mmsb.State(s.gamma, s.phi_s, p, s.B, s.alpha))(jnp.log(s.phi_r))
    grad_s = softmax_grad(lambda p: mmsb.State(s.gamma, p, state.phi_r, s.B, s.alpha))(jnp.log(s.phi_s))
    np.testing.assert_allclose(grad_r, 0, atol=1e-8)
    np.testing.assert_allclose(grad_s, 0, atol=1e-8)

    # alpha: Newton lands on the maximiser
    s = mmsb._update_alpha(state)
    assert abs(float(jax.grad(lambda a: f(mmsb.State(s.gamma, s.phi_s, s.phi_r, s.B, a)))(s.alpha))) < 1e-6


@pytest.mark.parametrize("symmetric", [False, True])
def test_bound_never_decreases(symmetric):
    Y, mask = _problem(symmetric, seed=3, n=12, r=3)
    hp = mmsb.Hyperparams(n_blocks=4, symmetric=symmetric)
    result = mmsb.fit(jax.random.key(0), Y, mask, hp, max_iter=60, tol=0.0)
    trace = np.asarray(result.trace)
    assert np.all(np.isfinite(trace))
    assert np.all(np.diff(trace) >= -1e-9 * np.abs(trace[1:]))
    if symmetric:
        P = np.asarray(mmsb.predict_proba(result.state))
        np.testing.assert_allclose(P, P.transpose(0, 2, 1), atol=1e-12)


def test_masked_cells_have_no_effect():
    Y, mask = _problem(False, seed=4, n=10)
    flipped = np.where(mask, Y, 1 - Y)
    hp = mmsb.Hyperparams(n_blocks=3)
    a = mmsb.fit(jax.random.key(0), Y, mask, hp, max_iter=20, tol=0.0)
    b = mmsb.fit(jax.random.key(0), flipped, mask, hp, max_iter=20, tol=0.0)
    np.testing.assert_allclose(a.trace, b.trace)
    np.testing.assert_allclose(mmsb.predict_proba(a.state), mmsb.predict_proba(b.state))


def test_planted_blocks_are_recovered(planted_blocks):
    truth, P, Y, train, test = planted_blocks
    est = MMSBLinkPredictor(n_blocks=3, n_init=4, random_state=0).fit(Y, train)
    assert adjusted_rand_score(truth, est.memberships_.argmax(1)) > 0.9
    prob = est.predict_proba()
    assert prob.shape == Y.shape
    assert roc_auc_score(Y[test], prob[test]) > roc_auc_score(Y[test], P[test]) - 0.03


def test_assortative_blocks_are_found_at_the_defaults():
    """One relation, three blocks linking within at 0.9 and across at 0.1, the estimator's
    defaults (8 blocks): the fit finds the blocks (random Dirichlet starts left every
    object the membership 1/K, a flat B and held-out AUC 0.37 here) and predicts the held-out
    cells about as well as the truth does."""
    rng = np.random.default_rng(0)
    n = 30
    truth = np.repeat(np.arange(3), 10)
    P = np.where(truth[:, None] == truth[None, :], 0.9, 0.1)
    Y = (rng.random((n, n)) < P).astype(np.int8)
    off = ~np.eye(n, dtype=bool)
    test = (rng.random((n, n)) < 0.2) & off
    est = MMSBLinkPredictor(random_state=0).fit(Y, off & ~test)
    assert np.ptp(est.memberships_, axis=1).min() > 0.5  # no object left at the uniform membership
    assert homogeneity_score(truth, est.memberships_.argmax(1)) > 0.9  # 8 blocks may split the 3, never mix them
    prob = est.predict_proba()
    assert roc_auc_score(Y[test], prob[test]) > roc_auc_score(Y[test], P[test]) - 0.05


def test_the_start_reads_an_undirected_relation_whole():
    """An undirected relation is observed for i < j only; the start's embedding mirrors it,
    so it is the embedding of the same network given as a directed relation with every
    cell observed: the same blocks from the same key (reading each object's observed row
    and column as they stand missed the neighbours between two objects)."""
    rng = np.random.default_rng(0)
    n = 60
    truth = np.repeat(np.arange(3), 20)
    upper = np.triu(rng.random((n, n)) < np.where(truth[:, None] == truth[None], 0.3, 0.1), 1)
    Y = (upper | upper.T).astype(np.int8)[None]
    undirected = as_data(Y, np.triu(np.ones((n, n), bool), 1)[None], True)
    directed = as_data(Y, ~np.eye(n, dtype=bool)[None], False)
    for seed in range(3):
        key = jax.random.key(seed)
        np.testing.assert_array_equal(mmsb._spectral_blocks(key, undirected, 3, True), mmsb._spectral_blocks(key, directed, 3, False))


def test_restarts_keep_the_highest_bound():
    Y, mask = _problem(False, seed=5, n=10)
    best = MMSBLinkPredictor(n_blocks=3, n_init=3, max_iter=50, random_state=0).fit(Y, mask)
    keys = jax.random.split(jax.random.key(0), 3)
    hp = best.hyperparams_
    bounds = [float(mmsb.fit(k, Y, mask, hp, max_iter=50).objective) for k in keys]
    assert best.elbo_ == pytest.approx(max(bounds))
    together = mmsb.fit_restarts(keys, Y, mask, hp, max_iter=50)  # one vmapped program
    np.testing.assert_allclose(together.objective, bounds, rtol=1e-10)


def test_stored_restarts_are_keyed_on_what_changes_the_fit(tmp_path, monkeypatch):
    """With the executable cache on, fits that differ in tol, alpha, estimate_alpha or
    max_iter each get their own stored program and give what jax.jit gives."""
    from bayeskit.core import executables

    Y, mask = _problem(True, seed=2, n=9)
    keys = jax.random.split(jax.random.key(3), 2)
    cases = [(mmsb.Hyperparams(n_blocks=2, symmetric=True), 30, 1e-6),
             (mmsb.Hyperparams(n_blocks=2, symmetric=True), 30, 1e-2),
             (mmsb.Hyperparams(n_blocks=2, symmetric=True, alpha=0.5), 30, 1e-6),
             (mmsb.Hyperparams(n_blocks=2, symmetric=True, estimate_alpha=False), 30, 1e-6),
             (mmsb.Hyperparams(n_blocks=2, symmetric=True), 7, 1e-6)]
    expected = [mmsb.fit_restarts(keys, Y, mask, hp, max_iter=m, tol=t) for hp, m, t in cases]  # cache off
    monkeypatch.setattr(executables, "folder", lambda: tmp_path)
    got = [mmsb.fit_restarts(keys, Y, mask, hp, max_iter=m, tol=t) for hp, m, t in cases]
    # a program per max_iter and per estimate_alpha (static fields); tol and alpha are arguments
    assert len(list(tmp_path.glob("*.bin"))) == 3
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a.n_iter, b.n_iter)
        np.testing.assert_allclose(a.objective, b.objective, rtol=1e-12)
    assert len({float(r.objective[0]) for r in got}) == len(cases)  # the cases do differ


def test_errors():
    Y, mask = _problem(False)
    with pytest.raises(ValueError, match="n_blocks"):
        MMSBLinkPredictor(n_blocks=0).fit(Y, mask)
    with pytest.raises(ValueError, match="alpha"):
        MMSBLinkPredictor(alpha=0.0).fit(Y, mask)
    with pytest.raises(ValueError, match="0 or 1"):
        MMSBLinkPredictor().fit(np.full((5, 5), 2))
    with pytest.raises(ValueError, match="no observed"):
        MMSBLinkPredictor().fit(Y, np.zeros_like(mask))
    with pytest.raises(ValueError, match="symmetric"):
        MMSBLinkPredictor(symmetric=True).fit(Y, mask)
    # a = b = 1 (the paper's maximum-likelihood M-step) put a network without links at B = 0,
    # and the fit ran to NaN with a status, not a message
    for prior in ((1.0, 1.0), (1.0, 2.0), (0.5, 2.0)):
        with pytest.raises(ValueError, match="block_prior must be two numbers above 1"):
            mmsb.fit(jax.random.key(0), np.zeros((12, 12), int), None, mmsb.Hyperparams(n_blocks=3, block_prior=prior))

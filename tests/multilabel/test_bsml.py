"""BSML / BSML+ARD / BSSML: the bound, the updates, recovery of known truth, batching."""

from __future__ import annotations

import logging

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from compilations import count_compilations
from scipy.linalg import subspace_angles
from scipy.stats import norm

from bayeskit.core import column_pairs as cp
from bayeskit.core.column_pairs import column_pairs, pays_off
from bayeskit.core.loop import as_arrays
from bayeskit.core.status import Status
from bayeskit.multilabel import bsml, probit

SIGMA_Z = 0.1


def simulate(rng, n=80, d=6, r=2, n_labels=3, weight_scale=2.0):
    """Data from the model itself: z = Q'x + noise, t = W'z + b + noise, y = 1[t > 0]."""
    X = rng.normal(size=(n, d))
    Q = rng.normal(size=(d, r)) / np.sqrt(d)
    W = weight_scale * rng.normal(size=(r, n_labels))
    b = 0.3 * rng.normal(size=n_labels)
    Z = X @ Q + SIGMA_Z * rng.normal(size=(n, r))
    Y = (Z @ W + b + rng.normal(size=(n, n_labels)) > 0).astype(np.int8)
    return X, Y, (Q, W, b)


@pytest.fixture(scope="module")
def small():
    return simulate(np.random.default_rng(1))[:2]


CONFIGS = {
    "bsml": bsml.Hyperparams(n_components=2),
    "ard": bsml.Hyperparams(n_components=2, prior="ard"),
    "bssml": bsml.Hyperparams(n_components=2, semisupervised=True),
}


def _labels_for(name, Y):
    if name != "bssml":
        return Y
    Y = Y.copy()
    Y[::3, 0] = -1  # unobserved per entry
    Y[::4] = -1  # and whole rows unlabelled
    return Y


@pytest.mark.parametrize("name", list(CONFIGS))
def test_lower_bound_never_decreases(small, name):
    X, Y = small
    hp = CONFIGS[name]
    result = bsml.fit(jax.random.key(3), X, _labels_for(name, Y), hp, max_iter=80, tol=0.0)
    trace = np.asarray(result.trace)
    assert np.all(np.isfinite(trace)) and int(result.n_iter) == 80
    steps = np.diff(trace)
    assert np.all(steps >= -1e-9 * (1 + np.abs(trace[1:]))), steps.min()
    assert trace[-1] > trace[0]


# --- every closed-form update is a coordinate-wise optimum of the bound -------------------


def _prepared(name, X, Y):
    hp = as_arrays(CONFIGS[name], jnp.float64)
    data = bsml.prepare(jnp.asarray(X), jnp.asarray(_labels_for(name, Y), jnp.int8), hp)
    state = bsml.init(jax.random.key(0), data, hp)
    for _ in range(3):  # leave the random start
        state = bsml.update(state, data, hp)
    return hp, data, state


def _with_q_mean(state, data, q):
    return eqx.tree_at(lambda s: (s.q_mean, s.xq), state, (q, data.X @ q))


def _with_t_loc(state, data, hp, loc):
    _, shift = probit.auxiliary_moments(loc, data.Y, hp.classifier_priors(), hp.semisupervised)
    cs = eqx.tree_at(lambda c: (c.t_loc, c.t_mean), state.classifier, (loc, loc + shift))
    return eqx.tree_at(lambda s: s.classifier, state, cs)


def _zero_gradient(f, x_before, x_after):
    """The gradient after the update is tiny compared with the gradient before it."""
    g_before = jnp.linalg.norm(jax.grad(f)(x_before))
    g_after = jnp.linalg.norm(jax.grad(f)(x_after))
    assert g_before > 1e-6
    assert g_after <= 1e-6 * g_before + 1e-8, (float(g_after), float(g_before))


def _no_perturbation_improves(objective, state, perturbations):
    best = objective(state)
    for p in perturbations:
        value = objective(p(state))
        assert value <= best + 1e-9 * (1 + abs(best)), (float(value), float(best))


def _scale(c):
    return jnp.asarray(c, jnp.float64)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_updates_are_coordinatewise_optima(small, name):
    X, Y = small
    hp, data, state = _prepared(name, X, Y)
    obj = jax.jit(lambda s: bsml.objective(s, data, hp))
    rng = np.random.default_rng(0)
    d = data.X.shape[1]

    # q(Phi): any other Gamma factor is worse.
    s1 = bsml.update_phi(state, data, hp)
    _no_perturbation_improves(obj, s1, [
        lambda s, c=c: eqx.tree_at(lambda t: t.phi_scale, s, s.phi_scale * c) for c in (0.9, 1.1)
    ] + [lambda s, c=c: eqx.tree_at(lambda t: t.phi_shape, s, s.phi_shape * c) for c in (0.95, 1.05)])

    # q(Q): zero gradient in the means; rescaling every covariance is worse.
    s2 = bsml.update_q(s1, data, hp)
    _zero_gradient(lambda q: obj(_with_q_mean(s2, data, q)), s1.q_mean, s2.q_mean)
    _no_perturbation_improves(obj, s2, [
        lambda s, c=c: eqx.tree_at(
            lambda t: (t.q_var, t.q_logdet, t.q_trace_gram), s,
            (s.q_var * c, s.q_logdet + d * jnp.log(_scale(c)), s.q_trace_gram * c),
        ) for c in (0.8, 1.25)
    ])

    # q(Z): zero gradient in the means; other covariances are worse.
    s3 = bsml.update_z(s2, data, hp)
    _zero_gradient(lambda z: obj(eqx.tree_at(lambda t: t.z_mean, s3, z)), s2.z_mean, s3.z_mean)
    r = s3.z_cov.shape[0]
    perturbed_covs = [s3.z_cov * 0.8, s3.z_cov * 1.25]
    A = jnp.asarray(rng.normal(size=(r, r)))
    perturbed_covs.append(s3.z_cov + 0.05 * jnp.trace(s3.z_cov) * (A @ A.T) / r)
    _no_perturbation_improves(obj, s3, [
        lambda s, C=C: eqx.tree_at(lambda t: (t.z_cov, t.z_logdet), s, (C, jnp.linalg.slogdet(C)[1]))
        for C in perturbed_covs
    ])
    # and zero gradient in the covariance (the bound counted N tr(Cov(w) Sigma_Z) twice, which
    # moved its optimum a little away from the update, too little for the rescalings above)
    with_cov = lambda C: eqx.tree_at(lambda t: (t.z_cov, t.z_logdet), s3, (C, jnp.linalg.slogdet(C)[1]))
    _zero_gradient(lambda C: obj(with_cov(C)), s2.z_cov, s3.z_cov)

    # q(lambda), q(Psi), then q(b, W), then q(T).
    priors = hp.classifier_priors()
    cs = probit.update_precisions(s3.classifier, priors)
    s4 = eqx.tree_at(lambda t: t.classifier, s3, cs)
    _no_perturbation_improves(obj, s4, [
        lambda s, c=c: eqx.tree_at(lambda t: (t.classifier.lambda_scale, t.classifier.psi_scale), s,
                                   (s.classifier.lambda_scale * c, s.classifier.psi_scale * c))
        for c in (0.9, 1.1)
    ])
    gram = bsml._z_gram(s4)
    cs = probit.update_coefficients(cs, gram, probit.augmented_cross(s4.z_mean, cs.t_mean))
    s5 = eqx.tree_at(lambda t: t.classifier, s4, cs)
    _zero_gradient(
        lambda m: obj(eqx.tree_at(lambda t: t.classifier.coef_mean, s5, m)), s4.classifier.coef_mean, s5.classifier.coef_mean
    )
    k = cs.coef_mean.shape[1]
    _no_perturbation_improves(obj, s5, [
        lambda s, c=c: eqx.tree_at(lambda t: (t.classifier.coef_cov, t.classifier.coef_logdet), s,
                                   (s.classifier.coef_cov * c, s.classifier.coef_logdet + k * jnp.log(_scale(c))))
        for c in (0.8, 1.25)
    ])
    s6 = bsml.update_classifier(s3, data, hp)
    _zero_gradient(
        lambda loc: obj(_with_t_loc(s6, data, hp, loc)), s5.classifier.t_loc, s6.classifier.t_loc
    )
    # A full sweep raises the bound.
    assert obj(bsml.update(state, data, hp)) > obj(state)


# --- updates against dense linear algebra -------------------------------------------------


@pytest.mark.parametrize("prior, dual", [("entrywise", False), ("entrywise", True), ("ard", None)])
def test_q_update_matches_dense_inverse(small, prior, dual):
    X, Y = small
    hp = as_arrays(bsml.Hyperparams(n_components=2, prior=prior), jnp.float64)
    data = bsml.prepare(jnp.asarray(X), jnp.asarray(Y, jnp.int8), hp, dual=dual)
    state = bsml.update_phi(bsml.update(bsml.init(jax.random.key(1), data, hp), data, hp), data, hp)
    new = bsml.update_q(state, data, hp)
    phi = np.broadcast_to(np.asarray(state.phi_shape * state.phi_scale), new.q_mean.shape)
    G = X.T @ X / SIGMA_Z**2
    for s in range(2):
        Sigma = np.linalg.inv(np.diag(phi[:, s]) + G)
        mean = Sigma @ X.T @ np.asarray(state.z_mean[:, s]) / SIGMA_Z**2
        np.testing.assert_allclose(new.q_mean[:, s], mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(new.q_var[:, s], np.diag(Sigma), rtol=1e-8)
        np.testing.assert_allclose(new.q_logdet[s], np.linalg.slogdet(Sigma)[1], rtol=1e-9)
        np.testing.assert_allclose(new.q_trace_gram[s], np.trace(Sigma @ X.T @ X), rtol=1e-7)


def _run_sweeps(X, Y, hp, dual, sweeps, pairs=None):
    data = bsml.prepare(jnp.asarray(X), jnp.asarray(Y, jnp.int8), hp, dual=dual, pairs=pairs)
    @jax.jit
    def sweep(state, data):
        state = bsml.update(state, data, hp)
        return state, bsml.objective(state, data, hp)

    state, trace = bsml.init(jax.random.key(2), data, hp), []
    for _ in range(sweeps):
        state, bound = sweep(state, data)
        trace.append(float(bound))
    return state, np.array(trace)


def test_wide_data_take_the_n_by_n_form_with_the_same_trace(rng):
    """Features outnumber samples (sparse binary, as bag-of-words data): the N x N (Woodbury)
    Q update is the default there and gives the D x D update's bound, sweep by sweep."""
    X = (rng.random((24, 60)) < 0.15).astype(float)
    Y = (X[:, :3] + X[:, 3:6] + 0.3 * rng.normal(size=(24, 3)) > 0.5).astype(np.int8)
    hp = as_arrays(bsml.Hyperparams(n_components=3), jnp.float64)
    assert bsml.prepare(jnp.asarray(X), jnp.asarray(Y, jnp.int8), hp).dual
    assert not bsml.prepare(jnp.asarray(X.T[:, :20]), jnp.asarray(Y[:20].repeat(3, 0)[:60], jnp.int8), hp).dual
    dual_state, dual_trace = _run_sweeps(X, Y, hp, True, 25)
    primal_state, primal_trace = _run_sweeps(X, Y, hp, False, 25)
    np.testing.assert_allclose(dual_trace, primal_trace, rtol=1e-6)
    assert np.all(np.diff(dual_trace) > -1e-8 * np.abs(dual_trace[1:]))
    np.testing.assert_allclose(dual_state.q_mean, primal_state.q_mean, rtol=1e-5, atol=1e-8)
    # the sparse variant (N x N matrices from the column pairs of X) too
    sparse_state, sparse_trace = _run_sweeps(X, Y, hp, True, 25, column_pairs(X))
    np.testing.assert_allclose(sparse_trace, primal_trace, rtol=1e-6)
    np.testing.assert_allclose(sparse_state.q_mean, primal_state.q_mean, rtol=1e-5, atol=1e-8)


def test_fit_takes_the_column_pairs_for_sparse_wide_data(rng, monkeypatch):
    """``fit`` finds the pairs of a sparse wide X itself and gives the dense forms' bound."""
    built = []
    monkeypatch.setattr(cp, "column_pairs", lambda X: built.append(X.shape) or column_pairs(X))
    n, d = 40, 200
    X = (rng.random((n, d)) < 0.04).astype(float)
    Y = (X[:, :20].sum(1, keepdims=True) + 0.3 * rng.normal(size=(n, 2)) > 0.5).astype(np.int8)
    assert pays_off(X)
    hp = bsml.Hyperparams(n_components=2)
    result = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=15, tol=0.0)
    arrays = as_arrays(hp, jnp.float64)
    dense = bsml._fit(jax.random.key(0), jnp.asarray(X), jnp.asarray(Y, jnp.int8), arrays, None, max_iter=15,
                      tol=np.float64(0.0), progress=None, throw=True)
    assert built == [(n, d)]
    np.testing.assert_allclose(result.trace, dense.trace, rtol=1e-6)
    # restarts under vmap (X closed over, so concrete): the same pairs, each key's own fit
    keys = jax.random.split(jax.random.key(1), 2)
    batch = jax.vmap(lambda k: bsml.fit(k, X, Y, hp, max_iter=15, tol=0.0, throw=False))(keys)
    singles = [bsml.fit(k, X, Y, hp, max_iter=15, tol=0.0).trace for k in keys]
    np.testing.assert_allclose(batch.trace, np.stack(singles), rtol=1e-9)
    assert len(built) == 4


def test_nearest_labelled_neighbour_imputation(rng):
    X = rng.normal(size=(30, 3))
    Y = rng.integers(0, 2, size=(30, 2)).astype(np.int8)
    Y[rng.random((30, 2)) < 0.4] = -1
    got = np.asarray(bsml._impute_nearest(jnp.asarray(X), jnp.asarray(Y), chunk_size=7))
    D = ((X[:, None] - X[None]) ** 2).sum(-1)
    for o in range(2):
        cand = np.where(Y[:, o] >= 0)[0]
        want = Y[cand[np.argmin(D[:, cand], axis=1)], o]
        np.testing.assert_array_equal(got[:, o], want)


# --- recovery of known truth ---------------------------------------------------------------


def test_recovers_subspace_and_approaches_bayes_error():
    rng = np.random.default_rng(7)
    X, Y, (Q, W, b) = simulate(rng, n=2600, d=8, r=2, n_labels=5)
    X_train, Y_train, X_test, Y_test = X[:600], Y[:600], X[600:], Y[600:]
    hp = bsml.Hyperparams(n_components=2)
    result = bsml.fit(jax.random.key(0), X_train, Y_train, hp, max_iter=300, tol=1e-8)
    angles = np.degrees(subspace_angles(np.asarray(result.state.q_mean), Q))
    assert angles.max() < 10, angles
    # Bayes rule with the true parameters: P(y=1|x) = Phi((b + w'Q'x) / sqrt(1 + sigma^2 |w|^2)).
    p_bayes = norm.cdf((X_test @ Q @ W + b) / np.sqrt(1 + SIGMA_Z**2 * (W**2).sum(0)))
    bayes = np.mean((p_bayes > 0.5) != Y_test)
    ours = np.mean((np.asarray(bsml.predict_proba(result.state, X_test, hp)) > 0.5) != Y_test)
    assert ours <= bayes + 0.02, (ours, bayes)


def test_ard_switches_off_unneeded_dimensions():
    rng = np.random.default_rng(11)
    X, Y, (Q, _, _) = simulate(rng, n=500, d=8, r=2, n_labels=6, weight_scale=3.0)
    hp = bsml.Hyperparams(n_components=5, prior="ard", alpha_phi=1e-10, beta_phi=1e10)
    result = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=500, tol=1e-9)
    active = np.asarray(bsml.active_components(result.state))
    # At least the two superfluous of five dimensions are switched off, and the true
    # two-dimensional subspace lies within the span of the survivors.
    assert 2 <= active.sum() <= 3, np.asarray(bsml.component_relevance(result.state))
    angles = np.degrees(subspace_angles(np.asarray(result.state.q_mean)[:, active], Q))
    assert angles.max() < 15, angles


# --- batching, compilation -----------------------------------------------------------------


def test_vmap_over_keys_equals_separate_fits(small):
    X, Y = small
    hp = CONFIGS["bsml"]
    keys = jax.random.split(jax.random.key(5), 3)
    batched = jax.vmap(lambda k: bsml.fit(k, X, Y, hp, max_iter=40, tol=1e-5, throw=False))(keys)
    for i in range(3):
        single = bsml.fit(keys[i], X, Y, hp, max_iter=40, tol=1e-5, throw=False)
        assert int(batched.n_iter[i]) == int(single.n_iter)
        np.testing.assert_allclose(batched.trace[i], single.trace, rtol=1e-9, equal_nan=True)
        np.testing.assert_allclose(batched.state.q_mean[i], single.state.q_mean, rtol=1e-7, atol=1e-9)


def test_vmap_over_stacked_datasets_equals_separate_fits():
    rng = np.random.default_rng(2)
    sets = [simulate(rng)[:2] for _ in range(2)]
    Xs = jnp.stack([jnp.asarray(s[0]) for s in sets])
    Ys = jnp.stack([jnp.asarray(s[1]) for s in sets])
    hp = CONFIGS["bsml"]
    key = jax.random.key(0)
    batched = jax.vmap(lambda X, Y: bsml.fit(key, X, Y, hp, max_iter=40, tol=1e-5, throw=False))(Xs, Ys)
    for i, (X, Y) in enumerate(sets):
        single = bsml.fit(key, X, Y, hp, max_iter=40, tol=1e-5, throw=False)
        np.testing.assert_allclose(batched.trace[i], single.trace, rtol=1e-9, equal_nan=True)
        assert int(batched.n_iter[i]) == int(single.n_iter)


def test_second_call_does_not_recompile(small, caplog):
    X, Y = small
    bsml.fit(jax.random.key(0), X, Y, bsml.Hyperparams(n_components=2), max_iter=10)
    with jax.log_compiles(True), caplog.at_level(logging.WARNING):
        caplog.clear()
        result = bsml.fit(jax.random.key(1), X, Y, bsml.Hyperparams(n_components=2, alpha_psi=2.0), max_iter=10)
        jax.block_until_ready(result)
    compiled = [r.getMessage() for r in caplog.records if "_fit" in r.getMessage() and "ompil" in r.getMessage()]
    assert not compiled, compiled


# --- numerics on awkward input ------------------------------------------------------------


def _assert_healthy(result, X_new, hp):
    assert not bool((result.status == Status.nonfinite) | (result.status == Status.not_positive_definite))
    assert np.all(np.isfinite(np.asarray(result.trace)[: int(result.n_iter)]))
    proba = np.asarray(bsml.predict_proba(result.state, X_new, hp))
    assert np.all(np.isfinite(proba)) and proba.min() >= 0 and proba.max() <= 1


def test_float32_raw_emotions(emotions):
    X_train, Y_train, X_test, _ = emotions
    hp = bsml.Hyperparams(n_components=3)
    result = bsml.fit(jax.random.key(0), X_train.astype(np.float32), Y_train, hp, max_iter=60)
    assert result.state.q_mean.dtype == jnp.float32 and result.trace.dtype == jnp.float32
    _assert_healthy(result, X_test.astype(np.float32), hp)


def test_degenerate_columns_and_scales(small):
    X, Y = small
    X = np.column_stack([X, X[:, :2], np.ones(len(X)), 1e4 * X[:, 0]])  # duplicated, constant, rescaled
    Y = np.column_stack([Y, np.zeros(len(Y)), np.ones(len(Y))]).astype(np.int8)  # all-0 and all-1 labels
    hp = bsml.Hyperparams(n_components=2)
    _assert_healthy(bsml.fit(jax.random.key(0), X, Y, hp, max_iter=60, throw=False), X, hp)


def test_inputs_are_not_modified(small):
    X, Y = small
    X, Y = X.copy(), Y.copy()
    X.flags.writeable = False
    Y.flags.writeable = False
    X0, Y0 = X.copy(), Y.copy()
    bsml.fit(jax.random.key(0), X, Y, CONFIGS["bsml"], max_iter=5)
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(Y, Y0)


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda X, Y, hp: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), Y, hp), "non-finite"),
        (lambda X, Y, hp: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.inf, X), Y, hp), "non-finite"),
        (lambda X, Y, hp: (X, np.where(np.arange(Y.size).reshape(Y.shape) == 3, 2, Y), hp), r"values in \{0, 1\}"),
        (lambda X, Y, hp: (X, Y[:-1], hp), "must match"),
        (lambda X, Y, hp: (X[:, 0], Y, hp), "2-D"),
        (lambda X, Y, hp: (X[:0], Y[:0], hp), "at least 1"),
        (lambda X, Y, hp: (X[:, :0], Y, hp), "feature"),
        (lambda X, Y, hp: (X, Y, bsml.Hyperparams(n_components=0)), "n_components"),
        (lambda X, Y, hp: (X, Y, bsml.Hyperparams(n_components=2, alpha_phi=-1.0)), "alpha_phi"),
        (lambda X, Y, hp: (X, Y, bsml.Hyperparams(n_components=2, sigma_z=0.0)), "sigma_z"),
        (lambda X, Y, hp: (X, Y, bsml.Hyperparams(n_components=2, prior="rowwise")), "prior"),
        (lambda X, Y, hp: (X, np.where(np.arange(Y.size).reshape(Y.shape) == 3, -1, Y), hp), "semisupervised"),
    ],
)
def test_bad_input_is_refused_before_compiling(small, change, message):
    X, Y = small
    X, Y, hp = change(X.astype(float), Y.astype(int), CONFIGS["bsml"])
    with pytest.raises(ValueError, match=message):
        bsml.fit(jax.random.key(0), X, Y, hp, max_iter=5)


# --- prediction -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bsml", "bssml"])
def test_predictive_forms(small, name):
    X, Y = small
    hp = CONFIGS[name]
    state = bsml.fit(jax.random.key(0), X, _labels_for(name, Y), hp, max_iter=30).state
    consistent = np.asarray(bsml.predict_proba(state, X, hp))
    author = np.asarray(bsml.predict_proba(state, X, hp, predictive="author"))
    mean, var = (np.asarray(a) for a in bsml.predict_scores(state, X))
    np.testing.assert_allclose(author, norm.cdf(mean / var), rtol=1e-10, atol=1e-14)
    if name == "bsml":
        np.testing.assert_allclose(consistent, norm.cdf(mean / np.sqrt(var)), rtol=1e-10, atol=1e-14)
        np.testing.assert_array_equal(consistent > 0.5, author > 0.5)
    else:  # the low-density rule of Section 3.2 with gamma_+ = gamma_- = 1/2
        pos, neg = norm.cdf((mean - 0.5) / np.sqrt(var)), norm.cdf((-mean - 0.5) / np.sqrt(var))
        np.testing.assert_allclose(consistent, pos / (pos + neg), rtol=1e-9)
    # The predictive variance [1 z]' S_o [1 z] + 1, against a direct loop.
    z = np.asarray(bsml.transform(state, X))
    S = np.asarray(state.classifier.coef_cov)
    aug = np.column_stack([np.ones(len(z)), z])
    np.testing.assert_allclose(var[:, 1], 1 + np.einsum("ni,ij,nj->n", aug, S[1], aug), rtol=1e-12)
    chunked = np.asarray(bsml.predict_proba(state, X, hp, chunk_size=16))
    np.testing.assert_allclose(chunked, consistent, rtol=1e-12)


def test_functional_predictions_take_a_dataframe_as_fit_does(small):
    pd = pytest.importorskip("pandas")
    X, Y = small
    hp = CONFIGS["bsml"]
    state = bsml.fit(jax.random.key(0), pd.DataFrame(X), Y, hp, max_iter=5, throw=False).state
    np.testing.assert_array_equal(bsml.predict_proba(state, pd.DataFrame(X), hp), bsml.predict_proba(state, X, hp))
    cs = probit.fit(jax.random.key(0), X, Y, max_iter=5, throw=False).state
    np.testing.assert_array_equal(probit.predict_proba(cs, pd.DataFrame(X)), probit.predict_proba(cs, X))


def test_functional_predictions_cast_a_jax_array_of_another_dtype_inside_their_one_program(small):
    X, Y = small
    hp = CONFIGS["bsml"]
    state = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=5, throw=False).state
    cs = probit.fit(jax.random.key(0), X, Y, max_iter=5, throw=False).state
    X32 = jnp.asarray(X[:9], jnp.float32)
    for predict, want in [(lambda x: bsml.predict_proba(state, x, hp), state.q_mean.dtype),
                          (lambda x: probit.predict_proba(cs, x), cs.coef_mean.dtype)]:
        jax.clear_caches()
        with count_compilations() as seen:
            got = predict(X32)
        assert seen["compiled"] == ["jit(_predict_proba)"], seen
        assert got.dtype == want
        np.testing.assert_allclose(np.asarray(got), np.asarray(predict(np.asarray(X32, np.float64))), rtol=1e-12)


def test_save_and_load_roundtrip(small, tmp_path):
    import bayeskit

    X, Y = small
    hp = CONFIGS["ard"]
    result = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=20)
    path = bayeskit.save(tmp_path / "fit.bkz", result, hp)
    assert path.is_file()
    loaded, hp2 = bayeskit.load(path)
    assert type(hp2) is bsml.Hyperparams and hp2 == hp and hp2.prior == "ard" and hp2.n_components == 2
    assert type(loaded) is type(result) and type(loaded.state) is bsml.State
    assert jax.tree.structure(loaded) == jax.tree.structure(result)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(result)):  # bit for bit
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert loaded.status == result.status
    np.testing.assert_array_equal(bsml.predict_proba(loaded.state, X, hp2), bsml.predict_proba(result.state, X, hp))


@pytest.mark.parametrize("cls", ["BSMLClassifier", "ProbitClassifier"])
def test_estimators_refuse_data_beyond_float32_and_warn_far_from_unit_scale(small, emotions, cls):
    """The priors set a scale near 1, so X is not rescaled: X'X of data at 1e20 (1e40) or
    1e-20 (1e-40) is beyond float32 and refused, at fit and at predict, before compiling; data
    at 1e8 fit with a warning; the bundled raw Emotions features (scale 1/16) fit silently."""
    import warnings

    from bayeskit import estimators

    make = lambda: getattr(estimators, cls)(max_iter=5, tol=0)
    X, Y = small
    X32 = X.astype(np.float32)
    for a in (1e20, 1e-20):
        with pytest.raises(ValueError, match=r"X is at scale .* leave what float32 holds; standardise X"):
            make().fit(X32 * np.float32(a), Y)
    fitted = make().fit(X32, Y)
    with pytest.raises(ValueError, match="X is at scale"):
        fitted.predict_proba(X32 * np.float32(1e20))
    with pytest.warns(RuntimeWarning, match=r"X is at scale .*e\+07; the priors on the weights"):
        make().fit(X32 * np.float32(1e8), Y)
    X_train, Y_train, _, _ = emotions
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        make().fit(X_train.astype(np.float32), Y_train)


def test_estimator_takes_a_sparse_label_matrix_as_its_dense_values(small):
    from scipy import sparse

    from bayeskit.estimators import BSMLClassifier

    X, Y = small
    dense = BSMLClassifier(max_iter=3, tol=0, random_state=0).fit(X, Y)
    from_sparse = BSMLClassifier(max_iter=3, tol=0, random_state=0).fit(X, sparse.csr_matrix(Y))
    np.testing.assert_array_equal(from_sparse.predict_proba(X), dense.predict_proba(X))


def test_new_inputs_are_checked_by_the_functional_predictions():
    """predict_proba of BSML and of the probit classifier took X with the wrong number of
    features to XLA's dot_general error, and NaN rows to NaN probabilities; transform and
    predict_scores too. Each refuses them by name now (the shape inside jit as well)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 4))
    Y = (X[:, :2] > 0).astype(np.int8)
    hp = bsml.Hyperparams(n_components=2)
    state = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=5).state
    classifier = probit.fit(jax.random.key(0), X, Y, max_iter=5).state
    calls = {"bsml.predict_proba": lambda x: bsml.predict_proba(state, x, hp), "bsml.transform": lambda x: bsml.transform(state, x),
             "bsml.predict_scores": lambda x: bsml.predict_scores(state, x), "probit.predict_proba": lambda x: probit.predict_proba(classifier, x)}
    nan_row = np.full((1, 4), np.nan)
    for name, call in calls.items():
        with pytest.raises(ValueError, match=r"X must have shape \(m, 4\)"):
            call(X[:3, :3])
        with pytest.raises(ValueError, match=r"X must have shape \(m, 4\)"):
            jax.jit(call)(X[:3, :3])
        with pytest.raises(ValueError, match="X contains 4 non-finite"):
            call(nan_row)
        assert np.all(np.isfinite(np.asarray(jax.tree.leaves(call(X[:3]))[0]))), name


def test_the_functional_predictions_take_a_state_stacked_by_vmap():
    """The new-input check read the feature count from the stacked state's batch axis."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    Y = (X[:, :2] > 0).astype(np.int8)
    hp = bsml.Hyperparams(n_components=2)
    states = jax.vmap(lambda k: bsml.fit(k, X, Y, hp, max_iter=5, throw=False).state)(jax.random.split(jax.random.key(0), 3))
    stacked = bsml.transform(states, X)
    assert stacked.shape == (3, 30, 2)
    np.testing.assert_allclose(stacked[1], bsml.transform(jax.tree.map(lambda a: a[1], states), X), rtol=1e-12)


@pytest.mark.parametrize("model", ["bsml", "probit", "ssdrmc"])
def test_a_nan_input_under_jit_is_reported_as_nonfinite_not_as_ill_conditioned(model):
    """Inside the caller's jit the host check of X cannot run: a NaN in X made the fits'
    Cholesky factors fail, and the status blamed the conditioning (not positive definite)."""
    from bayeskit.multilabel import ssdrmc

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    Y = (rng.normal(size=(30, 3)) > 0).astype(np.int32)
    fits = {"bsml": lambda X: bsml.fit(jax.random.key(0), X, Y, bsml.Hyperparams(n_components=2), max_iter=5, throw=False),
            "probit": lambda X: probit.fit(jax.random.key(0), X, Y, max_iter=5, throw=False),
            "ssdrmc": lambda X: ssdrmc.fit(X, Y, 2, n_neighbors=5, max_iter=5, throw=False)}
    fit = jax.jit(fits[model])
    assert fit(jnp.asarray(X)).status == Status.successful or fit(jnp.asarray(X)).status == Status.max_iter_reached
    for bad in (np.nan, np.inf):
        assert fit(jnp.asarray(X).at[3, 2].set(bad)).status == Status.nonfinite


def test_a_label_missing_in_every_row_is_refused(small):
    """Its nearest-labelled-neighbour start read row 0 of an all-missing column as a
    negative, and the fit predicted it at about 5e-4 everywhere."""
    X, Y = small
    Y = Y.copy()
    Y[:, 1] = -1
    with pytest.raises(ValueError, match=r"label\(s\) \[1\] of Y are missing \(-1\) in every row"):
        bsml.fit(jax.random.key(0), X, Y, bsml.Hyperparams(n_components=2, semisupervised=True), max_iter=5)

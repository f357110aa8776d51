"""Every predictive entry point gives the same numbers with ``chunk_size`` (blocks of rows
evaluated in sequence, the last one partial) as in one piece."""

import jax
import numpy as np
import pytest

from bayeskit.density import cdpmm, gp, sbmoe
from bayeskit.estimators import BSMLClassifier, ProbitClassifier, RVMRegressor, SBMoERegressor
from bayeskit.multilabel import bsml, probit

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
CHUNK = 7  # 23 test rows: three full blocks and a partial one


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(60, 2))
    y = np.sin(2 * X[:, 0]) + 0.3 * X[:, 1] + 0.1 * rng.normal(size=60)
    return X, y, rng.uniform(-2, 2, size=(23, 2)), rng.normal(size=23)


@pytest.fixture(scope="module")
def multilabel():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(50, 4))
    Y = (X @ rng.normal(size=(4, 3)) > 0).astype(np.int8)
    return X, Y, rng.normal(size=(23, 4))


def same(a, b):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-10, atol=1e-12)


def test_bsml_and_probit(multilabel):
    X, Y, X_new = multilabel
    hp = bsml.Hyperparams(n_components=2)
    state = bsml.fit(jax.random.key(0), X, Y, hp, max_iter=20).state
    for f in (lambda c: bsml.predict_proba(state, X_new, hp, chunk_size=c),
              lambda c: bsml.transform(state, X_new, chunk_size=c),
              lambda c: bsml.predict_scores(state, X_new, chunk_size=c),
              lambda c: probit.predict_proba(state.classifier, bsml.transform(state, X_new), chunk_size=c)):
        same(f(CHUNK), f(None))
    for est in (BSMLClassifier(n_components=2, max_iter=20, random_state=0), ProbitClassifier(max_iter=20, random_state=0)):
        est.fit(X, Y)
        same(est.predict_proba(X_new, chunk_size=CHUNK), est.predict_proba(X_new))
        np.testing.assert_array_equal(est.predict(X_new, chunk_size=CHUNK), est.predict(X_new))


def test_conditional_densities(regression):
    X, y, X_new, y_new = regression
    for model, predictive in ((gp.fit(X, y[:, None], max_iter=30).state, gp.predictive),
                              (cdpmm.fit(jax.random.key(0), X, y[:, None], 4, max_iter=50).state, cdpmm.predictive)):
        same(predictive(model, X_new, chunk_size=CHUNK), predictive(model, X_new))
    est = SBMoERegressor(n_experts=3, max_iter=3, gate_steps=5, n_gate=10, n_draws=10, random_state=0).fit(X, y)
    key, state, hp = jax.random.key(1), est.state_, est.hyperparams_
    same(sbmoe.predictive(key, state, X_new, hp, n_gate=10, n_draws=10, chunk_size=CHUNK),
         sbmoe.predictive(key, state, X_new, hp, n_gate=10, n_draws=10))
    same(est.predict(X_new, chunk_size=CHUNK), est.predict(X_new))
    same(est.score_samples(X_new, y_new, chunk_size=CHUNK), est.score_samples(X_new, y_new))


def test_sparse_bayes(regression):
    X, y, X_new, _ = regression
    rvm = RVMRegressor().fit(X, y)
    same(rvm.predict(X_new, return_std=True, chunk_size=CHUNK), rvm.predict(X_new, return_std=True))
    assert rvm.predict(X_new, chunk_size=CHUNK).shape == (23,)
    with pytest.raises(ValueError, match="chunk_size"):
        rvm.predict(X_new, chunk_size=0)


def test_chunked_predictions_compile_once(regression):
    """A chunked prediction at the top level runs its blocks through programs compiled once:
    the second call on new rows of the same shape compiles nothing (a lax.map staged at the
    top level was a new program, compiled again, at every call)."""
    from compilations import count_compilations

    X, y, X_new, y_new = regression
    rvm = RVMRegressor().fit(X, y)
    est = SBMoERegressor(n_experts=3, max_iter=3, gate_steps=5, n_gate=10, n_draws=10, random_state=0).fit(X, y)
    calls = (lambda Z: rvm.predict(Z, return_std=True, chunk_size=CHUNK), lambda Z: est.predict(Z, chunk_size=CHUNK),
             lambda Z: est.score_samples(Z, y_new, chunk_size=CHUNK))
    for call in calls:
        jax.block_until_ready(call(X_new))
        with count_compilations() as seen:
            jax.block_until_ready(call(X_new[::-1]))
        assert seen["compiles"] == 0, seen

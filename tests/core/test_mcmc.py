"""Diagnostics of (chain, draw) draws and their ArviZ conversion: R-hat and ESS on
autoregressive chains whose effective sample size is known, R-hat equal to ArviZ's split
R-hat, and the groups of the InferenceData; the order of every sampler's LAPACK calls."""

import numpy as np
import pytest

from bayeskit.core.mcmc import diagnostics, to_inference_data


def _ar1(rng, phi, chains, draws, shift=None):
    x = np.zeros((chains, draws))
    x[:, 0] = rng.normal(size=chains) / np.sqrt(1 - phi**2)
    for t in range(1, draws):
        x[:, t] = phi * x[:, t - 1] + rng.normal(size=chains)
    return x if shift is None else x + np.asarray(shift)[:, None]


def test_ess_and_rhat_of_autoregressive_chains():
    rng = np.random.default_rng(0)
    phi, chains, draws = 0.5, 4, 4000
    d = diagnostics({"x": _ar1(rng, phi, chains, draws)}, names=("x",))["x"]
    want = chains * draws * (1 - phi) / (1 + phi)  # integrated autocorrelation time of AR(1)
    assert d["ess"] == pytest.approx(want, rel=0.15)
    assert abs(d["r_hat"] - 1) < 0.01
    stuck = diagnostics({"x": _ar1(rng, phi, chains, draws, shift=[0, 0, 0, 3])}, names=("x",))["x"]
    assert stuck["r_hat"] > 1.2


def test_inference_data_matches_arviz():
    az = pytest.importorskip("arviz")
    rng = np.random.default_rng(1)
    samples = {"log_joint": _ar1(rng, 0.9, 3, 300), "n_features": rng.integers(1, 5, (3, 300)),
               "W": rng.normal(size=(3, 300, 2, 4, 4)), "accept": rng.random((3, 300)), "saturated": np.zeros((3, 300), bool)}
    idata = to_inference_data(samples, ("accept", "saturated"))
    assert set(idata.groups()) == {"posterior", "sample_stats"}
    assert idata.posterior["W"].shape == (3, 300, 2, 4, 4)
    assert "accept" not in idata.posterior and "lp" in idata.sample_stats
    ours = diagnostics(samples, ("log_joint",))
    assert ours["log_joint"]["r_hat"] == pytest.approx(float(az.rhat(idata, method="split")["log_joint"]), rel=1e-10)
    assert np.isnan(diagnostics({"x": rng.normal(size=(1, 10))}, names=("x",))["x"]["r_hat"])
    assert np.isnan(diagnostics({"x": rng.normal(size=(2, 3))}, names=("x",))["x"]["ess"])
    with pytest.raises(ValueError, match="chain, draw"):
        diagnostics({"x": np.ones(10)}, names=("x",))


def test_a_sampler_with_its_progress_bar_compiles_once_and_draws_the_bar(monkeypatch, capsys):
    """With a bar the chains run in segments of one compiled program: the same draws as in
    one piece, a bar on stderr, nothing compiled again on the next call, and no host
    callback in the program (one would defeat the persistent compilation cache)."""
    import jax

    from bayeskit.core import mcmc
    from bayeskit.datasets import ibp_toy_images
    from bayeskit.relational import ibp

    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setattr(mcmc, "PROGRESS_STEPS", 3)
    X = ibp_toy_images(jax.random.key(0), 12)[0]
    hp = ibp.Hyperparams(k_max=10)
    run = lambda key, progress, chains=2: ibp.sample_posterior(key, X, hp, num_warmup=3, num_samples=6, thinning=2,  # noqa: E731
                                                               num_chains=chains, progress=progress)
    first = run(jax.random.key(1), True)
    assert "sample" in capsys.readouterr().err
    plain = run(jax.random.key(1), False)
    assert set(first) == set(plain)
    for name in plain:
        np.testing.assert_array_equal(first[name], plain[name], err_msg=name)
    one = run(jax.random.key(4), True, chains=1)
    np.testing.assert_array_equal(one["sigma_x"], run(jax.random.key(4), False, chains=1)["sigma_x"])
    size = mcmc._segment_program.jitted._cache_size()
    again = run(jax.random.key(2), True)
    assert mcmc._segment_program.jitted._cache_size() == size  # a new bar, not a new program
    assert again["n_features"].shape == (2, 3)


def test_the_kept_draws_are_every_thinning_th_transition_after_the_warm_up():
    """run_chains against the kernel stepped by hand: warm-up 3, then 7 transitions thinned
    by 2 keep transitions 5, 7 and 9 (1-based); a run that keeps nothing returns no draws."""
    import jax

    from bayeskit.core.mcmc import run_chains
    from bayeskit.sparse import bayesian_lasso as bl

    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 4))
    data = bl.as_data(X, X @ np.array([1.0, 0.0, -2.0, 0.5]) + rng.normal(size=30))
    kernel = bl.BayesianLassoGibbs(bl.Hyperparams())
    draws = run_chains(kernel, jax.random.key(6), data, num_warmup=3, num_samples=7, thinning=2)["beta"][0]
    state = bl.init(jax.random.key(6), data, bl.Hyperparams())
    by_hand = []
    for _ in range(9):  # transitions 1..9
        state = bl.gibbs_step(state, data, bl.Hyperparams())
        by_hand.append(np.asarray(state.beta))
    np.testing.assert_allclose(draws, np.stack([by_hand[4], by_hand[6], by_hand[8]]), rtol=1e-12)
    empty = run_chains(kernel, jax.random.key(6), data, num_warmup=2, num_samples=1, thinning=2)
    assert empty["beta"].shape == (1, 0, 4)


def _kernel_cases():
    """(kernel, model arguments, whether its step calls LAPACK) of every sampler of the
    library on a small problem."""
    import jax.numpy as jnp

    from bayeskit.relational import irm, lfrm
    from bayeskit.relational.data import as_data as relational_data
    from bayeskit.relational.ibp import linear_gaussian as lg
    from bayeskit.relational.irm import IRMGibbs
    from bayeskit.relational.lfrm.gibbs import LFRMGibbs
    from bayeskit.sparse import bayesian_lasso as bl

    rng = np.random.default_rng(0)
    Y, mask = rng.integers(0, 2, (3, 12, 12)).astype(np.int8), rng.random((3, 12, 12)) < 0.9
    relations = (relational_data(Y, mask, False),)
    X = rng.normal(size=(20, 6))
    return {
        "LFRM, prior births": (LFRMGibbs(lfrm.Hyperparams(k_max=6)), relations, False),
        "LFRM, fitted births": (LFRMGibbs(lfrm.Hyperparams(k_max=6, births="fitted")), relations, True),
        "IRM": (IRMGibbs(irm.Hyperparams(c_max=5)), relations, False),
        "IBP linear-Gaussian": (lg.CollapsedGibbs(lg.Hyperparams(k_max=6)), (jnp.asarray(X),), True),
        "Bayesian lasso": (bl.BayesianLassoGibbs(bl.Hyperparams()), (bl.as_data(X, X @ rng.normal(size=6)),), True),
    }


@pytest.mark.parametrize("name", ["LFRM, prior births", "LFRM, fitted births", "IRM", "IBP linear-Gaussian", "Bayesian lasso"])
def test_vectorised_samplers_make_their_lapack_calls_one_at_a_time(name):
    """Every sampler's step over two vectorised chains makes its LAPACK calls one after
    another (``lapack_order``): batched calls side by side can leave every CPU thread
    waiting (bayeskit.core.xla). The samplers that call none are named, so that one that
    starts to is checked too."""
    import jax
    from lapack_order import lapack_calls, one_at_a_time

    kernel, args, calls_lapack = _kernel_cases()[name]
    state = kernel.init(jax.random.split(jax.random.key(0), 2), 0, None, args, {})
    bodies = lapack_calls(jax.make_jaxpr(lambda s: kernel.sample(s, args, {}))(state))
    assert any(bodies) == calls_lapack, bodies
    assert one_at_a_time(bodies), bodies

"""Variable selection (Helgoy & Li, Tables 3-7): BLS against the Bayesian Lasso (Park &
Casella's Gibbs sampler) and the Lasso with 10-fold cross-validation.

* Simulation 1 (Tables 3, 4): Tibshirani's design, beta = (3, 1.5, 0, 0, 2, 0, 0, 0),
  corr(x_i, x_j) = 0.5^|i-j|, sigma in {1, 3, 5}, 50 training and 100 test points, 100
  repetitions: how often each coefficient is selected, the number of non-zero
  coefficients (NOC), the RMSE against the noise-free test targets, and the mean (sd) of
  the estimates.
* Simulations 2 and 3 (Table 5): grouped correlations, N = 50, P = 40 (3 groups of 5
  and 25 noise predictors) and P = 60 (5 groups of 10 and 10 noise), sigma = 1. The
  paper's coefficient vectors were lost from our copy; we put 3 on every grouped
  predictor and 0 on the noise ones (Zou & Hastie's Example 4, which Simulation 2
  follows), and report how many of each kind are selected.
* Diabetes (Tables 6, 7; Efron et al. 2004, shipped with scikit-learn, raw response),
  predictors standardised: the coefficients of the three methods with the Bayesian
  Lasso's 95% credible intervals on the whole data, and 100 random 70/30 splits with the
  test RMSE and NOC.

BLS is the sparse-Bayes engine with the identity (linear) design on centred data (a flat
prior on the intercept); every repetition of a setting runs as one vmapped fit, and so do
the Bayesian Lasso chains (15,000 draws after 3,000 burn-in, lambda^2 ~ Gamma(0.1, 0.1);
posterior means in the simulations and Table 7, medians in Table 6, as the paper). BLS sees
the three simulated designs padded with zero columns to P = 60, which the engine never
adds, so that they share one compiled program. The
paper's table values were not available to us; none are printed. Quick: 10 repetitions,
2,000 draws after 500.
"""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from bayeskit.core.executables import jit
from bayeskit.datasets import grouped_datasets, tibshirani_datasets
from bayeskit.experiments.common import print_table, write_json
from bayeskit.sparse import bayesian_lasso, sparse_bayes

NAME = "sparse_bayes_selection"
PAPER_NOTE = "Tables 3-7 of Helgoy & Li; their values were not available to us"
SIGMAS = (1.0, 3.0, 5.0)
GROUPED = {"P = 40": (3, 5, 25), "P = 60": (5, 10, 10)}
METHODS = ("BLS", "Bayesian Lasso", "Lasso")
MAX_ITER = 1000  # BLS on P = 60 needs up to about 3500 moves
SIMULATED_WIDTH = max(groups * size + noise for groups, size, noise in GROUPED.values())  # BLS pads the simulations to it


def _centre(X, y, X_test):
    mean_X, mean_y = X.mean(-2, keepdims=True), y.mean(-1, keepdims=True)
    return X - mean_X, y - mean_y, X_test - mean_X, mean_y


@jax.jit
def bls_batch(X, y, X_test):
    """BLS on stacked sets X (S, n, p), y (S, n): coefficients (S, p) (0 when pruned) and
    test predictions (S, n_test)."""
    Xc, yc, Xt, mean_y = _centre(X, y, X_test)
    hp = sparse_bayes.Hyperparams(prior="bls", max_basis=X.shape[-1])

    def one(Phi, t):
        r = sparse_bayes.fit(Phi, t, hp, max_iter=MAX_ITER, throw=False)
        return sparse_bayes.weights(r.state, sparse_bayes.as_data(Phi, t, gram=False).scale)

    coef = jax.vmap(one)(Xc, yc)
    return coef, jnp.einsum("snp,sp->sn", Xt, coef) + mean_y


def bls_padded(X, y, X_test, width: int):
    """:func:`bls_batch` with the predictors padded by zero columns to ``width`` (at least
    p), as NumPy arrays: the engine never adds a zero column (its ``alive`` mask), so the
    fit is the same to rounding and sets of several widths share one compiled program;
    the coefficients come back at X's width."""
    X, X_test = np.asarray(X), np.asarray(X_test)
    p = X.shape[-1]
    if width < p:
        raise ValueError(f"width must be at least the {p} predictors; got {width}.")
    pad = [(0, 0)] * (X.ndim - 1) + [(0, width - p)]
    coef, pred = bls_batch(jnp.asarray(np.pad(X, pad)), jnp.asarray(y), jnp.asarray(np.pad(X_test, pad)))
    return np.asarray(coef)[..., :p], np.asarray(pred)


def _gibbs_chains(keys, X, y, *, num_warmup: int, num_samples: int, keep_draws: bool):
    hp = bayesian_lasso.Hyperparams()

    def chain(key, X, y):
        data = bayesian_lasso.as_data(X, y)
        state = bayesian_lasso.init(key, data, hp)

        def sweep(carry, i):  # warm-up and sampling in one loop: one traced copy of the step
            s, total = carry
            s = bayesian_lasso.gibbs_step(s, data, hp)
            return (s, total + jnp.where(i >= num_warmup, s.beta, 0.0)), (s.beta if keep_draws else None)

        (_, total), draws = jax.lax.scan(sweep, (state, jnp.zeros_like(state.beta)), jnp.arange(num_warmup + num_samples))
        return total / num_samples, (draws[num_warmup:] if keep_draws else None)

    return jax.vmap(chain)(keys, X, y)


# jitted as the library's MCMC drivers are (bayeskit.core.mcmc)
_gibbs_program = jit(_gibbs_chains, static_argnames=("num_warmup", "num_samples", "keep_draws"))


def bayesian_lasso_batch(key, X, y, X_test, *, num_warmup: int, num_samples: int, keep_draws: bool = False):
    """One Gibbs chain per stacked set: posterior mean coefficients (S, p), test
    predictions with them, and with ``keep_draws`` the draws (S, num_samples, p)."""
    X, y, X_test = jnp.asarray(X), jnp.asarray(y), jnp.asarray(X_test)
    coef, draws = _gibbs_program(jax.random.split(key, X.shape[0]), X, y, num_warmup=num_warmup, num_samples=num_samples,
                                 keep_draws=keep_draws)
    _, _, Xt, mean_y = _centre(X, y, X_test)
    return coef, jnp.einsum("snp,sp->sn", Xt, coef) + mean_y, draws


def lasso_batch(X, y, X_test):
    """scikit-learn's LassoCV (10 folds) per set: coefficients and test predictions; more
    coordinate-descent sweeps than its default 1000, which the smallest penalties of the
    P = 60 design need."""
    from sklearn.linear_model import LassoCV

    fits = [LassoCV(cv=10, max_iter=10000).fit(Xs, ys) for Xs, ys in zip(X, y)]
    return np.stack([f.coef_ for f in fits]), np.stack([f.predict(Xt) for f, Xt in zip(fits, X_test)])


def run_methods(key, X, y, X_test, *, num_warmup, num_samples, bls_width=None) -> dict:
    """{method: (coefficients (S, p), test predictions (S, n_test), seconds)} on one setting;
    ``bls_width`` as :func:`bls_padded`'s ``width``."""
    out = {}
    for name in METHODS:
        t = time.perf_counter()
        if name == "BLS":
            coef, pred = bls_padded(X, y, X_test, bls_width or np.shape(X)[-1])
        elif name == "Bayesian Lasso":
            coef, pred, _ = jax.block_until_ready(bayesian_lasso_batch(key, X, y, X_test, num_warmup=num_warmup,
                                                                       num_samples=num_samples))
        else:
            coef, pred = lasso_batch(X, y, X_test)
        out[name] = (np.asarray(coef), np.asarray(pred), time.perf_counter() - t)
    return out


def _scores(coef, pred, f_test) -> dict:
    rmse = np.sqrt(np.mean((pred - f_test) ** 2, axis=-1))
    noc = np.count_nonzero(coef, axis=-1)
    return {"rmse_mean": float(rmse.mean()), "rmse_sd": float(rmse.std(ddof=1)), "noc_mean": float(noc.mean()),
            "noc_sd": float(noc.std(ddof=1)), "selected": np.mean(coef != 0, axis=0).tolist(),
            "coef_mean": coef.mean(0).tolist(), "coef_sd": coef.std(0, ddof=1).tolist()}


def simulation_1(key, n_sets, seed, **mcmc) -> tuple[dict, list, list]:
    results, table3, table4 = {}, [], []
    for i, sigma in enumerate(SIGMAS):
        X, y, X_test, f_test, beta = tibshirani_datasets(n_sets, sigma, seed=seed + i)
        runs = run_methods(jax.random.fold_in(key, i), X, y, X_test, bls_width=SIMULATED_WIDTH, **mcmc)
        for name, (coef, pred, seconds) in runs.items():
            r = results[f"sigma {sigma:g} {name}"] = {**_scores(coef, pred, f_test), "seconds": seconds}
            table3.append([f"{sigma:g}", name, *(f"{100 * s:.0f}" for s in r["selected"]), f"{r['noc_mean']:.2f}",
                           f"{r['rmse_mean']:.3f} ({r['rmse_sd']:.3f})"])
            table4.append([f"{sigma:g}", name, *(f"{m:.2f} ({s:.2f})" for m, s in zip(r["coef_mean"], r["coef_sd"]))])
    return results, table3, table4


def simulation_grouped(key, n_sets, seed, **mcmc) -> tuple[dict, list]:
    results, rows = {}, []
    for i, (label, design) in enumerate(GROUPED.items()):
        X, y, X_test, f_test, beta = grouped_datasets(n_sets, *design, seed=seed + 10 + i)
        runs = run_methods(jax.random.fold_in(key, 10 + i), X, y, X_test, bls_width=SIMULATED_WIDTH, **mcmc)
        for name, (coef, pred, seconds) in runs.items():
            r = _scores(coef, pred, f_test)
            on = coef != 0
            r.update(true_selected=float(on[:, beta != 0].sum(1).mean()), false_selected=float(on[:, beta == 0].sum(1).mean()),
                     seconds=seconds)
            results[f"{label} {name}"] = r
            rows.append([label, name, f"{r['rmse_mean']:.3f} ({r['rmse_sd']:.3f})", f"{r['noc_mean']:.1f} ({r['noc_sd']:.1f})",
                         f"{r['true_selected']:.1f} / {np.count_nonzero(beta)}",
                         f"{r['false_selected']:.1f} / {np.count_nonzero(beta == 0)}"])
    return results, rows


def load_diabetes_standardised():
    """Diabetes (442 x 10, raw response) with the predictors standardised; (X, y, names)."""
    from sklearn.datasets import load_diabetes

    d = load_diabetes(scaled=False)
    X = (d.data - d.data.mean(0)) / d.data.std(0)
    return X, d.target.astype(float), list(d.feature_names)


def diabetes_coefficients(key, *, num_warmup, num_samples) -> tuple[dict, list]:
    """Table 6: BLS, Bayesian Lasso posterior medians with 95% intervals, and the Lasso."""
    X, y, names = load_diabetes_standardised()
    bls_coef, _ = bls_batch(jnp.asarray(X[None]), jnp.asarray(y[None]), jnp.asarray(X[None]))
    _, _, draws = bayesian_lasso_batch(key, X[None], y[None], X[None], num_warmup=num_warmup, num_samples=num_samples,
                                       keep_draws=True)
    draws = np.asarray(draws[0])
    median, (low, high) = np.median(draws, 0), np.quantile(draws, [0.025, 0.975], axis=0)
    lasso_coef, _ = lasso_batch(X[None], y[None], X[None])
    bls_coef, lasso_coef = np.asarray(bls_coef[0]), lasso_coef[0]
    inside = (bls_coef >= low) & (bls_coef <= high)
    rows = [[n, f"{b:.2f}", f"{m:.2f} [{lo:.2f}, {hi:.2f}]", f"{l:.2f}", "yes" if i else "no"]
            for n, b, m, lo, hi, l, i in zip(names, bls_coef, median, low, high, lasso_coef, inside)]
    result = {"names": names, "BLS": bls_coef.tolist(), "Bayesian Lasso median": median.tolist(),
              "Bayesian Lasso 95%": np.stack([low, high], 1).tolist(), "Lasso": lasso_coef.tolist(),
              "BLS inside the intervals": int(inside.sum()),
              "same zeros, BLS and Lasso": bool(np.array_equal(bls_coef == 0, lasso_coef == 0))}
    return result, rows


def diabetes_split_data(n_splits: int, seed: int, train_fraction: float = 0.7):
    """Random train/test splits of diabetes, the predictors standardised on each training
    part: stacked (X (K, n, p), y (K, n), X_test (K, n_test, p), y_test (K, n_test))."""
    X_all, y_all, _ = load_diabetes_standardised()
    rng = np.random.default_rng(seed)
    n_train = int(round(train_fraction * len(y_all)))
    perms = np.stack([rng.permutation(len(y_all)) for _ in range(n_splits)])
    X, y = X_all[perms[:, :n_train]], y_all[perms[:, :n_train]]
    X_test, y_test = X_all[perms[:, n_train:]], y_all[perms[:, n_train:]]
    mean, sd = X.mean(1, keepdims=True), X.std(1, keepdims=True)
    return (X - mean) / sd, y, (X_test - mean) / sd, y_test


def diabetes_splits(key, n_splits, seed, **mcmc) -> tuple[dict, list]:
    """Table 7: random 70/30 splits (:func:`diabetes_split_data`)."""
    X, y, X_test, y_test = diabetes_split_data(n_splits, seed)
    results, rows = {}, []
    for name, (coef, pred, seconds) in run_methods(key, X, y, X_test, **mcmc).items():
        r = _scores(coef, pred, y_test)
        r["seconds"] = seconds
        results[name] = r
        rows.append([name, f"{r['rmse_mean']:.2f} ({r['rmse_sd']:.2f})", f"{r['noc_mean']:.2f} ({r['noc_sd']:.2f})",
                     f"{seconds / n_splits:.3f}"])
    return results, rows


def run(out_dir, quick: bool = False, seed: int = 0) -> dict:
    n_sets = 10 if quick else 100
    mcmc = {"num_warmup": 500, "num_samples": 2000} if quick else {"num_warmup": 3000, "num_samples": 15000}
    key = jax.random.key(seed)
    sim1, table3, table4 = simulation_1(jax.random.fold_in(key, 1), n_sets, seed, **mcmc)
    print_table(f"\nSimulation 1 (Table 3): {n_sets} repetitions; % of repetitions selecting each coefficient, NOC, "
                "RMSE (sd) against the noise-free test targets",
                ["sigma", "method", *(f"b{j + 1}" for j in range(8)), "NOC", "RMSE"], table3, paper=PAPER_NOTE)
    print_table("\nSimulation 1 (Table 4): mean (sd) of the estimates; truth (3, 1.5, 0, 0, 2, 0, 0, 0)",
                ["sigma", "method", *(f"b{j + 1}" for j in range(8))], table4, paper=PAPER_NOTE)
    grouped, table5 = simulation_grouped(jax.random.fold_in(key, 2), n_sets, seed, **mcmc)
    print_table(f"\nSimulations 2 and 3 (Table 5): N = 50, sigma = 1, {n_sets} repetitions",
                ["design", "method", "RMSE", "NOC", "non-zero selected", "zero selected"], table5, paper=PAPER_NOTE)
    coefficients, table6 = diabetes_coefficients(jax.random.fold_in(key, 3), **mcmc)
    print_table("\nDiabetes (Table 6): coefficients on standardised predictors; Bayesian Lasso posterior median "
                "[95% interval]", ["predictor", "BLS", "Bayesian Lasso", "Lasso (CV)", "BLS inside"], table6, paper=PAPER_NOTE)
    splits, table7 = diabetes_splits(jax.random.fold_in(key, 4), n_sets, seed, **mcmc)
    print_table(f"\nDiabetes (Table 7): {n_sets} random 70/30 splits; test RMSE (sd), NOC (sd), seconds per fit",
                ["method", "RMSE", "NOC", "s/fit"], table7, paper=PAPER_NOTE)
    payload = {"experiment": NAME, "quick": quick, "seed": seed, "n_sets": n_sets, "mcmc": mcmc,
               "simulation_1": sim1, "simulations_2_3": grouped, "diabetes_coefficients": coefficients,
               "diabetes_splits": splits}
    write_json(out_dir, NAME, payload)
    return payload

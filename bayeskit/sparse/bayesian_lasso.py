"""The Bayesian Lasso (Park & Casella, "The Bayesian Lasso", JASA 2008) by their Gibbs
sampler and by numpyro's NUTS on the same hierarchy.

Notation: y (n,) centred and X (n, p) with centred columns (the intercept mu has a flat
prior and is integrated out, which is where n - 1 comes from); the hierarchy is

    y | beta, sigma^2      ~ N(X beta, sigma^2 I_n)      (mu integrated out)
    beta_j | tau_j^2, sigma^2 ~ N(0, sigma^2 tau_j^2)
    tau_j^2 | lambda       ~ Exp(rate lambda^2 / 2)     (so beta_j | sigma^2 is Laplace)
    sigma^2                ~ 1 / sigma^2                 (improper)
    lambda^2               ~ Gamma(r, delta)             (the paper's r = delta = 0.1... here
                                                           ``lambda_prior``)

and the Gibbs conditionals (paper, Section 2 and 3.1) are, with A = X'X + D_tau^-1,

    beta | .      ~ N(A^-1 X'y, sigma^2 A^-1)
    sigma^2 | .   ~ InvGamma((n - 1 + p) / 2, ||y - X beta||^2 / 2 + beta' D_tau^-1 beta / 2)
    1/tau_j^2 | . ~ InverseGaussian(mean sqrt(lambda^2 sigma^2 / beta_j^2), shape lambda^2)
    lambda^2 | .  ~ Gamma(p + r, sum_j tau_j^2 / 2 + delta).

Numerics. When p >= n, X'X is singular and the posterior has a heavy tail towards
sigma^2 -> 0 with tau^2 -> infinity (the data interpolated; lambda^2's Gamma(0.1, 0.1)
prior barely resists): chains reach sigma^2 ~ 1e-12 and 1/tau^2 ~ 1e-15 within 15,000
scans, where cond(A) passes 1 / eps and a Cholesky of A breaks down. The beta draw
therefore never forms A: with X = U S V' (thin SVD, once) the draw solves the ridge least
squares problem [S V'; D_tau^-1/2] beta ~ [U'y; 0] by a QR factorisation, whose R has
R'R = A but only the square root of A's condition number. The inverse Gaussian draw is
written without cancellation or overflow (``inverse_gaussian``).

Scale. The posterior is equivariant: with X / a and y / c and lambda^2's prior rate delta
times a^2, the draws are those of (X, y) with beta divided by c / a, sigma^2 by c^2, tau^2 by
1 / a^2 and lambda^2 by a^2. :func:`sample_posterior` samples on that unit scale (a, c
powers of two near the scales of X and y) and
puts the draws back: NUTS, whose initial points and first step size are set for the unit
scale, otherwise settles on data at 1e8 with sigma^2 at 1e-8 of its posterior. The Gibbs draws
are exactly those of the data as given (the scales are powers of two); NUTS adapts on the
rescaled data, so its draws differ from a run on the data as given (standardised data have
a = 1/2) by Monte Carlo error only.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from bayeskit.core import mcmc, sampling, validation
from bayeskit.core import progress as _progress
from bayeskit.core.device import real_dtype
from bayeskit.core.mcmc import VectorisedKernel, run_chains
from bayeskit.core.scaling import check_representable, unit_scale


class Hyperparams(eqx.Module):
    """``lambda_prior`` (shape r, rate delta) of the Gamma prior on lambda^2."""

    lambda_prior: tuple = (0.1, 0.1)


class Data(eqx.Module):
    """Centred design and response: ``X`` (n, p), ``y`` (n,), and the reduced least-squares
    problem ``SVt`` = S V' (k, p), ``Uty`` = U'y (k,), k = min(n, p), from X = U S V'."""

    X: Float[Array, "n p"]
    y: Float[Array, " n"]
    SVt: Float[Array, "k p"]
    Uty: Float[Array, " k"]


class State(eqx.Module):
    beta: Float[Array, " p"]
    sigma2: Float[Array, ""]
    inv_tau2: Float[Array, " p"]
    lambda2: Float[Array, ""]
    key: Array

    @property
    def sample(self) -> dict:
        return {"beta": self.beta, "sigma2": self.sigma2, "tau2": 1.0 / self.inv_tau2, "lambda2": self.lambda2}


@jax.jit
def as_data(X, y) -> Data:
    """The centred problem and its SVD, in X's floating dtype (integer or boolean X in the
    default float dtype, y with it)."""
    X = jnp.asarray(X)
    X = X.astype(real_dtype(X.dtype))
    y = jnp.asarray(y, X.dtype)
    Xc, yc = X - X.mean(0), y - y.mean()
    U, s, Vt = jnp.linalg.svd(Xc, full_matrices=False)
    return Data(Xc, yc, s[:, None] * Vt, U.T @ yc)


def inverse_gaussian(key, mean, shape):
    """Draws from the inverse Gaussian IG(mean, shape) by Michael, Schucany & Haas (1976).

    Their smaller root x = mean + mean (w - sqrt(w (4 shape + w))) / (2 shape), w = mean nu^2,
    cancels (and w overflows) when w >> shape; the same root is written as
    x = mean * 4 phi / (|nu| + sqrt(nu^2 + 4 phi))^2 with phi = shape / mean, and the
    larger root mean^2 / x as mean / (x / mean): positive and finite for any positive
    mean and shape."""
    k_n, k_u = jax.random.split(key)
    dtype = jnp.result_type(mean, shape)
    nu = jnp.abs(jax.random.normal(k_n, jnp.shape(mean), dtype))
    phi = shape / mean
    ratio = 4.0 * phi / (nu + jnp.sqrt(nu**2 + 4.0 * phi)) ** 2  # x / mean, in (0, 1]
    u = jax.random.uniform(k_u, jnp.shape(mean), dtype)
    return jnp.where(u <= 1.0 / (1.0 + ratio), mean * ratio, mean / ratio)


def draw_beta(key, data: Data, inv_tau2, sigma2):
    """beta ~ N(A^-1 X'y, sigma^2 A^-1), A = X'X + D_tau^-1, without forming A: the QR
    factorisation of [S V', U'y; D_tau^-1/2, 0] gives [R, c; 0, d] with R'R = A and
    R^-1 c = A^-1 X'y, so beta = R^-1 (c + sigma z), z ~ N(0, I)."""
    p = inv_tau2.shape[0]
    top = jnp.concatenate([data.SVt, data.Uty[:, None]], axis=1)
    bottom = jnp.concatenate([jnp.diag(jnp.sqrt(inv_tau2)), jnp.zeros((p, 1), inv_tau2.dtype)], axis=1)
    R = jnp.linalg.qr(jnp.concatenate([top, bottom]), mode="r")
    z = jax.random.normal(key, (p,), inv_tau2.dtype)
    return jax.scipy.linalg.solve_triangular(R[:p, :p], R[:p, p] + jnp.sqrt(sigma2) * z, lower=False)


def gibbs_step(state: State, data: Data, hparams: Hyperparams) -> State:
    """One scan of the four conditionals (module docstring)."""
    n, p = data.X.shape
    key, k_beta, k_gamma, k_tau = jax.random.split(state.key, 4)
    r, delta = (jnp.asarray(v, data.X.dtype) for v in hparams.lambda_prior)  # the data's dtype, float32 too
    # the Gamma variates of sigma^2 and lambda^2 have fixed shapes: both from one sampler call
    g_sigma, g_lambda = sampling.gamma(k_gamma, jnp.stack([jnp.asarray(0.5 * (n - 1 + p), data.X.dtype), p + r]),
                                       dtype=data.X.dtype)
    beta = draw_beta(k_beta, data, state.inv_tau2, state.sigma2)
    resid = data.y - data.X @ beta
    rate = 0.5 * (resid @ resid + beta @ (state.inv_tau2 * beta))
    sigma2 = rate / g_sigma
    tiny = jnp.finfo(data.X.dtype).tiny
    ig_mean = jnp.sqrt(state.lambda2 * sigma2 / jnp.maximum(beta**2, tiny))
    inv_tau2 = jnp.maximum(inverse_gaussian(k_tau, ig_mean, state.lambda2), tiny)
    lambda2 = g_lambda / (0.5 * jnp.sum(1.0 / inv_tau2) + delta)
    return State(beta, sigma2, inv_tau2, lambda2, key)


def init(key, data: Data, hparams: Hyperparams) -> State:
    """Start at the ridge-like least-squares fit, sigma^2 from its residuals, tau^2 = 1 and
    lambda^2 at p sqrt(sigma^2) / sum |beta| (the paper's suggestion, squared)."""
    n, p = data.X.shape
    XtX = data.SVt.T @ data.SVt
    beta = jnp.linalg.solve(XtX + 1e-6 * jnp.trace(XtX) / p * jnp.eye(p, dtype=data.X.dtype), data.SVt.T @ data.Uty)
    resid = data.y - data.X @ beta
    sigma2 = jnp.maximum(resid @ resid / max(n - p - 1, 1), 1e-12 * (data.y @ data.y) / n + jnp.finfo(data.X.dtype).tiny)
    lambda2 = (p * jnp.sqrt(sigma2) / jnp.maximum(jnp.sum(jnp.abs(beta)), jnp.finfo(data.X.dtype).tiny)) ** 2
    return State(beta, sigma2, jnp.ones(p, data.X.dtype), lambda2, key)


class BayesianLassoGibbs(VectorisedKernel):
    """Park & Casella's Gibbs sampler as a numpyro kernel (chains vectorised)."""

    sample_stats = ()

    def __init__(self, hparams: Hyperparams | None = None, data_per_chain: bool = False):
        super().__init__(Hyperparams() if hparams is None else hparams, data_per_chain)

    def init_one(self, key, init_params, data):
        return init(key, data, self.hparams)

    def step_one(self, state, data):
        return gibbs_step(state, data, self.hparams)


def model(X, y, hparams: Hyperparams):
    """The same hierarchy for numpyro's NUTS: beta non-centred (beta = sigma tau z),
    sigma^2 with its 1/sigma^2 prior as a flat density on log sigma^2, and mu integrated
    out (the n - 1 in the likelihood of the centred data)."""
    import numpyro
    import numpyro.distributions as dist

    n, p = X.shape
    r, delta = hparams.lambda_prior
    lambda2 = numpyro.sample("lambda2", dist.Gamma(r, delta))
    tau2 = numpyro.sample("tau2", dist.Exponential(lambda2 / 2.0).expand([p]).to_event(1))
    log_sigma2 = numpyro.sample("log_sigma2", dist.ImproperUniform(dist.constraints.real, (), ()))
    sigma2 = numpyro.deterministic("sigma2", jnp.exp(log_sigma2))
    z = numpyro.sample("z", dist.Normal(jnp.zeros(p, X.dtype), 1.0).to_event(1))
    beta = numpyro.deterministic("beta", jnp.sqrt(sigma2 * tau2) * z)
    resid = y - X @ beta
    numpyro.factor("likelihood", -0.5 * (n - 1) * log_sigma2 - 0.5 * resid @ resid / sigma2)


def check_problem(X, y):
    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0]:
        raise ValueError(f"X must be (n, p) and y (n,) with the same n; got {X.shape} and {y.shape}.")
    if X.shape[0] < 3:
        raise ValueError(f"at least three samples are needed; got {X.shape[0]}.")
    for name, a in (("X", X), ("y", y)):
        if a.dtype.kind not in "biuf":
            raise ValueError(f"{name} must be numeric; got dtype {a.dtype}.")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} has {int(np.sum(~np.isfinite(a)))} non-finite values.")
    if np.all(X == X[:1]):  # np.ptp refuses booleans
        raise ValueError("every column of X is constant: after centring there is nothing to regress on.")
    if np.all(y == y[0]):
        raise ValueError(f"y is constant ({y[0]} in every sample): the posterior of the noise variance sigma^2 under "
                         "its prior 1/sigma^2 is improper when every residual can be zero; there is nothing to regress.")


def unit_problem(X, y, hparams: Hyperparams) -> tuple[np.ndarray, np.ndarray, Hyperparams, dict]:
    """X / a, y / c and the hyperparameters with lambda^2's rate times a^2 (module docstring,
    Scale), on the host in the data's own precision (before a cast to JAX's dtype can
    overflow), with the factors {beta: c / a, sigma2: c^2, tau2: 1 / a^2, lambda2: a^2} that
    put each draw back. A rate whose counterpart leaves X's dtype is refused with the scale."""
    X, y = np.asarray(X), np.asarray(y)
    dtype = real_dtype(X.dtype)
    X = X if X.dtype.kind == "f" else X.astype(np.float64)
    X_unit, a = unit_scale(X)
    y_unit, c = unit_scale(y.astype(X.dtype)[:, None])
    r, delta = (float(v) for v in hparams.lambda_prior)
    check_representable("the rate of lambda_prior", delta * a * a, a, dtype,
                        "the Laplace prior's scale is set in X's units: divide X by a constant nearer its scale")
    back = {"beta": c / a, "sigma2": c * c, "tau2": 1 / (a * a), "lambda2": a * a}
    return X_unit.astype(dtype), y_unit[:, 0].astype(dtype), Hyperparams(lambda_prior=(r, delta * a * a)), back


def sample_posterior(key, X, y, hparams: Hyperparams | None = None, *, method: str = "gibbs", num_warmup: int = 3000,
                     num_samples: int = 15000, num_chains: int = 1, progress: bool = False) -> dict:
    """Posterior draws (chain, draw, ...) of beta, sigma2, tau2 and lambda2, by the Gibbs
    sampler or NUTS (the paper's 3,000 burn-in and 15,000 kept draws by default), sampled on
    the unit scale and put back (module docstring, Scale), in X's floating dtype. The
    intercept's draws are ``mean(y) - mean(X) beta`` plus its own noise; not returned.
    ``progress`` shows a bar over the transitions (off under the ``CI`` environment variable)."""
    hparams = hparams or Hyperparams()
    check_problem(X, y)
    if method not in ("gibbs", "nuts"):
        raise ValueError(f"method must be 'gibbs' or 'nuts'; got {method!r}.")
    if np.shape(hparams.lambda_prior) != (2,) or not all(np.isfinite(v) and v > 0 for v in np.asarray(hparams.lambda_prior, float)):
        raise ValueError(f"lambda_prior must be a pair (shape r, rate delta) of positive numbers; got {hparams.lambda_prior!r}.")
    validation.check_int_in("num_warmup", num_warmup, 0)
    validation.check_int_in("num_samples", num_samples, 1)
    validation.check_int_in("num_chains", num_chains, 1)
    X_unit, y_unit, hparams_unit, back = unit_problem(X, y, hparams)
    draws = sample_unit(key, as_data(X_unit, y_unit), hparams_unit, method=method, num_warmup=num_warmup,
                        num_samples=num_samples, num_chains=num_chains, progress=progress)
    scaled = {name: np.asarray(v, np.float64) * back[name] for name, v in draws.items()}  # a factor alone may leave the dtype
    out = {name: jnp.asarray(v.astype(draws[name].dtype)) for name, v in scaled.items()}
    overflowed = [name for name in out if np.any(np.isfinite(scaled[name]) & ~np.isfinite(np.asarray(out[name])))]
    if overflowed:
        raise ValueError(f"the draws of {', '.join(overflowed)} on data at scales {1 / np.sqrt(back['tau2']):.3g} (X) and "
                         f"{np.sqrt(back['sigma2']):.3g} (y) leave {X_unit.dtype.name}; fit in float64 (jax_enable_x64), "
                         "or divide X and y by constants nearer their scales.")
    return out


def sample_unit(key, data: Data, hparams: Hyperparams, *, method: str, num_warmup: int, num_samples: int, num_chains: int,
                progress: bool) -> dict:
    """The draws of :func:`sample_posterior` on a problem already on the unit scale (the
    output of :func:`unit_problem`, through :func:`as_data`), not put back and with no checks:
    for a caller that has made both (the estimator, which puts its draws back in float64)."""
    if method == "gibbs":
        return run_chains(BayesianLassoGibbs(hparams), key, data, num_warmup=num_warmup, num_samples=num_samples,
                          num_chains=num_chains, progress=progress)
    from numpyro.infer import MCMC, NUTS

    mcmc = MCMC(NUTS(model), num_warmup=num_warmup, num_samples=num_samples, num_chains=num_chains,
                chain_method="vectorized", progress_bar=_progress.enabled(progress))
    mcmc.run(key, data.X, data.y, hparams)
    s = mcmc.get_samples(group_by_chain=True)
    # numpyro draws its unconstrained sites in the default dtype (float64 under x64): in X's, as Gibbs's
    return {name: s[name].astype(data.X.dtype) for name in ("beta", "sigma2", "tau2", "lambda2")}


def to_inference_data(samples: dict):
    """ArviZ ``InferenceData`` of the draws of :func:`sample_posterior` (chain, draw, ...),
    with BayesianLassoGibbs's sampler statistics apart; needs ``arviz``."""
    return mcmc.to_inference_data(samples, BayesianLassoGibbs.sample_stats, log_joint=None)

__all__ = ["Hyperparams", "Data", "State", "as_data", "unit_problem", "inverse_gaussian", "draw_beta", "gibbs_step", "init", "model",
           "sample_posterior", "sample_unit", "BayesianLassoGibbs", "to_inference_data"]

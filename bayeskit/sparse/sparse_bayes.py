"""Sparse Bayesian regression on one fast marginal-likelihood engine (Tipping & Faul,
"Fast marginal likelihood maximisation for sparse Bayesian models", AISTATS 2003), with
four priors on the weight variances: the RVM (Tipping 2001), FLAP and FLAP-sigma (Babacan,
Molina & Katsaggelos 2010, Laplace prior) and BLS (Helgoy & Li 2019, the Bayesian Lasso's
Laplace prior conditioned on the noise).

Notation: y (N,) targets, Phi (N, M) the basis (kernel columns at the training inputs,
optionally a bias column, or the raw features for variable selection), normalised to unit
columns inside the engine; w ~ N(0, diag(gamma)) the weights, gamma_m the prior variance
of weight m (gamma_m = 1 / alpha_m of Tipping; 0 means "out of the model"); beta = 1 /
sigma^2 the noise precision. The active set A holds the bases with gamma_m > 0; with
C = sigma^2 I + Phi_A Gamma_A Phi_A' the log evidence is

    L = -1/2 [N log 2 pi + log |C| + y' C^-1 y] - rho / 2 sum_A gamma_m,

where rho is 0 for the RVM, lambda for FLAP (gamma_m ~ Exp(lambda / 2)) and lambda beta
for BLS (w_m | sigma^2 ~ N(0, sigma^2 g_m) with g_m ~ Exp(lambda / 2), so gamma_m =
sigma^2 g_m ~ Exp(lambda beta / 2)). For one basis m, with the others fixed, L depends on
gamma_m through (Tipping & Faul, eq. 7, in variances)

    l(gamma) = -1/2 [log(1 + gamma s_m) - q_m^2 gamma / (1 + gamma s_m) + rho gamma],

s_m = phi_m' C_-m^-1 phi_m, q_m = phi_m' C_-m^-1 y (C without basis m), maximised at

    gamma = 2 (theta - rho) / (s [(s + 2 rho) + sqrt(s^2 + 4 rho q^2)]) if theta = q^2 - s > rho,

else 0 (out): the stable root of the quadratic rho s^2 gamma^2 + (s^2 + 2 rho s) gamma +
(s - q^2 + rho) = 0, which tends to the RVM's theta / s^2 as rho -> 0.

Each move computes S_m = phi_m' C^-1 phi_m and Q_m = phi_m' C^-1 y for every basis
(s = S / (1 - gamma S), q = Q / (1 - gamma S) in the model), takes the single addition,
re-estimation or deletion that raises L most (deletions first when any helps, as
Tipping's SparseBayes), and updates the posterior Sigma, mu of the active weights and
S, Q by the rank-one formulas of Tipping & Faul's appendix. An iteration is ``moves``
moves (10) followed by the noise update, after which all statistics are recomputed from
scratch so that nothing drifts (FLAP, without noise updates, recomputes them alone).
Noise: the RVM and FLAP-sigma use MacKay's update beta = (N - sum_A (1 -
Sigma_mm / gamma_m)) / ||y - Phi mu||^2 (kept only when it raises L); BLS maximises over
sigma^2 with g fixed, sigma^2 = y'(y - Phi mu) / N; FLAP keeps its initial noise. lambda
(FLAP, FLAP-sigma, BLS) is re-estimated after every move as Babacan's code does, lambda =
2 (|A| + nu - 1) / (sum_A g_m + 2 delta) with (nu, delta) the Gamma hyperprior (default
0, 0) and g = gamma (FLAP) or gamma beta (BLS). Because lambda grows with |A|, a basis
whose addition raises lambda can be deleted again at once and re-added forever; as in
Babacan's code, a basis deleted under a re-estimated lambda is not added again (the RVM,
like SparseBayes, may re-add).

Shapes are static: at most ``max_basis`` active bases live in slots of Sigma and mu, so
the fit jits and vmaps over stacked data sets. A fit that fills every slot is flagged
(``saturated``). Bases nearly parallel to an active one (|phi_m' phi_a| > 1 -
``align_tol``) are not added, nor those so nearly in the span of the active ones that S_m
< sqrt(eps) beta: S_m = beta - beta^2 phi_m' Phi_A Sigma Phi_A' phi_m is then a difference
of nearly equal numbers and holds no correct digit in float32. The noise precision is
capped at ``max_precision`` / var(y).

The kernel design matrices live in :mod:`bayeskit.sparse.bases`, the evidence algebra
(l(gamma) and its maximiser, s and q, the posterior and L from scratch, MacKay's noise
re-estimate) in :mod:`bayeskit.sparse.evidence`; this module holds the engine (its types,
the moves, the sweep, the fit and reading it) and re-exports their public names.
"""

from __future__ import annotations

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from bayeskit.core import loop as _loop
from bayeskit.core import validation
from bayeskit.core.chunks import map_blocks
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.sparse.bases import KERNELS, cross_row, design, unit_basis
from bayeskit.sparse.evidence import basis_objective, leave_one_out, log_evidence, noise_reestimate, optimal_gamma, posterior, residual_terms, rho_of

PRIORS = ("rvm", "flap", "flap_sigma", "bls")
_ADD, _REESTIMATE, _DELETE = 0, 1, 2
GRAM_MAX = 512  # keep Phi' Phi for at most this many bases (a vmapped fit then never multiplies by Phi)


class Hyperparams(eqx.Module):
    """Settings of the engine.

    Parameters
    ----------
    prior : {"rvm", "flap", "flap_sigma", "bls"}
        The prior on the weights (module docstring); FLAP keeps the initial noise.
    max_basis : int
        Slots for active bases (static); a fit that fills them is flagged ``saturated``.
    noise_init : float
        Initial noise variance as a fraction of var(y) (0.01: sd 0.1 std(y), as SparseBayes).
    lam : float
        Initial (or, with ``estimate_lambda=False``, fixed) lambda.
    estimate_lambda : bool
        Re-estimate lambda after every move (FLAP, FLAP-sigma, BLS).
    lambda_prior : (nu, delta) of the Gamma hyperprior on lambda; (0, 0) is Babacan's.
    align_tol : a basis with |cosine| > 1 - align_tol to an active one is not added.
    max_precision : the noise precision is at most max_precision / var(y).
    min_delta_log_gamma, gain_tol, min_delta_log_beta : converged when the best move is
        a re-estimation that changes log gamma by less than ``min_delta_log_gamma``
        (SparseBayes' 1e-3) or no move raises L by more than ``gain_tol`` nats, and the
        last noise update changed log beta by less than ``min_delta_log_beta``. Near the
        optimum two correlated bases can trade variance, and the noise follow them, for
        hundreds of moves worth 1e-5 nats each; the tolerances stop that creep.
    moves : basis moves per iteration (static); each iteration ends with the noise update,
        or with FLAP a recomputation of Sigma, mu, S, Q and L from scratch.
    """

    prior: str = eqx.field(static=True, default="rvm")
    max_basis: int = eqx.field(static=True, default=64)
    noise_init: float = 0.01
    lam: float = 0.0
    estimate_lambda: bool = eqx.field(static=True, default=True)
    lambda_prior: tuple = (0.0, 0.0)
    align_tol: float = 1e-3
    max_precision: float = 1e6
    min_delta_log_gamma: float = 1e-3
    gain_tol: float = 1e-4
    min_delta_log_beta: float = 1e-4
    moves: int = eqx.field(static=True, default=10)

    @property
    def estimates_noise(self) -> bool:
        return self.prior in ("rvm", "flap_sigma", "bls")

    @property
    def uses_lambda(self) -> bool:
        return self.prior != "rvm"


class Data(eqx.Module):
    """The problem with unit-norm basis columns, kept implicit. ``Phi`` (N, M) is the basis
    as given and ``inv_scale`` (M,) one over its column norms (zero on zero columns, which
    ``alive`` excludes from ever being added): the engine's Phi is Phi diag(inv_scale),
    never stored as a second N x M array (:func:`unit_basis` forms it). ``scale`` (M,) the
    column norms (one on zero columns), ``y`` (N,), ``Phi_y`` = Phi' y, ``y_var`` the
    variance scale of y (var(y), or mean(y^2) when y is constant), ``gram`` = Phi' Phi
    when M is at most ``GRAM_MAX`` (else the row an addition needs is computed then)."""

    Phi: Float[Array, "n m"]
    alive: Bool[Array, " m"]
    scale: Float[Array, " m"]
    inv_scale: Float[Array, " m"]
    y: Float[Array, " n"]
    Phi_y: Float[Array, " m"]
    y_var: Float[Array, ""]
    gram: Float[Array, "m m"] | None = None


class State(eqx.Module):
    """Engine state. ``gamma`` (M,) prior variances (0: out); ``slot`` (M,) the slot of
    each active basis (``max_basis`` when out); ``basis`` (max_basis,) the basis in each
    slot and ``used`` which slots hold one; ``Sigma``, ``mu`` the posterior of the slot
    weights (zero on free slots); ``G`` (max_basis, M) the rows phi_slot' Phi; ``S``, ``Q`` (M,);
    ``beta`` the noise precision; ``lam`` lambda; ``deleted`` the bases barred from
    re-entry; ``log_evidence`` L, carried by the gains of the moves and recomputed with
    the statistics; ``converged``, ``saturated`` flags."""

    gamma: Float[Array, " m"]
    slot: Int[Array, " m"]
    basis: Int[Array, " k"]
    used: Bool[Array, " k"]
    Sigma: Float[Array, "k k"]
    mu: Float[Array, " k"]
    G: Float[Array, "k m"]
    S: Float[Array, " m"]
    Q: Float[Array, " m"]
    beta: Float[Array, ""]
    lam: Float[Array, ""]
    deleted: Bool[Array, " m"]
    log_evidence: Float[Array, ""]
    iteration: Int[Array, ""]
    converged: Bool[Array, ""]
    saturated: Bool[Array, ""]


# ------------------------------------------------------------- data and evidence


@functools.partial(jax.jit, static_argnames="gram")
def as_data(Phi, y, *, gram: bool = True) -> Data:
    """Normalise the basis columns and cache Phi' y, and the unit-column Gram matrix when
    M is at most ``GRAM_MAX`` and ``gram`` (reading a fit, :func:`weights` needs only
    ``scale``: ``gram=False`` skips the M x M product)."""
    Phi = jnp.asarray(Phi)
    if not jnp.issubdtype(Phi.dtype, jnp.floating):  # an integer or boolean basis is valid input
        Phi = Phi.astype(jnp.result_type(float))
    y = jnp.asarray(y, Phi.dtype)
    norm = jnp.sqrt(jnp.sum(Phi * Phi, axis=0))
    alive = norm > jnp.finfo(Phi.dtype).tiny ** 0.5
    scale = jnp.where(alive, norm, 1.0)
    inv_scale = jnp.where(alive, 1.0 / scale, 0.0)
    var = jnp.var(y)
    mean_sq = jnp.mean(y * y)
    y_var = jnp.where(var > 1e-12 * mean_sq, var, jnp.where(mean_sq > 0, mean_sq, 1.0))
    G = (Phi.T @ Phi) * jnp.outer(inv_scale, inv_scale) if gram and Phi.shape[1] <= GRAM_MAX else None
    return Data(Phi, alive, scale, inv_scale, y, (y @ Phi) * inv_scale, y_var, G)


def objective(state: State, data: Data, hparams: Hyperparams) -> Array:
    """The log evidence L (module docstring), computed from scratch."""
    _, mu, logdet_Sigma = posterior(state, data)
    return log_evidence(state, data, hparams, mu, logdet_Sigma)


def refresh(state: State, data: Data, hparams: Hyperparams) -> State:
    """Sigma, mu, S, Q and L recomputed from gamma, beta and the slots."""
    Sigma, mu, logdet_Sigma = posterior(state, data)
    G = state.G  # free slots have zero rows
    S = state.beta * data.alive - state.beta**2 * jnp.sum((Sigma @ G) * G, axis=0)
    Q = state.beta * (data.Phi_y - mu @ G)
    L = log_evidence(state, data, hparams, mu, logdet_Sigma)
    return eqx.tree_at(lambda s: (s.Sigma, s.mu, s.S, s.Q, s.log_evidence), state, (Sigma, mu, S, Q, L))


# --------------------------------------------------------------------- the three moves


def _move(state: State, data: Data, m, action, gamma_new, ok) -> State:
    """Add, re-estimate or delete basis m (Tipping & Faul, appendix); nothing when not
    ``ok``. All three are one rank-one change of the slot posterior, Sigma += a v v',
    mu += a t v, with S -= a beta^2 (G v)^2 and Q -= a t beta G v:

    - add into free slot j: v = beta Sigma Phi_A' phi_m - e_j, a = Sigma_mm =
      1 / (1 / gamma + S_m), t = -Q_m (G gains column j = Phi' phi_m);
    - re-estimate in slot j: v = Sigma e_j, a = -kappa = -d / (1 + Sigma_jj d) with
      d = 1 / gamma_new - 1 / gamma_old, t = mu_j;
    - delete from slot j: v = Sigma e_j, a = -1 / Sigma_jj, t = mu_j (then slot j is
      cleared).

    Only the small per-move pieces differ, so the update has no branch: a vmapped fit
    computes it once instead of every branch of a ``switch``."""
    k = state.used.shape[0]
    add, delete = ok & (action == _ADD), ok & (action == _DELETE)
    j = jnp.where(action == _ADD, jnp.argmin(state.used), state.slot[m]).astype(state.slot.dtype)  # add: first free slot
    e_j = jnp.arange(k) == j
    e_m = jnp.arange(state.gamma.shape[0]) == m
    if data.gram is None:  # Phi' phi_m
        g = jax.lax.cond(add, lambda: cross_row(data, m), lambda: state.G[j])
    else:
        g = data.gram[m]
    Sj, Sjj = state.Sigma[:, j], state.Sigma[j, j]
    safe_new = jnp.where(gamma_new > 0, gamma_new, 1.0)
    safe_old = jnp.where(state.gamma[m] > 0, state.gamma[m], 1.0)
    d = 1.0 / safe_new - 1.0 / safe_old
    v = jnp.where(add, state.beta * state.Sigma @ state.G[:, m] - e_j, Sj)
    a = jnp.where(add, safe_new / (1.0 + safe_new * state.S[m]), jnp.where(delete, -1.0 / Sjj, -d / (1.0 + Sjj * d)))
    a = jnp.where(ok, a, 0.0)
    t = jnp.where(add, -state.Q[m], state.mu[j])
    Gv = v @ state.G + v[j] * (g - state.G[j])  # with row j of G set to g
    Sigma = state.Sigma + a * jnp.outer(v, v)
    mu = state.mu + (a * t) * v
    cleared = jnp.where(delete, e_j, False)  # a deletion clears its slot
    return eqx.tree_at(lambda s: (s.Sigma, s.mu, s.S, s.Q, s.gamma, s.slot, s.basis, s.used, s.G), state,
                       (jnp.where(cleared[:, None] | cleared[None, :], 0.0, Sigma), jnp.where(cleared, 0.0, mu),
                        state.S - a * state.beta**2 * Gv * Gv, state.Q - (a * t * state.beta) * Gv,
                        jnp.where(e_m & ok, gamma_new, state.gamma),
                        jnp.where(e_m & delete, k, jnp.where(e_m & add, j, state.slot)),
                        jnp.where(e_j & delete, 0, jnp.where(e_j & add, m, state.basis)),
                        jnp.where(e_j & delete, False, state.used | (e_j & add)),
                        jnp.where((e_j & delete)[:, None], 0.0, jnp.where((e_j & add)[:, None], g, state.G))))


def candidates(state: State, data: Data, hparams: Hyperparams):
    """For every basis: the action it would take (add, re-estimate, delete), its new
    gamma, and the gain in L (-inf where not allowed)."""
    s, q = leave_one_out(state)
    rho = rho_of(state, hparams)
    gamma_new = optimal_gamma(s, q, rho)
    gain = basis_objective(gamma_new, s, q, rho) - basis_objective(state.gamma, s, q, rho)
    active = state.gamma > 0
    n_active = jnp.sum(active)
    aligned = jnp.any(jnp.abs(state.G) > 1.0 - hparams.align_tol, axis=0)  # free slots have G = 0
    resolvable = state.S > jnp.sqrt(jnp.finfo(state.S.dtype).eps) * state.beta
    add = ~active & (gamma_new > 0) & ~aligned & resolvable & data.alive & ~state.deleted & (n_active < state.used.shape[0])
    reestimate = active & (gamma_new > 0)
    delete = active & (gamma_new == 0) & (n_active > 1)
    action = jnp.where(active, jnp.where(gamma_new > 0, _REESTIMATE, _DELETE), _ADD)
    gain = jnp.where(add | reestimate | delete, gain, -jnp.inf)
    return action, gamma_new, gain, delete


def _basis_step(state: State, data: Data, hparams: Hyperparams):
    """The best single move; returns (state, whether the basis set has converged)."""
    action, gamma_new, gain, delete = candidates(state, data, hparams)
    priority = jnp.any(delete & (gain > 0))
    m = jnp.argmax(jnp.where(priority & ~delete, -jnp.inf, gain)).astype(state.basis.dtype)
    small = jnp.abs(jnp.log(jnp.where(gamma_new[m] > 0, gamma_new[m], 1.0) / jnp.where(state.gamma[m] > 0, state.gamma[m], 1.0)))
    settled = ~(gain[m] > hparams.gain_tol) | ((action[m] == _REESTIMATE) & (small < hparams.min_delta_log_gamma))
    ok = gain[m] > 0
    state = _move(state, data, m, action[m], gamma_new[m], ok)
    state = eqx.tree_at(lambda s: s.log_evidence, state, state.log_evidence + jnp.where(ok, gain[m], 0.0))
    if hparams.uses_lambda and hparams.estimate_lambda:
        barred = state.deleted.at[m].set(state.deleted[m] | ((action[m] == _DELETE) & ok))
        state = eqx.tree_at(lambda s: s.deleted, state, barred)
    saturated = state.saturated | (jnp.all(state.used) & jnp.any(~(state.gamma > 0) & (gamma_new > 0)))
    return eqx.tree_at(lambda s: s.saturated, state, saturated), settled


def _update_lambda(state: State, hparams: Hyperparams) -> State:
    nu, delta = hparams.lambda_prior
    g = state.gamma * state.beta if hparams.prior == "bls" else state.gamma
    n_active = jnp.sum(state.gamma > 0)
    lam = jnp.maximum(2.0 * (n_active + nu - 1.0), 0.0) / (jnp.sum(g) + 2.0 * delta)
    new = eqx.tree_at(lambda s: s.lam, state, lam)
    L = state.log_evidence - 0.5 * (rho_of(new, hparams) - rho_of(state, hparams)) * jnp.sum(state.gamma)
    return eqx.tree_at(lambda s: s.log_evidence, new, L)


def _update_noise(state: State, data: Data, hparams: Hyperparams) -> State:
    """The prior's noise update followed by a full recomputation; the MacKay update of the
    RVM and FLAP-sigma is kept only when it raises L."""
    n = data.y.shape[0]
    floor = data.y_var / hparams.max_precision  # noise variance floor
    if hparams.prior == "bls":
        _, y_resid = residual_terms(state, data, state.mu)
        beta = 1.0 / jnp.maximum(y_resid / n, floor)
        new = eqx.tree_at(lambda s: (s.beta, s.gamma), state, (beta, state.gamma * state.beta / beta))
        return refresh(new, data, hparams)
    if jnp.finfo(data.y.dtype).bits < 64:  # in float32 the L carried by the gains drifts: compare fresh values
        state = refresh(state, data, hparams)
    beta = 1.0 / jnp.maximum(noise_reestimate(state, data), floor)
    new = refresh(eqx.tree_at(lambda s: s.beta, state, beta), data, hparams)
    return jax.tree.map(lambda a, b: jnp.where(new.log_evidence >= state.log_evidence, a, b), new, state)


def move(state: State, data: Data, hparams: Hyperparams):
    """The best single basis move and, with FLAP, FLAP-sigma and BLS, the lambda that
    follows it; returns (state, whether the basis set has settled). Sigma, mu, S, Q and
    L are carried by the rank-one updates."""
    state, settled = _basis_step(state, data, hparams)
    if hparams.uses_lambda and hparams.estimate_lambda:
        state = _update_lambda(state, hparams)
    return state, settled


def update(state: State, data: Data, hparams: Hyperparams) -> State:
    """One iteration: ``hparams.moves`` basis moves, then the noise update (RVM,
    FLAP-sigma, BLS), which recomputes the statistics from scratch, or that recomputation
    alone (FLAP). SparseBayes updates the noise after every fifth move (after each of the
    first ten); doing so at fixed points keeps a vmapped fit from paying for the
    recomputation at every move, and ten moves between them halve its cost on the sinc
    batches against five, with the same fits to Monte Carlo error.
    Converged when the last move settled and the noise with it.

    Every move and noise update of the RVM raises L. When L at the end of an iteration
    (recomputed from scratch) is below L at its start, the moves chased gains that were
    rounding errors (S and Q of a basis nearly in the span of the active ones lose their
    digits in float32): the iteration is undone and the fit stops there."""
    start = state
    state, settled = jax.lax.fori_loop(0, hparams.moves, lambda _, c: move(c[0], data, hparams),
                                       (state, jnp.zeros((), bool)))
    if hparams.estimates_noise:
        old_beta = state.beta
        state = _update_noise(state, data, hparams)
        settled = settled & (jnp.abs(jnp.log(state.beta / old_beta)) < hparams.min_delta_log_beta)
    else:
        state = refresh(state, data, hparams)
    if hparams.prior == "rvm":
        slack = jnp.sqrt(jnp.finfo(data.y.dtype).eps) * (1.0 + jnp.abs(start.log_evidence))
        fell = state.log_evidence < start.log_evidence - slack
        state = jax.tree.map(lambda a, b: jnp.where(fell, a, b), start, state)
        settled = settled | fell
    return eqx.tree_at(lambda s: (s.iteration, s.converged), state, (state.iteration + 1, settled))


def init(data: Data, hparams: Hyperparams) -> State:
    """Start from the single basis most aligned with y (Tipping & Faul, section 4), its
    gamma from its own optimum with the initial noise, clipped to [1e-3, 1e3] var(y)."""
    n, m = data.Phi.shape
    k = min(hparams.max_basis, m)
    dtype = data.Phi.dtype
    beta = 1.0 / (hparams.noise_init * data.y_var)
    first = jnp.argmax(data.Phi_y**2).astype(jnp.int32)
    gamma0 = jnp.clip(data.Phi_y[first] ** 2 - 1.0 / beta, 1e-3 * data.y_var, 1e3 * data.y_var)
    lam = jnp.asarray(hparams.lam, dtype)
    state = State(gamma=jnp.zeros(m, dtype).at[first].set(gamma0), slot=jnp.full(m, k, jnp.int32).at[first].set(0),
                  basis=jnp.zeros(k, jnp.int32).at[0].set(first), used=jnp.zeros(k, bool).at[0].set(True),
                  Sigma=jnp.zeros((k, k), dtype), mu=jnp.zeros(k, dtype),
                  G=jnp.zeros((k, m), dtype).at[0].set(cross_row(data, first)),
                  S=jnp.zeros(m, dtype), Q=jnp.zeros(m, dtype), beta=jnp.asarray(beta, dtype), lam=lam, deleted=jnp.zeros(m, bool),
                  log_evidence=jnp.zeros((), dtype),
                  iteration=jnp.zeros((), jnp.int32), converged=jnp.zeros((), bool), saturated=jnp.zeros((), bool))
    return refresh(state, data, hparams)


# ----------------------------------------------------------------------------- fit


def check_hparams(hparams: Hyperparams):
    if hparams.prior not in PRIORS:
        raise ValueError(f"prior must be one of {PRIORS}; got {hparams.prior!r}.")
    if hparams.max_basis < 1:
        raise ValueError(f"max_basis must be at least 1; got {hparams.max_basis}.")
    if isinstance(hparams.moves, bool) or not isinstance(hparams.moves, (int, np.integer)) or hparams.moves < 1:
        raise ValueError(f"moves must be an int >= 1; got {hparams.moves!r}.")
    if not validation.is_concrete(hparams):  # traced by an enclosing vmap over a value: the caller's to check
        return
    positive = dict(noise_init=hparams.noise_init, max_precision=hparams.max_precision, align_tol=hparams.align_tol)
    non_negative = dict(lam=hparams.lam, min_delta_log_gamma=hparams.min_delta_log_gamma, gain_tol=hparams.gain_tol,
                        min_delta_log_beta=hparams.min_delta_log_beta)
    for name, value in positive.items():
        if not (np.ndim(value) == 0 and np.isfinite(float(value)) and float(value) > 0):
            raise ValueError(f"{name} must be a positive finite number; got {value!r}.")
    for name, value in non_negative.items():
        if not (np.ndim(value) == 0 and np.isfinite(float(value)) and float(value) >= 0):
            raise ValueError(f"{name} must be a finite number >= 0; got {value!r}.")
    if np.shape(hparams.lambda_prior) != (2,) or not all(np.isfinite(v) and v >= 0 for v in map(float, hparams.lambda_prior)):
        raise ValueError(f"lambda_prior must be a pair (nu, delta) of finite numbers >= 0; got {hparams.lambda_prior!r}.")


def check_problem(Phi, y):
    """Refuse what :func:`bayeskit.core.validation.check_real` refuses (naming Phi or y),
    other shapes, mismatched lengths and fewer than two samples."""
    Phi, y = validation.check_real(Phi, "Phi", two_d=False), validation.check_real(y, "y", two_d=False)
    if Phi.ndim != 2 or y.ndim != 1:
        raise ValueError(f"Phi must be (n_samples, n_basis) and y (n_samples,); got {Phi.shape} and {y.shape}.")
    if Phi.shape[0] != y.shape[0]:
        raise ValueError(f"Phi has {Phi.shape[0]} rows but y has {y.shape[0]} values.")
    if Phi.shape[1] == 0:
        raise ValueError("Phi has no basis functions (0 columns).")
    if y.shape[0] < 2:
        raise ValueError(f"at least two samples are needed; got {y.shape[0]}.")


@readable_failure
def fit(Phi, y, hparams: Hyperparams | None = None, *, max_iter: int = 200, progress: bool | None = None,
        throw: bool = True, check: bool = True) -> FitResult:
    """Maximise the evidence over the basis set, the variances, the noise and lambda.

    ``Phi`` (N, M) and ``y`` (N,); vmappable over stacked data sets after one check
    (``jax.vmap(lambda P, t: fit(P, t, hp, throw=False))``). Deterministic: no key.
    Returns a ``FitResult`` whose state is a :class:`State` (read it with
    :func:`weights`, :func:`relevance` and :func:`predict`) and whose trace is L.
    ``check=False`` skips the host-side check of Phi and y (a copy of Phi to the host),
    for a caller that built them from inputs it has checked.
    """
    hparams = hparams or Hyperparams()
    _loop.check_throw(throw)
    max_iter = validation.check_int_in("max_iter", max_iter, 1)
    check_hparams(hparams)
    if check and validation.is_concrete(Phi, y):
        check_problem(Phi, y)
    elif np.ndim(y) != 1 or np.ndim(Phi) != 2 or np.shape(Phi)[0] != np.shape(y)[0]:  # traced: static shapes only
        raise ValueError(f"Phi must be (n_samples, n_basis) and y (n_samples,); got {np.shape(Phi)} and {np.shape(y)}.")
    data = as_data(Phi, y)
    return _fit(data, _loop.as_arrays(hparams, data.y.dtype), max_iter=max_iter, progress=progress, throw=throw)


@eqx.filter_jit
def _fit(data: Data, hparams: Hyperparams, *, max_iter, progress, throw) -> FitResult:
    return _loop.run(lambda s: update(s, data, hparams), lambda s: s.log_evidence, init(data, hparams),
                     max_iter=max_iter, tol=0.0, progress=progress, throw=throw, done=lambda s: s.converged)


# --------------------------------------------------------------------- read the fit


@jax.jit
def weights(state: State, scale) -> Float[Array, " m"]:
    """Posterior mean weights of the original (unnormalised) basis columns; 0 when out.
    ``scale`` is the column norms (``as_data(Phi, y, gram=False).scale``)."""
    m = state.gamma.shape[0]
    w = jnp.zeros(m, state.mu.dtype).at[jnp.where(state.used, state.basis, m)].set(state.mu, mode="drop")
    return w / scale


@jax.jit
def relevance(state: State) -> Bool[Array, " m"]:
    """Which bases are in the model (the relevance vectors)."""
    return state.gamma > 0


@functools.partial(jax.jit, static_argnames=("noise", "chunk_size"))
def predict(state: State, Phi_new, scale, *, noise: bool = True, chunk_size: int | None = None):
    """Predictive mean and variance at new basis rows ``Phi_new`` (N*, M): mean phi* mu,
    variance phi* Sigma phi*' (+ sigma^2 with ``noise``), ``chunk_size`` rows at a time.
    :func:`predict_inputs` builds the basis rows block by block too."""

    def rows(Phi):
        Phi_A = jnp.where(state.used, (Phi / scale)[:, state.basis], 0.0)
        return Phi_A @ state.mu, jnp.sum((Phi_A @ state.Sigma) * Phi_A, axis=1) + (1.0 / state.beta if noise else 0.0)

    return map_blocks(rows, Phi_new, chunk_size)


def predict_inputs(state: State, X_new, basis_rows, scale, *, noise: bool = True, chunk_size: int | None = None):
    """:func:`predict` at new inputs ``X_new`` (N*, d), building the basis rows
    ``basis_rows(X_block)`` of ``chunk_size`` inputs at a time, so that the N* x M design is
    never formed whole."""
    return map_blocks(lambda x: predict(state, basis_rows(x), scale, noise=noise), X_new, chunk_size)


__all__ = ["Hyperparams", "State", "Data", "KERNELS", "design", "unit_basis", "as_data", "optimal_gamma", "basis_objective", "objective", "update",
           "init", "fit", "weights", "relevance", "predict", "predict_inputs", "refresh", "candidates", "move", "noise_reestimate"]

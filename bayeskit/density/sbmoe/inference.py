"""Algorithm 1: initialisation, one VB sweep, the ELBO of Appendix C, and ``fit``.

One sweep (iteration l):

1. s = softmax(A) (the default), or by the LP (8) from the previous E-step's caps
   (softmax(A) at the first sweep);
2. E-step (Proposition 1) with A from q^l(mu, Sigma), B linearised at s, and the
   deterministic gate term G at q^l(Lambda);
3. M-step I (Proposition 2): r = a + b - s rho, floored at eps, then the NIW update;
   with ``s_schedule="resolve"`` the s in r is re-solved with the new caps;
4. M-step II: Proposition 4 (optax sub-steps) or Proposition 3.

The ELBO (Appendix C, corrected: NIW and Wishart KLs in closed form, the entropy of
omega included, the gate's log-normaliser not linearised) is evaluated after the sweep
with the sweep's omega and s and the new q(theta)::

    ELBO = sum a A + sum b B                     (T1, expert terms)
           - eta_q/2 tr(L' S_Omega L)            (T2, gate, Omega part)
           - sum_n E LSE_m(-1/2 d_Lambda(x_n, x_m))   (T2, gate normaliser; Monte Carlo)
           + H(omega) - KL(q(Lambda)) - sum_c KL(q(mu_c, Sigma_c))

It is a surrogate (the linearisations make it an over-estimate of the pseudo-ELBO), and
with the stochastic gate it is not monotone; it is traced for diagnosis.
"""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
from jaxtyping import Array, Float, Int, PRNGKeyArray

from bayeskit.core import executables, validation
from bayeskit.core import loop as _loop
from bayeskit.core.device import as_array
from bayeskit.core.linalg import spd_inverse
from bayeskit.core.scaling import column_scales, median
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.density.sbmoe import gate as _gate
from bayeskit.density.sbmoe.estep import estep, gate_logits
from bayeskit.density.sbmoe.model import (
    GATES,
    INITS,
    LP_SENSES,
    SCHEDULES,
    Data,
    Experts,
    Hyperparams,
    Priors,
    expected_loglik,
    kl_experts,
    kl_gate,
    linearised_b,
    niw_update,
    prepare,
    solve_lp,
)

DEFAULT_OPTIMIZER = optax.adam(0.05)
_SHIPPED_OPTIMIZER = DEFAULT_OPTIMIZER  # passed to the compiled fit as None, a static argument keyed alike in every process
BOUND_TERMS = ("experts", "gate_omega", "gate_normaliser", "entropy", "kl_gate", "kl_experts")


class State(eqx.Module):
    """Variational factors and what the next sweep and the ELBO need.

    Attributes
    ----------
    data : the standardised training data (the predictive sums over it).
    experts : q(mu_c, Sigma_c).
    gate : q(Lambda) = W(L L', eta_q) through :class:`~bayeskit.density.sbmoe.gate.GateParams`.
    opt_state : the gate optimiser's state.
    s : (N, C) linearisation points used in the last E-step.
    a, b : (N, C) reductions of omega from the last E-step.
    caps : (N, C) the caps (a + b) / rho of the LP (8) for the next sweep.
    s_omega : (Dx, Dx) scatter of the inputs under Omega.
    entropy : H(omega).
    negative_r : fraction of weights r below 0 before the floor, last sweep.
    floored : number of sweeps whose projection gate hit the eigenvalue floor.
    neighbourhood : (max_iter,) per sweep, the median over training points of the
        effective number of neighbours ``1 / sum_m g_nm^2`` of the gate at E[Lambda] that
        the sweep's E-step used (0 for sweeps not run): a gate that localises has few.
    iteration : sweeps done.
    key : randomness of the gate sub-steps; elbo_key : fixed draws for the ELBO trace.
    bound : the terms of the surrogate ELBO (:func:`elbo_terms`) after the last accepted
        sweep, zeros before the first; the fit's trace is their sum.
    """

    data: Data
    experts: Experts
    gate: _gate.GateParams
    opt_state: optax.OptState
    s: Float[Array, "n c"]
    a: Float[Array, "n c"]
    b: Float[Array, "n c"]
    caps: Float[Array, "n c"]
    s_omega: Float[Array, "dx dx"]
    entropy: Array
    negative_r: Array
    floored: Int[Array, ""]
    neighbourhood: Float[Array, " max_iter"]
    iteration: Int[Array, ""]
    key: PRNGKeyArray
    elbo_key: PRNGKeyArray
    bound: dict[str, Array]


def agglomerative_labels(Y: np.ndarray, n_clusters: int) -> np.ndarray:
    """Ward clustering of the standardised outputs into ``n_clusters`` groups (the
    paper's initialisation of the expert means; host side, deterministic)."""
    from scipy.cluster.hierarchy import cut_tree, ward

    Y = np.asarray(Y, np.float64)
    Y = Y / column_scales(Y)  # the variance of outputs at 1e300 would overflow
    sd = Y.std(axis=0)
    Ys = (Y - Y.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    if n_clusters >= len(Ys):
        return np.arange(len(Ys)) % n_clusters
    return cut_tree(ward(Ys), n_clusters=n_clusters)[:, 0].astype(np.int32)


def kmeans_pp_labels(key: PRNGKeyArray, Y: Array, n_clusters: int, n_iter: int = 20) -> Array:
    """k-means++ seeding and ``n_iter`` Lloyd steps on ``Y`` (jittable, per key). The draws
    are the same with and without ``jax_enable_x64`` (an int32 first index)."""
    Y = jnp.asarray(Y)  # a NumPy Y cannot be indexed by the traced draws
    n = Y.shape[0]
    first = jax.random.randint(key, (), 0, n, dtype=jnp.int32)

    def seed(carry, k):
        centres, d2, i = carry
        new = jax.random.choice(k, n, p=d2 / jnp.sum(d2))
        centres = centres.at[i].set(Y[new])
        d2 = jnp.minimum(d2, jnp.sum((Y - Y[new]) ** 2, axis=1))
        return (centres, d2, i + 1), None

    centres = jnp.zeros((n_clusters, Y.shape[1]), Y.dtype).at[0].set(Y[first])
    d2 = jnp.sum((Y - Y[first]) ** 2, axis=1)
    d2 = jnp.where(jnp.sum(d2) > 0, d2, jnp.ones_like(d2))
    (centres, _, _), _ = jax.lax.scan(seed, (centres, d2, 1), jax.random.split(jax.random.fold_in(key, 1), n_clusters - 1))

    def lloyd(centres, _):
        labels = jnp.argmin(jnp.sum((Y[:, None, :] - centres[None]) ** 2, axis=2), axis=1)
        onehot = jax.nn.one_hot(labels, n_clusters, dtype=Y.dtype)
        count = onehot.sum(0)
        mean = (onehot.T @ Y) / jnp.where(count > 0, count, 1.0)[:, None]
        return jnp.where(count[:, None] > 0, mean, centres), None

    centres, _ = jax.lax.scan(lloyd, centres, None, length=n_iter)
    return jnp.argmin(jnp.sum((Y[:, None, :] - centres[None]) ** 2, axis=2), axis=1)


def init(key: PRNGKeyArray, data: Data, priors: Priors, hparams: Hyperparams, optimizer: optax.GradientTransformation, labels: Array | None,
         max_iter: int = 1) -> State:
    """q^0: the NIW update with one-hot weights of the initial clustering (agglomerative
    on the outputs, or k-means++), q^0(Lambda) with the prior's mean eta0 Lambda0; room
    for ``max_iter`` sweeps of diagnostics."""
    n, dx = data.X.shape
    c = hparams.n_experts
    dtype = data.X.dtype
    k_init, k_gate, k_elbo = jax.random.split(key, 3)
    if labels is None:
        labels = kmeans_pp_labels(k_init, data.Y, c)
    r0 = jnp.maximum(jax.nn.one_hot(labels, c, dtype=dtype), priors.eps)
    L0 = jnp.linalg.cholesky(spd_inverse(priors.lambda0_inv)) * jnp.sqrt(priors.eta0 / priors.eta_q)
    params = _gate.GateParams.from_factor(L0)
    zeros = jnp.zeros((n, c), dtype)
    return State(
        data=data,
        experts=niw_update(r0, data.Y, priors),
        gate=params,
        opt_state=optimizer.init(params),
        s=zeros,
        a=zeros,
        b=zeros,
        caps=jnp.full((n, c), jnp.inf, dtype),
        s_omega=jnp.zeros((dx, dx), dtype),
        entropy=jnp.zeros((), dtype),
        negative_r=jnp.zeros((), dtype),
        floored=jnp.zeros((), jnp.int32),
        neighbourhood=jnp.zeros((max_iter,), dtype),
        iteration=jnp.zeros((), jnp.int32),
        key=k_gate,
        elbo_key=k_elbo,
        bound=dict.fromkeys(BOUND_TERMS, jnp.zeros((), dtype)),
    )


def linearisation_points(A: Array, caps: Array, first: Array, lp_sign: Array) -> Array:
    """s for the E-step: softmax(A) at the first sweep (no caps yet) or where ``lp_sign``
    is 0 (``lp_sense="softmax"``); otherwise the LP (8) (:func:`signed_lp`)."""
    return jnp.where(first | (lp_sign == 0), jax.nn.softmax(A, axis=1), signed_lp(A, caps, lp_sign))


def signed_lp(A: Array, caps: Array, lp_sign: Array) -> Array:
    """The LP (8) maximised (``lp_sign`` +1) or minimised (-1): minimising over A fills
    the caps in the order that maximising over -A does, so both are one program."""
    return solve_lp(lp_sign * A, caps, "max")


def mean_precision(state: State, hparams: Hyperparams) -> Float[Array, "dx dx"]:
    """``E[Lambda] = eta_q L L'`` of the fitted gate, in standardised input units (one
    compiled program, eta_q a traced value)."""
    eta_q = hparams.gate_dofs(state.data.X.shape[1])[1]
    return _scaled_gram(state.gate, _loop.as_arrays(eta_q, state.data.X.dtype))


@jax.jit
def _scaled_gram(gate: _gate.GateParams, scale: Array) -> Array:
    return scale * gate.L @ gate.L.T


def effective_neighbours(G: Float[Array, "n n"]) -> Float[Array, " n"]:
    """``1 / sum_m g_nm^2`` for the gate ``g_n = softmax(G[n])`` of every training point."""
    return 1 / jnp.sum(jax.nn.softmax(G, axis=1) ** 2, axis=1)


def update(state: State, priors: Priors, hparams: Hyperparams, optimizer: optax.GradientTransformation) -> State:
    """One sweep of Algorithm 1 (see the module docstring); the LP's sense comes from
    ``priors.lp_sign``, the static settings from ``hparams``."""
    data = state.data
    A = expected_loglik(state.experts, data.Y)
    s = linearisation_points(A, state.caps, state.iteration == 0, priors.lp_sign)
    B = linearised_b(A, s, hparams.s_entropy)
    L = state.gate.L
    G = gate_logits(data.X, L, priors.eta_q)
    e = estep(A, B, G, data.X, hparams.fallback_rows)
    neighbourhood = state.neighbourhood.at[state.iteration].set(median(effective_neighbours(G)), mode="drop")
    rho = jnp.sum(e.b, axis=1)
    caps = jnp.where(rho[:, None] > 0, (e.a + e.b) / jnp.where(rho > 0, rho, 1.0)[:, None], jnp.inf)
    if hparams.s_schedule == "resolve":
        s_m = jnp.where(priors.lp_sign == 0, s, signed_lp(A, caps, priors.lp_sign))
    else:
        s_m = s
    r = e.a + e.b - s_m * rho[:, None]
    experts = niw_update(jnp.maximum(r, priors.eps), data.Y, priors)
    key, k_gate = jax.random.split(state.key)
    floored = state.floored
    opt_state = state.opt_state
    bound_draws = None
    if hparams.gate == "stochastic":
        if hparams.reset_optimizer:
            opt_state = optimizer.init(state.gate)
        # the Bartlett factors of the gate's sub-steps and of the bound, drawn at once
        n_draws = max(hparams.gate_samples, hparams.elbo_samples)
        keys = jnp.concatenate([jax.random.split(k_gate, hparams.gate_steps), state.elbo_key[None]])
        factors = _gate.bartlett_factors(keys, data.X.shape[1], priors.eta_q, n_draws, data.X.dtype)
        bound_draws = factors[-1, : hparams.elbo_samples]
        params, opt_state = _gate.stochastic_update(
            k_gate, state.gate, opt_state, data.X, e.s_omega, priors, optimizer,
            steps=hparams.gate_steps, n_samples=hparams.gate_samples, chunk=hparams.gate_chunk,
            factors=factors[:-1, : hparams.gate_samples],
        )
    else:
        L_new, hit = _gate.projection_update(L, data.X, e.s_omega, priors)
        params = _gate.GateParams.from_factor(L_new)
        floored = floored + hit.astype(jnp.int32)
    state = eqx.tree_at(
        lambda t: (t.experts, t.gate, t.opt_state, t.s, t.a, t.b, t.caps, t.s_omega, t.entropy, t.negative_r, t.floored, t.neighbourhood,
                   t.iteration, t.key),
        state,
        (experts, params, opt_state, s, e.a, e.b, caps, e.s_omega, e.entropy, jnp.mean(r < 0).astype(r.dtype), floored, neighbourhood,
         state.iteration + 1, key),
    )
    return eqx.tree_at(lambda t: t.bound, state, _elbo_terms(state, priors, hparams, bound_draws))


def elbo_terms(state: State, priors: Priors, hparams: Hyperparams) -> dict[str, Array]:
    """The terms of the surrogate ELBO at the current factors (module docstring); the
    continuous hyperparameters and priors are traced values."""
    dtype = state.data.X.dtype
    return _elbo_terms(state, _loop.as_arrays(priors, dtype), _loop.as_arrays(hparams, dtype))


@eqx.filter_jit
def _elbo_terms(state: State, priors: Priors, hparams: Hyperparams, factors: Array | None = None) -> dict[str, Array]:
    data = state.data
    A = expected_loglik(state.experts, data.Y)
    B = linearised_b(A, state.s, hparams.s_entropy)
    L = state.gate.L
    return {
        "experts": jnp.sum(state.a * A) + jnp.sum(state.b * B),
        "gate_omega": -0.5 * priors.eta_q * jnp.sum(L * (state.s_omega @ L)),
        "gate_normaliser": -_gate.expected_log_normaliser(state.elbo_key, data.X, L, priors.eta_q, hparams.elbo_samples, hparams.gate_chunk,
                                                          factors),
        "entropy": state.entropy,
        "kl_gate": -kl_gate(L, priors),
        "kl_experts": -kl_experts(state.experts, priors),
    }


def objective(state: State, priors: Priors, hparams: Hyperparams) -> Array:
    """The surrogate ELBO (sum of :func:`elbo_terms`), computed anew."""
    return sum(elbo_terms(state, priors, hparams).values())


def _check_settings(hparams: Hyperparams) -> None:
    """The static settings: sizes, counts and choices."""
    validation.check_int_in("n_experts", hparams.n_experts, 1)
    validation.check_choice("lp_sense", hparams.lp_sense, LP_SENSES)
    validation.check_choice("s_schedule", hparams.s_schedule, SCHEDULES)
    validation.check_choice("gate", hparams.gate, GATES)
    validation.check_choice("init", hparams.init, INITS)
    validation.check_int_in("gate_steps", hparams.gate_steps, 1)
    validation.check_int_in("gate_samples", hparams.gate_samples, 1)
    validation.check_int_in("elbo_samples", hparams.elbo_samples, 1)
    validation.check_int_in("fallback_rows", hparams.fallback_rows, 0)
    if hparams.gate_chunk is not None:
        validation.check_int_in("gate_chunk", hparams.gate_chunk, 1)


def check_hparams(hparams: Hyperparams, dx: int, dy: int) -> None:
    """Refuse hyperparameters outside their domains, naming the offending one. Where a
    transform traces a value (``vmap`` over ``kappa0``, say), the values are the caller's to check."""
    _check_settings(hparams)
    if not validation.is_concrete(hparams):
        return
    validation.check_positive(kappa0=hparams.kappa0, eps=hparams.eps, floor=hparams.floor)
    if not 0 < float(hparams.damping) <= 1:
        raise ValueError(f"damping must lie in (0, 1], got {hparams.damping!r}.")
    if hparams.nu0 is not None and not float(hparams.nu0) > dy - 1:
        raise ValueError(f"nu0 must exceed dim Y - 1 = {dy - 1}, got {hparams.nu0!r}.")
    if hparams.eta0 is not None and not float(hparams.eta0) > dx - 1:
        raise ValueError(f"eta0 must exceed dim X - 1 = {dx - 1}, got {hparams.eta0!r}.")
    nu0 = dy + 2.0 if hparams.nu0 is None else float(hparams.nu0)
    if hparams.sigma0 is None and hparams.expert_width is not None and not nu0 > dy + 1:
        raise ValueError(f"with expert_width (E[Sigma_c] = expert_width^2 I) nu0 must exceed dim Y + 1 = {dy + 1}, got {hparams.nu0!r}; "
                         "or pass sigma0.")
    if hparams.eta_q is not None and not float(hparams.eta_q) > dx - 1:
        raise ValueError(f"eta_q must exceed dim X - 1 = {dx - 1}, got {hparams.eta_q!r}.")
    if hparams.lambda0 is not None:
        validation.check_positive(lambda0=hparams.lambda0)
    if hparams.expert_width is not None:
        validation.check_positive(expert_width=hparams.expert_width)
    mu0 = np.asarray(hparams.mu0, float)
    if mu0.ndim > 1 or (mu0.ndim == 1 and mu0.shape[0] != dy) or not np.all(np.isfinite(mu0)):
        raise ValueError(f"mu0 must be a finite scalar or a vector of length dim Y = {dy}, got shape {mu0.shape}.")
    for name, value, dim in (("sigma0", hparams.sigma0, dy), ("Lambda0", hparams.Lambda0, dx)):
        if value is None:
            continue
        m = np.asarray(value, float)
        if m.ndim == 0:
            if not (np.isfinite(m) and m > 0):
                raise ValueError(f"{name} must be positive, got {value!r}.")
            continue
        if m.shape != (dim, dim) or not np.all(np.isfinite(m)) or not np.allclose(m, m.T) or np.linalg.eigvalsh(m).min() <= 0:
            raise ValueError(f"{name} must be a symmetric positive definite {dim} x {dim} matrix.")


def check_inputs(X, Y, hparams: Hyperparams) -> tuple[np.ndarray, np.ndarray]:
    """Refuse bad data or hyperparameters on the host, before anything compiles; return
    X (N, D) and Y (N, P) as checked NumPy arrays (a vector y becomes one column)."""
    X = validation.check_matrix(X, "X", min_rows=2)
    Y = np.asarray(Y)
    if Y.ndim == 1:
        Y = Y[:, None]
    Y = validation.check_matrix(Y, "Y", min_rows=2)
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and {Y.shape[0]}.")
    check_hparams(hparams, X.shape[1], Y.shape[1])
    dtype = np.result_type(X.dtype, Y.dtype)
    return X.astype(dtype, copy=False), Y.astype(dtype, copy=False)



@readable_failure
def fit(
    key: PRNGKeyArray,
    X: Float[Array, "n dx"],
    Y: Float[Array, "n dy"],
    hparams: Hyperparams,
    *,
    max_iter: int = 20,
    tol: float = 0.0,
    optimizer: optax.GradientTransformation | None = None,
    init_labels: Int[Array, " n"] | None = None,
    progress: bool | None = None,
    throw: bool = True,
) -> FitResult:
    """Fit SBMoE by the mean-field VB of Algorithm 1.

    Parameters
    ----------
    key : PRNG key
        Randomness of the gate's Monte Carlo sub-steps (and of k-means++).
    X : array of shape (n_samples, n_inputs)
    Y : array of shape (n_samples, n_outputs) or (n_samples,)
        Both are standardised column-wise inside the fit; densities are reported in
        the caller's units.
    hparams : Hyperparams
    max_iter : int
        VB sweeps (20 in the paper).
    tol : float
        Relative tolerance on the ELBO; 0 (default) runs all sweeps as the paper,
        which is sensible because the gate step is stochastic.
    optimizer : optax.GradientTransformation, optional
        The gate optimiser (default Adam with learning rate 0.05). It is a static
        argument: pass the same object again to avoid recompiling.
    init_labels : int array of shape (n_samples,), optional
        Initial cluster of each sample. By default agglomerative (Ward) clustering of the
        outputs (``hparams.init="agglomerative"``, computed on the host, so under ``vmap``
        pass :func:`agglomerative_labels` computed outside) or k-means++ per key.
    progress : bool, optional
        Show a progress bar (off under ``CI``).
    throw : bool
        Raise on a failed fit; use ``False`` under ``vmap`` and read ``status``.

    Returns
    -------
    FitResult
        ``state`` (:class:`State`, which holds the standardised training data the
        predictive needs), the ELBO after each sweep in ``trace``, ``n_iter``, ``status``.

    Examples
    --------
    >>> import jax
    >>> from bayeskit.datasets import sbmoe_synthetic_1d
    >>> from bayeskit.density.sbmoe import Hyperparams, fit, predictive
    >>> X, Y = sbmoe_synthetic_1d(jax.random.key(0), 200)
    >>> hp = Hyperparams(n_experts=8, gate_steps=5)
    >>> result = fit(jax.random.key(1), X, Y, hp, max_iter=3)
    >>> predictive(jax.random.key(2), result.state, X[:4], hp).mean.shape
    (4, 1)
    """
    _loop.check_tol(tol)
    _loop.check_throw(throw)
    concrete = validation.is_concrete(X, Y)
    if concrete:
        X, Y = check_inputs(X, Y, hparams)
    else:  # traced: the values are the caller's to check, the shapes are static
        validation.check_paired_shapes(X, Y)
        Y = Y[:, None] if jnp.ndim(Y) == 1 else Y
        check_hparams(hparams, jnp.shape(X)[1], jnp.shape(Y)[1])
    if init_labels is None and hparams.init == "agglomerative":
        if not concrete:
            raise ValueError(
                "init='agglomerative' clusters on the host and cannot run on traced Y (inside jit or vmap); "
                "pass init_labels=agglomerative_labels(Y, n_experts) computed outside, or use init='kmeans++'."
            )
        init_labels = agglomerative_labels(Y, hparams.n_experts)
    if init_labels is not None:
        init_labels = as_array(init_labels, jnp.int32)
    X = as_array(X)
    priors = resolved_priors(hparams, X.shape[1], jnp.shape(Y)[1], X.dtype)
    return _fit(key, X, as_array(Y, X.dtype), priors, settings(hparams), init_labels, max_iter=max_iter,
                tol=_loop.tolerance(tol, X.dtype), optimizer=_static_optimizer(optimizer or DEFAULT_OPTIMIZER), progress=progress, throw=throw)


def _static_optimizer(optimizer: optax.GradientTransformation) -> optax.GradientTransformation | None:
    """None for the optimizer bayeskit ships (also when ``DEFAULT_OPTIMIZER`` was rebound
    to another: that one is passed as itself)."""
    return None if optimizer is _SHIPPED_OPTIMIZER else optimizer


def settings(hparams: Hyperparams) -> Hyperparams:
    """``hparams`` with its static settings only (every continuous field None): what the
    compiled sweep depends on besides the shapes, once the priors are resolved. Two
    hyperparameter sets that differ only in values, or in which values are left to their
    defaults, give the same settings and share one compiled fit; so do the three
    ``lp_sense`` settings, which the sweep reads as the value ``Priors.lp_sign``."""
    # a placeholder: the sweep reads the sense from the priors, never from here
    return dataclasses.replace(jax.tree.map(lambda _: None, hparams), lp_sense="softmax")


def resolved_priors(hparams: Hyperparams, dx: int, dy: int, dtype) -> Priors:
    """``hparams.priors(dx, dy, dtype)`` by one compiled program per setting (the continuous
    fields traced), not an operation at a time."""
    return _priors(_loop.as_arrays(hparams, dtype), dx, dy, dtype)


@eqx.filter_jit
def _priors(hparams: Hyperparams, dx: int, dy: int, dtype) -> Priors:
    return hparams.priors(dx, dy, dtype)


def _fit(key, X, Y, priors, hparams, labels, *, max_iter, tol, optimizer, progress, throw) -> FitResult:
    return _fit_program(key, X, Y, priors, hparams, labels, max_iter=max_iter, tol=tol, optimizer=optimizer,
                        progress=progress, throw=throw)


def _fit_loop(key, X, Y, priors, hparams, labels, *, max_iter, tol, optimizer, progress, throw) -> FitResult:
    optimizer = _SHIPPED_OPTIMIZER if optimizer is None else optimizer
    data = prepare(X, Y)
    state = init(key, data, priors, hparams, optimizer, labels, max_iter)
    return _loop.run(
        lambda s: update(s, priors, hparams, optimizer),
        lambda s: sum(s.bound.values()),
        state,
        max_iter=max_iter,
        tol=tol,
        progress=progress,
        throw=throw,
    )


# the sweeps are a loop of small steps, which run as fast under the loop-program options
# and compile in about half a second less (N = 200 and 2000)
_fit_program = executables.loop_jit(_fit_loop, static_argnames=("max_iter", "optimizer", "progress", "throw"))

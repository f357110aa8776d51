"""Variational Bayesian probit classification, one classifier per label (PROBIT).

The classifier block is shared with :mod:`bayeskit.multilabel.bsml`, which runs it on a learnt
embedding ``Z`` instead of the raw features. For label ``o`` with features ``f_i``
(here ``f_i = x_i``; in BSML ``f_i = z_i``):

    lambda_o ~ Gamma(alpha_lambda, beta_lambda),  b_o | lambda_o ~ N(0, 1/lambda_o)
    psi_ko ~ Gamma(alpha_psi, beta_psi),          w_ko | psi_ko ~ N(0, 1/psi_ko)
    t_io ~ N(b_o + w_o' f_i, 1),                  y_io = 1[t_io > 0]

(Gönen 2014, Sections 2.1-2.2, eqs. (5)-(8)). The mean-field updates are

    q(lambda_o) = Gamma(alpha_lambda + 1/2, (1/beta_lambda + <b_o^2>/2)^-1)          (5)
    q(psi_ko)   = Gamma(alpha_psi + 1/2, (1/beta_psi + <w_ko^2>/2)^-1)                (6)
    q(b_o, w_o) = N(S_o [1'<t_o>; <F>'<t_o>],
                    S_o = ([[<lambda_o> + N, 1'<F>], [<F>'1, diag<psi_o> + <F'F>]])^-1)  (7)
    q(t_io)     = TN(<b_o> + <w_o>'<f_i>, 1, t_io y_io > 0)                         (8)

The semi-supervised variant (Section 3.2) truncates labelled scores at a margin,
``t y > 1/2``, and gives an unobserved label (-1) the two-piece distribution
``N(t; o, 1) (gamma_- 1[t < -1/2] + gamma_+ 1[t > 1/2])``.

``q(t)`` is stored by its location ``t_loc`` and its mean ``t_mean``. The ELBO part of
``t`` is then (with ``o`` the current mean score and ``u = t - t_loc``)

    sum log Z(t_loc) - (t_loc - o)^2 / 2 - (t_loc - o) <u> - Var(b_o + w_o' f_i) / 2,

which avoids the cancelling entropy and second-moment terms of Appendix A.
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray

from bayeskit.core import expfam, validation
from bayeskit.core import loop as _loop
from bayeskit.core.chunks import map_blocks
from bayeskit.core.device import as_array, program_input
from bayeskit.core.linalg import cholesky
from bayeskit.core.sampling import flat
from bayeskit.core.special import log_ndtr, lower_tail
from bayeskit.core.status import FitResult, readable_failure


class Hyperparams(eqx.Module):
    """Gamma hyperparameters of the bias and weight precisions, and the label model.

    ``margin`` is the low-density half-width (0 for supervised probit, 1/2 for the
    semi-supervised model); ``gamma_pos`` / ``gamma_neg`` are the class hparams of
    unobserved labels.
    """

    alpha_lambda: float | Array = 1.0
    beta_lambda: float | Array = 1.0
    alpha_psi: float | Array = 1.0
    beta_psi: float | Array = 1.0
    margin: float | Array = 0.0
    gamma_pos: float | Array = 0.5
    gamma_neg: float | Array = 0.5


class State(eqx.Module):
    """Variational factors of the per-label classifiers.

    Attributes
    ----------
    lambda_shape, lambda_scale : (L,) Gamma factors of the bias precisions.
    psi_shape, psi_scale : (L, K) Gamma factors of the weight precisions.
    coef_mean : (L, K + 1) means of ``[b_o, w_o]``.
    coef_cov : (L, K + 1, K + 1) their covariances ``S_o``.
    coef_logdet : (L,) ``log det S_o``.
    t_loc, t_mean : (N, L) location and mean of the truncated normals ``q(t)``.
    """

    lambda_shape: Array
    lambda_scale: Array
    psi_shape: Array
    psi_scale: Array
    coef_mean: Array
    coef_cov: Array
    coef_logdet: Array
    t_loc: Array
    t_mean: Array
    jitter: Array


def init_classifier(key: PRNGKeyArray, Y: Array, n_features: int, hparams: Hyperparams, dtype) -> State:
    """The author's initialisation: standard normal means, identity covariances, Gamma
    scales at the prior scale, and ``<t> = |N(0,1)| sign(y)`` (plus the margin)."""
    n, n_labels = Y.shape
    k_coef, k_t = jax.random.split(key)
    c = lambda v: jnp.asarray(v, dtype)
    sign = jnp.where(Y == 1, 1.0, -1.0).astype(dtype)
    t_mean = (jnp.abs(flat(jax.random.normal, k_t, (n, n_labels), dtype)) + c(hparams.margin)) * sign
    return State(
        lambda_shape=jnp.full((n_labels,), c(hparams.alpha_lambda) + 0.5),
        lambda_scale=jnp.full((n_labels,), c(hparams.beta_lambda)),
        psi_shape=jnp.full((n_labels, n_features), c(hparams.alpha_psi) + 0.5),
        psi_scale=jnp.full((n_labels, n_features), c(hparams.beta_psi)),
        coef_mean=flat(jax.random.normal, k_coef, (n_labels, n_features + 1), dtype),
        coef_cov=jnp.broadcast_to(jnp.eye(n_features + 1, dtype=dtype), (n_labels, n_features + 1, n_features + 1)),
        coef_logdet=jnp.zeros((n_labels,), dtype),
        t_loc=t_mean,
        t_mean=t_mean,
        jitter=jnp.zeros((), dtype),
    )


def coef_second_moments(cs: State) -> Array:
    """``E[[b; w][b; w]']`` per label, shape (L, K + 1, K + 1)."""
    return cs.coef_cov + cs.coef_mean[:, :, None] * cs.coef_mean[:, None, :]


def update_precisions(cs: State, hparams: Hyperparams) -> State:
    """Updates (5) and (6): Gamma factors of the bias and weight precisions."""
    dtype = cs.coef_mean.dtype
    second = cs.coef_mean**2 + jnp.diagonal(cs.coef_cov, axis1=-2, axis2=-1)
    lam_scale = 1 / (1 / jnp.asarray(hparams.beta_lambda, dtype) + 0.5 * second[:, 0])
    psi_scale = 1 / (1 / jnp.asarray(hparams.beta_psi, dtype) + 0.5 * second[:, 1:])
    return eqx.tree_at(
        lambda s: (s.lambda_shape, s.lambda_scale, s.psi_shape, s.psi_scale),
        cs,
        (
            jnp.full_like(cs.lambda_shape, jnp.asarray(hparams.alpha_lambda, dtype) + 0.5),
            lam_scale,
            jnp.full_like(cs.psi_shape, jnp.asarray(hparams.alpha_psi, dtype) + 0.5),
            psi_scale,
        ),
    )


def update_coefficients(cs: State, gram: Array, cross: Array) -> State:
    """Update (7): ``q(b_o, w_o)`` for all labels with one batched Cholesky.

    Parameters
    ----------
    gram : (K + 1, K + 1) ``E[F'F]`` of the augmented features ``F = [1, f]``.
    cross : (K + 1, L) ``E[F]' <T>``.
    """
    prior_precision = jnp.concatenate(
        [expfam.gamma_mean(cs.lambda_shape, cs.lambda_scale)[:, None], expfam.gamma_mean(cs.psi_shape, cs.psi_scale)],
        axis=1,
    )
    precision = gram[None] + jax.vmap(jnp.diag)(prior_precision)
    chol = cholesky(precision)
    eye = jnp.broadcast_to(jnp.eye(gram.shape[0], dtype=gram.dtype), precision.shape)
    cov = chol.solve(eye)
    mean = jnp.einsum("lij,jl->li", cov, cross)
    return eqx.tree_at(
        lambda s: (s.coef_mean, s.coef_cov, s.coef_logdet, s.jitter),
        cs,
        (mean, 0.5 * (cov + jnp.swapaxes(cov, -1, -2)), -chol.logdet(), jnp.max(chol.jitter)),
    )


def auxiliary_moments(loc: Array, Y: Int[Array, "n l"], hparams: Hyperparams, semisupervised: bool):
    """``log Z`` and ``E[t] - loc`` of ``q(t)`` with location ``loc`` (eq. (8), Section 3.2).

    A label ``y`` (sign ``s = +-1``) truncates to ``s t > margin``: ``s (t - loc)`` is a
    standard normal truncated below at ``margin - s loc``. An unobserved label mixes the
    two one-sided pieces with weights ``gamma_+- Phi(+-loc - margin)``.
    """
    dtype = loc.dtype
    margin = jnp.asarray(hparams.margin, dtype)
    sign = jnp.where(Y == 1, 1.0, -1.0).astype(dtype)
    log_z, lam = lower_tail(margin - sign * loc)
    shift = sign * lam
    if semisupervised:
        log_z_pos, lam_pos = lower_tail(margin - loc)
        log_z_neg, lam_neg = lower_tail(margin + loc)
        log_w_pos = jnp.log(jnp.asarray(hparams.gamma_pos, dtype)) + log_z_pos
        log_w_neg = jnp.log(jnp.asarray(hparams.gamma_neg, dtype)) + log_z_neg
        log_z_u = jnp.logaddexp(log_w_pos, log_w_neg)
        shift_u = jnp.exp(log_w_pos - log_z_u) * lam_pos - jnp.exp(log_w_neg - log_z_u) * lam_neg
        missing = Y < 0
        log_z = jnp.where(missing, log_z_u, log_z)
        shift = jnp.where(missing, shift_u, shift)
    return log_z, shift


def update_auxiliary(cs: State, scores: Array, Y: Array, hparams: Hyperparams, semisupervised: bool) -> State:
    """Update (8): ``q(t)`` centred at the current mean scores ``<b_o> + <w_o>'<f_i>``."""
    _, shift = auxiliary_moments(scores, Y, hparams, semisupervised)
    return eqx.tree_at(lambda s: (s.t_loc, s.t_mean), cs, (scores, scores + shift))


def augmented_gram(features_mean: Array, features_second: Array) -> Array:
    """``E[F'F]`` for ``F = [1, f]`` from ``E[f]`` (N, K) and ``E[f'f]`` summed (K, K)."""
    n = features_mean.shape[0]
    col = jnp.sum(features_mean, axis=0)
    top = jnp.concatenate([jnp.asarray([n], features_mean.dtype), col])
    gram = jnp.concatenate([top[None], jnp.concatenate([col[:, None], features_second], axis=1)], axis=0)
    return gram


def augmented_cross(features_mean: Array, t_mean: Array) -> Array:
    """``E[F]' <T>`` of shape (K + 1, L) for ``F = [1, f]``."""
    return jnp.concatenate([jnp.sum(t_mean, axis=0)[None], features_mean.T @ t_mean], axis=0)


def mean_scores(cs: State, features_mean: Array) -> Array:
    """``<b_o> + <w_o>' <f_i>`` of shape (N, L)."""
    return features_mean @ cs.coef_mean[:, 1:].T + cs.coef_mean[:, 0]


def classifier_elbo(
    cs: State,
    features_mean: Array,
    gram: Array,
    features_cov: Array | None,
    Y: Array,
    hparams: Hyperparams,
    semisupervised: bool,
) -> Array:
    """ELBO terms of ``lambda, Psi, (b, W)`` and ``T`` (Appendix A), given the features.

    ``features_cov`` is the covariance shared by every ``f_i`` (``Sigma_Z`` in BSML) or
    ``None`` for fixed features.
    """
    dtype = cs.coef_mean.dtype
    n_feat = cs.psi_shape.shape[1]
    second = cs.coef_mean**2 + jnp.diagonal(cs.coef_cov, axis1=-2, axis2=-1)
    elbo = expfam.gamma_elbo(cs.lambda_shape, cs.lambda_scale, jnp.asarray(hparams.alpha_lambda, dtype), jnp.asarray(hparams.beta_lambda, dtype))
    elbo += expfam.gamma_elbo(cs.psi_shape, cs.psi_scale, jnp.asarray(hparams.alpha_psi, dtype), jnp.asarray(hparams.beta_psi, dtype))
    elbo += expfam.normal_given_precision(second[:, 0], cs.lambda_shape, cs.lambda_scale)
    elbo += expfam.normal_given_precision(second[:, 1:], cs.psi_shape, cs.psi_scale)
    elbo += expfam.gaussian_entropy(cs.coef_logdet, n_feat + 1)
    # T: sum log Z - (loc - o)^2/2 - (loc - o)<u> - Var(score)/2.
    scores = mean_scores(cs, features_mean)
    log_z, shift = auxiliary_moments(cs.t_loc, Y, hparams, semisupervised)
    gap = cs.t_loc - scores
    elbo += jnp.sum(log_z - 0.5 * gap * gap - gap * shift)
    # sum_i Var(b_o + w_o' f_i) = tr(S_o E[F'F]) + N m_o' Sigma_f m_o for each o, m_o = E[w_o]:
    # E[F'F] holds N Sigma_f already, and with it N tr(Cov(w_o) Sigma_f).
    var_sum = jnp.einsum("lij,ji->", cs.coef_cov, gram)
    if features_cov is not None:
        w = cs.coef_mean[:, 1:]
        var_sum += features_mean.shape[0] * jnp.einsum("li,ij,lj->", w, features_cov, w)
    return elbo - 0.5 * var_sum


def predictive_scores(cs: State, features: Array) -> tuple[Array, Array]:
    """Mean and variance of ``t*`` for new features (Section 2.4): the (b, W)
    uncertainty ``[1 z*]' S_o [1 z*]`` plus the unit noise, with no N* x N* matrix."""
    mean = mean_scores(cs, features)
    aug = jnp.concatenate([jnp.ones((features.shape[0], 1), features.dtype), features], axis=1)
    var = 1 + jnp.einsum("ni,lij,nj->nl", aug, cs.coef_cov, aug)
    return mean, var


def predictive_probability(mean: Array, var: Array, hparams: Hyperparams, semisupervised: bool, predictive: str) -> Array:
    """``P(y* = 1)`` from the predictive ``t* ~ N(mean, var)``.

    ``predictive="consistent"`` uses the standard deviation: ``Phi(mean / sqrt(var))``,
    or for the semi-supervised model the normalised low-density rule
    ``gamma_+ Phi((mean - 1/2)/sd) / (gamma_+ Phi((mean - 1/2)/sd) + gamma_- Phi((-mean - 1/2)/sd))``.
    ``predictive="author"`` reproduces the author's code, ``Phi(mean / var)``, for both.
    """
    if predictive == "author":
        return jnp.exp(log_ndtr(mean / var))
    sd = jnp.sqrt(var)
    if not semisupervised:
        return jnp.exp(log_ndtr(mean / sd))
    dtype = mean.dtype
    margin = jnp.asarray(hparams.margin, dtype)
    log_pos = jnp.log(jnp.asarray(hparams.gamma_pos, dtype)) + log_ndtr((mean - margin) / sd)
    log_neg = jnp.log(jnp.asarray(hparams.gamma_neg, dtype)) + log_ndtr((-mean - margin) / sd)
    return jnp.exp(log_pos - jnp.logaddexp(log_pos, log_neg))


# --- PROBIT: the classifier block on the raw features ------------------------------


class Data(eqx.Module):
    """Features with ``E[F'F]`` of ``F = [1, X]`` precomputed once."""

    X: Float[Array, "n d"]
    Y: Int[Array, "n l"]
    gram: Float[Array, "d1 d1"]


def prepare(X: Array, Y: Array) -> Data:
    return Data(X, Y, augmented_gram(X, X.T @ X))


def init(key: PRNGKeyArray, data: Data, hparams: Hyperparams) -> State:
    return init_classifier(key, data.Y, data.X.shape[1], hparams, data.X.dtype)


def update(cs: State, data: Data, hparams: Hyperparams, semisupervised: bool = False) -> State:
    """One sweep: (5), (6), (7), then (8)."""
    cs = update_precisions(cs, hparams)
    cs = update_coefficients(cs, data.gram, augmented_cross(data.X, cs.t_mean))
    return update_auxiliary(cs, mean_scores(cs, data.X), data.Y, hparams, semisupervised)


def objective(cs: State, data: Data, hparams: Hyperparams, semisupervised: bool = False) -> Array:
    """The lower bound of the probit model (Appendix A restricted to lambda, Psi, b, W, T)."""
    return classifier_elbo(cs, data.X, data.gram, None, data.Y, hparams, semisupervised)


@readable_failure
def fit(
    key: PRNGKeyArray,
    X: Float[Array, "n d"],
    Y: Int[Array, "n l"],
    hparams: Hyperparams | None = None,
    *,
    max_iter: int = 500,
    tol: float = 1e-6,
    progress: bool | None = None,
    throw: bool = True,
) -> FitResult:
    """Fit one VB probit classifier per label (the paper's PROBIT baseline).

    Parameters
    ----------
    key : PRNG key for the initialisation.
    X : array of shape (n_samples, n_features)
    Y : array of shape (n_samples, n_labels) in {0, 1}
    hparams : Hyperparams (Gamma hyperparameters, all 1 in the paper)
    max_iter, tol, progress, throw : as in :func:`bayeskit.multilabel.bsml.fit`.

    Returns
    -------
    FitResult with a :class:`State`.

    Examples
    --------
    >>> import jax, numpy as np
    >>> X = np.random.default_rng(0).normal(size=(50, 3)); Y = (X[:, :1] > 0).astype(int)
    >>> r = fit(jax.random.key(0), X, Y, max_iter=50)
    >>> bool(predict_proba(r.state, X).shape == (50, 1))
    True
    """
    _loop.check_tol(tol)
    _loop.check_throw(throw)
    max_iter = validation.check_int_in("max_iter", max_iter, 1)
    hparams = Hyperparams() if hparams is None else hparams
    if validation.is_concrete(X, Y):
        X = validation.check_matrix(X, "X")
        Y = validation.check_labels(Y, X.shape[0], "Y")
    if validation.is_concrete(hparams):  # traced by an enclosing vmap over a prior: the caller's to check
        validation.check_positive(
            alpha_lambda=hparams.alpha_lambda, beta_lambda=hparams.beta_lambda, alpha_psi=hparams.alpha_psi, beta_psi=hparams.beta_psi
        )
    X = as_array(X)
    hparams = jax.tree.map(lambda v: as_array(v, X.dtype), hparams)
    return _fit(key, X, as_array(Y, jnp.int8), hparams, max_iter=max_iter,
                tol=_loop.tolerance(tol, X.dtype), progress=progress, throw=throw)


@eqx.filter_jit
def _fit(key, X, Y, hparams, *, max_iter, tol, progress, throw) -> FitResult:
    data = prepare(X, Y)
    return _loop.run(
        lambda s: update(s, data, hparams),
        lambda s: objective(s, data, hparams),
        init(key, data, hparams),
        max_iter=max_iter,
        tol=tol,
        progress=progress,
        throw=throw,
        failed=lambda s: ~jnp.isfinite(s.jitter),
        inputs=X,
    )


def predict_proba(cs: State, X: Float[Array, "m d"], *, predictive: str = "consistent",
                  chunk_size: int | None = None) -> Array:
    """``P(y* = 1 | x*)`` per label, shape (m, L), ``chunk_size`` rows at a time, one
    compiled program; see :func:`predictive_probability`. ``X`` may be anything
    array-like (e.g. a pandas DataFrame), as in :func:`fit`."""
    validation.check_new_inputs(X, cs.coef_mean.shape[-1] - 1)
    return _predict_proba(cs, program_input(X, cs.coef_mean.dtype), predictive=predictive, chunk_size=chunk_size)


@partial(jax.jit, static_argnames=("predictive", "chunk_size"))
def _predict_proba(cs: State, X, *, predictive: str, chunk_size: int | None) -> Array:
    def rows(x):
        return predictive_probability(*predictive_scores(cs, x), Hyperparams(), False, predictive)

    return map_blocks(rows, X.astype(cs.coef_mean.dtype), chunk_size)


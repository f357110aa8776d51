"""Bayesian supervised multilabel learning (BSML), its ARD variant and BSSML.

Gönen (2014), "Coupled dimensionality reduction and classification for supervised and
semi-supervised multilabel learning", Pattern Recognition Letters 38:132-141. Notation
of the paper, with samples as rows here:

    X (N, D) inputs, Y (N, L) labels, R the subspace dimension,
    Q (D, R) projection with precisions Phi (entrywise, D x R) or phi (ARD, per column),
    Z (N, R) embeddings, z_i ~ N(Q' x_i, sigma_z^2 I),
    b (L,), W (R, L) classifier biases and weights (see :mod:`bayeskit.multilabel.probit`),
    T (N, L) auxiliary scores, t_io ~ N(b_o + w_o' z_i, 1), y_io = 1[t_io > 0].

The mean-field factorisation q(Phi) q(Q) q(Z) q(lambda) q(Psi) q(b, W) q(T) gives the
closed-form updates (2)-(8), run in Algorithm 1's order by :func:`update`:

    q(phi_ds) = Gamma(alpha_phi + 1/2, (1/beta_phi + <q_ds^2>/2)^-1)                 (2)
    q(q_s)    = N(Sigma_s X'<z^s>/sigma_z^2, Sigma_s = (diag<phi_s> + X'X/sigma_z^2)^-1)  (3)
    q(z_i)    = N(Sigma_Z (<Q>'x_i/sigma_z^2 + sum_o <w_o><t_io> - <w_o b_o>),
                  Sigma_Z = (I/sigma_z^2 + sum_o <w_o w_o'>)^-1)                       (4)
    (5)-(8): the probit classifier block on the embeddings.

ARD (Section 3.1) uses one precision per column, ``q(phi_s) = Gamma(alpha_phi + D/2,
(1/beta_phi + <q_s'q_s>/2)^-1)``; then every ``Sigma_s`` is diagonal in the eigenbasis of
``X'X``, computed once. BSSML (Section 3.2) adds the low-density margin 1/2 and
unobserved labels (-1). The paper's equations are the case ``sigma_z = 1``; the author's
code uses ``sigma_z = 0.1``, the default here.

The lower bound (Appendix A) is implemented with the two corrections to the author's
code (``E[log phi]`` for ``log E[phi]``; the trace ``tr(<QQ'> X'X)`` for the sum of all
entries), and with the ``T`` part in the cancellation-free form of
:mod:`bayeskit.multilabel.probit`. It never decreases over sweeps and drives convergence.

Reading a fit (embeddings, predictive scores and probabilities, the dimensions ARD kept)
lives in :mod:`bayeskit.multilabel.bsml_predict`; this module re-exports its names.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from bayeskit.core import column_pairs, expfam, validation
from bayeskit.core import loop as _loop
from bayeskit.core.device import as_array
from bayeskit.core.linalg import cholesky, low_rank_plus_diagonal, shared_plus_diagonal, sparse_low_rank_plus_diagonal
from bayeskit.core.sampling import flat
from bayeskit.core.status import FitResult, readable_failure
from bayeskit.multilabel import probit
from bayeskit.multilabel.bsml_predict import PREDICTIVES, active_components, component_relevance, predict_proba, predict_scores, transform

PRIORS = ("entrywise", "ard")


class Hyperparams(eqx.Module):
    """Priors and settings of BSML / BSML+ARD / BSSML.

    Parameters
    ----------
    n_components : int
        R, the dimension of the projected subspace (static).
    prior : {"entrywise", "ard"}
        Precision prior on Q: one per entry (BSML) or one per column (BSML+ARD).
    semisupervised : bool
        BSSML: labelled scores truncated at the margin, -1 marks an unobserved label.
    alpha_phi, beta_phi, alpha_lambda, beta_lambda, alpha_psi, beta_psi : float
        Gamma shape / scale of the precisions of Q, b and W (all 1 in the paper; the
        paper's ARD runs use alpha_phi = 1e-10, beta_phi = 1e10).
    sigma_z : float
        Standard deviation of z_i around Q'x_i (0.1 as in the author's code).
    margin : float, optional
        Half-width of the low-density region; default 1/2 for BSSML, 0 otherwise.
    gamma_pos, gamma_neg : float
        Class priors of unobserved labels (BSSML), 1/2 each in the paper.
    """

    n_components: int = eqx.field(static=True)
    prior: str = eqx.field(static=True, default="entrywise")
    semisupervised: bool = eqx.field(static=True, default=False)
    alpha_phi: float | Array = 1.0
    beta_phi: float | Array = 1.0
    alpha_lambda: float | Array = 1.0
    beta_lambda: float | Array = 1.0
    alpha_psi: float | Array = 1.0
    beta_psi: float | Array = 1.0
    sigma_z: float | Array = 0.1
    margin: float | Array | None = None
    gamma_pos: float | Array = 0.5
    gamma_neg: float | Array = 0.5

    def classifier_priors(self) -> probit.Hyperparams:
        margin = self.margin if self.margin is not None else (0.5 if self.semisupervised else 0.0)
        return probit.Hyperparams(
            alpha_lambda=self.alpha_lambda,
            beta_lambda=self.beta_lambda,
            alpha_psi=self.alpha_psi,
            beta_psi=self.beta_psi,
            margin=margin,
            gamma_pos=self.gamma_pos,
            gamma_neg=self.gamma_neg,
        )


class Data(eqx.Module):
    """Training data with what every sweep reuses: the Gram matrix ``X'X`` and, for
    ARD, its eigendecomposition. ``dual``: the entrywise Q update factorises N x N
    matrices instead of D x D ones (features outnumber samples); ``pairs``: it builds
    them from the pairs of nonzeros of X that share a column (sparse X)."""

    X: Float[Array, "n d"]
    Y: Int[Array, "n l"]
    gram: Float[Array, "d d"]
    eig_values: Float[Array, " d"] | None
    eig_vectors: Float[Array, "d d"] | None
    dual: bool = eqx.field(static=True, default=False)
    pairs: column_pairs.ColumnPairs | None = None


class State(eqx.Module):
    """Variational factors of BSML.

    Attributes
    ----------
    phi_shape, phi_scale : (D, R) entrywise or (R,) ARD, Gamma factors of Phi.
    q_mean : (D, R) means of the columns q_s of Q.
    q_var : (D, R) diagonals of their covariances Sigma_s.
    q_logdet : (R,) ``log det Sigma_s``.
    q_trace_gram : (R,) ``tr(Sigma_s X'X)``.
    z_mean : (N, R) embedding means; z_cov (R, R) the covariance shared by every z_i;
    z_logdet its log determinant.
    xq : (N, R) ``X <Q>``, kept from the Z update for the bound.
    classifier : the probit block, :class:`bayeskit.multilabel.probit.State`.
    jitter : largest jitter any factorisation needed in the last sweep (0 normally).
    ok : whether every factorisation of the last sweep succeeded.
    """

    phi_shape: Array
    phi_scale: Array
    q_mean: Array
    q_var: Array
    q_logdet: Array
    q_trace_gram: Array
    z_mean: Array
    z_cov: Array
    z_logdet: Array
    xq: Array
    classifier: probit.State
    jitter: Array
    ok: Array


def prepare(X: Array, Y: Array, hparams: Hyperparams, dual: bool | None = None,
            pairs: column_pairs.ColumnPairs | None = None) -> Data:
    """Precompute ``X'X`` (and its eigendecomposition under ARD) once. ``dual`` (default:
    when D > N) chooses the N x N form of the entrywise Q update; ``pairs`` (the column
    pairs of X, :func:`bayeskit.core.column_pairs.column_pairs`) its sparse variant.

    The eigendecomposition comes from the SVD of X (``X'X = V S^2 V'``) rather than from
    ``X'X`` itself: the squared singular values keep the small eigenvalues that rounding
    in ``X'X`` wipes out in float32 when features are on very different scales (their
    exactness is what keeps the ARD update from diverging along those directions)."""
    gram = X.T @ X
    if hparams.prior == "ard":
        n, d = X.shape
        if n >= d:
            _, sv, Vt = jnp.linalg.svd(X, full_matrices=False)
            vectors = Vt.T
        else:  # a full basis of R^d; the d - n directions outside X's row space have eigenvalue 0
            vectors, sv, _ = jnp.linalg.svd(X.T, full_matrices=True)
            sv = jnp.concatenate([sv, jnp.zeros(d - n, sv.dtype)])
        return Data(X, Y, gram, sv * sv, vectors)
    dual = pairs is not None or (X.shape[1] > X.shape[0] if dual is None else dual)
    return Data(X, Y, gram, None, None, dual=dual, pairs=pairs)


def _c(value, dtype) -> Array:
    return jnp.asarray(value, dtype)


def _impute_nearest(X: Array, Y: Array, chunk_size: int = 256) -> Array:
    """For each (instance, label), the label of the nearest instance (Euclidean) that
    observes that label: the author's 1-NN initialisation of unobserved labels."""
    sq = jnp.sum(X * X, axis=1)
    observed = Y >= 0

    def row(i_x):
        x, s = i_x
        d = s - 2 * (X @ x) + sq
        masked = jnp.where(observed, d[:, None], jnp.inf)  # (N, L)
        nearest = jnp.argmin(masked, axis=0)
        return jnp.take_along_axis(Y, nearest[None], axis=0)[0]

    return jax.lax.map(row, (X, sq), batch_size=chunk_size)


def init(key: PRNGKeyArray, data: Data, hparams: Hyperparams) -> State:
    """The author's initialisation: standard normal means, identity covariances, Gamma
    scales at the prior scale, ``<t> = |N(0, 1)| sign(y)`` (BSSML: plus the margin for
    observed labels, and the sign of the nearest labelled neighbour for unobserved ones)."""
    X, Y = data.X, data.Y
    n, d = X.shape
    r = hparams.n_components
    dtype = X.dtype
    k_q, k_z, k_c = jax.random.split(key, 3)
    q_mean = flat(jax.random.normal, k_q, (d, r), dtype)
    priors = hparams.classifier_priors()
    Y_init = jnp.where(Y < 0, _impute_nearest(X, Y), Y) if hparams.semisupervised else Y
    cs = probit.init_classifier(k_c, Y_init, r, priors, dtype)
    if hparams.semisupervised:  # unobserved entries start without the margin
        margin = _c(priors.margin, dtype) * jnp.where(Y_init == 1, 1.0, -1.0).astype(dtype)
        t_mean = jnp.where(Y < 0, cs.t_mean - margin, cs.t_mean)
        cs = eqx.tree_at(lambda s: (s.t_loc, s.t_mean), cs, (t_mean, t_mean))
    phi_shape_value = _c(hparams.alpha_phi, dtype) + (0.5 if hparams.prior == "entrywise" else 0.5 * d)
    phi_size = (d, r) if hparams.prior == "entrywise" else (r,)
    return State(
        phi_shape=jnp.full(phi_size, phi_shape_value),
        phi_scale=jnp.full(phi_size, _c(hparams.beta_phi, dtype)),
        q_mean=q_mean,
        q_var=jnp.ones((d, r), dtype),
        q_logdet=jnp.zeros((r,), dtype),
        q_trace_gram=jnp.full((r,), jnp.trace(data.gram)),
        z_mean=flat(jax.random.normal, k_z, (n, r), dtype),
        z_cov=jnp.eye(r, dtype=dtype),
        z_logdet=jnp.zeros((), dtype),
        xq=X @ q_mean,
        classifier=cs,
        jitter=jnp.zeros((), dtype),
        ok=jnp.asarray(True),
    )


def update_phi(state: State, data: Data, hparams: Hyperparams) -> State:
    """Update (2) (entrywise) or its ARD form (Section 3.1)."""
    dtype = state.q_mean.dtype
    second = state.q_mean**2 + state.q_var
    if hparams.prior == "ard":
        second = jnp.sum(second, axis=0)
    scale = 1 / (1 / _c(hparams.beta_phi, dtype) + 0.5 * second)
    return eqx.tree_at(lambda s: s.phi_scale, state, scale)


def update_q(state: State, data: Data, hparams: Hyperparams) -> State:
    """Update (3): every column of Q at once.

    Entrywise: one batched, blocked Cholesky of the R precisions
    ``diag<phi_s> + X'X/sigma_z^2`` (:func:`bayeskit.core.linalg.shared_plus_diagonal`);
    only the diagonals of ``Sigma_s``, the means and the log determinants are kept.
    When features outnumber samples (``data.dual``), the same through N x N
    factorisations of ``I + X diag<phi_s>^{-1} X'/sigma_z^2`` (Woodbury,
    :func:`bayeskit.core.linalg.low_rank_plus_diagonal`): O(N^2 D) per column, not O(D^3);
    for sparse X (``data.pairs``) the N x N matrices come from the pairs of nonzeros that
    share a column (:func:`bayeskit.core.linalg.sparse_low_rank_plus_diagonal`).
    ARD: ``Sigma_s = U diag(1/(<phi_s> + Lambda/sigma_z^2)) U'`` with ``X'X = U Lambda U'``.
    """
    dtype = state.q_mean.dtype
    s2 = _c(hparams.sigma_z, dtype) ** 2
    phi = expfam.gamma_mean(state.phi_shape, state.phi_scale)
    rhs = data.X.T @ state.z_mean / s2  # (D, R)
    if hparams.prior == "ard":
        lam = data.eig_values / s2
        U = data.eig_vectors
        h = 1 / (phi[None, :] + lam[:, None])  # (D, R): eigenvalues of Sigma_s
        mean = U @ (h * (U.T @ rhs))
        var = (U * U) @ h
        logdet = jnp.sum(jnp.log(h), axis=0)
        trace_gram = s2 * jnp.sum(lam[:, None] * h, axis=0)
        jitter, ok = jnp.zeros((), dtype), jnp.asarray(True)
    else:
        if data.pairs is not None:
            g = sparse_low_rank_plus_diagonal(data.X / jnp.sqrt(s2), data.pairs.scaled(1 / s2), phi.T, rhs.T)
        elif data.dual:
            g = low_rank_plus_diagonal(data.X / jnp.sqrt(s2), phi.T, rhs.T)
        else:
            g = shared_plus_diagonal(data.gram / s2, phi.T, rhs.T)
        mean, var, logdet = g.mean.T, g.var.T, g.logdet
        # tr(Sigma_s X'X) = sigma_z^2 tr(Sigma_s (P_s - diag phi_s)) = sigma_z^2 (D - sum phi_ds var_ds)
        trace_gram = s2 * (phi.shape[0] - jnp.sum(phi * var, axis=0))
        jitter, ok = jnp.max(g.jitter), jnp.all(g.ok)
    return eqx.tree_at(
        lambda s: (s.q_mean, s.q_var, s.q_logdet, s.q_trace_gram, s.jitter, s.ok),
        state,
        (mean, var, logdet, trace_gram, jnp.maximum(state.jitter, jitter), state.ok & ok),
    )


def update_z(state: State, data: Data, hparams: Hyperparams) -> State:
    """Update (4): the shared covariance Sigma_Z and all embedding means."""
    dtype = state.q_mean.dtype
    s2 = _c(hparams.sigma_z, dtype) ** 2
    cs = state.classifier
    second = probit.coef_second_moments(cs)  # (L, R+1, R+1) E[[b; w][b; w]']
    ww = jnp.sum(second[:, 1:, 1:], axis=0)
    wb = jnp.sum(second[:, 1:, 0], axis=0)
    r = ww.shape[0]
    chol = cholesky(jnp.eye(r, dtype=dtype) / s2 + ww)
    cov = chol.solve(jnp.eye(r, dtype=dtype))
    cov = 0.5 * (cov + cov.T)
    xq = data.X @ state.q_mean
    mean = (xq / s2 + cs.t_mean @ cs.coef_mean[:, 1:] - wb) @ cov
    return eqx.tree_at(
        lambda s: (s.z_mean, s.z_cov, s.z_logdet, s.xq, s.jitter, s.ok),
        state,
        (mean, cov, -chol.logdet(), xq, jnp.maximum(state.jitter, chol.jitter), state.ok & chol.ok),
    )


def _z_gram(state: State) -> Array:
    """``E[F'F]`` of the augmented embeddings ``F = [1, z]``."""
    n = state.z_mean.shape[0]
    return probit.augmented_gram(state.z_mean, state.z_mean.T @ state.z_mean + n * state.z_cov)


def update_classifier(state: State, data: Data, hparams: Hyperparams) -> State:
    """Updates (5)-(8): lambda, Psi, then (b, W), then T, on the current embeddings."""
    priors = hparams.classifier_priors()
    cs = probit.update_precisions(state.classifier, priors)
    cs = probit.update_coefficients(cs, _z_gram(state), probit.augmented_cross(state.z_mean, cs.t_mean))
    cs = probit.update_auxiliary(cs, probit.mean_scores(cs, state.z_mean), data.Y, priors, hparams.semisupervised)
    return eqx.tree_at(
        lambda s: (s.classifier, s.jitter, s.ok),
        state,
        (cs, jnp.maximum(state.jitter, cs.jitter), state.ok & jnp.isfinite(cs.jitter)),
    )


def update(state: State, data: Data, hparams: Hyperparams) -> State:
    """One sweep of Algorithm 1: Phi, Q, Z, then lambda, Psi, (b, W) and T."""
    state = eqx.tree_at(lambda s: (s.jitter, s.ok), state, (jnp.zeros_like(state.jitter), jnp.asarray(True)))
    state = update_phi(state, data, hparams)
    state = update_q(state, data, hparams)
    state = update_z(state, data, hparams)
    return update_classifier(state, data, hparams)


def objective(state: State, data: Data, hparams: Hyperparams) -> Array:
    """The variational lower bound (Appendix A, corrected; see the module docstring)."""
    dtype = state.q_mean.dtype
    n, d = data.X.shape
    r = state.q_mean.shape[1]
    s2 = _c(hparams.sigma_z, dtype) ** 2
    # Phi and Q | Phi.
    elbo = expfam.gamma_elbo(state.phi_shape, state.phi_scale, _c(hparams.alpha_phi, dtype), _c(hparams.beta_phi, dtype))
    second = state.q_mean**2 + state.q_var
    if hparams.prior == "ard":
        elbo += expfam.normal_given_precision(jnp.sum(second, axis=0), state.phi_shape, state.phi_scale, count=d)
    else:
        elbo += expfam.normal_given_precision(second, state.phi_shape, state.phi_scale)
    elbo += expfam.gaussian_entropy(state.q_logdet, d)
    # Z | Q, X: -(1/2 sigma^2) sum_i E||z_i - Q'x_i||^2 - N R/2 log(2 pi sigma^2).
    sq = (
        jnp.sum(state.z_mean**2)
        + n * jnp.trace(state.z_cov)
        - 2 * jnp.sum(state.z_mean * state.xq)
        + jnp.sum(state.q_mean * (data.gram @ state.q_mean))
        + jnp.sum(state.q_trace_gram)
    )
    elbo += -0.5 * sq / s2 - 0.5 * n * r * (expfam.LOG_2PI + jnp.log(s2))
    elbo += n * expfam.gaussian_entropy(state.z_logdet, r)
    elbo += probit.classifier_elbo(
        state.classifier, state.z_mean, _z_gram(state), state.z_cov, data.Y, hparams.classifier_priors(), hparams.semisupervised
    )
    return elbo


def check_hparams(hparams: Hyperparams) -> None:
    """Refuse bad hyperparameters on the host, before anything compiles. Where a transform
    traces a value (``vmap`` over ``sigma_z``, say), the values are the caller's to check."""
    validation.check_int_in("n_components", hparams.n_components, 1)
    validation.check_choice("prior", hparams.prior, PRIORS)
    if not validation.is_concrete(hparams):
        return
    positives = {
        name: getattr(hparams, name)
        for name in ("alpha_phi", "beta_phi", "alpha_lambda", "beta_lambda", "alpha_psi", "beta_psi", "sigma_z", "gamma_pos", "gamma_neg")
    }
    validation.check_positive(**positives)
    if hparams.margin is not None and (not np.all(np.isfinite(hparams.margin)) or np.any(np.asarray(hparams.margin) < 0)):
        raise ValueError(f"margin must be a non-negative finite number, got {hparams.margin!r}.")


def check_inputs(X, Y, hparams: Hyperparams):
    """Refuse bad data or hyperparameters on the host, before anything compiles; return
    the checked X and Y (labels in {0, 1}, -1 for missing)."""
    check_hparams(hparams)
    X = validation.check_matrix(X, "X")
    Y = validation.check_labels(Y, X.shape[0], "Y", allow_missing=True)
    if not hparams.semisupervised and np.any(Y < 0):
        raise ValueError("Y has missing labels (-1); they need the semi-supervised model (semisupervised=True).")
    unseen = np.flatnonzero(np.all(Y < 0, axis=0))
    if unseen.size:
        raise ValueError(f"label(s) {unseen.tolist()} of Y are missing (-1) in every row: with no observed value the model "
                         "has nothing to learn them from (their imputed start made them negative everywhere); drop them.")
    return X, Y


@readable_failure
def fit(
    key: PRNGKeyArray,
    X: Float[Array, "n d"],
    Y: Int[Array, "n l"],
    hparams: Hyperparams,
    *,
    max_iter: int = 500,
    tol: float = 1e-6,
    progress: bool | None = None,
    throw: bool = True,
) -> FitResult:
    """Fit BSML / BSML+ARD / BSSML by the variational updates of Algorithm 1.

    Parameters
    ----------
    key : PRNG key
        Randomness of the initialisation.
    X : array of shape (n_samples, n_features)
        Inputs, used as given (the paper uses raw features). float32 or float64. When
        features outnumber samples and X is sparse (bag-of-words, motifs) and float64, the Q update
        works with the pairs of nonzeros that share a column
        (:mod:`bayeskit.core.column_pairs`); they are found here, on the host, so an X
        traced by an enclosing ``jit`` takes the dense N x N form.
    Y : array of shape (n_samples, n_labels)
        Labels in {0, 1}; with ``hparams.semisupervised``, -1 marks an unobserved label.
    hparams : Hyperparams
    max_iter : int
        Maximum number of sweeps (the paper runs 500 with no convergence check; use
        ``tol=0`` to do the same).
    tol : float
        Relative tolerance on the change of the lower bound.
    progress : bool, optional
        Show a progress bar (not under the ``CI`` environment variable).
    throw : bool
        Raise on a failed fit; use ``False`` under ``vmap`` and read ``status``.

    Returns
    -------
    FitResult
        ``state`` (:class:`State`), the bound after each sweep in ``trace``, ``n_iter``
        and ``status``.

    Raises
    ------
    ValueError
        On bad input, before anything is compiled.

    Examples
    --------
    >>> import jax, numpy as np
    >>> X = np.random.default_rng(0).normal(size=(40, 5))
    >>> Y = (X[:, :2] > 0).astype(int)
    >>> result = fit(jax.random.key(0), X, Y, Hyperparams(n_components=2), max_iter=50)
    >>> predict_proba(result.state, X[:3], Hyperparams(n_components=2)).shape
    (3, 2)
    """
    _loop.check_tol(tol)
    _loop.check_throw(throw)
    max_iter = validation.check_int_in("max_iter", max_iter, 1)
    if validation.is_concrete(X, Y):
        X, Y = check_inputs(X, Y, hparams)
    else:  # traced: the values are the caller's to check, the shapes are static
        validation.check_paired_shapes(X, Y)
        Y = Y[:, None] if jnp.ndim(Y) == 1 else Y
        check_hparams(hparams)
    X = as_array(X)
    pairs = column_pairs.if_they_pay_off(X) if hparams.prior == "entrywise" and validation.is_concrete(X) else None
    hparams = _loop.as_arrays(hparams, X.dtype)
    return _fit(key, X, as_array(Y, jnp.int8), hparams, pairs, max_iter=max_iter,
                tol=_loop.tolerance(tol, X.dtype), progress=progress, throw=throw)


@eqx.filter_jit
def _fit(key, X, Y, hparams, pairs, *, max_iter, tol, progress, throw) -> FitResult:
    data = prepare(X, Y, hparams, pairs=pairs)
    state = init(key, data, hparams)
    return _loop.run(
        lambda s: update(s, data, hparams),
        lambda s: objective(s, data, hparams),
        state,
        max_iter=max_iter,
        tol=tol,
        progress=progress,
        throw=throw,
        failed=lambda s: ~s.ok,
        inputs=X,
    )


def result_like(hparams: Hyperparams, shapes: dict) -> FitResult:
    """Zeros with the structure of ``fit``'s result for data of the given ``shapes``
    (``n_samples``, ``n_features``, ``n_labels``, ``max_iter``, ``dtype``), traced with
    ``jax.eval_shape`` and never run: a template for compiling prediction ahead of a fit
    (the benchmarks use it). Saving and loading need no template (:func:`bayeskit.save`)."""
    dtype = jnp.dtype(shapes["dtype"])
    hp = _loop.as_arrays(hparams, dtype)
    run = lambda key, X, Y: _fit(key, X, Y, hp, None, max_iter=shapes["max_iter"], tol=0.0, progress=None, throw=False)
    X = jax.ShapeDtypeStruct((shapes["n_samples"], shapes["n_features"]), dtype)
    Y = jax.ShapeDtypeStruct((shapes["n_samples"], shapes["n_labels"]), jnp.int8)
    like = jax.eval_shape(run, jax.random.key(0), X, Y)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), like)


__all__ = ["PRIORS", "PREDICTIVES", "Hyperparams", "Data", "State", "prepare", "init", "update_phi", "update_q", "update_z",
           "update_classifier", "update", "objective", "check_hparams", "check_inputs", "fit", "result_like", "transform", "predict_scores",
           "predict_proba", "component_relevance", "active_components"]

"""Figures of Gönen (2014): 2-D embeddings with decision boundaries (Figure 6) and the
relevance of the dimensions that BSML+ARD keeps; ROBPCA's outlier map and the tolerance
ellipse of its scores (Hubert et al. 2005).

matplotlib is an optional dependency: it is imported inside the functions only.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from bayeskit.core.validation import is_sparse
from bayeskit.estimators.multilabel import BSMLClassifier
from bayeskit.multilabel import bsml

__all__ = ["plot_embedding", "plot_bsml_embedding", "plot_ard_relevance", "plot_outlier_map", "plot_tolerance_ellipse"]

NO_LABEL_COLOR = "0.8"


def _axes(ax, figsize=(6.0, 5.0)):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=figsize)
    return ax


def _label_colors(n_labels: int) -> list:
    import matplotlib

    name = "tab10" if n_labels <= 10 else "tab20"
    if n_labels <= 20:
        return [matplotlib.colormaps[name](i) for i in range(n_labels)]
    return list(matplotlib.colormaps["turbo"](np.linspace(0.0, 1.0, n_labels)))


def clip_line(b: float, w, xlim, ylim) -> np.ndarray | None:
    """End points, shape (2, 2), of the segment of ``b + w'z = 0`` inside the box
    ``xlim x ylim``; None when the line misses the box or ``w = 0``."""
    w = np.asarray(w, float)
    ww = float(w @ w)
    if not np.isfinite(ww) or ww == 0.0 or not np.isfinite(b):
        return None
    p0 = -b * w / ww  # the point of the line closest to the origin
    d = np.array([-w[1], w[0]])  # its direction
    t_lo, t_hi = -np.inf, np.inf
    for k, (lo, hi) in enumerate((sorted(xlim), sorted(ylim))):
        if d[k] == 0.0:
            if not lo <= p0[k] <= hi:
                return None
            continue
        t1, t2 = sorted(((lo - p0[k]) / d[k], (hi - p0[k]) / d[k]))
        t_lo, t_hi = max(t_lo, t1), min(t_hi, t2)
    if not t_lo < t_hi:
        return None
    return np.stack([p0 + t_lo * d, p0 + t_hi * d])


def plot_embedding(Z, Y, *, coef=None, label_names=None, ax=None, title=None):
    """Scatter a 2-D embedding coloured by label, with each label's linear boundary.

    Parameters
    ----------
    Z : array of shape (n_samples, 2)
        Embedded points.
    Y : array of shape (n_samples, n_labels)
        Labels; 1 is positive (0 and -1 are not). A point with several positive labels
        is drawn once per label, slightly transparent; a point with none in light grey.
    coef : array of shape (n_labels, 3), optional
        ``[b_o, w_o1, w_o2]`` per label. Each boundary ``b_o + w_o'z = 0`` is drawn in
        its label's colour, clipped to the axes limits that the points set. One line
        per label is appended to ``ax.lines`` in label order; it is empty when the
        boundary does not cross the plotted region.
    label_names : sequence of str, optional
        Legend entries (default ``"label 0"``, ``"label 1"``, ...).
    ax : matplotlib Axes, optional
        Where to draw (default: a new figure).
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        On inconsistent shapes.
    """
    Z = np.asarray(Z, float)
    Y = np.asarray(Y)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Z.ndim != 2 or Z.shape[1] != 2:
        raise ValueError(f"Z must have shape (n_samples, 2), got {Z.shape}.")
    if Y.ndim != 2 or Y.shape[0] != Z.shape[0]:
        raise ValueError(f"Y must have shape ({Z.shape[0]}, n_labels), got {Y.shape}.")
    n_labels = Y.shape[1]
    if label_names is None:
        label_names = [f"label {o}" for o in range(n_labels)]
    if isinstance(label_names, str):
        raise ValueError(f"label_names must be a sequence of names, one per label, got the string {label_names!r}.")
    label_names = [str(s) for s in label_names]
    if len(label_names) != n_labels:
        raise ValueError(f"label_names has {len(label_names)} entries for {n_labels} labels.")
    if coef is not None:
        coef = np.asarray(coef, float)
        if coef.shape != (n_labels, 3):
            raise ValueError(f"coef must have shape ({n_labels}, 3) = [b, w1, w2] per label, got {coef.shape}.")

    ax = _axes(ax)
    colors = _label_colors(n_labels)
    positive = Y == 1
    none = ~positive.any(axis=1)
    if none.any():
        ax.scatter(Z[none, 0], Z[none, 1], s=14, color=NO_LABEL_COLOR, label="no label")
    for o in range(n_labels):
        rows = positive[:, o]
        ax.scatter(Z[rows, 0], Z[rows, 1], s=14, color=colors[o], alpha=0.5, label=label_names[o])
    if coef is not None:
        xlim, ylim = ax.get_xlim(), ax.get_ylim()
        for o in range(n_labels):
            seg = clip_line(coef[o, 0], coef[o, 1:], xlim, ylim)
            xs, ys = (seg[:, 0], seg[:, 1]) if seg is not None else ([], [])
            ax.plot(xs, ys, color=colors[o], lw=2, label=f"_boundary {label_names[o]}")
        ax.set_xlim(xlim)
        ax.set_ylim(ylim)
    legend = ax.legend(fontsize="small", loc="best")
    for handle in legend.legend_handles:
        handle.set_alpha(1.0)
    ax.set_xlabel("$z_1$")
    ax.set_ylabel("$z_2$")
    if title is not None:
        ax.set_title(title)
    return ax


def _bsml_state(state) -> bsml.State:
    """``state``, or the ``state_`` of a fitted :class:`~bayeskit.estimators.BSMLClassifier`."""
    if isinstance(state, BSMLClassifier):
        check_is_fitted(state, "state_")
        return state.state_
    return state


def plot_bsml_embedding(state: bsml.State | BSMLClassifier, X, Y, label_names=None, ax=None):
    """Figure 6 (b): the BSML embedding ``<Q>'x`` of ``X`` with the learned boundaries.

    Parameters
    ----------
    state : bayeskit.multilabel.bsml.State or BSMLClassifier
        A fitted state with ``n_components = 2`` (``result.state``), or a fitted
        ``BSMLClassifier`` (its ``state_`` is plotted).
    X : array or scipy.sparse matrix of shape (n_samples, n_features)
    Y : array of shape (n_samples, n_labels)
        One column per label of the fit.
    label_names : sequence of str, optional
    ax : matplotlib Axes, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        If the state's subspace dimension R is not 2, the state is batched, or X's width
        or Y's number of labels is not the state's.
    sklearn.exceptions.NotFittedError
        If ``state`` is a ``BSMLClassifier`` not yet fitted.
    """
    state = _bsml_state(state)
    q = np.asarray(state.q_mean)
    if q.ndim != 2:
        raise ValueError(f"state must be a single fit (q_mean of shape (D, R)), got q_mean of shape {q.shape}.")
    if q.shape[1] != 2:
        raise ValueError(f"plot_bsml_embedding needs a 2-D subspace: R must be 2, got R = {q.shape[1]}.")
    X = X.toarray() if is_sparse(X) else np.asarray(X)
    if X.ndim != 2 or X.shape[1] != q.shape[0]:
        raise ValueError(f"X must have shape (n_samples, {q.shape[0]}) for a state fitted on {q.shape[0]} features, got {X.shape}.")
    coef = np.asarray(state.classifier.coef_mean)
    Y = np.asarray(Y)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[1] != coef.shape[0]:
        raise ValueError(f"Y must have {coef.shape[0]} labels, those of the fit: shape (n_samples, {coef.shape[0]}), got {Y.shape}.")
    Z = np.asarray(bsml.transform(state, X))
    return plot_embedding(Z, Y, coef=coef, label_names=label_names, ax=ax, title="BSML")


def plot_ard_relevance(state: bsml.State | BSMLClassifier, ax=None, *, threshold: float = 1e-3):
    """Bar chart (log scale) of ``E[q_s'q_s]`` per dimension of a BSML(+ARD) fit.

    Dimensions that survive (:func:`bayeskit.multilabel.bsml.active_components` with
    ``threshold``) are drawn in colour, switched-off ones in grey.

    Parameters
    ----------
    state : bayeskit.multilabel.bsml.State or BSMLClassifier
        A fitted state, or a fitted ``BSMLClassifier`` (its ``state_`` is plotted).
    ax : matplotlib Axes, optional
    threshold : float
        Relative relevance below which a dimension counts as switched off.

    Returns
    -------
    matplotlib.axes.Axes
        One bar per dimension, in order, in ``ax.patches``.

    Raises
    ------
    ValueError
        If the state is batched (several restarts).
    sklearn.exceptions.NotFittedError
        If ``state`` is a ``BSMLClassifier`` not yet fitted.
    """
    state = _bsml_state(state)
    q = np.asarray(state.q_mean)
    if q.ndim != 2:
        raise ValueError(f"state must be a single fit (q_mean of shape (D, R)), got q_mean of shape {q.shape}: "
                         "take one restart's state, e.g. jax.tree.map(lambda a: a[0], state).")
    relevance = np.asarray(bsml.component_relevance(state))
    active = np.asarray(bsml.active_components(state, threshold))
    ax = _axes(ax, figsize=(5.0, 3.5))
    dims = np.arange(1, relevance.size + 1)
    colors = ["C0" if a else NO_LABEL_COLOR for a in active]
    ax.bar(dims, relevance, color=colors)
    ax.set_yscale("log")
    ax.set_xticks(dims)
    ax.set_xlabel("dimension $s$")
    ax.set_ylabel(r"$E[q_s^\top q_s]$")
    ax.set_title(f"ARD: {int(active.sum())} of {relevance.size} dimensions active")
    return ax


LABEL_STYLES = {"regular": ("0.6", "o"), "good_leverage": ("C0", "s"), "orthogonal": ("C2", "^"),
                "bad_leverage": ("C3", "D")}


def _robpca_labels(labels, n: int) -> np.ndarray:
    """``labels`` as ROBPCA's class names, one per point: the names (``ROBPCA.labels_``) or
    their codes 0-3 in :data:`bayeskit.robust.robpca.LABELS` (``robpca.diagnostics(...).labels``)."""
    from bayeskit.robust.robpca import LABELS

    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"labels must have one entry per point ({n}), got shape {labels.shape}.")
    if labels.dtype.kind in "iu" and labels.size and labels.min() >= 0 and labels.max() < len(LABELS):
        return np.asarray(LABELS)[labels]
    unknown = sorted(set(map(str, labels)) - set(LABELS)) if labels.dtype.kind in "UO" else [f"an array of {labels.dtype}"]
    if unknown:
        raise ValueError(f"labels must be ROBPCA's classes {list(LABELS)} (its labels_) or their codes 0-3, got {unknown[:3]}.")
    return labels.astype(str)


def _scatter_classes(ax, x, y, labels) -> None:
    """One scatter per ROBPCA class present, in its colour and marker, named with its count."""
    for label, (color, marker) in LABEL_STYLES.items():
        mask = labels == label
        if mask.any():
            ax.scatter(x[mask], y[mask], s=18, color=color, marker=marker, label=f"{label} ({mask.sum()})")


def plot_outlier_map(score_distances, orthogonal_distances, sd_cutoff, od_cutoff, labels, *, names=None, ax=None,
                     title=None):
    """ROBPCA's diagnostic plot (Hubert et al. 2005, Figure 2): orthogonal against score
    distance, the two cutoffs, points marked by their class; the flagged points annotated
    with ``names``.

    Parameters
    ----------
    score_distances, orthogonal_distances : arrays of shape (n_samples,)
        ``ROBPCA.score_distances_`` and ``orthogonal_distances_``.
    sd_cutoff, od_cutoff : float
        ``ROBPCA.sd_cutoff_`` and ``od_cutoff_`` (an orthogonal cutoff of 0, when every
        component is kept, draws no horizontal line).
    labels : array of shape (n_samples,)
        ``ROBPCA.labels_``: "regular", "good_leverage", "orthogonal" or "bad_leverage"
        (or their codes 0-3, the functional ``robpca.diagnostics(...).labels``).
    names : sequence of shape (n_samples,), optional
        Annotations of the flagged points (default: 1-based row numbers).
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        On distances, labels or names of different lengths, labels that are not ROBPCA's
        classes, or cutoffs that are not finite and non-negative.
    """
    sd, od = np.asarray(score_distances, float), np.asarray(orthogonal_distances, float)
    if sd.ndim != 1 or od.shape != sd.shape:
        raise ValueError(f"score_distances and orthogonal_distances must be 1-D of one length, got {sd.shape} and {od.shape}.")
    labels = _robpca_labels(labels, sd.size)
    names = np.arange(1, len(sd) + 1).astype(str) if names is None else np.asarray(names)
    if names.shape != sd.shape:
        raise ValueError(f"names must have one entry per point ({sd.size}), got shape {names.shape}.")
    for cutoff, name in ((sd_cutoff, "sd_cutoff"), (od_cutoff, "od_cutoff")):
        if not (np.ndim(cutoff) == 0 and np.isfinite(cutoff) and cutoff >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {cutoff!r}.")
    ax = _axes(ax)
    _scatter_classes(ax, sd, od, labels)
    ax.axvline(sd_cutoff, color="k", lw=0.8, ls="--")
    if od_cutoff > 0:
        ax.axhline(od_cutoff, color="k", lw=0.8, ls="--")
    for i in np.nonzero(labels != "regular")[0]:
        ax.annotate(names[i], (sd[i], od[i]), fontsize=6, xytext=(2, 2), textcoords="offset points")
    ax.set(xlabel="score distance", ylabel="orthogonal distance", title=title)
    ax.legend(fontsize=7)
    return ax


def plot_tolerance_ellipse(scores, eigenvalues, *, quantile: float = 0.975, labels=None, ax=None, title=None):
    """The first two scores with the ``quantile`` tolerance ellipse
    t_1^2 / l_1 + t_2^2 / l_2 = chi2_{2, quantile} (scores in the eigenbasis, so it is
    axis-aligned).

    Parameters
    ----------
    scores : array of shape (n_samples, k), k >= 2
        ``ROBPCA.transform(X)``.
    eigenvalues : array of shape (k,)
        ``ROBPCA.eigenvalues_``.
    quantile : float in (0, 1)
    labels : array of shape (n_samples,), optional
        ``ROBPCA.labels_`` (or their codes 0-3); the points are marked by class, with a
        legend (default: all regular, no legend).
    ax : matplotlib Axes, optional
    title : str, optional

    Returns
    -------
    matplotlib.axes.Axes

    Raises
    ------
    ValueError
        On fewer than two components, eigenvalues that are not positive, a quantile
        outside (0, 1), or labels that are not ROBPCA's classes of one per point.
    """
    from scipy.stats import chi2

    T, lam = np.asarray(scores, float), np.asarray(eigenvalues, float)
    if T.ndim != 2 or T.shape[1] < 2:
        raise ValueError(f"scores must have shape (n_samples, k) with k >= 2 components, got {T.shape}.")
    if lam.ndim != 1 or lam.size < 2 or not np.all(np.isfinite(lam[:2]) & (lam[:2] > 0)):
        raise ValueError(f"eigenvalues must hold at least two positive values, got {lam}.")
    if not 0 < quantile < 1:
        raise ValueError(f"quantile must be in (0, 1), got {quantile!r}.")
    T = T[:, :2]
    given = labels is not None
    labels = _robpca_labels(labels, len(T)) if given else np.full(len(T), "regular")
    ax = _axes(ax)
    _scatter_classes(ax, T[:, 0], T[:, 1], labels)
    radius = np.sqrt(chi2.ppf(quantile, 2))
    angle = np.linspace(0, 2 * np.pi, 200)
    l1, l2 = lam[:2]
    ax.plot(radius * np.sqrt(l1) * np.cos(angle), radius * np.sqrt(l2) * np.sin(angle), color="k", lw=1)
    ax.set(xlabel="score 1", ylabel="score 2", title=title)
    if given:
        ax.legend(fontsize=7)
    return ax

"""bayeskit.plotting: embeddings with decision boundaries (Figure 6) and ARD relevance."""

import os
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bayeskit import plotting  # noqa: E402
from bayeskit.multilabel import bsml

N, D, L = 60, 5, 3


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, D))
    W = rng.normal(size=(D, L))
    Y = (X @ W + 0.3 * rng.normal(size=(N, L)) > 0).astype(np.int8)
    Y[:4] = 0  # a few points without any positive label
    return X, Y


@pytest.fixture(scope="module")
def state(data):
    X, Y = data
    return bsml.fit(jax.random.key(0), X, Y, bsml.Hyperparams(n_components=2), max_iter=30).state


def _offsets(ax, label):
    (coll,) = [c for c in ax.collections if c.get_label() == label]
    return np.asarray(coll.get_offsets())


def _check_boundaries(ax, coef, n_lines):
    """Every drawn boundary has its end points on ``b + w'z = 0`` and inside the axes."""
    assert len(ax.lines) == n_lines
    xlim, ylim = ax.get_xlim(), ax.get_ylim()
    scale = np.max(np.abs(np.concatenate([xlim, ylim])))
    drawn = 0
    for o, line in enumerate(ax.lines):
        xy = line.get_xydata()
        if xy.size == 0:
            continue
        drawn += 1
        assert xy.shape == (2, 2)
        b, w = coef[o, 0], coef[o, 1:]
        np.testing.assert_allclose(b + xy @ w, 0.0, atol=1e-9 * (abs(b) + np.abs(w).sum() * scale))
        assert np.all((xy[:, 0] >= xlim[0] - 1e-9) & (xy[:, 0] <= xlim[1] + 1e-9))
        assert np.all((xy[:, 1] >= ylim[0] - 1e-9) & (xy[:, 1] <= ylim[1] + 1e-9))
        # clipped to the box: both end points on its border, and distinct
        on_border = np.isclose(xy[:, 0], xlim[0]) | np.isclose(xy[:, 0], xlim[1]) | np.isclose(xy[:, 1], ylim[0]) | np.isclose(xy[:, 1], ylim[1])
        assert on_border.all()
        assert np.linalg.norm(xy[0] - xy[1]) > 0
    return drawn


def test_bsml_embedding_points_and_boundaries(state, data):
    X, Y = data
    names = ["a", "b", "c"]
    ax = plotting.plot_bsml_embedding(state, X, Y, label_names=names)
    Z = np.asarray(X @ state.q_mean)
    # each label's scatter holds exactly that label's positive points, at Z
    for o, name in enumerate(names):
        np.testing.assert_allclose(_offsets(ax, name), Z[Y[:, o] == 1])
    none = ~(Y == 1).any(axis=1)
    np.testing.assert_allclose(_offsets(ax, "no label"), Z[none])
    assert sum(len(c.get_offsets()) for c in ax.collections) == int((Y == 1).sum() + none.sum())
    # one boundary line per label, in its colour, on b + w'z = 0
    coef = np.asarray(state.classifier.coef_mean)
    drawn = _check_boundaries(ax, coef, L)
    assert drawn == L  # labels are linear in X: every boundary crosses the data
    for o, line in enumerate(ax.lines):
        assert matplotlib.colors.same_color(line.get_color(), ax.collections[o + 1].get_facecolor()[0][:3])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["no label", *names]


def test_plot_embedding_clips_and_skips_boundaries():
    Z = np.array([[0.0, 0.0], [1.0, 1.0], [0.5, 0.2], [0.9, 0.1]])
    Y = np.array([[1, 0, -1], [0, 1, 1], [1, 1, 0], [-1, -1, -1]])  # -1 (unobserved) is not positive
    coef = np.array([
        [-0.5, 1.0, 0.0],  # vertical line x = 0.5
        [-0.8, 1.0, 1.0],  # a diagonal x + y = 0.8
        [100.0, 1.0, 1.0],  # far outside the data: not drawn
    ])
    fig, ax = plt.subplots()
    out = plotting.plot_embedding(Z, Y, coef=coef, ax=ax, title="toy")
    assert out is ax and ax.get_title() == "toy"
    np.testing.assert_allclose(_offsets(ax, "no label"), Z[[3]])
    np.testing.assert_allclose(_offsets(ax, "label 2"), Z[[1]])
    assert _check_boundaries(ax, coef, 3) == 2
    assert ax.lines[2].get_xydata().size == 0
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0], 0.5)
    np.testing.assert_allclose(sorted(xy[:, 1]), ax.get_ylim())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["no label", "label 0", "label 1", "label 2"]


def test_clip_line_segment():
    seg = plotting.clip_line(0.0, [1.0, -1.0], (0, 2), (0, 1))  # y = x inside [0,2]x[0,1]
    np.testing.assert_allclose(sorted(map(tuple, seg)), [(0, 0), (1, 1)], atol=1e-12)
    assert plotting.clip_line(1.0, [0.0, 0.0], (0, 1), (0, 1)) is None
    assert plotting.clip_line(-5.0, [0.0, 1.0], (0, 1), (0, 1)) is None  # y = 5


def test_plot_embedding_rejects_bad_shapes():
    Z, Y = np.zeros((5, 2)), np.zeros((5, 2), int)
    with pytest.raises(ValueError, match="Z must have shape"):
        plotting.plot_embedding(np.zeros((5, 3)), Y)
    with pytest.raises(ValueError, match="coef must have shape"):
        plotting.plot_embedding(Z, Y, coef=np.zeros((2, 4)))
    with pytest.raises(ValueError, match="label_names"):
        plotting.plot_embedding(Z, Y, label_names=["only one"])
    with pytest.raises(ValueError, match="label_names must be a sequence of names"):
        plotting.plot_embedding(Z, Y, label_names="ab")  # two characters are not two names


def test_bsml_embedding_needs_two_components(state, data):
    X, Y = data
    wide = eqx.tree_at(lambda s: s.q_mean, state, jnp.zeros((D, 3)))
    with pytest.raises(ValueError, match="R must be 2"):
        plotting.plot_bsml_embedding(wide, X, Y)


def test_ard_relevance_bars(state):
    relevance_shape = (D, 4)
    q = jnp.zeros(relevance_shape).at[:, 0].set(1.0).at[:, 1].set(0.5).at[:, 2].set(1e-4).at[:, 3].set(1e-5)
    ard = eqx.tree_at(lambda s: (s.q_mean, s.q_var), state, (q, jnp.full(relevance_shape, 1e-12)))
    ax = plotting.plot_ard_relevance(ard)
    assert len(ax.patches) == 4
    heights = np.array([p.get_height() for p in ax.patches])
    np.testing.assert_allclose(heights, np.asarray(bsml.component_relevance(ard)))
    assert ax.get_yscale() == "log"
    grey = [matplotlib.colors.same_color(p.get_facecolor()[:3], plotting.NO_LABEL_COLOR) for p in ax.patches]
    assert grey == [False, False, True, True]
    assert "2 of 4" in ax.get_title()
    # the fitted R = 2 state: one bar per component
    assert len(plotting.plot_ard_relevance(state).patches) == 2


ROBPCA_LABELS = np.array(["regular"] * 6 + ["good_leverage", "orthogonal", "bad_leverage", "bad_leverage"])


def test_outlier_map_places_each_class_and_names_the_flagged_points():
    rng = np.random.default_rng(1)
    sd, od = rng.uniform(0, 5, 10), rng.uniform(0, 3, 10)
    names = [f"row{i}" for i in range(10)]
    ax = plotting.plot_outlier_map(sd, od, 2.5, 1.5, ROBPCA_LABELS, names=names)
    for label in ("regular", "good_leverage", "orthogonal", "bad_leverage"):
        mask = ROBPCA_LABELS == label
        np.testing.assert_array_equal(_offsets(ax, f"{label} ({mask.sum()})"), np.c_[sd[mask], od[mask]])
    assert [line.get_xdata()[0] for line in ax.lines[:1]] == [2.5] and ax.lines[1].get_ydata()[0] == 1.5
    assert sorted(t.get_text() for t in ax.texts) == ["row6", "row7", "row8", "row9"]
    codes = np.array([0] * 6 + [1, 2, 3, 3])  # the functional diagnostics' labels
    again = plotting.plot_outlier_map(sd, od, 2.5, 1.5, codes)
    np.testing.assert_array_equal(_offsets(again, "bad_leverage (2)"), np.c_[sd[8:], od[8:]])


def test_tolerance_ellipse_is_the_chi_square_contour():
    from scipy.stats import chi2

    T = np.random.default_rng(2).normal(size=(10, 3)) * [2.0, 1.0, 0.5]
    lam = np.array([4.0, 1.0, 0.25])
    ax = plotting.plot_tolerance_ellipse(T, lam, quantile=0.9, labels=ROBPCA_LABELS)
    xy = ax.lines[0].get_xydata()
    np.testing.assert_allclose(xy[:, 0] ** 2 / lam[0] + xy[:, 1] ** 2 / lam[1], chi2.ppf(0.9, 2), rtol=1e-12)
    np.testing.assert_array_equal(_offsets(ax, "regular (6)"), T[:6, :2])
    assert ax.get_legend() is not None


def test_outlier_plots_refuse_bad_input():
    sd = np.ones(10)
    for labels, words in ((ROBPCA_LABELS[:9], "one entry per point"), (np.zeros(10, bool), "array of bool"),
                          (np.array(["regular"] * 9 + ["outlier"]), "outlier"), (np.full(10, 7), "array of int")):
        with pytest.raises(ValueError, match=words):
            plotting.plot_outlier_map(sd, sd, 1.0, 1.0, labels)
    with pytest.raises(ValueError, match="1-D of one length"):
        plotting.plot_outlier_map(sd, sd[:9], 1.0, 1.0, ROBPCA_LABELS)
    with pytest.raises(ValueError, match="names must have one entry"):
        plotting.plot_outlier_map(sd, sd, 1.0, 1.0, ROBPCA_LABELS, names=["a"])
    with pytest.raises(ValueError, match="sd_cutoff"):
        plotting.plot_outlier_map(sd, sd, np.nan, 1.0, ROBPCA_LABELS)
    T = np.ones((10, 2))
    with pytest.raises(ValueError, match="k >= 2 components"):
        plotting.plot_tolerance_ellipse(T[:, :1], [1.0])
    with pytest.raises(ValueError, match="quantile"):
        plotting.plot_tolerance_ellipse(T, [1.0, 1.0], quantile=1.5)
    with pytest.raises(ValueError, match="two positive"):
        plotting.plot_tolerance_ellipse(T, [1.0, 0.0])


def test_bsml_plots_refuse_a_batched_state_or_other_features(state, data):
    X, Y = data
    with pytest.raises(ValueError, match=f"X must have shape \\(n_samples, {D}\\)"):
        plotting.plot_bsml_embedding(state, X[:, :3], Y)
    batched = jax.tree.map(lambda a: jnp.stack([a, a]), state)
    with pytest.raises(ValueError, match="single fit .* take one restart"):
        plotting.plot_ard_relevance(batched)


def test_bsml_embedding_takes_sparse_X_and_a_fitted_estimator(state, data):
    import scipy.sparse
    from sklearn.exceptions import NotFittedError

    from bayeskit.estimators import BSMLClassifier

    X, Y = data
    Z = np.asarray(bsml.transform(state, X))
    ax = plotting.plot_bsml_embedding(state, scipy.sparse.csr_matrix(X), Y)
    np.testing.assert_allclose(_offsets(ax, "label 0"), Z[Y[:, 0] == 1])
    est = BSMLClassifier(2, max_iter=5, tol=0, random_state=0).fit(X, Y)
    ax = plotting.plot_bsml_embedding(est, X, Y)
    np.testing.assert_allclose(_offsets(ax, "label 0"), np.asarray(est.transform(X))[Y[:, 0] == 1])
    assert len(plotting.plot_ard_relevance(est).patches) == 2
    with pytest.raises(NotFittedError):
        plotting.plot_bsml_embedding(BSMLClassifier(2), X, Y)


def test_bsml_embedding_names_Y_and_its_label_count(state, data):
    X, Y = data
    with pytest.raises(ValueError, match=f"Y must have {L} labels"):
        plotting.plot_bsml_embedding(state, X, Y[:, :2])


def test_matplotlib_imported_lazily():
    code = "import sys, bayeskit.plotting; print('matplotlib' in sys.modules)"
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root, env=env)
    assert out.stdout.strip() == "False"

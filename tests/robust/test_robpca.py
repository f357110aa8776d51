"""ROBPCA: orthogonal and scale equivariance, closeness to classical PCA without outliers,
planted outliers of each kind recovered by the outlier map, exact-fit directions, the
paper's data sets against rrcov's flagged points, the choice of k, jit/vmap, bad input."""

import jax
import numpy as np
import pytest
from scipy.stats import median_abs_deviation

from bayeskit.datasets import load_robpca
from bayeskit.estimators import ROBPCA
from bayeskit.robust import robpca


def _planted(n=200, p=10, seed=0):
    """A k = 2 subspace with small noise, and 10 points of each outlier kind: indices of
    good leverage, orthogonal outliers and bad leverage."""
    rng = np.random.default_rng(seed)
    basis = np.linalg.qr(rng.normal(size=(p, 2)))[0]
    X = rng.normal(size=(n, 2)) * [3.0, 1.5] @ basis.T + 0.1 * rng.normal(size=(n, p)) + 5.0
    normal = np.linalg.qr(np.c_[basis, rng.normal(size=(p, 1))])[0][:, 2]  # orthogonal to the subspace
    good, orth, bad = np.arange(10), np.arange(10, 20), np.arange(20, 30)
    X[good] += 25 * basis[:, 0]
    X[orth] += 4 * normal
    X[bad] += 25 * basis[:, 0] + 4 * normal
    return X, basis, good, orth, bad


def _projector(components):
    return components @ components.T


def test_orthogonal_and_scale_equivariance():
    X, *_ = _planted(n=80, p=6, seed=1)
    rng = np.random.default_rng(2)
    Q, b = np.linalg.qr(rng.normal(size=(6, 6)))[0], rng.normal(size=6)
    r1 = robpca.fit(jax.random.key(0), X, 2, use_mcd=False).state
    r2 = robpca.fit(jax.random.key(0), X @ Q + b, 2, use_mcd=False).state
    r3 = robpca.fit(jax.random.key(0), 3.0 * X, 2, use_mcd=False).state
    np.testing.assert_allclose(r2.center, np.asarray(r1.center) @ Q + b, atol=1e-8)
    np.testing.assert_allclose(_projector(np.asarray(r2.components)),
                               Q.T @ _projector(np.asarray(r1.components)) @ Q, atol=1e-8)
    np.testing.assert_allclose(r2.eigenvalues, r1.eigenvalues, rtol=1e-8)
    np.testing.assert_allclose(r3.eigenvalues, 9 * np.asarray(r1.eigenvalues), rtol=1e-8)
    np.testing.assert_array_equal(r1.labels, r2.labels)


def test_close_to_classical_pca_without_outliers():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 5)) * [4.0, 2.5, 1.5, 0.7, 0.3]
    for use_mcd in (True, False):
        r = robpca.fit(jax.random.key(1), X, 2, use_mcd=use_mcd).state
        values, vectors = np.linalg.eigh(np.cov(X.T))
        classical = vectors[:, ::-1][:, :2]
        cosines = np.linalg.svd(classical.T @ np.asarray(r.components), compute_uv=False)
        assert cosines.min() > 0.99
        np.testing.assert_allclose(r.eigenvalues, values[::-1][:2], rtol=0.15)
        labels = np.asarray(r.labels)
        assert np.mean(labels % 2 == 1) < 0.06  # SD flags: 2.5% expected at the normal
        assert np.mean(labels >= 2) < 0.12  # OD flags: the cutoff (4) is calibrated on the MCD half of a skewed OD^(2/3)


@pytest.mark.parametrize("use_mcd", [True, False])
def test_planted_outliers_are_labelled_by_kind(use_mcd):
    X, basis, good, orth, bad = _planted()
    est = ROBPCA(n_components=2, use_mcd=use_mcd, random_state=0).fit(X)
    high_sd = est.score_distances_ > est.sd_cutoff_
    high_od = est.orthogonal_distances_ > est.od_cutoff_
    assert np.all(high_sd[good]) and np.all(high_od[orth]) and np.all(high_sd[bad] & high_od[bad])
    # the cutoffs pass about 95% of the regular points, and the outliers of one kind as often
    assert np.mean(est.labels_[good] == "good_leverage") >= 0.8 and np.mean(est.labels_[orth] == "orthogonal") >= 0.8
    assert np.mean(est.labels_[30:] == "regular") > 0.85
    cosines = np.linalg.svd(basis.T @ est.components_, compute_uv=False)
    assert cosines.min() > 0.999  # the outliers do not tilt the subspace
    np.testing.assert_allclose(est.transform(X), est.scores_, atol=1e-8)


def test_exact_fit_directions_reduce_the_dimension():
    """25 of 30 points on the plane x3 = 0, and a pair of points differing in x3 only: that
    direction has s_MCD = 0, the data are projected onto the plane, and the plane is found
    (all 435 pairs are directions, so that one is among them whatever the key)."""
    rng = np.random.default_rng(4)
    X = np.c_[rng.normal(size=(30, 2)) * [3.0, 1.0], np.zeros(30)]
    X[25:, 2] = rng.uniform(3, 6, 5)
    X[25, :2] = X[0, :2]
    r = robpca.fit(jax.random.key(0), X, 2, use_mcd=False, n_directions=435).state
    assert int(r.n_reductions) >= 1
    np.testing.assert_allclose(np.abs(np.asarray(r.components)[2]), 0, atol=1e-8)
    assert np.all(np.asarray(r.labels)[25:] >= 2)  # the off-plane points have a large orthogonal distance


def test_octane_and_cars_flag_rrcovs_outliers():
    """rrcov 1.7-2's PcaHubert flags octane samples 25, 26, 36-39 as bad leverage (k = 2), and
    on the mad-scaled car data (k = 2) the sports cars and vans 25 30 32 34 36 102 106 107 111."""
    X = load_robpca("octane")["X"]
    est = ROBPCA(n_components=2, random_state=0).fit(X)
    assert set(np.nonzero(est.labels_ == "bad_leverage")[0] + 1) == {25, 26, 36, 37, 38, 39}
    C = load_robpca("cars")["X"]
    C = (C - np.median(C, 0)) / median_abs_deviation(C, 0, scale="normal")
    est = ROBPCA(n_components=2, random_state=0).fit(C)
    assert {25, 30, 32, 34, 36, 102, 106, 107, 111} <= set(np.nonzero(est.labels_ == "bad_leverage")[0] + 1)


def test_glass_flags_the_other_detector_settings():
    """Rows 57-63, 74-76 and 143-180 (other detector settings) have large score distances."""
    est = ROBPCA(n_components=3, random_state=0).fit(load_robpca("glass")["X"])
    high_sd = set(np.nonzero(est.score_distances_ > est.sd_cutoff_)[0] + 1)
    assert set(range(143, 181)) <= high_sd and len({57, 58, 59, 60, 61, 62, 63, 74, 75, 76} & high_sd) >= 8


def test_choice_of_k_as_rrcov():
    assert robpca.choose_k(np.array([10.0, 5.0, 1.0, 0.5, 0.001]), 10, 5) == 2  # 83% after two
    assert robpca.choose_k(np.array([10.0, 9.0, 8.0, 7.0, 1e-3]), 10, 5) == 4  # the ratio test stops at 1e-3
    assert robpca.choose_k(np.array([10.0, 9.0, 8.0, 7.0, 6.0]), 3, 5) == 3  # k_max
    # rrcov counts the first small eigenvalue in (then the 80% rule applies)
    assert robpca.choose_k(np.array([10.0, 9.0, 8.0, 7.0, 1e-3]), 10, 5, "rrcov") == 4
    assert robpca.choose_k(np.array([10.0, 1e-3, 1e-4]), 10, 3) == 1
    assert robpca.choose_k(np.array([10.0, 1e-3, 1e-4]), 10, 3, "rrcov") == 1  # 10 / 10.0011 > 80% after one
    X, *_ = _planted(seed=5)
    assert ROBPCA(random_state=0).fit(X).n_components_ == 2


def test_full_rank_k_has_no_orthogonal_outliers():
    X, *_ = _planted(n=60, p=3, seed=6)
    r = robpca.fit(jax.random.key(0), X, 3).state
    assert float(np.max(r.orthogonal_distances)) == 0 and not np.any(np.asarray(r.labels) >= 2)


def test_jit_and_vmap_over_keys():
    X, *_ = _planted(n=60, p=8, seed=7)
    fit = jax.jit(lambda key: robpca.fit(key, X, 2, n_starts=50).state)
    keys = jax.random.split(jax.random.key(0), 3)
    batched = jax.vmap(fit)(keys)
    np.testing.assert_allclose(batched.eigenvalues[2], fit(keys[2]).eigenvalues, rtol=1e-10)


@pytest.mark.parametrize("kwargs, X, match", [
    (dict(n_components=4), np.random.default_rng(0).normal(size=(20, 3)), "n_components"),
    (dict(alpha=0.4), np.random.default_rng(0).normal(size=(20, 3)), "alpha"),
    (dict(alpha=1.2), np.random.default_rng(0).normal(size=(20, 3)), "alpha"),
    (dict(), np.ones((1, 3)), "at least 2"),
    (dict(), np.array([[1.0, np.inf], [0.0, 1.0], [2.0, 2.0]]), "non-finite"),
    (dict(), np.ones((5, 3)), "no spread"),
])
def test_bad_input(kwargs, X, match):
    with pytest.raises(ValueError, match=match):
        ROBPCA(**kwargs).fit(X)


@pytest.mark.parametrize("alpha", [0.4, 2.0, -1.0, float("nan")])
def test_the_functional_fit_refuses_an_alpha_outside_its_range(alpha):
    """alpha >= 1 took h = n (plain PCA, outliers unflagged), NaN failed converting h."""
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match=r"alpha must be in \[0.5, 1\]"):
        robpca.fit(jax.random.key(0), X, 2, alpha)


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e-20), (np.float32, 1e20), (np.float64, 1e-150), (np.float64, 1e150)])
def test_estimator_is_scale_equivariant_far_from_unit_scale(dtype, scale):
    """ROBPCA(a X): the same k, subspace and labels, centre and scores times a, eigenvalues
    times a^2, in float32 at 1e+-20 and float64 at 1e+-150."""
    X = load_robpca("octane")["X"].astype(dtype)
    ref = ROBPCA(random_state=0).fit(X)
    got = ROBPCA(random_state=0).fit(X * dtype(scale))
    assert got.n_components_ == ref.n_components_
    np.testing.assert_array_equal(got.labels_, ref.labels_)
    np.testing.assert_allclose(got.eigenvalues_ / scale / scale, ref.eigenvalues_, rtol=1e-3)
    np.testing.assert_allclose(np.abs(got.components_), np.abs(ref.components_), atol=1e-3)
    np.testing.assert_allclose(got.scores_ / scale, ref.scores_, rtol=1e-3, atol=1e-3 * np.abs(ref.scores_).max())


def _r_generator_pairs(n, count):
    """rrcov's extradir (random branch) transcribed with its floating-point arithmetic: uniran's
    seed <- floor(seed * 5761) + 999 reduced modulo 65536 by floor division, 1-based indices."""
    seed, out = 0.0, []

    def uniran(seed):
        seed = np.floor(seed * 5761) + 999
        quot = np.floor(seed / 65536)
        seed = np.floor(seed) - np.floor(quot * 65536)
        return seed, seed / 65536

    for _ in range(count):
        seed, u = uniran(seed)
        a = np.floor(u * n) + 1
        seed, u = uniran(seed)
        b = np.floor(u * n) + 1
        while b == a:
            seed, u = uniran(seed)
            b = np.floor(u * n) + 1
        out.append((int(a) - 1, int(b) - 1))
    return np.array(out)


@pytest.mark.parametrize("n", [23, 178, 1000])
def test_rrcov_directions_follow_its_generator(n):
    i, j = robpca.rrcov_pairs(n, 250)
    np.testing.assert_array_equal(np.c_[i, j], _r_generator_pairs(n, 250))
    assert np.all(i != j) and i.min() >= 0 and max(i.max(), j.max()) < n


def test_reweighted_univariate_mcd_against_its_definition():
    """rrcov's unimcd by brute force: the h-window of smallest variance among all windows of
    the sorted data, the points within r_(h) chi2_{1,0.975} / chi2_{1,h/n} of its mean, their
    mean and standard deviation."""
    from scipy import stats

    rng = np.random.default_rng(21)
    y = np.r_[rng.normal(size=40), rng.normal(size=9) + 7]
    for h in (25, 37, 49):
        s = np.sort(y)
        j = int(np.argmin([np.var(s[a:a + h]) for a in range(len(y) - h + 1)]))
        r = (y - s[j:j + h].mean()) ** 2
        w = r < np.sort(r)[h - 1] / stats.chi2.ppf(h / len(y), 1) * stats.chi2.ppf(0.975, 1)
        expected = (y.mean(), y.std(ddof=1)) if h == len(y) else (y[w].mean(), y[w].std(ddof=1))
        np.testing.assert_allclose(robpca.reweighted_univariate_mcd(jax.numpy.asarray(y), h), expected, rtol=1e-10)


def test_rrcov_conventions_are_deterministic_and_find_the_planted_structure():
    """Under rrcov's conventions the directions are fixed, so two keys give the same fit
    (n(n - 1)/2 > 250 pairs); the fit finds the planted subspace and outliers; its OD cutoff
    is the median/MAD rule (4) of OD^(2/3)."""
    X, basis, good, orth, bad = _planted(n=120, p=10, seed=8)
    a, b = (robpca.fit(jax.random.key(s), X, 2, conventions="rrcov", use_mcd=False).state for s in (0, 1))
    np.testing.assert_allclose(a.components, b.components, atol=1e-10)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert np.linalg.svd(basis.T @ np.asarray(a.components), compute_uv=False).min() > 0.999
    labels = np.asarray(a.labels)
    assert np.all(labels[orth] >= 2) and np.all(labels[bad] == 3) and np.all(labels[good] % 2 == 1)
    y = np.asarray(a.orthogonal_distances) ** (2 / 3)
    cutoff = (np.median(y) + median_abs_deviation(y, scale="normal") * 1.959963984540054) ** 1.5
    assert float(a.od_cutoff) == pytest.approx(cutoff, rel=1e-10)
    assert int(a.h) == robpca.mcd.h_alpha_n(0.75, 120, 2)


def test_estimator_uses_all_pairs_on_small_data():
    """With n_directions=None every pair is a direction for n <= 200: the fit does not depend
    on random_state."""
    X, *_ = _planted(n=90, p=8, seed=9)
    fits = [ROBPCA(n_components=2, random_state=s).fit(X) for s in (0, 1)]
    np.testing.assert_allclose(fits[0].components_, fits[1].components_, atol=1e-10)
    assert robpca.default_directions(200) == 19900 and robpca.default_directions(201) == 250
    with pytest.raises(ValueError, match="conventions"):
        ROBPCA(conventions="R").fit(X)


@pytest.mark.parametrize("conventions", robpca.CONVENTIONS)
def test_choosing_k_reuses_the_low_dimensional_mcd(conventions):
    """In the low-dimensional branch the MCD does not depend on k: fit_auto takes the one
    :func:`robpca.provisional` computed, and gives what a fit at the chosen k computes anew;
    its eigenvalues are the leading ones of the provisional MCD scatter."""
    X, *_ = _planted(n=80, p=4, seed=10)
    assert robpca.low_dimensional(80, 4, 10)
    key = jax.random.key(3)
    auto = robpca.fit_auto(key, X, None, n_starts=50, conventions=conventions)
    k = auto.state.eigenvalues.shape[-1]
    direct = robpca.fit(key, X, k, n_starts=50, conventions=conventions)
    for a, b in zip(jax.tree.leaves(auto.state), jax.tree.leaves(direct.state)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)
    values, _ = robpca.provisional(key, X, n_starts=50, conventions=conventions)
    np.testing.assert_allclose(auto.state.eigenvalues, values[:k], rtol=1e-10)


def test_k_is_checked_inside_jit():
    """k against n and p (static) was checked only when X was concrete: inside jit, k = 5 of
    a 4 x 6 X returned 3 components with a successful status."""
    X = np.random.default_rng(0).normal(size=(4, 6))
    with pytest.raises(ValueError, match="k must be between 1 and 3"):
        jax.jit(lambda X: robpca.fit(jax.random.key(0), X, 5))(X)

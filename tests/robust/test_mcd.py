"""FAST-MCD: the exact univariate MCD against all windows, C-steps never raising the
determinant, the global optimum on problems small enough to enumerate, agreement with
scikit-learn's MinCovDet, consistency at the normal, affine equivariance, exact fits,
jit/vmap and bad input."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats
from sklearn.covariance import MinCovDet as SkMinCovDet

from bayeskit.core.special import chi2_quantile
from bayeskit.estimators import MinCovDet
from bayeskit.robust import mcd


def _contaminated(n=200, p=4, fraction=0.15, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)) * np.linspace(2, 0.5, p)
    m = int(fraction * n)
    X[:m] = rng.normal(size=(m, p)) * 0.5 + 8.0
    return X


@pytest.mark.parametrize("ties", [False, True])
def test_univariate_mcd_is_the_best_window(ties):
    rng = np.random.default_rng(1)
    x = rng.normal(size=51)
    x[:12] += 6
    if ties:
        x[20:45] = 0.25  # 25 equal values: a window of variance 0 once h <= 25
    traced = jax.jit(mcd.univariate_mcd)  # h a traced value: windows masked, not sliced
    for h in (26, 30, 40, 51):
        loc, var, window = map(np.asarray, mcd.univariate_mcd(jnp.asarray(x), h))
        for a, b in zip(traced(jnp.asarray(x), jnp.asarray(h)), (loc, var, window), strict=True):
            np.testing.assert_array_equal(np.asarray(a), b)
        s = np.sort(x)
        variances = [np.var(s[j:j + h]) for j in range(len(x) - h + 1)]
        j = int(np.argmin(variances))
        assert var == pytest.approx(variances[j], abs=1e-12)
        assert loc == pytest.approx(s[j:j + h].mean(), abs=1e-12)
        assert window.sum() == h and np.var(x[window]) == pytest.approx(variances[j], abs=1e-12)


@pytest.mark.parametrize("p", [1, 2, 5, 40])
def test_consistency_factor_and_chi2_quantile_match_scipy(p):
    """The traced chi-square quantile (bisection on the incomplete gamma function) and c(a)
    of (2) against SciPy's."""
    for a in (0.5, 0.55, 0.75, 0.9, 0.975):
        q = stats.chi2.ppf(a, p)
        assert float(chi2_quantile(a, p)) == pytest.approx(q, rel=1e-12)
        assert float(mcd.consistency_factor(p, a)) == pytest.approx(a / stats.chi2.cdf(q, p + 2), rel=1e-12)
    assert float(mcd.consistency_factor(p, 1.0)) == 1.0


def test_c_steps_never_raise_the_determinant():
    X = jnp.asarray(_contaminated())
    h = mcd.default_h(*X.shape)
    start, c_step = jax.jit(mcd.elemental_start, static_argnums=2), jax.jit(mcd.c_step, static_argnums=2)  # compiled once
    for seed in range(5):
        state = start(jax.random.key(seed), X, h)
        dets = [float(state.log_det)]
        for _ in range(8):
            state = c_step(X, state, h)
            dets.append(float(state.log_det))
        assert np.all(np.diff(dets) <= 1e-12), dets
        assert int(state.H.sum()) == h


def test_floyd_subsets_are_uniform():
    """Floyd's draws: m distinct points, every point and every pair equally likely (chi-square
    against the uniform law over 20000 draws of 3 of 6 points, all 20 subsets)."""
    n, m, draws = 6, 3, 20000
    H = np.asarray(jax.vmap(lambda k: mcd.floyd_subset(mcd.floyd_draws(k, n, m), n))(jax.random.split(jax.random.key(0), draws)))
    assert np.all(H.sum(1) == m)
    codes, counts = np.unique(H @ (2 ** np.arange(n)), return_counts=True)
    assert len(codes) == 20
    assert stats.chisquare(counts).pvalue > 1e-3
    assert mcd.floyd_subset(mcd.floyd_draws(jax.random.key(1), 4, 4), 4).all()


def _h_smallest(d2, h):
    """The h smallest of each row of d2, ties by index (a stable sort)."""
    ranks = np.argsort(np.argsort(d2, axis=-1, kind="stable"), axis=-1, kind="stable")
    return ranks < np.asarray(h)[..., None]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_closest_picks_the_h_smallest_with_ties_by_index_alone_and_under_vmap(dtype):
    """closest against a stable sort: one vector, rows under vmap (one h and an h per row),
    nested vmaps (which fold into one batch), with ties, zeros and inf."""
    rng = np.random.default_rng(6)
    d2 = rng.exponential(size=(3, 5, 23)).astype(dtype)
    d2[..., ::4] = np.round(d2[..., ::4], 1)  # ties
    d2[0, 0, :6] = 0.0
    d2[1, 2, -3:] = np.inf
    h = rng.integers(1, 24, size=(3, 5))
    np.testing.assert_array_equal(mcd.closest(jnp.asarray(d2[0, 0]), 9), _h_smallest(d2[0, 0], 9))
    np.testing.assert_array_equal(jax.vmap(lambda d: mcd.closest(d, 12))(jnp.asarray(d2[1])), _h_smallest(d2[1], 12))
    per_row = jax.vmap(mcd.closest)(jnp.asarray(d2[2]), jnp.asarray(h[2]))
    np.testing.assert_array_equal(per_row, _h_smallest(d2[2], h[2]))
    nested = jax.jit(jax.vmap(jax.vmap(mcd.closest), in_axes=(1, 1), out_axes=1))(jnp.asarray(d2), jnp.asarray(h))
    np.testing.assert_array_equal(nested, _h_smallest(d2, h))


@pytest.mark.parametrize("p", [4, mcd.SWEEP_MAX_P + 4])
def test_quick_form_of_the_starts_matches_the_exact_one(p):
    """The starts' quick form (moments and distances from the rows' x x' of median-centred
    data, distances ranked in single precision, S inverted by sweeps up to SWEEP_MAX_P and
    by its Cholesky factor above) gives the exact form's moments, log determinant and
    distances to rounding and, away from ties, the same C-step subsets."""
    X = _contaminated(p=p)
    X = jnp.asarray(X - np.median(X, 0))
    h = mcd.default_h(*X.shape)
    outer = mcd.quick_form(X)
    for seed in range(3):
        H = mcd.floyd_subset(mcd.floyd_draws(jax.random.key(seed), X.shape[0], h), X.shape[0])
        quick, exact = mcd.subset(X, H, outer), mcd.subset(X, H)
        np.testing.assert_allclose(quick.S, exact.S, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(quick.T, exact.T, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(quick.log_det, exact.log_det, rtol=1e-10)
        np.testing.assert_allclose(quick.d2, exact.d2, rtol=1e-8, atol=1e-10)
        np.testing.assert_array_equal(mcd.c_step(X, exact, h, outer).H, mcd.c_step(X, exact, h).H)
        np.testing.assert_array_equal(mcd.c_step(X, quick, h, outer).H, mcd.c_step(X, exact, h).H)
        # an elemental start: p + 1 points, the least well-conditioned S the quick form meets
        J = mcd.floyd_subset(mcd.floyd_draws(jax.random.key(seed), X.shape[0], X.shape[1] + 1), X.shape[0])
        quick, exact = mcd.subset(X, J, outer), mcd.subset(X, J)
        np.testing.assert_allclose(quick.d2, exact.d2, rtol=1e-6, atol=1e-8)
        np.testing.assert_array_equal(mcd.c_step(X, quick, h, outer).H, mcd.c_step(X, exact, h).H)
    assert mcd.quick_form(jnp.zeros((5, mcd.QUICK_MAX_P + 1))) is None


def test_swept_inverse_matches_the_cholesky_inverse():
    """The sweeps' log det S, S^-1 and regularity equal those from S's Cholesky factor (and
    numpy's inverse), also for a singular S, one whose singularity shows only at the last
    pivot, one whose last pivot is positive but below the regularity floor (float64), and
    one with a NaN; float64 and float32."""
    rng = np.random.default_rng(5)
    Z = rng.normal(size=(12, 5)) * np.array([1e3, 1, 1e-2, 1, 3])
    regular = Z.T @ Z / 12
    Z_last = Z.copy()
    Z_last[:, -1] = Z_last[:, 0]  # the last variable repeats the first: only the last pivot is ~0
    last = Z_last.T @ Z_last / 12
    Z_last[:, -1] += 1e-4 * rng.normal(size=12)  # last pivot ~1e-8: positive, below the floor 1e-6
    nearly = Z_last.T @ Z_last / 12
    nan = regular.copy()
    nan[2, 2] = np.nan
    common = (regular, nan, np.zeros((5, 5)), np.eye(1) * 4.0)
    for dtype, rtol, cases in ((np.float64, 1e-9, common + (last, nearly)), (np.float32, 1e-3, common)):
        for S in cases:
            S = S.astype(dtype)
            log_det, P, ok = mcd._swept_inverse(jnp.asarray(S))
            log_det_c, L_inv, ok_c = mcd._inverse_factor(jnp.asarray(S))
            regular_S = np.isfinite(S).all() and np.linalg.eigvalsh(S.astype(np.float64)).min() > 1e-6
            assert bool(ok) == bool(ok_c) == bool(regular_S)
            if not ok:
                assert float(log_det) == float(log_det_c) == -np.inf
            else:
                assert P.dtype == dtype
                np.testing.assert_allclose(log_det, log_det_c, rtol=rtol)
                inverse = np.linalg.inv(S.astype(np.float64))
                np.testing.assert_allclose(P, inverse, rtol=rtol, atol=rtol * 1e-3 * np.abs(inverse).max())
                np.testing.assert_allclose(P, L_inv.T @ L_inv, rtol=rtol, atol=rtol * 1e-3 * np.abs(np.asarray(P)).max())


def test_elemental_starts_grow_past_singular_subsets():
    """Ten of sixty points coincide: a (p + 1)-subset with two of them spans too few
    dimensions, and the start adds random points until it does not, so every start (its
    h = 32 closest points, at most ten of them equal) is regular."""
    rng = np.random.default_rng(4)
    X = jnp.asarray(np.r_[np.zeros((10, 3)), rng.normal(size=(50, 3))])
    keys = jax.random.split(jax.random.key(2), 200)
    first = jax.vmap(lambda k: mcd.subset(X, mcd.floyd_subset(mcd.start_draws(k, 60, 4)[0], 60)).log_det)(keys)
    assert int(np.sum(~np.isfinite(first))) > 5  # draws that had to grow
    starts = jax.vmap(lambda k: mcd.elemental_start(k, X, 32))(keys)
    assert np.all(np.isfinite(starts.log_det)) and np.all(np.asarray(starts.H).sum(1) == 32)


def test_finds_the_global_minimum_on_an_enumerable_problem():
    """n = 12, p = 2, h = 7: the raw subset has the smallest determinant of all 792 subsets."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(12, 2))
    X[:3] += [4.0, -3.0]
    h = mcd.default_h(12, 2)
    best = min(np.linalg.det(np.cov(X[list(c)].T, bias=True)) for c in itertools.combinations(range(12), h))
    r = mcd.fit(jax.random.key(0), X).state
    assert np.exp(float(r.log_det)) == pytest.approx(best, rel=1e-9)


def test_agrees_with_scikit_learn_on_contaminated_data():
    X = _contaminated(n=300, p=5, fraction=0.2, seed=4)
    ours = mcd.fit(jax.random.key(0), X).state
    theirs = SkMinCovDet(support_fraction=mcd.default_h(300, 5) / 300, random_state=0).fit(X)
    assert not np.any(np.asarray(ours.support)[:60])  # no outlier kept
    assert np.mean(np.asarray(ours.support) == theirs.support_) > 0.97
    np.testing.assert_allclose(ours.location, theirs.location_, atol=0.05)
    np.testing.assert_allclose(ours.covariance, theirs.covariance_, atol=0.1 * np.abs(theirs.covariance_).max())
    # the raw determinant is at most theirs: both are C-step fixed points, ours from more starts
    sk_raw = np.linalg.slogdet(np.cov(X[theirs.raw_support_].T, bias=True))[1]
    assert float(ours.log_det) <= sk_raw + 1e-9


def test_consistent_at_the_normal():
    """Clean normal data: raw and reweighted covariances estimate the true one (the
    consistency factors (2)-(3)), within sampling error at n = 4000."""
    rng = np.random.default_rng(5)
    A = rng.normal(size=(3, 3))
    Sigma = A @ A.T + np.eye(3)
    X = rng.multivariate_normal(np.zeros(3), Sigma, size=4000)
    r = mcd.fit(jax.random.key(1), X, n_starts=50).state
    for S in (r.raw_covariance, r.covariance):
        ratio = np.linalg.eigvals(np.linalg.solve(Sigma, np.asarray(S))).real
        assert np.all(np.abs(ratio - 1) < 0.12), ratio
    assert np.mean(np.asarray(r.support)) == pytest.approx(0.975, abs=0.015)


def test_affine_equivariance():
    X = _contaminated(n=120, p=3, seed=6)
    rng = np.random.default_rng(7)
    A, b = rng.normal(size=(3, 3)), rng.normal(size=3)
    r1, r2 = mcd.fit(jax.random.key(2), X).state, mcd.fit(jax.random.key(2), X @ A + b).state
    np.testing.assert_array_equal(r1.raw_support, r2.raw_support)
    np.testing.assert_allclose(r2.location, np.asarray(r1.location) @ A + b, atol=1e-8)
    np.testing.assert_allclose(r2.covariance, A.T @ np.asarray(r1.covariance) @ A, atol=1e-8)


def test_exact_fit_is_reported_not_raised():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(100, 3))
    X[:70, 2] = 2 * X[:70, 0] - X[:70, 1] + 1  # 70 > h = 52 points on a plane
    result = mcd.fit(jax.random.key(0), X)
    r = result.state
    assert bool(r.exact_fit) and int(r.n_on_hyperplane) == 70
    assert bool(result.converged) and float(result.objective) == -np.inf  # an exact fit is a valid outcome
    a = np.asarray(r.hyperplane)
    np.testing.assert_allclose(a / a[2], [-2.0, 1.0, 1.0], atol=1e-8)
    est = MinCovDet(random_state=0)
    with pytest.warns(UserWarning, match="hyperplane"):
        est.fit(X)
    assert est.exact_fit_ and est.n_on_hyperplane_ == 70
    assert not bool(mcd.fit(jax.random.key(0), rng.normal(size=(100, 3))).state.exact_fit)


def test_jit_and_vmap_over_keys_and_data_sets():
    Xs = jnp.stack([jnp.asarray(_contaminated(n=80, p=3, seed=s)) for s in range(3)])
    fit = jax.jit(lambda k, X: mcd.fit(k, X, n_starts=50).state)
    batched = jax.vmap(fit)(jax.random.split(jax.random.key(0), 3), Xs)
    one = fit(jax.random.split(jax.random.key(0), 3)[1], Xs[1])
    np.testing.assert_allclose(batched.covariance[1], one.covariance, rtol=1e-10)


def test_estimator_attributes_and_distances():
    X = _contaminated(n=150, p=3, seed=9)
    est = MinCovDet(random_state=0).fit(X)
    assert est.location_.shape == (3,) and est.covariance_.shape == (3, 3) and est.support_.shape == (150,)
    Z = X - est.location_
    np.testing.assert_allclose(est.mahalanobis(X), np.sum(Z @ np.linalg.inv(est.covariance_) * Z, 1), rtol=1e-8)
    np.testing.assert_allclose(est.dist_, est.mahalanobis(X), rtol=1e-8)


@pytest.mark.parametrize("bad, match", [
    (dict(X=np.array([[1.0, np.nan], [2.0, 3.0], [0.0, 1.0]])), "non-finite"),
    (dict(X=np.ones((1, 2))), "at least 2"),
    (dict(support_fraction=0.3), "support_fraction"),
    (dict(support_fraction=1.5), "support_fraction"),
    (dict(X=np.random.default_rng(0).normal(size=(3, 5))), "more samples than variables; X is 3 x 5"),
])
def test_bad_input(bad, match):
    X = bad.pop("X", np.random.default_rng(0).normal(size=(20, 2)))
    with pytest.raises(ValueError, match=match):
        MinCovDet(**bad).fit(X)


def test_nested_subsets_for_large_n_find_the_clean_majority(monkeypatch):
    """n = 1300 > 600 runs the starts in nested subsets: no outlier in the raw subset, and a
    determinant within 1% of starting everywhere on the whole data (the n <= 600 path)."""
    X = _contaminated(n=1300, p=3, fraction=0.2, seed=10)
    nested = mcd.fit(jax.random.key(0), X, n_starts=100).state
    assert not np.any(np.asarray(nested.raw_support)[:260])
    monkeypatch.setattr(mcd, "NESTED_ABOVE", 10**6)
    everywhere = mcd._raw_subset(jax.random.key(0), jnp.asarray(X), mcd.default_h(1300, 3), 100, 10, 100, None)
    assert float(nested.log_det) <= float(everywhere.log_det) + 0.01


@pytest.mark.parametrize("dtype, scale", [(np.float32, 1e-20), (np.float32, 1e20), (np.float64, 1e-150), (np.float64, 1e150)])
def test_estimator_is_scale_equivariant_far_from_unit_scale(dtype, scale):
    """MCD(a X) = a MCD(X): same subsets and distances, location times a, covariance times
    a^2, in float32 at 1e+-20 (whose squares overflow or underflow float32) and float64 at
    1e+-150; a covariance beyond float64's range is refused with the reason."""
    X = _contaminated(n=60, p=3, seed=11).astype(dtype)
    ref = MinCovDet(random_state=0).fit(X)
    got = MinCovDet(random_state=0).fit(X * dtype(scale))
    np.testing.assert_array_equal(got.support_, ref.support_)
    np.testing.assert_allclose(got.location_ / scale, ref.location_, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got.covariance_ / scale / scale, ref.covariance_, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(got.dist_, ref.dist_, rtol=1e-3)
    with pytest.raises(ValueError, match="beyond the range of float64"):
        MinCovDet(random_state=0).fit(_contaminated(n=60, p=3, seed=11) * 1e300)


def test_exchange_ratios_match_brute_force_determinants():
    """(6): det S_H' / det S_H of exchanging i in H for j outside, against the determinant of
    the exchanged subset's covariance computed from scratch."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(20, 3)) @ rng.normal(size=(3, 3))
    H = np.zeros(20, bool)
    H[rng.permutation(20)[:12]] = True
    state = mcd.subset(jnp.asarray(X), jnp.asarray(H))
    ratios = np.asarray(mcd.swap_ratios(jnp.asarray(X), state, 12))
    det = lambda mask: np.linalg.det(np.cov(X[mask].T, bias=True))  # noqa: E731
    for i in np.nonzero(H)[0]:
        for j in np.nonzero(~H)[0]:
            swapped = H.copy()
            swapped[i], swapped[j] = False, True
            assert ratios[i, j] == pytest.approx(det(swapped) / det(H), rel=1e-9)
    assert np.all(ratios[~H] == 1) and np.all(ratios[:, H] == 1)


def test_refined_subset_admits_no_improving_exchange():
    """Every seed ends at a subset that no exchange of one point in for one point out
    improves (brute force over all h (n - h) exchanges), and all seeds agree on it."""
    rng = np.random.default_rng(12)
    X = np.concatenate([rng.normal(size=(30, 4)), rng.normal(size=(14, 4)) * 0.6 + 1.5, rng.normal(size=(6, 4)) * 3])
    logdet = lambda mask: np.linalg.slogdet(np.cov(X[mask].T, bias=True))[1]  # noqa: E731
    found = []
    for seed in range(4):
        H = np.asarray(mcd.fit(jax.random.key(seed), X, n_starts=100).state.raw_support)
        base = logdet(H)
        for i in np.nonzero(H)[0]:
            for j in np.nonzero(~H)[0]:
                swapped = H.copy()
                swapped[i], swapped[j] = False, True
                assert logdet(swapped) >= base - 1e-10
        found.append(base)
    assert np.ptp(found) < 1e-10


def test_robustbase_conventions_h_and_small_sample_factors():
    """robustbase's h(alpha; n, p) at its ends, and the small-sample factors of (4), which
    Pison et al. calibrate on det(S)^(1/p): over 400 standard normal data sets of n = 30,
    p = 3 it averages 1 for the raw and the reweighted covariance under robustbase's
    conventions (within sampling error), and falls clearly short of 1 under (2)-(3)."""
    n, p = 30, 3
    assert mcd.h_alpha_n(0.5, n, p) == mcd.default_h(n, p) and mcd.h_alpha_n(1.0, n, p) == n
    assert mcd.h_alpha_n(0.75, 100, 3) == 76
    assert mcd.small_sample_factor(p, n, 0.75, reweighted=False) > 1.1
    assert mcd.small_sample_factor(p, 10 ** 6, 0.75, reweighted=True) == pytest.approx(1, abs=1e-3)
    for alpha in (0.75, np.float32(0.75), np.array(0.75)):  # the remembered pair, for any real scalar
        assert mcd.robustbase_factors(p, n, alpha) == (mcd.small_sample_factor(p, n, 0.75, False),
                                                       mcd.small_sample_factor(p, n, 0.75, True))
    X = np.random.default_rng(13).normal(size=(400, n, p))
    keys = jax.random.split(jax.random.key(0), 400)
    for conventions, low, high in (("robustbase", 0.96, 1.04), ("bayeskit", 0.0, 0.9)):
        fit = jax.jit(jax.vmap(lambda k, X: mcd.fit(k, X, n_starts=20, conventions=conventions, alpha=0.75).state))
        r = fit(keys, X)
        for S in (r.raw_covariance, r.covariance):
            assert low < np.mean(np.linalg.det(np.asarray(S)) ** (1 / p)) < high, conventions


def test_robustbase_reweighting_recomputed_from_the_raw_subset():
    """Under robustbase's conventions the reweighted estimates are (4) of the raw subset:
    recomputed here with NumPy from the subset, the raw covariance and SciPy's quantiles."""
    X = _contaminated(n=80, p=3, fraction=0.1, seed=14)
    n, p = X.shape
    r = mcd.fit(jax.random.key(0), X, conventions="robustbase", alpha=0.75).state
    H = np.asarray(r.raw_support)
    h = mcd.h_alpha_n(0.75, n, p)
    assert H.sum() == h
    c_raw = mcd.small_sample_factor(p, n, 0.75, False) / stats.chi2.cdf(stats.chi2.ppf(h / n, p), p + 2) * h / n
    np.testing.assert_allclose(r.raw_covariance, c_raw * np.cov(X[H].T), rtol=1e-10)
    d2 = np.sum((X - X[H].mean(0)) * np.linalg.solve(np.asarray(r.raw_covariance), (X - X[H].mean(0)).T).T, 1)
    w = d2 < stats.chi2.ppf(0.975, p)
    m = w.sum()
    c_rew = mcd.small_sample_factor(p, n, 0.75, True) / stats.chi2.cdf(stats.chi2.ppf(m / n, p), p + 2) * m / n
    np.testing.assert_array_equal(np.asarray(r.support), w)
    np.testing.assert_allclose(r.location, X[w].mean(0), rtol=1e-10)
    np.testing.assert_allclose(r.covariance, c_rew * np.cov(X[w].T), rtol=1e-7)


def test_estimator_takes_robustbase_conventions():
    """MinCovDet(conventions="robustbase", support_fraction=alpha) is the functional fit under
    robustbase's conventions (h(alpha; n, p), factors (4)); a bad convention is refused."""
    X = _contaminated(n=90, p=3, fraction=0.1, seed=15)
    est = MinCovDet(support_fraction=0.75, conventions="robustbase", random_state=0).fit(X)
    ref = mcd.fit(jax.random.key(0), X, conventions="robustbase", alpha=0.75).state
    assert est.h_ == mcd.h_alpha_n(0.75, 90, 3) == int(np.asarray(ref.raw_support).sum())
    np.testing.assert_array_equal(est.raw_support_, np.asarray(ref.raw_support))
    np.testing.assert_allclose(est.covariance_, np.asarray(ref.covariance), rtol=1e-8)
    with pytest.raises(ValueError, match="conventions"):
        MinCovDet(conventions="R").fit(X)


def test_the_functional_fit_refuses_a_covariance_below_float32():
    """Data at 1e-20 in float32: the covariance (1e-40) came back exactly 0, status converged."""
    X = _contaminated(n=40, p=2, seed=3).astype(np.float32) * np.float32(1e-20)
    with jax.enable_x64(False), pytest.raises(ValueError, match="below what float32 holds"):
        mcd.fit(jax.random.key(0), X, n_starts=10)


def test_h_is_checked_inside_jit_and_may_be_vmapped():
    """h against n and p (static) was checked only when X was concrete: inside jit, h = 100
    of 40 points ran "successfully" on all of them, and h = 5 on a 5-point subset; a vmapped
    h was refused as not an integer, though the fit takes h as a traced value."""
    X = np.random.default_rng(0).normal(size=(40, 3))
    key = jax.random.key(0)
    for h in (100, 5):
        with pytest.raises(ValueError, match="h must be between 22 and 40"):
            jax.jit(lambda X: mcd.fit(key, X, h, n_starts=20))(X)  # noqa: B023
    batched = jax.vmap(lambda h: mcd.fit(key, X, h, n_starts=20).state.log_det)(jnp.array([22, 30]))
    one_by_one = [float(mcd.fit(key, X, h, n_starts=20).state.log_det) for h in (22, 30)]
    np.testing.assert_allclose(batched, one_by_one, rtol=1e-10)
    with pytest.raises(ValueError, match="concrete h"):
        jax.vmap(lambda h: mcd.fit(key, X, h, n_starts=20, conventions="robustbase").state.log_det)(jnp.array([22, 30]))

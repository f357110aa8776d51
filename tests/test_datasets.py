"""The bundled MULAN benchmarks: shapes of the standard splits (MULAN's published
statistics, as tabulated in ``bayeskit.datasets.mulan``), label values, names."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from bayeskit.datasets import MULAN_NAMES, load_mulan, mulan_info

# name: (n_train, n_test, n_features, n_labels)
EXPECTED = {
    "emotions": (391, 202, 72, 6),
    "scene": (1211, 1196, 294, 6),
    "yeast": (1500, 917, 103, 14),
    "tmc2007": (21519, 7077, 500, 22),
}


@functools.cache
def _load(name):
    return load_mulan(name)


def test_names():
    assert set(MULAN_NAMES) == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_shapes_and_dtypes(name):
    X_train, Y_train, X_test, Y_test = _load(name)
    n_train, n_test, d, n_labels = EXPECTED[name]
    assert X_train.shape == (n_train, d)
    assert Y_train.shape == (n_train, n_labels)
    assert X_test.shape == (n_test, d)
    assert Y_test.shape == (n_test, n_labels)
    assert X_train.dtype == X_test.dtype == np.float64
    assert Y_train.dtype == Y_test.dtype == np.int8
    assert np.all(np.isfinite(X_train)) and np.all(np.isfinite(X_test))


@pytest.mark.parametrize("name", list(EXPECTED))
def test_labels_binary_and_every_label_positive_in_both_splits(name):
    _, Y_train, _, Y_test = _load(name)
    for Y in (Y_train, Y_test):
        assert set(np.unique(Y).tolist()) <= {0, 1}
        assert np.all(Y.sum(axis=0) > 0), np.flatnonzero(Y.sum(axis=0) == 0)
        assert np.all(Y.sum(axis=0) < Y.shape[0])  # and a negative


@pytest.mark.parametrize("name", list(EXPECTED))
def test_info_names(name):
    info = mulan_info(name)
    _, _, d, n_labels = EXPECTED[name]
    assert len(info["feature_names"]) == d
    assert len(info["label_names"]) == n_labels
    assert all(isinstance(s, str) and s for s in info["feature_names"] + info["label_names"])
    assert len(set(info["label_names"])) == n_labels


def test_float32_dtype_option():
    X_train, Y_train, X_test, _ = load_mulan("emotions", dtype=np.float32)
    X64 = _load("emotions")[0]
    assert X_train.dtype == X_test.dtype == np.float32
    np.testing.assert_allclose(X_train, X64, rtol=1e-6, atol=1e-30)
    assert Y_train.dtype == np.int8


def test_loads_are_independent_copies():
    a = load_mulan("emotions")
    a[0][0, 0] = 1e9
    a[1][0, 0] = 7
    b = load_mulan("emotions")
    assert b[0][0, 0] != 1e9 and b[1][0, 0] != 7


@pytest.mark.parametrize("bad", ["Emotions", "medical", "", "emotions.npz"])
def test_unknown_name_raises(bad):
    with pytest.raises(ValueError, match="unknown MULAN data set"):
        load_mulan(bad)
    with pytest.raises(ValueError, match="unknown MULAN data set"):
        mulan_info(bad)


# ---------------------------------------------------------------- relational benchmarks


def test_relational_counts_match_the_data_readme():
    from bayeskit.datasets import load_relational

    kin = load_relational("kinship")
    assert kin["Y"].shape == (26, 104, 104) and int(kin["Y"].sum()) == 10790 and kin["mask"].all()
    np.testing.assert_array_equal(kin["Y"][23], np.eye(104))  # the self relation
    assert kin["Y"].sum((1, 2))[:4].tolist() == [228, 489, 231, 379]
    nat = load_relational("nations")
    y, m = nat["Y"], nat["mask"]
    assert (int((y == 1).sum()), int((y == 0).sum()), int((~m).sum())) == (2024, 7733, 1219)
    assert np.all(y[~m] == -1) and not m[:, np.arange(14), np.arange(14)].any()
    assert nat["features"].shape == (14, 111) and len(nat["country_names"]) == 14
    nips = load_relational("nips234")["Y"]
    assert nips.shape == (234, 234) and int(np.triu(nips).sum()) == 598
    np.testing.assert_array_equal(nips, nips.T)
    assert not np.diag(nips).any()
    with pytest.raises(ValueError, match="unknown relational"):
        load_relational("karate")


def test_holdout_split_is_disjoint_symmetric_and_a_fifth():
    from bayeskit.datasets import holdout_split, load_relational

    nips = load_relational("nips234")
    train, test = holdout_split(nips["Y"][None], nips["mask"][None], symmetric=True)
    assert not (train & test).any() and not np.diagonal(train | test, axis1=1, axis2=2).any()
    np.testing.assert_array_equal(test, test.transpose(0, 2, 1))
    assert abs(test.sum() / (234 * 233) - 0.2) < 0.01


def test_holdout_by_entries_leaks_mirrors_and_by_pairs_never():
    """Ordered entries of a symmetric relation leave the mirror of about 1 - frac of the
    held-out cells in training; unordered pairs leave none, directed or not."""
    from bayeskit.datasets import holdout_split, load_relational

    nips = load_relational("nips234")
    Y, mask = nips["Y"][None], nips["mask"][None]
    train, test = holdout_split(Y, mask, symmetric=True, unit="entries", seed=3)
    mirrored = test & train.transpose(0, 2, 1)
    assert abs(mirrored.sum() / test.sum() - 0.8) < 0.02
    assert abs(test.sum() / (234 * 233) - 0.2) < 0.01
    for symmetric in (True, False):
        train, test = holdout_split(Y, mask, symmetric=symmetric, unit="pairs", seed=3)
        assert not (test & train.transpose(0, 2, 1)).any()
    with pytest.raises(ValueError, match="unit"):
        holdout_split(Y, mask, symmetric=True, unit="cells")


def test_holdout_split_takes_masks_as_check_relations_does():
    """A 0/1 mask of any number type (or nested lists) gives the boolean split of the
    boolean mask; other values, and shapes that do not fit, are refused by name."""
    from bayeskit.datasets import holdout_split

    rng = np.random.default_rng(0)
    Y = (rng.random((2, 12, 12)) < 0.4).astype(np.int8)
    mask = rng.random((2, 12, 12)) < 0.8
    expected = holdout_split(Y, mask, symmetric=False, seed=1)
    for args in ((Y, mask.astype(np.int8)), (Y, mask.astype(float)), (Y.tolist(), mask.tolist())):
        for a, b in zip(holdout_split(*args, symmetric=False, seed=1), expected):
            assert a.dtype == bool
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="mask must be boolean"):
        holdout_split(Y, 2 * mask.astype(np.int8), symmetric=False)
    with pytest.raises(ValueError, match=r"Y must be \(N, N\) or \(n_relations, N, N\)"):
        holdout_split(np.zeros((3, 5)), np.ones((3, 5), bool), symmetric=False)
    with pytest.raises(ValueError, match=r"mask must have Y's shape \(2, 12, 12\)"):
        holdout_split(Y, mask[0], symmetric=False)


def test_holdout_split_refuses_an_empty_test_or_training_set():
    """``frac`` is each cell's chance of being held out, so a small relation can draw none
    or all of its cells."""
    from bayeskit.datasets import holdout_split

    Y, mask = np.zeros((3, 3)), np.ones((3, 3), bool)
    with pytest.raises(ValueError, match="empty test set"):
        holdout_split(Y, mask, symmetric=False, frac=1e-9)
    with pytest.raises(ValueError, match="empty training set"):
        holdout_split(Y, mask, symmetric=False, frac=1 - 1e-9)


def test_sinc_and_bump_generators():
    from bayeskit.datasets import bump_datasets, bumps, sinc, sinc_datasets
    from bayeskit.datasets.sparse import BUMP_H, BUMP_T

    X, y, X_test, f_test = sinc_datasets(50, 0.3, seed=1)
    assert X.shape == (50, 100, 1) and y.shape == (50, 100) and X_test.shape == (1000, 1)
    assert np.all(np.abs(X) <= 10) and sinc(0.0) == 1.0
    assert abs(np.std(y - sinc(X[..., 0])) - 0.3) < 0.01
    np.testing.assert_allclose(f_test, np.sin(X_test[:, 0]) / X_test[:, 0], rtol=1e-12)
    # each bump's height is reached at its position, up to the other bumps' tails
    assert np.all(np.abs(bumps(BUMP_T) - BUMP_H) < 0.25 * BUMP_H)
    X, y, f, sigma = bump_datasets(200, snr=4.0, seed=2)
    assert X.shape == (200, 120, 1) and np.isclose(sigma, np.std(f) / 4.0)
    assert abs(np.std(y - f) - sigma) < 0.02 * sigma


def test_variable_selection_designs():
    """Simulation designs of the BLS paper: the sample correlations and noise match the
    stated design, and the test targets are noise free."""
    from bayeskit.datasets import grouped_datasets, tibshirani_datasets

    X, y, X_test, f_test, beta = tibshirani_datasets(40, 3.0, n_train=500, seed=0)
    assert X.shape == (40, 500, 8) and X_test.shape == (40, 100, 8) and f_test.shape == (40, 100)
    C = np.corrcoef(X.reshape(-1, 8).T)
    R = 0.5 ** np.abs(np.subtract.outer(np.arange(8), np.arange(8)))
    assert np.max(np.abs(C - R)) < 0.02
    assert abs(np.std(y - X @ beta) - 3.0) < 0.03
    np.testing.assert_allclose(f_test, X_test @ beta)

    X, y, X_test, f_test, beta = grouped_datasets(20, 3, 5, 25, n_train=400, seed=1)
    assert X.shape == (20, 400, 40) and np.count_nonzero(beta) == 15
    C = np.corrcoef(X.reshape(-1, 40).T)
    # within a group the correlation is 1 / 1.01; across groups and with the noise block, 0
    assert abs(C[0, 4] - 1 / 1.01) < 0.005 and abs(C[0, 5]) < 0.03 and abs(C[0, 20]) < 0.03
    assert abs(np.std(y - X @ beta) - 1.0) < 0.02


def test_sbmoe_inputs_of_the_wrong_width_are_refused_and_integers_become_floats():
    import jax

    from bayeskit.datasets import sbmoe_conditional_1d, sbmoe_features_2d

    E = np.array([[1, 2], [3, 1]])
    X = sbmoe_features_2d(E)
    assert X.dtype == jax.numpy.result_type(float)
    np.testing.assert_array_equal(X, sbmoe_features_2d(E.astype(X.dtype)))
    assert sbmoe_conditional_1d(jax.random.key(0), E, 1).dtype == X.dtype
    for bad in (E[:, :1], np.ones((2, 3))):
        with pytest.raises(ValueError, match=r"E must have shape \(m, 2\)"):
            sbmoe_features_2d(bad)


def test_uci_bag_of_words_reads_empty_files_and_checks_the_stated_count(tmp_path):
    import warnings

    from bayeskit.datasets import read_uci_bag_of_words

    path = tmp_path / "docword.txt"
    path.write_text("2\n3\n2\n1 1 2\n2 3 7\n")
    np.testing.assert_array_equal(read_uci_bag_of_words(path).toarray(), [[2, 0, 0], [0, 0, 7]])
    path.write_text("2\n3\n0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X = read_uci_bag_of_words(path)
    assert X.shape == (2, 3) and X.nnz == 0
    path.write_text("2\n3\n5\n1 1 7\n")
    with pytest.raises(ValueError, match="docword.txt states 5 entries .* 1"):
        read_uci_bag_of_words(path)


def test_rca_simulation_is_the_authors_generative_model():
    from bayeskit.datasets import load_rca_simulation

    d = load_rca_simulation()
    np.testing.assert_allclose(d["Y"], d["X"] @ d["W"] + d["rho"] * d["V"] + d["sigma_n"] * d["E"], atol=1e-10)
    np.testing.assert_allclose(d["Sigma"] @ d["Lambda"], np.eye(50), atol=1e-8)
    assert int((np.triu(d["Lambda"], 1) != 0).sum()) == 13


def test_sachs_conditions_and_ground_truth():
    from bayeskit.datasets import SACHS_EDGES, load_sachs, sachs_adjacency

    assert load_sachs().shape == (2666, 11)
    assert load_sachs(range(1, 10)).shape == (7466, 11)
    assert np.all(load_sachs(range(1, 15)) > 0)
    A = sachs_adjacency()
    assert A.sum() == 2 * len(SACHS_EDGES) == 28 and np.all(A == A.T) and not A.diagonal().any()
    with pytest.raises(ValueError, match="conditions"):
        load_sachs([0])


def test_sachs_refuses_a_float_id_and_repeated_ids():
    from bayeskit.datasets import load_sachs

    with pytest.raises(ValueError, match="conditions must be integer ids"):
        load_sachs(1.0)
    with pytest.raises(ValueError, match=r"conditions repeat an id: \[1, 2, 1\]"):
        load_sachs((1, 2, 1))


def test_robpca_data_sets_match_their_readme():
    from bayeskit.datasets import load_robpca

    glass, cars, octane = (load_robpca(name) for name in ("glass", "cars", "octane"))
    assert glass["X"].shape == (180, 750) and 0.09 < glass["X"].min() < glass["X"].max() < 8677
    assert cars["X"].shape == (111, 11) and cars["rownames"][24] == "Chevrolet Corvette"
    assert list(cars["columns"][:2]) == ["length", "wheelbase"]
    assert octane["X"].shape == (39, 226) and octane["y"].shape == (39,)
    with pytest.raises(ValueError, match="one of"):
        load_robpca("iris")


def test_sparse_precision_is_sparse_unit_diagonal_and_well_conditioned():
    from bayeskit.datasets import sparse_precision

    theta = sparse_precision(200, np.random.default_rng(0))
    np.testing.assert_allclose(theta, theta.T, rtol=1e-15, atol=0)
    np.testing.assert_allclose(np.diag(theta), 1.0)
    edges = np.count_nonzero(np.triu(theta, 1))
    assert 150 <= edges <= 250  # 2p pairs drawn, those above the diagonal kept: about p edges
    eig = np.linalg.eigvalsh(theta)
    assert eig[0] > 0 and eig[-1] / eig[0] < 100  # diagonally dominant, so positive definite


def test_generators_refuse_bad_arguments_by_name():
    """Sizes, probabilities and correlations out of range are refused by name (they
    returned empty or wrong data, or failed deep inside NumPy or scipy)."""
    import jax

    from bayeskit.datasets import grouped_datasets, ibp_toy_images, load_sachs, sinc_datasets, sparse_precision, tibshirani_datasets, zipf_corpus

    assert load_sachs(3).shape == load_sachs([3]).shape == load_sachs({3}).shape  # one id is one condition
    for bad in ([1.5], [0], []):
        with pytest.raises(ValueError, match="conditions must be integer ids"):
            load_sachs(bad)
    with pytest.raises(ValueError, match="n_words = 60 leaves no room .* at least 71"):
        zipf_corpus(50, 60, topic_size=10, n_topics=5, n_stop_words=20)
    X, topics = zipf_corpus(30, 200)  # the topic pool (ranks 20 to 1020 by default) fits a small vocabulary
    assert X.shape == (30, 200) and 20 <= topics.min() and topics.max() < 200 and np.unique(topics).size == 50
    with pytest.raises(ValueError, match="p must be a probability"):
        ibp_toy_images(jax.random.key(0), 5, p=2.0)
    with pytest.raises(ValueError, match="n must be"):
        ibp_toy_images(jax.random.key(0), 0)
    with pytest.raises(ValueError, match=r"rho must be in \(-1, 1\)"):
        tibshirani_datasets(2, 3.0, rho=1.5)
    with pytest.raises(ValueError, match="n_train must be"):
        sinc_datasets(2, 0.1, n_train=0)
    with pytest.raises(ValueError, match="noise_sd"):
        sinc_datasets(2, -0.1)
    np.testing.assert_array_equal(sparse_precision(5, 0), sparse_precision(5, np.random.default_rng(0)))  # a seed is a Generator
    assert zipf_corpus(20, 200, exponent=0.0)[0].shape == (20, 200)  # a uniform word law
    with pytest.raises(ValueError, match="group_size must be"):
        grouped_datasets(2, 3, 0, 5)
    assert grouped_datasets(2, 3, 2, 0)[0].shape == (2, 50, 6)  # no noise predictors
    with pytest.raises(ValueError, match="floating dtype"):
        load_mulan("emotions", dtype=np.int32)

"""Host-side input validation of ``bayeskit.core.validation``: every ValueError path, and
that the caller's arrays are never modified."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from bayeskit.core.validation import check_choice, check_int_in, check_labels, check_matrix, check_positive, is_symmetric

# ----------------------------------------------------------------------------------------
# check_matrix
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_matrix_nonfinite_reports_index(bad):
    X = np.ones((4, 5))
    X[2, 3] = bad
    with pytest.raises(ValueError, match=re.escape("1 non-finite value(s) at index (2, 3)")):
        check_matrix(X)


def test_matrix_many_nonfinite_reports_first_three_and_count():
    X = np.ones((3, 4))
    X[0, 1] = X[1, 0] = X[1, 2] = X[2, 3] = X[2, 0] = np.nan
    with pytest.raises(ValueError) as e:
        check_matrix(X, "X_train")
    msg = str(e.value)
    assert msg.startswith("X_train contains 5 non-finite value(s)")
    assert "(0, 1), (1, 0), (1, 2) and 2 more" in msg


def test_matrix_float32_nonfinite():
    X = np.zeros((2, 2), np.float32)
    X[1, 1] = np.inf
    with pytest.raises(ValueError, match=re.escape("(1, 1)")):
        check_matrix(X)


def test_matrix_1d_suggests_reshape():
    with pytest.raises(ValueError, match=r"must be 2-D .* got shape \(5,\)\. Reshape"):
        check_matrix(np.arange(5.0))


@pytest.mark.parametrize("shape", [(), (2, 3, 4)])
def test_matrix_other_ndim(shape):
    with pytest.raises(ValueError, match="must be 2-D") as e:
        check_matrix(np.zeros(shape))
    assert "Reshape" not in str(e.value)


def test_matrix_zero_rows_and_cols():
    with pytest.raises(ValueError, match=r"X has 0 sample\(s\); at least 1 required"):
        check_matrix(np.zeros((0, 3)))
    with pytest.raises(ValueError, match=r"X has 0 feature\(s\); at least 1 required"):
        check_matrix(np.zeros((3, 0)))
    with pytest.raises(ValueError, match=r"at least 5 required"):
        check_matrix(np.zeros((4, 2)), min_rows=5)
    with pytest.raises(ValueError, match=r"2 feature\(s\); at least 3 required"):
        check_matrix(np.zeros((4, 2)), min_cols=3)


@pytest.mark.parametrize("X", [np.array([["a", "b"]]), np.array([[1, "a"]], dtype=object)], ids=["str", "object"])
def test_matrix_non_numeric(X):
    with pytest.raises(ValueError, match="must be a real numeric array"):
        check_matrix(X)


def test_matrix_object_numbers_are_floats():
    """An object array of numbers is read as float64 (as scikit-learn reads it); None in it
    is a missing value, refused with its place."""
    got = check_matrix(np.array([[1, 2.5], [True, 4]], dtype=object))
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [[1.0, 2.5], [1.0, 4.0]])
    with pytest.raises(ValueError, match=r"non-finite value\(s\) at index \(0, 1\)"):
        check_matrix(np.array([[1, None]], dtype=object))


def test_matrix_complex_is_refused():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numpy's ComplexWarning from the cast
        with pytest.raises(ValueError):
            check_matrix(np.array([[1j, 2.0], [3.0, 4.0]]))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint8, bool])
def test_matrix_integer_and_bool_become_float64(dtype):
    X = (np.arange(6).reshape(2, 3) % 2).astype(dtype)
    before = X.copy()
    out = check_matrix(X)
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, before.astype(np.float64))
    assert X.dtype == dtype
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matrix_float_keeps_dtype_and_is_not_modified(dtype):
    X = np.arange(6, dtype=dtype).reshape(2, 3)
    X.setflags(write=False)  # any write attempt would raise
    out = check_matrix(X)
    assert out.dtype == dtype
    np.testing.assert_array_equal(out, X)


def test_matrix_accepts_lists():
    out = check_matrix([[1, 2], [3, 4]])
    assert out.dtype == np.float64 and out.shape == (2, 2)


def test_matrix_name_in_message():
    with pytest.raises(ValueError, match=r"^X_test must be 2-D"):
        check_matrix(np.ones(3), "X_test")


# ----------------------------------------------------------------------------------------
# check_labels
# ----------------------------------------------------------------------------------------


def test_labels_valid_and_converted_to_int8():
    Y = np.array([[0, 1], [1, 0], [1, 1]], dtype=np.int64)
    before = Y.copy()
    out = check_labels(Y, 3)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, before)
    np.testing.assert_array_equal(Y, before)
    assert Y.dtype == np.int64


@pytest.mark.parametrize("Y", [np.array([[0.0, 1.0]]), np.array([[False, True]])], ids=["float", "bool"])
def test_labels_float_and_bool_01(Y):
    out = check_labels(Y, 1)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [[0, 1]])


def test_labels_1d_becomes_column():
    out = check_labels(np.array([0, 1, 1]), 3)
    assert out.shape == (3, 1)


def test_labels_outside_01():
    Y = np.array([[0, 1], [2, 0], [1, 3]])
    with pytest.raises(ValueError, match=re.escape("Y must have values in {0, 1}; found [2, 3] (first at index (1, 0))")):
        check_labels(Y, 3)


def test_labels_minus_one_only_when_missing_allowed():
    Y = np.array([[0, -1], [1, 0]])
    with pytest.raises(ValueError, match=re.escape("{0, 1}; found [-1]")):
        check_labels(Y, 2)
    out = check_labels(Y, 2, allow_missing=True)
    np.testing.assert_array_equal(out, Y)
    assert out.dtype == np.int8


def test_labels_outside_01_minus1():
    Y = np.array([[0, -1], [2, 1]])
    with pytest.raises(ValueError, match=re.escape("{0, 1}, or -1 for a missing label; found [2] (first at index (1, 0))")):
        check_labels(Y, 2, allow_missing=True)


def test_labels_fractional_values():
    with pytest.raises(ValueError, match=re.escape("found [0.5]")):
        check_labels(np.array([[0.5, 1.0]]), 1)


def test_labels_nonfinite_reports_index():
    Y = np.array([[0.0, 1.0], [np.nan, 0.0]])
    with pytest.raises(ValueError, match=re.escape("Y contains 1 non-finite value(s) at index (1, 0)")):
        check_labels(Y, 2)


def test_labels_mismatched_rows():
    with pytest.raises(ValueError, match="X has 4 samples but Y has 3 rows"):
        check_labels(np.zeros((3, 2), int), 4)
    with pytest.raises(ValueError, match="X has 2 samples but Y_test has 3 rows"):
        check_labels(np.zeros(3, int), 2, "Y_test")


def test_labels_no_columns_and_bad_ndim():
    with pytest.raises(ValueError, match="no label columns"):
        check_labels(np.zeros((3, 0), int), 3)
    with pytest.raises(ValueError, match="must be 2-D"):
        check_labels(np.zeros((3, 2, 1), int), 3)


def test_labels_non_numeric():
    with pytest.raises(ValueError, match="must be numeric"):
        check_labels(np.array([["a", "b"]]), 1)


def test_labels_input_not_modified():
    Y = np.array([[0.0, 1.0], [1.0, -1.0]])
    Y.setflags(write=False)
    out = check_labels(Y, 2, allow_missing=True)
    assert out.dtype == np.int8
    np.testing.assert_array_equal(out, [[0, 1], [1, -1]])


# ----------------------------------------------------------------------------------------
# hyperparameters
# ----------------------------------------------------------------------------------------


def test_positive_accepts_positive_scalars_and_arrays():
    check_positive(alpha=1.0, beta=np.array([0.5, 2.0]), gamma=3, tiny=1e-300)


@pytest.mark.parametrize("value", [0.0, -1.0, np.inf, np.nan, np.array([1.0, 0.0]), np.array([1.0, -np.inf])])
def test_positive_rejects(value):
    with pytest.raises(ValueError, match=r"^sigma must be a positive finite number, got"):
        check_positive(alpha=1.0, sigma=value)


def test_positive_names_the_first_bad_one():
    with pytest.raises(ValueError, match="^b must be"):
        check_positive(a=1.0, b=-2.0, c=-3.0)


@pytest.mark.parametrize("value", [3, np.int64(3), np.int32(3)])
def test_int_in_accepts(value):
    out = check_int_in("n", value, 1, 10)
    assert out == 3 and type(out) is int


@pytest.mark.parametrize("value", [3.0, "3", None, True, False, np.float64(3.0)])
def test_int_in_rejects_non_integers(value):
    with pytest.raises(ValueError, match=r"^n must be an integer, got"):
        check_int_in("n", value, 0)


@pytest.mark.parametrize(
    "value, low, high, msg",
    [(0, 1, 10, "n must be between 1 and 10, got 0"), (11, 1, 10, "n must be between 1 and 10, got 11"),
     (-1, 0, None, "n must be >= 0, got -1")],
)
def test_int_in_rejects_out_of_range(value, low, high, msg):
    with pytest.raises(ValueError, match=re.escape(msg)):
        check_int_in("n", value, low, high)


def test_int_in_bounds_inclusive():
    assert check_int_in("n", 1, 1, 10) == 1
    assert check_int_in("n", 10, 1, 10) == 10
    assert check_int_in("n", 10**9, 0) == 10**9


def test_choice():
    assert check_choice("solver", "vb", ("vb", "gibbs")) == "vb"
    assert check_choice("solver", "gibbs", iter(["vb", "gibbs"])) == "gibbs"
    with pytest.raises(ValueError, match=re.escape("solver must be one of ('vb', 'gibbs'), got 'VB'")):
        check_choice("solver", "VB", ("vb", "gibbs"))
    with pytest.raises(ValueError, match="got None"):
        check_choice("solver", None, ("vb",))


def test_sparse_matrices_are_refused_by_name_and_sparse_labels_densified():
    from scipy import sparse

    X = sparse.csr_matrix(np.eye(3))
    with pytest.raises(TypeError, match=r"X is a scipy sparse matrix, but a dense array is required; use X.toarray\(\)"):
        check_matrix(X)
    Y = sparse.csr_array(np.array([[1, 0], [0, 1], [1, 1]]))
    np.testing.assert_array_equal(check_labels(Y, 3), Y.toarray())


def test_is_symmetric_agrees_with_numpy_allclose():
    """The symmetry test of the covariance checks is np.allclose(A, A.T, rtol=1e-6,
    atol=1e-8 max|A|): the same verdict on matrices perturbed around both tolerances, at
    several scales, in float32 and float64."""
    rng = np.random.default_rng(0)
    for scale in (1e-30, 1.0, 1e30):
        for dtype in (np.float32, np.float64):
            B = rng.standard_normal((6, 6))
            A = (B @ B.T * scale).astype(dtype)
            for relative in (0.0, 1e-9, 1e-7, 5e-7, 2e-6, 1e-5, 1e-3):
                for absolute in (0.0, 1e-9, 2e-8, 1e-6):
                    P = A.copy()
                    P[1, 4] = P[1, 4] * (1 + relative) + absolute * np.abs(A).max()
                    expected = np.allclose(P, P.T, rtol=1e-6, atol=1e-8 * np.abs(P).max())
                    assert is_symmetric(P) == expected, (scale, dtype, relative, absolute)
    assert is_symmetric(np.array([[2.0]])) and not is_symmetric(np.array([[1.0, 0.0], [1.0, 1.0]]))
    # integers and booleans as np.allclose takes them: in float64, without wrap-around
    for A in (np.array([[100, -128], [-128, 100]], np.int8), np.array([[3, 250], [249, 3]], np.uint8),
              np.array([[1, 2], [2, 1]], np.int64), np.array([[1, 2], [3, 1]], np.int64),
              np.array([[True, False], [False, True]]), np.array([[True, True], [False, True]])):
        assert is_symmetric(A) == np.allclose(A, A.T, rtol=1e-6, atol=1e-8 * np.abs(A.astype(float)).max()), A

"""Host-side input validation: refuse bad input with an actionable ``ValueError``.

Everything here runs on concrete (NumPy) arrays before anything is traced or compiled,
and never modifies what the caller passed.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np


def where_nonfinite(a: np.ndarray) -> str:
    """'k non-finite value(s) at index (i, j), ...': the count and the first three places."""
    bad = np.argwhere(~np.isfinite(a))
    shown = ", ".join(str(tuple(int(i) for i in idx)) for idx in bad[:3])
    more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
    return f"{len(bad)} non-finite value(s) at index {shown}{more}"


def is_sparse(X) -> bool:
    """A scipy sparse matrix or array (told by its type's module: scipy is not imported)."""
    return type(X).__module__.startswith("scipy.sparse")


def _object_as_float(X, a: np.ndarray, name: str) -> np.ndarray:
    """An object array of numbers (pandas' nullable dtypes, mixed columns) as float64, as
    scikit-learn converts it; pandas' missing values become NaN (refused by the caller with
    their places). Anything else is refused by name."""
    try:
        if hasattr(X, "to_numpy"):
            return X.to_numpy(dtype=np.float64, na_value=np.nan)
        return a.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a real numeric array; got dtype object holding values that are not real numbers.") from None


def check_real(X, name: str = "X", *, two_d: bool = True, min_rows: int = 1) -> np.ndarray:
    """``X`` as a NumPy array after the checks every data argument gets, each message naming
    ``name``: dense (a scipy sparse matrix is a ``TypeError``, as in scikit-learn), real
    numbers (bool, integer or floating), 2-D when ``two_d``, at least ``min_rows`` rows,
    finite (the count and places of NaN or inf)."""
    if is_sparse(X):
        raise TypeError(f"{name} is a scipy sparse matrix, but a dense array is required; use {name}.toarray().")
    a = np.asarray(X)
    if a.dtype.kind == "O":
        a = _object_as_float(X, a, name)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be a real numeric array; got dtype {a.dtype}.")
    if two_d and a.ndim != 2:
        hint = f" Reshape your data: {name}.reshape(-1, 1) for a single feature." if a.ndim == 1 else ""
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {a.shape}.{hint}")
    if a.ndim and a.shape[0] < min_rows:
        raise ValueError(f"{name} has {a.shape[0]} sample(s); at least {min_rows} required.")
    if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains {where_nonfinite(a)} (NaN or inf).")
    return a


def check_matrix(X, name: str = "X", *, min_rows: int = 1, min_cols: int = 1) -> np.ndarray:
    """A finite 2-D floating array with at least ``min_rows`` rows and ``min_cols`` columns
    (:func:`check_real`). Integer and boolean input is converted to the default float dtype;
    floating input keeps its dtype. The caller's array is never modified (a view or copy is
    returned)."""
    a = check_real(X, name, min_rows=min_rows)
    if a.shape[1] < min_cols:
        raise ValueError(f"{name} has {a.shape[1]} feature(s); at least {min_cols} required.")
    return a if a.dtype.kind == "f" else a.astype(np.float64)


def check_labels(Y, n_samples: int, name: str = "Y", *, allow_missing: bool = False) -> np.ndarray:
    """A 2-D label matrix with values in {0, 1} (and -1 for missing when allowed), as int8.
    A scipy sparse label matrix (scikit-learn's MultiLabelBinarizer makes them) is densified."""
    a = Y.toarray() if is_sparse(Y) else np.asarray(Y)
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_labels), got shape {a.shape}.")
    if a.shape[0] != n_samples:
        raise ValueError(
            f"X has {n_samples} samples but {name} has {a.shape[0]} rows; they must match."
        )
    if a.shape[1] < 1:
        raise ValueError(f"{name} has no label columns.")
    if a.dtype == object or not (np.issubdtype(a.dtype, np.number) or a.dtype == bool):
        raise ValueError(f"{name} must be numeric, got dtype {a.dtype}.")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains {where_nonfinite(a)}.")
    allowed = (-1, 0, 1) if allow_missing else (0, 1)
    bad = ~np.isin(a, allowed)
    if np.any(bad):
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        values = np.unique(a[bad])[:5].tolist()
        what = "{0, 1}, or -1 for a missing label" if allow_missing else "{0, 1}"
        raise ValueError(
            f"{name} must have values in {what}; found {values} (first at index {idx})."
        )
    return a.astype(np.int8)


def check_positive(**values) -> None:
    """Each named value (scalar or array) must be finite and > 0."""
    for name, v in values.items():
        arr = np.asarray(v, dtype=float)
        if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}.")


def check_int_in(name: str, value, low: int, high: int | None = None) -> int:
    """An integer in [low, high] (high optional)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}.")
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}.")
    return int(value)


def check_choice(name: str, value, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}.")
    return value


def check_square_shape(A, name: str) -> None:
    """``A`` is a non-empty square matrix, judged by its shape alone: inside ``jit`` and
    ``vmap``, where its values are not checked, its shape is still static."""
    shape = np.shape(A)
    if len(shape) != 2 or shape[0] != shape[1] or shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix; got shape {shape}.")


def check_paired_shapes(X, Y, names: tuple[str, str] = ("X", "Y")) -> None:
    """``X`` (n, d) and ``Y`` (n,) or (n, k) with the same n, judged by their shapes alone
    (static inside ``jit`` and ``vmap``, where the values are not checked)."""
    (x, y), sx, sy = names, np.shape(X), np.shape(Y)
    if len(sx) != 2:
        raise ValueError(f"{x} must be 2-D (n_samples, n_features), got shape {sx}.")
    if len(sy) not in (1, 2):
        raise ValueError(f"{y} must be 1-D or 2-D (n_samples, ...), got shape {sy}.")
    if sx[0] != sy[0]:
        raise ValueError(f"{x} and {y} must have the same number of rows, got {sx[0]} and {sy[0]}.")


def check_new_inputs(X, n_features: int, name: str = "X") -> None:
    """New inputs of a fit on ``n_features`` features: (m, n_features) by their shape
    (static, so checked inside ``jit`` too), and finite real numbers when they are host data
    (a JAX array is left on its device unread)."""
    import jax

    shape = np.shape(X)
    if len(shape) != 2 or shape[1] != n_features:
        raise ValueError(f"{name} must have shape (m, {n_features}) for a fit on {n_features} feature(s), got {shape}.")
    if is_concrete(X) and not isinstance(X, jax.Array):
        check_real(X, name)


def is_concrete(*xs) -> bool:
    """True when no leaf of ``xs`` is a JAX tracer, so the host-side checks can run
    (they are skipped inside ``jit`` and ``vmap``, where the caller validated already)."""
    import jax

    return not any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(xs))


def is_symmetric(A: np.ndarray) -> bool:
    """Whether the finite square ``A`` equals its transpose to a relative 1e-6 and an
    absolute 1e-8 times its largest entry: ``np.allclose``'s test, without its overhead
    (a tenth of a fit of a small covariance). Integers and booleans are compared as
    float64, as ``np.allclose`` compares them (no wrap-around, no boolean subtraction)."""
    A = np.asarray(A)
    A = A if np.issubdtype(A.dtype, np.inexact) else A.astype(np.float64)
    return bool(np.all(np.abs(A - A.T) <= 1e-8 * np.abs(A).max() + 1e-6 * np.abs(A.T)))

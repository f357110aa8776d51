"""The data of the RCA paper's network-recovery experiments (Kalaitzis & Lawrence 2012),
shipped with the package.

- ``load_rca_simulation()``: the authors' simulated low-rank plus sparse-inverse set
  (their ``simdata_Y.mat``): ``Y = X W + rho V + sigma_n E`` (100, 50) with V ~ N(0,
  Lambda^-1), the true sparse precision ``Lambda`` (13 off-diagonal pairs), and the
  unconfounded ``Y_unc = rho V + sigma_n E``; also ``X`` (100, 3), ``W`` (3, 50), ``V``,
  ``E``, ``Sigma`` = Lambda^-1, ``rho``, ``sigma_n``, ``sigma_n_unc``. The low-rank and
  sparse-inverse parts have equal energy and the noise is 10% of the signal.
- ``load_sachs(conditions)``: Sachs et al. (Science 2005) flow cytometry of 11
  phospho-proteins in single T cells, 14 perturbation conditions (11,672 cells), raw
  intensities as in the authors' spreadsheets. Conditions 1-3 (cd3cd28, cd3cd28icam2,
  cd3cd28+aktinhib; 2,666 cells) are the authors' code's protocol; 1-9 are the 7,466
  cells the paper quotes.
- ``SACHS_EDGES``: the 14-edge undirected ground truth of the authors' code, as 0-based
  pairs in the column order ``SACHS_PROTEINS``.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

SACHS_PROTEINS = ("Raf", "Mek", "PLCg", "PIP2", "PIP3", "Erk", "Akt", "PKA", "PKC", "P38", "JNK")
SACHS_EDGES = tuple((i - 1, j - 1) for i, j in (
    (1, 9), (1, 8), (1, 2), (2, 9), (2, 8), (2, 6), (3, 5), (3, 4), (4, 5), (7, 8), (8, 11), (8, 10), (9, 11), (9, 10)))


def _load(name: str) -> dict[str, np.ndarray]:
    with resources.files(__package__).joinpath("data", f"{name}.npz").open("rb") as f:
        with np.load(f) as d:
            return {k: d[k] for k in d.files}


def load_rca_simulation() -> dict[str, np.ndarray]:
    """The authors' simulated data set, as described in the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> d = load_rca_simulation()
    >>> d["Y"].shape, int((np.triu(d["Lambda"], 1) != 0).sum())
    ((100, 50), 13)
    """
    return _load("rca_sim")


def load_sachs(conditions=(1, 2, 3)) -> np.ndarray:
    """The raw intensities (n_cells, 11) of the given conditions (distinct 1-based ids, or
    one id), stacked in file order.

    Examples
    --------
    >>> load_sachs().shape, load_sachs(range(1, 10)).shape
    ((2666, 11), (7466, 11))
    """
    ids = np.asarray(list(conditions) if np.iterable(conditions) else [conditions])  # one id alone is one condition
    if ids.size == 0 or ids.dtype.kind not in "iu" or np.any((ids < 1) | (ids > 14)):
        raise ValueError(f"conditions must be integer ids in 1..14; got {ids.tolist()}.")
    if np.unique(ids).size < ids.size:
        raise ValueError(f"conditions repeat an id: {ids.tolist()}; each condition's cells are returned once.")
    d = _load("sachs")
    return d["X"][np.isin(d["condition"], ids)]


def sachs_adjacency() -> np.ndarray:
    """The (11, 11) boolean adjacency of ``SACHS_EDGES`` (symmetric, zero diagonal)."""
    A = np.zeros((11, 11), bool)
    for i, j in SACHS_EDGES:
        A[i, j] = A[j, i] = True
    return A

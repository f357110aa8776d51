"""The four MULAN multilabel benchmarks of Gönen (2014) with their standard splits.

Shipped with the package (from the MULAN repository, ``tsoumakas/mulan``); features are
raw, exactly as in the ARFF files, labels in {0, 1}.

| name     | n_train | n_test |   D |  L |
|----------|---------|--------|-----|----|
| emotions |     391 |    202 |  72 |  6 |
| scene    |    1211 |   1196 | 294 |  6 |
| tmc2007  |   21519 |   7077 | 500 | 22 |
| yeast    |    1500 |    917 | 103 | 14 |

Cite MULAN (Tsoumakas et al., JMLR 12, 2011) and the data sets' own papers (Trohidis
et al. 2008; Boutell et al. 2004; Srivastava & Zane-Ulman 2005; Elisseeff & Weston 2001).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

MULAN_NAMES = ("emotions", "scene", "tmc2007", "yeast")


def _archive(name: str):
    if name not in MULAN_NAMES:
        raise ValueError(f"unknown MULAN data set {name!r}; choose one of {MULAN_NAMES}.")
    return resources.files(__package__).joinpath("data", f"{name}.npz")


def load_mulan(name: str, dtype=np.float64) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Load a MULAN benchmark with its standard train/test split.

    Parameters
    ----------
    name : {"emotions", "scene", "tmc2007", "yeast"}
    dtype : floating dtype of the features (float64 by default).

    Returns
    -------
    X_train, Y_train, X_test, Y_test : numpy arrays; X of shape (n, D) in ``dtype``,
        Y of shape (n, L) with values in {0, 1} (int8).

    Examples
    --------
    >>> X_train, Y_train, X_test, Y_test = load_mulan("emotions")
    >>> X_train.shape, Y_test.shape
    ((391, 72), (202, 6))
    """
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError(f"dtype must be a floating dtype (the features are real), got {np.dtype(dtype)}.")
    with _archive(name).open("rb") as f, np.load(f) as d:
        return (
            d["X_train"].astype(dtype),
            d["Y_train"].astype(np.int8),
            d["X_test"].astype(dtype),
            d["Y_test"].astype(np.int8),
        )


def mulan_info(name: str) -> dict:
    """Feature and label names of a MULAN benchmark."""
    with _archive(name).open("rb") as f, np.load(f) as d:
        return {"feature_names": d["feature_names"].tolist(), "label_names": d["label_names"].tolist()}

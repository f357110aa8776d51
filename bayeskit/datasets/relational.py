"""The relational link-prediction benchmarks of the IRM and LFRM papers (Kemp et al.
2006; Miller, Griffiths & Jordan 2009), shipped with the package.

| name    | Y            | observed                | extra arrays                                       |
|---------|--------------|-------------------------|----------------------------------------------------|
| kinship | (26, 104, 104) | all cells             | person_features (104, 14), section (104,), section_onehot (104, 4) |
| nations | (56, 14, 14) | 9,757 of 10,976 cells   | features (14, 111), features_observed, relation_names, feature_names, country_names |
| nips234 | (234, 234)   | all cells (symmetric)   |                                                    |

Kinship (Alyawarra, Denham 1973): ``Y[r, i, j] = 1`` iff person i uses kinship term r for
person j; relation 23 is exactly the diagonal (exclude self-pairs from training and
scoring). Nations (Rummel's Dimensionality of Nations, as prepared for the IRM): -1 marks
a missing cell in ``Y`` and ``features``, the diagonal is missing in every relation; the
papers' "54 relations, 90 features" are this file's 56 one-of-n coded relations and 111
attribute columns. NIPS-234 (Globerson et al. 2007; the Miller et al. subset via Lloyd et
al. 2012): coauthorship of the 234 most connected NIPS 1-17 authors, 598 edges.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from bayeskit.relational.data import as_mask

RELATIONAL_NAMES = ("kinship", "nations", "nips234")


def load_relational(name: str) -> dict[str, np.ndarray]:
    """Load a relational benchmark.

    Returns a dict of numpy arrays named as in the table above (``Y`` int8, -1 where
    missing), plus ``mask``: bool, the same shape as ``Y``, True where the cell is observed.

    Examples
    --------
    >>> d = load_relational("kinship")
    >>> d["Y"].shape, int(d["Y"].sum())
    ((26, 104, 104), 10790)
    """
    if name not in RELATIONAL_NAMES:
        raise ValueError(f"unknown relational data set {name!r}; choose one of {RELATIONAL_NAMES}.")
    with resources.files(__package__).joinpath("data", f"{name}.npz").open("rb") as f, np.load(f) as d:
        out = {k: d[k] for k in d.files if k != "source_sha256"}
    out["mask"] = out.pop("Y_observed") if "Y_observed" in out else np.ones(out["Y"].shape, bool)
    return out


def holdout_split(Y, mask, symmetric: bool, seed: int | np.random.Generator = 0, frac: float = 0.2, unit: str | None = None):
    """Training and test masks for link prediction: each observed off-diagonal cell is held
    out with probability ``frac``, independently by ``unit``:

    - ``"pairs"`` (the default for a symmetric relation): unordered pairs {i, j}, both
      orientations together, so that no held-out link can be read from its mirror;
    - ``"entries"`` (the default for a directed relation): ordered cells (i, j)
      independently. On a symmetric relation this leaks: about 1 - frac of the held-out
      cells have their mirror in training (the papers do not say which unit they used; this
      one gives the leaky upper bound).

    The test set thus holds about, not exactly, ``frac`` of the observed off-diagonal cells,
    and a small relation can draw none of them or all of them. Such a split is refused
    rather than returned: it would leave nothing to score, or nothing to fit.

    Parameters
    ----------
    Y : array of shape (N, N) or (n_relations, N, N)
        The relations; only their shape is read.
    mask : array of Y's shape
        True (or 1) where a cell is observed, as for
        :func:`bayeskit.relational.data.check_relations`.
    symmetric : bool
        Whether the relations are undirected; sets the default ``unit``.
    seed : int or numpy.random.Generator, default=0
    frac : float in (0, 1), default=0.2
        The probability that a cell (or, by ``"pairs"``, a pair) is held out.
    unit : {"pairs", "entries"}, optional

    Returns
    -------
    train, test : boolean arrays of Y's shape
        Disjoint; neither holds a diagonal or an unobserved cell.

    Raises
    ------
    ValueError
        On a ``mask`` that is not boolean (or 0/1), shapes that do not fit, a ``unit`` or
        ``frac`` out of range, or an empty test or training set.
    """
    unit = unit or ("pairs" if symmetric else "entries")
    if unit not in ("pairs", "entries"):
        raise ValueError(f"unit must be 'pairs' or 'entries'; got {unit!r}.")
    if not 0 < frac < 1:
        raise ValueError(f"frac must be in (0, 1); got {frac!r}.")
    shape = np.shape(Y)
    if len(shape) not in (2, 3) or shape[-1] != shape[-2]:
        raise ValueError(f"Y must be (N, N) or (n_relations, N, N); got shape {shape}.")
    mask = as_mask(mask)
    if mask.shape != shape:
        raise ValueError(f"mask must have Y's shape {shape}; got {mask.shape}.")
    rng = np.random.default_rng(seed)
    observed = mask & ~np.eye(shape[-1], dtype=bool)
    draw = rng.random(shape) < frac
    if unit == "pairs":
        upper = np.triu(draw, 1)
        draw = upper | np.swapaxes(upper, -1, -2)
    test = observed & draw
    train = observed & ~test
    for name, cells in (("test", test), ("training", train)):
        if not cells.any():
            raise ValueError(f"the split leaves an empty {name} set: each of the {int(observed.sum())} observed off-diagonal "
                             f"cells was held out with probability frac = {frac}; use another frac or seed, or more data.")
    return train, test

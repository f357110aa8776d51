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


def holdout_split(Y, mask, symmetric: bool, seed: int = 0, frac: float = 0.2, unit: str | None = None):
    """(train, test) masks: ``frac`` of the observed off-diagonal cells held out, drawn by
    ``unit``:

    - ``"pairs"`` (the default for a symmetric relation): unordered pairs {i, j}, both
      orientations together, so that no held-out link can be read from its mirror;
    - ``"entries"`` (the default for a directed relation): ordered cells (i, j)
      independently. On a symmetric relation this leaks: about 1 - frac of the held-out
      cells have their mirror in training (the papers do not say which unit they used; this
      one gives the leaky upper bound).
    """
    unit = unit or ("pairs" if symmetric else "entries")
    if unit not in ("pairs", "entries"):
        raise ValueError(f"unit must be 'pairs' or 'entries'; got {unit!r}.")
    if not 0 < frac < 1:
        raise ValueError(f"frac must be in (0, 1); got {frac!r}.")
    rng = np.random.default_rng(seed)
    n = Y.shape[-1]
    observed = mask & ~np.eye(n, dtype=bool)
    draw = rng.random(Y.shape) < frac
    if unit == "pairs":
        upper = np.triu(draw, 1)
        draw = upper | np.swapaxes(upper, -1, -2)
    test = observed & draw
    return observed & ~test, test

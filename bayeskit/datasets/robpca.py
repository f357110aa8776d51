"""The real data sets of the ROBPCA paper (Hubert, Rousseeuw & Vanden Branden 2005), shipped
with the package (converted from the R packages rospca and rrcov):

- Glass (180, 750): EPXMA spectra of archaeological glass vessels (Lemberge et al. 2000);
  rows 57-63 and 74-76 were measured with a different detector setting and rows 143-180
  with a different detector efficiency (1-based).
- Cars (111, 11): Consumer Reports (April 1990) car dimensions, with the car names; sports
  cars (25, 30, 32, 34, 36) and vans (102-111) are the known outliers.
- Octane (39, 226): NIR absorbance spectra of gasoline samples (Esbensen et al.), with the
  octane numbers; samples 25, 26 and 36-39 contain added alcohol.
"""

from __future__ import annotations

from importlib import resources

import numpy as np

ROBPCA_DATASETS = ("glass", "cars", "octane")


def load_robpca(name: str) -> dict[str, np.ndarray]:
    """``{"X": ...}`` for "glass", with ``columns`` and ``rownames`` for "cars", and with the
    octane numbers ``y`` and the wavelengths ``columns`` for "octane".

    Examples
    --------
    >>> load_robpca("glass")["X"].shape, str(load_robpca("cars")["rownames"][24])
    ((180, 750), 'Chevrolet Corvette')
    """
    if name not in ROBPCA_DATASETS:
        raise ValueError(f"name must be one of {ROBPCA_DATASETS}, got {name!r}.")
    with resources.files(__package__).joinpath("data", "robpca.npz").open("rb") as f:
        with np.load(f) as d:
            return {key.removeprefix(name).lstrip("_") or "X": d[key] for key in d.files if key.startswith(name)}

"""Numbers reported by Gönen (2014) and measured with the author's Matlab code.

Hamming losses on the standard test splits, R = L, 500 iterations, all Gamma
hyperparameters 1 (BSML+ARD in the paper: alpha_phi = 1e-10, beta_phi = 1e10). The
"author_code" values are means over seeds of the author's code run under Octave 7.3 on
raw features with all hyperparameters 1, BSML+ARD included (see the project's research
notes); None entries were not run.
"""

DATASETS = ("emotions", "scene", "tmc2007", "yeast")

PAPER_HAMMING = {
    "BSML": {"emotions": 0.2153, "scene": 0.1150, "tmc2007": 0.0578, "yeast": 0.2053},
    "BSML+ARD": {"emotions": 0.2186, "scene": 0.1356, "tmc2007": 0.0609, "yeast": 0.2033},
    "BSSML": {"emotions": 0.2021, "scene": 0.1164, "tmc2007": 0.0590, "yeast": 0.2035},
    "SSDRMC": {"emotions": 0.2805, "scene": 0.1345, "tmc2007": None, "yeast": 0.2485},
}

PAPER_ARD_ACTIVE = {"emotions": 2, "scene": 3, "tmc2007": 8, "yeast": 3}

AUTHOR_CODE_HAMMING = {
    "BSML": {"emotions": 0.2129, "scene": 0.1297, "tmc2007": 0.0675, "yeast": 0.2052},
    "BSML+ARD": {"emotions": 0.2142, "scene": 0.1074, "tmc2007": None, "yeast": 0.2019},
    "BSSML": {"emotions": 0.2071, "scene": 0.1307, "tmc2007": None, "yeast": 0.2030},
}

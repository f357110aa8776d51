"""Reproductions of the source papers' experiments, run by ``bayeskit reproduce``.

Each module reproduces one table or figure: ``run(out_dir, quick=False) -> dict`` prints
our numbers beside the paper's and writes JSON (and PNG where the paper has a figure)
to ``out_dir``. Quick mode finishes in about a minute on two cores.
"""

from . import (bsml_ard, bsml_semisupervised, bsml_supervised, hsic_level_power, ibp_toy, lfrm_link_prediction, rca_sachs,
               rca_simulation, robpca_examples, robpca_simulation, sbmoe_sensitivity, sparse_pca_text, sbmoe_synthetic, sparse_bayes_bump, sparse_bayes_selection, sparse_bayes_sinc)

EXPERIMENTS = {
    "bsml_supervised": bsml_supervised,
    "bsml_ard": bsml_ard,
    "bsml_semisupervised": bsml_semisupervised,
    "sbmoe_synthetic": sbmoe_synthetic,
    "sbmoe_sensitivity": sbmoe_sensitivity,
    "ibp_toy": ibp_toy,
    "lfrm_link_prediction": lfrm_link_prediction,
    "sparse_bayes_sinc": sparse_bayes_sinc,
    "sparse_bayes_bump": sparse_bayes_bump,
    "sparse_bayes_selection": sparse_bayes_selection,
    "rca_simulation": rca_simulation,
    "rca_sachs": rca_sachs,
    "hsic_level_power": hsic_level_power,
    "robpca_examples": robpca_examples,
    "robpca_simulation": robpca_simulation,
    "sparse_pca_text": sparse_pca_text,
}

__all__ = ["EXPERIMENTS"]

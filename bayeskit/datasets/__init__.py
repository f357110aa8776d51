"""Bundled data sets of the source papers and generators of their synthetic data."""

from bayeskit.datasets.corpus import read_uci_bag_of_words, zipf_corpus
from bayeskit.datasets.covariance import sparse_precision
from bayeskit.datasets.ibp import ibp_toy_features, ibp_toy_images
from bayeskit.datasets.mulan import MULAN_NAMES, load_mulan, mulan_info
from bayeskit.datasets.rca import SACHS_EDGES, SACHS_PROTEINS, load_rca_simulation, load_sachs, sachs_adjacency
from bayeskit.datasets.relational import RELATIONAL_NAMES, holdout_split, load_relational
from bayeskit.datasets.robpca import ROBPCA_DATASETS, load_robpca
from bayeskit.datasets.sbmoe import (
    sbmoe_conditional_1d,
    sbmoe_conditional_2d,
    sbmoe_features_2d,
    sbmoe_logpdf_1d,
    sbmoe_synthetic_1d,
    sbmoe_synthetic_2d,
)
from bayeskit.datasets.sparse import bump_datasets, bumps, grouped_datasets, sinc, sinc_datasets, tibshirani_datasets

__all__ = [
    "RELATIONAL_NAMES", "holdout_split", "ibp_toy_features", "ibp_toy_images", "load_relational",
    "MULAN_NAMES", "load_mulan", "mulan_info", "sbmoe_conditional_1d", "sbmoe_conditional_2d",
    "sbmoe_features_2d", "sbmoe_logpdf_1d", "sbmoe_synthetic_1d", "sbmoe_synthetic_2d", "bump_datasets", "bumps", "grouped_datasets", "sinc",
    "sinc_datasets", "tibshirani_datasets", "SACHS_EDGES", "SACHS_PROTEINS", "load_rca_simulation", "load_sachs",
    "sachs_adjacency", "ROBPCA_DATASETS", "load_robpca", "zipf_corpus", "read_uci_bag_of_words",
    "sparse_precision",
]

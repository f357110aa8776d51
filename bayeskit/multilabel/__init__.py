"""Multilabel classification: BSML (Gönen 2014) and its baselines PROBIT, the PCA/MDDM/MLLS/MLDA projections, SSDRMC, and the multilabel metrics."""

"""Sparse Bayesian regression: RVM, FLAP, FLAP-sigma and BLS on one fast marginal-likelihood engine, and the Bayesian Lasso."""

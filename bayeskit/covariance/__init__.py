"""Covariance, components and dependence: the graphical lasso, residual component analysis, large-scale sparse PCA and HSIC."""

"""bayeskit: Bayesian and statistical models in JAX, from their papers."""

__version__ = "0.1.0"

from .core.io import load, save

__all__ = ["__version__", "load", "save"]

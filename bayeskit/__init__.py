"""bayeskit: Bayesian and statistical models in JAX, from their papers."""

__version__ = "0.1.0"

from bayeskit.core.io import load, save  # noqa: E402
from bayeskit.core.sweep import Swept, sweep  # noqa: E402

__all__ = ["__version__", "load", "save", "sweep", "Swept"]

"""bayeskit: Bayesian and statistical models in JAX, from their papers."""

__version__ = "0.1.0"

from bayeskit.core.sweep import Swept, sweep  # noqa: E402

__all__ = ["__version__", "load", "save", "sweep", "Swept"]


def __getattr__(name: str):
    # save/load live in bayeskit.persistence, imported on first use: it reaches the
    # estimators (scikit-learn) and every family, which `import bayeskit` does not load
    if name in ("save", "load"):
        from bayeskit import persistence

        return getattr(persistence, name)
    raise AttributeError(f"module 'bayeskit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"save", "load"})

"""bayeskit: Bayesian and statistical models in JAX, from their papers."""

__version__ = "0.1.0"

__all__ = ["__version__", "hparam_axes", "load", "save", "sweep", "Swept"]

# imported on first use, so that `import bayeskit` (and the `bayeskit` command's help and
# argument errors) start no JAX: save/load reach the estimators and every family
_LAZY = {"save": "bayeskit.persistence", "load": "bayeskit.persistence", "sweep": "bayeskit.core.sweep", "Swept": "bayeskit.core.sweep",
         "hparam_axes": "bayeskit.core.sweep"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bayeskit' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))

"""Every example in the package's docstrings runs and prints what it says, in float64 and in
JAX's default float32: a user copies them, so each example imports what it uses."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import jax
import pytest

import bayeskit


def _modules_with_examples() -> list[str]:
    names = [info.name for info in pkgutil.walk_packages(bayeskit.__path__, "bayeskit.")]
    return [n for n in names if any(test.examples for test in doctest.DocTestFinder().find(importlib.import_module(n)))]


@pytest.mark.parametrize("x64", [True, False], ids=["float64", "float32"])
@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples(name, x64):
    module = importlib.import_module(name)
    with jax.enable_x64(x64):
        # each example in a namespace of its own: an example may not lean on the module's imports
        finder = doctest.DocTestFinder()
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        for test in finder.find(module, globs={"__name__": name, **_public(module)}):
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result}"


def _public(module) -> dict:
    """The module's public names (its ``__all__`` and what it defines), which an example may
    use unimported; not what it imports for itself: ``np`` or ``jnp`` the example imports."""
    exported = set(getattr(module, "__all__", ()))
    own = lambda n, v: n in exported or getattr(v, "__module__", None) == module.__name__  # noqa: E731
    return {n: v for n, v in vars(module).items() if not n.startswith("_") and own(n, v)}

"""Reproductions of the source papers' experiments, run by ``bayeskit reproduce``.

Each module reproduces one table or figure: ``run(out_dir, quick=False) -> dict`` prints
our numbers beside the paper's and writes JSON (and PNG where the paper has a figure)
to ``out_dir``. The JSON is standard (RFC 8259): a number that is not finite (an infinite
R-hat, an undefined AUC) is written as null. Quick mode finishes in about a minute on two
cores.
:mod:`bayeskit.experiments.runner` runs them one after another or side by side.

The registry imports nothing: ``bayeskit list`` reads each module's docstring from its
source, and :func:`load_experiment` imports one module when it is run.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from types import ModuleType

EXPERIMENTS = ("bsml_supervised", "bsml_ard", "bsml_semisupervised", "sbmoe_synthetic", "sbmoe_sensitivity", "ibp_toy",
               "lfrm_link_prediction", "sparse_bayes_sinc", "sparse_bayes_bump", "sparse_bayes_selection", "rca_simulation",
               "rca_sachs", "hsic_level_power", "robpca_examples", "robpca_simulation", "sparse_pca_text")
# the experiments that save their JSON as they go and, rerun with the same settings into the
# same folder, keep what they saved and run the rest (``common.earlier_results``); the others
# start again
RESUMABLE = ("bsml_supervised", "sbmoe_synthetic", "lfrm_link_prediction")


def _check(name: str) -> str:
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; choose from {EXPERIMENTS}.")
    return f"{__name__}.{name}"


def summary(name: str) -> str:
    """The first paragraph of the experiment's docstring on one line, without RST markup,
    read from its source without importing it."""
    spec = importlib.util.find_spec(_check(name))
    paragraph = ast.get_docstring(ast.parse(spec.loader.get_source(spec.name))).strip().split("\n\n")[0]
    return " ".join(paragraph.split()).replace("``", "")


def load_experiment(name: str) -> ModuleType:
    """The experiment's module (imported now), with its ``run(out_dir, quick, seed)``."""
    return importlib.import_module(_check(name))


__all__ = ["EXPERIMENTS", "RESUMABLE", "load_experiment", "summary"]

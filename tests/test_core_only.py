"""A core-only install: with every optional package hidden (the test, notebook, bench
and ArviZ extras), ``bayeskit --help``, ``bayeskit list`` and importing every estimator
still work, and one estimator fits. The extras are hidden by an import hook in a fresh
interpreter, so a module that imports one at load time fails this test."""

from __future__ import annotations

import subprocess
import sys
import textwrap

OPTIONAL = ("matplotlib", "arviz", "pytest", "xdist", "mpmath", "nbclient", "nbformat", "ipykernel", "jupyter", "fastrvm", "hyppo")

SCRIPT = textwrap.dedent(
    """
    import contextlib, importlib.abc, io, sys

    HIDDEN = set({hidden!r})

    class Hide(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in HIDDEN:
                raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
            return None

    sys.meta_path.insert(0, Hide())
    for name in list(sys.modules):
        if name.split(".")[0] in HIDDEN:
            del sys.modules[name]

    from bayeskit import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main(["--help"])
        except SystemExit as e:
            assert e.code == 0, e.code
        assert cli.main(["list"]) == 0
    text = out.getvalue()
    assert "reproduce" in text and "bsml_supervised" in text, text

    import numpy as np
    from bayeskit import estimators
    classes = [getattr(estimators, name) for name in estimators.__all__]
    X = np.random.default_rng(0).standard_normal((30, 3))
    estimators.GraphicalLasso(alpha=0.1).fit(X)
    loaded = [m for m in sys.modules if m.split(".")[0] in HIDDEN]
    assert not loaded, loaded
    print("ok", len(classes))
    """
)


def test_core_only_install_lists_experiments_and_imports_every_estimator():
    run = subprocess.run([sys.executable, "-c", SCRIPT.format(hidden=OPTIONAL)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split()[-2:] == ["ok", "16"], run.stdout

"""The layout's rules, read from the source: ``core`` imports no family package and not the
package's ``__init__``; no import cycle among bayeskit's modules (imports inside functions
included); benchmarks, experiments and notebooks use public names of the library only."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "bayeskit"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in PACKAGE.rglob("*.py")}


def _resolve(name: str) -> str:
    """The bayeskit module an import of ``name`` loads (a name inside a module maps to it)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports(source: str, module: str, is_package: bool) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) for every import statement in ``source``,
    at any depth, relative imports resolved against ``module``."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor if is_package else anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            out += [(base, alias.name) for alias in node.names]
    return out


def graph() -> dict[str, set[str]]:
    edges = {}
    for name, path in MODULES.items():
        targets = set()
        for base, item in imports(path.read_text(), name, path.name == "__init__.py"):
            if not base.startswith("bayeskit"):
                continue
            full = f"{base}.{item}" if item and f"{base}.{item}" in MODULES else base
            targets.add(_resolve(full))
        edges[name] = targets - {name}
    return edges


def test_core_imports_no_family_and_not_the_package_init():
    bad = {m: sorted(t for t in targets if not t.startswith("bayeskit.core"))
           for m, targets in graph().items() if m.startswith("bayeskit.core")}
    assert not {m: t for m, t in bad.items() if t}, bad


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the directed graph, or None (depth-first search with colours)."""
    colour, stack = dict.fromkeys(edges, 0), []

    def visit(node):
        colour[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if colour.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if colour.get(nxt) == 0:
                found = visit(nxt)
                if found:
                    return found
        colour[node] = 2
        stack.pop()
        return None

    for node in sorted(edges):
        if colour[node] == 0:
            found = visit(node)
            if found:
                return found
    return None


def test_no_import_cycles():
    # the package __init__ re-exports from core only; edges into it are the core rule's business
    edges = {m: {t for t in targets if t != "bayeskit"} for m, targets in graph().items()}
    assert find_cycle(edges) is None, find_cycle(edges)


def test_cycle_finder_finds_a_planted_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def _sources():
    for path in sorted((ROOT / "benchmarks").glob("*.py")) + sorted((PACKAGE / "experiments").glob("*.py")):
        yield path, path.read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        yield path, "\n".join(line for line in code.splitlines() if not line.lstrip().startswith(("%", "!")))


def private_uses(source: str) -> list[str]:
    """Names starting with ``_`` imported from bayeskit, or read as attributes of a name
    bound to a bayeskit module."""
    tree = ast.parse(source)
    bound, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bayeskit"):
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{node.module}.{alias.name}")
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            bound |= {alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name.startswith("bayeskit")}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(ast.unparse(node))
    return found


@pytest.mark.parametrize("path, source", list(_sources()), ids=lambda v: v.name if isinstance(v, Path) else "")
def test_only_public_names_outside_the_library(path, source):
    assert private_uses(source) == [], f"{path.relative_to(ROOT)} uses private names"


def test_private_use_detector_sees_both_forms():
    assert private_uses("from bayeskit.multilabel.bsml import _fit\n") == ["bayeskit.multilabel.bsml._fit"]
    assert private_uses("from bayeskit.multilabel import bsml\nbsml._fit(1)\n") == ["bsml._fit"]
    assert private_uses("import numpy as np\nnp._x\nfrom bayeskit.multilabel import bsml\nbsml.fit\n") == []

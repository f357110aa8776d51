"""Shared protocol of the BSML experiments: timed fits, baselines, tables, output."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import time
from pathlib import Path

import jax
import jax.numpy as jnp

from bayeskit.core import loop
from bayeskit.multilabel import bsml, probit, projections
from bayeskit.multilabel.metrics import multilabel_report

METRICS = ("hamming_loss", "average_auc", "macro_f1", "micro_f1")
PROJECTIONS = {
    "PCA": lambda X, Y, r: projections.pca(X, r),
    "MDDM": lambda X, Y, r: projections.mddm(X, Y, r),
    "MLLS": lambda X, Y, r: projections.mlls(X, Y, r),
    "MLDA": lambda X, Y, r: projections.mlda(X, Y, r),
}


def max_components(method: str, n_labels: int, n_features: int) -> int:
    """Largest subspace each method allows (paper, Section 5.1)."""
    return {"MLDA": n_labels - 1, "PCA": n_features}.get(method, n_labels)


def timed(jitted, *args, **kwargs):
    """Run a jitted function ahead-of-time compiled: (output, compile_s, run_s)."""
    t0 = time.perf_counter()
    compiled = jitted.lower(*args, **kwargs).compile()
    t1 = time.perf_counter()
    out = jax.block_until_ready(compiled(*args, **kwargs))
    return out, t1 - t0, time.perf_counter() - t1


@functools.cache
def _bsml_fit(max_iter: int, tol: float):
    """One jitted BSML fit per (max_iter, tol), kept so that fits of the same shapes share
    their compiled program."""
    return jax.jit(lambda key, X, Y, hp: bsml.fit(key, X, Y, hp, max_iter=max_iter, tol=tol, throw=False, progress=True))


@functools.cache
def _probit_fit(max_iter: int, tol: float):
    """One jitted PROBIT fit per (max_iter, tol), as :func:`_bsml_fit`: the projections of
    one rank share it."""
    return jax.jit(lambda key, F, Y, hp: probit.fit(key, F, Y, hp, max_iter=max_iter, tol=tol, throw=False))


def fit_bsml(X_train, Y_train, X_test, Y_test, hp: bsml.Hyperparams, *, seed=0, max_iter=500, tol=0.0):
    """Fit BSML and score it on the test split; times exclude compilation."""
    X = jnp.asarray(X_train)
    result, compile_s, run_s = timed(_bsml_fit(max_iter, tol), jax.random.key(seed), X, jnp.asarray(Y_train, jnp.int8), loop.as_arrays(hp, X.dtype))
    proba = bsml.predict_proba(result.state, X_test, hp)
    report = multilabel_report(Y_test, proba)
    report.update(train_seconds=run_s, compile_seconds=compile_s, n_iter=int(result.n_iter),
                  active_components=int(jnp.sum(bsml.active_components(result.state))))
    return report, result


def fit_probit(F_train, Y_train, F_test, Y_test, *, seed=0, max_iter=500, tol=0.0):
    """PROBIT on given features (raw or projected)."""
    F = jnp.asarray(F_train)
    hp = loop.as_arrays(probit.Hyperparams(), F.dtype)
    result, compile_s, run_s = timed(_probit_fit(max_iter, tol), jax.random.key(seed), F, jnp.asarray(Y_train, jnp.int8), hp)
    report = multilabel_report(Y_test, probit.predict_proba(result.state, F_test))
    report.update(train_seconds=run_s, compile_seconds=compile_s)
    return report


def fit_projection_probit(method, X_train, Y_train, X_test, Y_test, n_components, **kw):
    """A baseline projection followed by PROBIT; the time includes the projection (its
    compilation excluded, by a first warm-up call)."""
    project = lambda: jax.block_until_ready(PROJECTIONS[method](jnp.asarray(X_train), jnp.asarray(Y_train), n_components))
    project()
    t0 = time.perf_counter()
    proj = project()
    proj_s = time.perf_counter() - t0
    report = fit_probit(proj.transform(jnp.asarray(X_train)), Y_train, proj.transform(jnp.asarray(X_test)), Y_test, **kw)
    report["train_seconds"] += proj_s
    return report


def fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def print_table(title: str, header: list[str], rows: list[list], paper: str | None = None) -> str:
    """Print a table (and add it to the Markdown file inside :func:`markdown_tables`).
    ``paper`` says what the paper reports for a table without a paper column, and why no
    number of it stands beside ours; it is printed under the table as "paper: ..."."""
    widths = [max(len(str(h)), *(len(fmt(r[i])) for r in rows)) for i, h in enumerate(header)]
    lines = [title, "  ".join(str(h).ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(fmt(v).ljust(w) for v, w in zip(r, widths)) for r in rows]
    lines += [f"paper: {paper}"] if paper else []
    text = "\n".join(lines)
    print(text, flush=True)
    _to_markdown(markdown_table(title, header, rows) + (f"\n\npaper: {paper}" if paper else ""))
    return text


def print_note(text: str) -> None:
    """Print a finding that goes with the tables (and add it to the Markdown file, as print_table)."""
    print(text, flush=True)
    _to_markdown(" ".join(text.split()))


def markdown_table(title: str, header: list[str], rows: list[list]) -> str:
    """``title`` as a paragraph, then a Markdown table of ``rows`` (cells as ``fmt`` prints them)."""
    cell = lambda v: fmt(v).replace("|", "\\|").replace("\n", " ")
    lines = [f"**{' '.join(title.split())}**", "", "| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(map(cell, r)) + " |" for r in rows])


_markdown: dict | None = None  # where print_table and print_note also write, inside markdown_tables()


def _to_markdown(block: str) -> None:
    if _markdown is not None:
        _markdown["blocks"].append(block)
        _markdown["path"].write_text("\n\n".join(_markdown["blocks"]) + "\n")


@contextlib.contextmanager
def markdown_tables(path: str | os.PathLike):
    """Inside this context every table that :func:`print_table` prints (and every
    :func:`print_note`) is also written to ``path`` as Markdown, the file rewritten after
    each one (a long run's file is current)."""
    global _markdown
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    outer, _markdown = _markdown, {"path": path, "blocks": []}
    try:
        yield path
    finally:
        _markdown = outer


def earlier_results(out_dir: str | os.PathLike, name: str, settings: dict) -> dict:
    """The ``results`` of an earlier run of experiment ``name`` into ``out_dir`` whose
    payload has every key of ``settings`` equal, else {}: a long run started again keeps
    what it finished."""
    path = Path(out_dir) / f"{name}.json"
    try:
        earlier = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    if any(earlier.get(k) != json.loads(to_json(v)) for k, v in settings.items()):
        return {}
    return earlier["results"]


def _finite_or_none(value):
    """``value`` with every float that is not finite (NaN, infinity) replaced by None, through
    dicts, lists and tuples."""
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


def _number(value) -> float | None:
    """A number json does not know (a NumPy or JAX scalar) as a float, None when not finite."""
    number = float(value)
    return number if math.isfinite(number) else None


def to_json(value, indent: int | None = None) -> str:
    """``value`` as standard JSON (RFC 8259, which has no NaN or infinity, so that strict
    parsers read it): a number that is not finite, such as an infinite R-hat, is written as
    null."""
    return json.dumps(_finite_or_none(value), indent=indent, default=_number, allow_nan=False)


def write_json(out_dir: str | os.PathLike, name: str, payload: dict) -> Path:
    """Write ``payload`` to ``out_dir/name.json`` as standard JSON (:func:`to_json`: a number
    that is not finite is null)."""
    path = Path(out_dir) / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".json.partial")
    partial.write_text(to_json(payload, indent=2))
    partial.replace(path)  # atomic: an interrupted run never leaves a truncated file
    return path


def save_figure(fig, out_dir: str | os.PathLike, filename: str, title: str) -> Path:
    """Title, lay out, write as PNG (110 dpi) and close a matplotlib figure."""
    import matplotlib.pyplot as plt

    fig.suptitle(title)
    fig.tight_layout()
    path = Path(out_dir) / filename
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

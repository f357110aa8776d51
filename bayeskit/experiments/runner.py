"""Running experiments one after another, or in worker processes side by side.

A quick experiment spends most of its time compiling, and XLA compiles a program on one
core; two workers on two cores compile two programs at once. Each worker runs whole
experiments with their output captured and hands the text back when the experiment
ends, so that the printed tables of two experiments never interleave; each
experiment's Markdown file is still rewritten after each of its tables. Workers show no
progress bars (``BAYESKIT_PROGRESS=0``); the parent shows one bar over the experiments.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple


class Finished(NamedTuple):
    """What a worker hands back: the experiment's printed text, its wall time, and the
    traceback when it raised (else None)."""

    name: str
    text: str
    seconds: float
    error: str | None


def available_cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (macOS, Windows)
        return os.cpu_count() or 1


def default_jobs(quick: bool, n_experiments: int) -> int:
    """Quick runs: two workers where two cores are free (quick experiments are mostly
    compilation, on one core each). Full runs: one, because their long fits already use
    every core."""
    return max(1, min(2, available_cores(), n_experiments)) if quick else 1


def run_experiment(name: str, out: str, quick: bool, seed: int) -> None:
    """Run experiment ``name`` (in float64, as the papers), printing its header, its tables
    and its time; its tables also go to ``out/name.md``."""
    import jax

    from bayeskit.experiments import load_experiment
    from bayeskit.experiments.common import markdown_tables

    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    print(f"== {name} ({'quick' if quick else 'full'}) ==", flush=True)
    with markdown_tables(Path(out) / f"{name}.md"):
        load_experiment(name).run(out, quick=quick, seed=seed)
    print(f"== {name} done in {time.perf_counter() - start:.1f} s; outputs in {out}/ (JSON, Markdown tables, figures)", flush=True)


def captured(task: Callable[..., None], name: str, *args) -> Finished:
    """``task(name, *args)`` with everything it prints (stdout and stderr, warnings
    included) captured; an exception is caught and handed back as its traceback."""
    buffer, start, error = io.StringIO(), time.perf_counter(), None
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            task(name, *args)
        except Exception:
            error = traceback.format_exc()
    return Finished(name, buffer.getvalue(), time.perf_counter() - start, error)


def _report(done: Finished) -> str:
    """The experiment's printed text, and its traceback when it failed."""
    text = done.text.rstrip("\n")
    return text if done.error is None else f"{text}\n== {done.name} FAILED after {done.seconds:.1f} s:\n{done.error.rstrip()}"


def _quiet_worker() -> None:
    os.environ["BAYESKIT_PROGRESS"] = "0"


def run_parallel(names: Sequence[str], args: tuple, jobs: int, task: Callable[..., None] = run_experiment,
                 show: Callable[[str], None] | None = None) -> list[str]:
    """Run ``task(name, *args)`` for every name on ``jobs`` worker processes, started
    fresh (spawn), in the given order as workers free up. Each experiment's text is shown
    as soon as it ends, whole; an experiment that raises is reported with what it printed
    and the others go on. A worker that dies (killed, out of memory) breaks the pool: the
    experiments not finished by then are reported as failed. ``show`` prints a text (default:
    above the bar). Returns the names that failed."""
    from tqdm.auto import tqdm

    show = show or tqdm.write

    failed = []
    context = multiprocessing.get_context("spawn")
    with (concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_quiet_worker) as pool,
          tqdm(total=len(names), desc="experiments", unit="exp", disable=bool(os.environ.get("CI")) or None) as bar):
        futures = {pool.submit(captured, task, name, *args): name for name in names}
        try:
            for future in concurrent.futures.as_completed(futures):
                try:
                    done = future.result()
                except Exception as e:  # the worker died (killed, out of memory): its output is lost
                    done = Finished(futures[future], "", float("nan"), f"the worker process failed: {e!r}\n")
                failed += [done.name] if done.error is not None else []
                show(_report(done))
                bar.update(1)
        except KeyboardInterrupt:  # stop at once: the pool would otherwise finish every queued experiment
            for process in list(pool._processes.values()):  # the executor has no public way to stop running tasks
                process.terminate()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return failed

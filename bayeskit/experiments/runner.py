"""Running experiments one after another, or in worker processes side by side.

A quick experiment spends most of its time compiling, and XLA compiles a program on one
core; two workers on two cores compile two programs at once. Each worker runs whole
experiments with their output captured and hands the text back when the experiment
ends, so that the printed tables of two experiments never interleave; each
experiment's Markdown file is still rewritten after each of its tables. Each worker runs
on its own share of the cores. Workers show no progress bars (``BAYESKIT_PROGRESS=0``);
the parent shows one bar over the experiments.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import sys
import tempfile
import threading
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
    """The cores this process may run on: its CPU affinity, bounded by a cgroup (v2) CPU
    quota where one is set (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity call (macOS, Windows)
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    return cores


def default_jobs(quick: bool, n_experiments: int, requested: int | None = None) -> int:
    """The number of worker processes: ``requested``, else for quick runs two where two
    cores are available (quick experiments are mostly compilation, on one core each) and
    for full runs one (their long fits already use every core); never more than the
    experiments."""
    return min(requested or (min(2, available_cores()) if quick else 1), n_experiments)


# Seconds of each experiment's quick run alone (``bayeskit reproduce --quick --jobs 1``, two
# cores, empty compilation cache, rounded). Only the order of the workers' queue reads them.
QUICK_SECONDS = {"lfrm_link_prediction": 52, "sbmoe_synthetic": 50, "rca_simulation": 49, "robpca_simulation": 41,
                 "sparse_bayes_selection": 34, "sparse_bayes_bump": 31, "hsic_level_power": 28, "robpca_examples": 27,
                 "bsml_supervised": 24, "sparse_bayes_sinc": 16, "bsml_semisupervised": 15, "ibp_toy": 15,
                 "sbmoe_sensitivity": 13, "rca_sachs": 13, "bsml_ard": 4, "sparse_pca_text": 2}


def longest_first(names: Sequence[str]) -> list[str]:
    """``names`` with the longest quick runs first (``QUICK_SECONDS``; an unknown name
    last, ties in the given order): workers that take them in this order end close
    together, where the given order can leave one worker running a long experiment
    alone at the end (list scheduling, longest processing time first)."""
    return sorted(names, key=lambda name: (name not in QUICK_SECONDS, -QUICK_SECONDS.get(name, 0)))


def run_experiment(name: str, out: str, quick: bool, seed: int, beside_others: bool = False) -> None:
    """Run experiment ``name`` (in float64, as the papers), printing its header, its tables
    and its time; its tables also go to ``out/name.md``. ``beside_others``: the header says
    that the experiment's timings may have been taken while other workers ran."""
    import jax

    from bayeskit.experiments import load_experiment
    from bayeskit.experiments.common import markdown_tables

    jax.config.update("jax_enable_x64", True)
    start = time.perf_counter()
    shared = "; its timings may be taken beside other experiments: --jobs 1 times it alone" if beside_others else ""
    print(f"== {name} ({'quick' if quick else 'full'}{shared}) ==", flush=True)
    with markdown_tables(Path(out) / f"{name}.md"):
        load_experiment(name).run(out, quick=quick, seed=seed)
    print(f"== {name} done in {time.perf_counter() - start:.1f} s; outputs in {out}/ (JSON, Markdown tables, figures)", flush=True)


def run_serial(names: Sequence[str], args: tuple, task: Callable[..., None] = run_experiment) -> list[str]:
    """Run ``task(name, *args)`` for every name in this process, printing as it goes; an
    experiment that raises is reported with its traceback and the others go on. Returns
    the names that failed."""
    failed = []
    for name in names:
        try:
            task(name, *args)
        except Exception:
            traceback.print_exc()
            print(f"== {name} FAILED", file=sys.stderr, flush=True)
            failed.append(name)
    return failed


def captured(task: Callable[..., None], name: str, *args) -> Finished:
    """``task(name, *args)`` with everything written to this process's standard output and
    error while it runs (prints, warnings, logs, and what C libraries write) captured: the
    file descriptors 1 and 2 point at a temporary file meanwhile. An exception is caught
    and handed back as its traceback."""
    start, error = time.perf_counter(), None
    with tempfile.TemporaryFile() as file:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(file.fileno(), 1)
        os.dup2(file.fileno(), 2)
        try:
            task(name, *args)
        except Exception:
            error = traceback.format_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, copy in zip((1, 2), saved):
                os.dup2(copy, fd)
                os.close(copy)
        file.seek(0)
        text = file.read().decode(errors="replace")
    return Finished(name, text, time.perf_counter() - start, error)


def _report(done: Finished) -> str:
    """The experiment's printed text, and its traceback when it failed."""
    text = done.text.rstrip("\n")
    return text if done.error is None else f"{text}\n== {done.name} FAILED after {done.seconds:.1f} s:\n{done.error.rstrip()}"


def _pin(index: int, jobs: int) -> None:
    """Give worker ``index`` of ``jobs`` its own share of this process's cores (where the
    system lets a process choose). XLA sizes its thread pool by the cores a process may
    use; without shares, each worker's pool expects every core, and a loop of small
    parallel operations waits on threads the other worker has descheduled (one EM/RCA fit
    ran 7 times slower beside another experiment than alone)."""
    try:
        cores = sorted(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows: no affinity call
        return
    share = max(1, len(cores) // jobs)
    first = (index * share) % len(cores)
    os.sched_setaffinity(0, cores[first:first + share])


def _worker_start(parent: int, started, jobs: int) -> None:
    """In each worker, before anything starts JAX: its share of the cores, no progress
    bars, prints written at once (so that prints and warnings keep their order), Ctrl-C
    left to the parent (which stops the workers; a worker of its own would print a
    traceback of the interrupt), and an exit as soon as the parent process is gone (killed,
    or ended without stopping its workers), which the pool itself would not notice."""
    with started.get_lock():
        index, started.value = started.value, started.value + 1
    _pin(index, jobs)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ["BAYESKIT_PROGRESS"] = "0"
    sys.stdout.reconfigure(line_buffering=True)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, daemon=True).start()


def _stop(pool: concurrent.futures.ProcessPoolExecutor) -> None:
    """Stop every worker now and drop the queued experiments."""
    for process in list((pool._processes or {}).values()):  # the executor has no public way to stop running tasks
        process.terminate()
    pool.shutdown(wait=False, cancel_futures=True)


def run_parallel(names: Sequence[str], args: tuple, jobs: int, task: Callable[..., None] = run_experiment,
                 show: Callable[[str], None] | None = None) -> list[str]:
    """Run ``task(name, *args)`` for every name on ``jobs`` worker processes, started
    fresh (spawn), in the given order as workers free up. Each experiment's text is shown
    as soon as it ends, whole; an experiment that raises is reported with what it printed
    and the others go on. A worker that dies (killed, out of memory) breaks the pool: the
    experiments not finished by then are reported as failed. An interrupt stops the
    workers at once. ``show`` prints a text (default: above the bar). Returns the names
    that failed."""
    from tqdm.auto import tqdm

    from bayeskit.core import progress

    show = show or tqdm.write
    failed = []
    context = multiprocessing.get_context("spawn")
    started = context.Value("i", 0)
    with (concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start,
                                                 initargs=(os.getpid(), started, jobs)) as pool,
          tqdm(total=len(names), desc="experiments", unit="exp", disable=None if progress.enabled(True) else True) as bar):
        try:
            futures = {pool.submit(captured, task, name, *args): name for name in names}
            for future in concurrent.futures.as_completed(futures):
                try:
                    done = future.result()
                except Exception as e:  # the worker died (killed, out of memory): its output is lost
                    done = Finished(futures[future], "", float("nan"), f"the worker process failed: {e!r}\n")
                failed += [done.name] if done.error is not None else []
                show(_report(done))
                bar.update(1)
        except BaseException:  # an interrupt: otherwise the pool would finish every queued experiment first
            _stop(pool)
            raise
    return failed

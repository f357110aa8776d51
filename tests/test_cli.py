"""The bayeskit command answers help, list and argument errors without starting JAX or
importing an experiment, lists whole descriptions, and names the valid choices."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap

import pytest

from bayeskit import cli
from bayeskit.experiments import EXPERIMENTS, summary

# runs the command in a fresh interpreter and reports whether JAX or an experiment was imported
PROBE = textwrap.dedent(
    """
    import contextlib, io, sys
    from bayeskit import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = cli.main({argv!r})
        except SystemExit as e:
            code = e.code
    heavy = sorted(m for m in sys.modules if m.split(".")[0] == "jax" or m.startswith("bayeskit.experiments."))
    print(code, len(heavy), heavy[:3])
    print(out.getvalue())
    """
)


@pytest.mark.parametrize("argv", [["--help"], ["list"], ["reproduce", "--only", "nosuchthing"], ["reproduce", "--jobs", "0"],
                                  ["bench", "--only", "nosuchmodel"]])
def test_help_list_and_argument_errors_import_no_jax(argv):
    run = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    code, n_heavy = run.stdout.split()[:2]
    assert n_heavy == "0", run.stdout[:500]
    assert code == ("0" if argv[0] in ("--help", "list") else "2"), run.stdout[:2000]


def test_list_gives_each_experiments_whole_first_paragraph(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in EXPERIMENTS:
        text = summary(name)
        assert text.endswith(".") and "``" not in text and "\n" not in text, (name, text)
        assert " ".join(text.split()[-3:]) in " ".join(out.split())


def test_unknown_names_are_answered_with_the_valid_choices(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["reproduce", "--only", "nosuchthing"])
    assert e.value.code == 2 and "bsml_supervised" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["bench", "--only", "nosuchmodel"])
    err = capsys.readouterr().err
    assert "nosuchmodel" in err and "glasso" in err and "report.py" not in err


def test_help_is_plain_text_and_lists_the_benchmark_models(capsys):
    for argv in (["--help"], ["bench", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr().out
        assert "``" not in text
    assert "glasso" in text and "--device" in text and "where our side runs" in text


def _chatty(name, lines, pause):
    """A stand-in experiment for the worker processes: prints ``lines`` numbered lines with
    pauses between them (so that two workers' prints would interleave if not captured),
    the progress-bar switch it sees, a warning, and raises for the name "fails"."""
    import os
    import time
    import warnings

    for i in range(lines):
        print(f"{name} line {i}", flush=True)
        time.sleep(pause)
    warnings.warn(f"{name} warns", stacklevel=1)
    print(f"{name} bars {os.environ.get('BAYESKIT_PROGRESS')}")
    if name == "fails":
        raise RuntimeError(f"{name} broke")


def test_parallel_runs_print_each_experiment_whole_and_go_on_after_a_failure():
    from bayeskit.experiments.runner import run_parallel

    shown = []
    failed = run_parallel(["first", "fails", "last"], (4, 0.05), 2, task=_chatty, show=shown.append)
    assert failed == ["fails"]
    assert sorted(block.split()[0] for block in shown) == ["fails", "first", "last"]
    for block in shown:
        name = block.split()[0]
        lines = block.splitlines()
        assert lines[:4] == [f"{name} line {i}" for i in range(4)], block  # whole, in order, no other's lines
        assert f"{name} warns" in block and f"{name} bars 0" in block, block
        assert ("RuntimeError: fails broke" in block and "FAILED" in block) == (name == "fails"), block


def test_default_jobs():
    from bayeskit.experiments.runner import available_cores, default_jobs

    assert default_jobs(False, 16) == 1
    assert default_jobs(True, 16) == min(2, available_cores())
    assert default_jobs(True, 1) == 1


INTERRUPTED = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_cli import _chatty
    from bayeskit.experiments.runner import run_parallel
    if __name__ == "__main__":
        start = time.perf_counter()
        try:
            run_parallel(["a", "b", "c"], (600, 0.1), 2, task=_chatty)  # a minute per experiment
        except KeyboardInterrupt:
            print("interrupted", time.perf_counter() - start)
    """
)


def test_an_interrupted_parallel_run_stops_its_workers_at_once(tmp_path):
    import os
    import signal
    import time
    from pathlib import Path

    script = tmp_path / "interrupted.py"
    script.write_text(INTERRUPTED.format(tests=str(Path(__file__).parent)))
    restore = lambda: (signal.signal(signal.SIGINT, signal.SIG_DFL), os.setpgrp())  # a Ctrl-C to the parent alone
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           preexec_fn=restore)
    try:
        time.sleep(4)
        os.kill(run.pid, signal.SIGINT)
        out, _ = run.communicate(timeout=30)
        assert "interrupted" in out, out[-2000:]
        for _ in range(50):  # the workers were sent SIGTERM; give them a moment to go
            try:
                os.killpg(run.pid, 0)  # a process left in the group
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            raise AssertionError("a worker process outlived the interrupted run")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(run.pid, signal.SIGKILL)

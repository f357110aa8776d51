"""The bayeskit command answers help, list and argument errors without starting JAX or
importing an experiment, lists whole descriptions, and names the valid choices."""

from __future__ import annotations

import contextlib
import os
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


def test_argument_errors_name_the_subcommand_and_the_argument(capsys, tmp_path):
    """A file given as the output folder and a negative seed are refused when parsed (each
    experiment raised its own traceback), and errors found after parsing print the
    subcommand's usage, not the top-level one."""
    afile = tmp_path / "afile"
    afile.write_text("")
    for argv, words in ((["reproduce", "--out", str(afile)], "is a file, not a folder"),
                        (["reproduce", "--seed", "-1"], "--seed: must be at least 0"),
                        (["reproduce", "--only", "nosuchthing"], "unknown experiment")):
        with pytest.raises(SystemExit) as e:
            cli.main(argv)
        err = capsys.readouterr().err
        assert e.value.code == 2 and "usage: bayeskit reproduce" in err and words in err, err


def test_a_reader_that_leaves_early_gets_no_traceback():
    """`bayeskit list | head`: the closed pipe ends the listing quietly."""
    proc = subprocess.Popen([sys.executable, "-m", "bayeskit.cli", "list"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and err == "", err


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
    import time
    import warnings

    for i in range(lines):
        print(f"{name} line {i}", flush=True)
        time.sleep(pause)
    warnings.warn(f"{name} warns", stacklevel=1)
    os.write(2, f"{name} raw\n".encode())  # below Python, as C libraries write
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
        assert f"{name} warns" in block and f"{name} raw" in block and f"{name} bars 0" in block, block
        assert ("RuntimeError: fails broke" in block and "FAILED" in block) == (name == "fails"), block


def test_a_serial_run_goes_on_after_a_failure(capsys):
    from bayeskit.experiments.runner import run_serial

    with pytest.warns(UserWarning):
        assert run_serial(["first", "fails", "last"], (1, 0.0), task=_chatty) == ["fails"]
    out, err = capsys.readouterr()
    assert "last line 0" in out and "RuntimeError: fails broke" in err and "fails FAILED" in err


def _cores(name, pause):
    """A stand-in experiment that prints its worker's process id and the cores it may use."""
    import time

    time.sleep(pause)
    print(os.getpid(), *sorted(os.sched_getaffinity(0)))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity on this system")
def test_parallel_workers_run_on_their_own_share_of_the_cores():
    from bayeskit.experiments.runner import run_parallel

    cores = sorted(os.sched_getaffinity(0))
    shown = []
    assert run_parallel(["a", "b", "c", "d"], (0.3,), 2, task=_cores, show=shown.append) == []
    shares = {}
    for block in shown:
        pid, *share = map(int, block.split())
        shares[pid] = frozenset(share)
    assert len(shares) == 2, shown  # both workers ran
    first, second = shares.values()
    assert len(first) == len(second) == max(1, len(cores) // 2) and first | second <= set(cores)
    assert not first & second or len(cores) == 1


def test_default_jobs():
    from bayeskit.experiments.runner import available_cores, default_jobs

    assert default_jobs(False, 16) == 1
    assert default_jobs(True, 16) == min(2, available_cores())
    assert default_jobs(True, 1) == 1
    assert default_jobs(True, 2, requested=5) == 2 and default_jobs(False, 16, requested=3) == 3



def _marking(name, folder, seconds):
    """A stand-in experiment that leaves a file named by its worker's process id in
    ``folder``, then runs for ``seconds``."""
    import time
    from pathlib import Path

    (Path(folder) / str(os.getpid())).touch()
    time.sleep(seconds)


STOPPED = textwrap.dedent(
    """
    import sys, time
    sys.path.insert(0, {tests!r})
    from test_cli import _marking
    from bayeskit.experiments.runner import run_parallel
    if __name__ == "__main__":
        start = time.perf_counter()
        try:
            run_parallel(["a", "b", "c"], ({folder!r}, 120), 2, task=_marking)
        except KeyboardInterrupt:
            print("stopped after", time.perf_counter() - start, "s")
    """
)


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (an ended process not yet reaped)."""
    from pathlib import Path

    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["SIGINT", "SIGKILL"])
def test_workers_stop_when_the_parallel_run_is_interrupted_or_killed(tmp_path, how):
    """A Ctrl-C to the parent alone stops the workers at once; so does the parent's death
    (a kill, the out-of-memory killer), which the pool itself would not notice."""
    import signal
    import time

    folder = tmp_path / "workers"
    folder.mkdir()
    script = tmp_path / "parallel_run.py"
    script.write_text(STOPPED.format(tests=os.path.dirname(__file__), folder=str(folder)))
    restore = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # pytest-xdist workers may ignore SIGINT
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           preexec_fn=restore, start_new_session=True)
    workers = []
    try:
        for _ in range(1200):  # both workers have started their experiment
            workers = [int(f.name) for f in folder.iterdir()]
            if len(workers) == 2 or run.poll() is not None:
                break
            time.sleep(0.05)
        assert len(workers) == 2, run.communicate()[0][-2000:]
        os.kill(run.pid, getattr(signal, how))
        out, _ = run.communicate(timeout=60)
        if how == "SIGINT":
            assert out.startswith("stopped after"), out[-2000:]
        for _ in range(100):
            if not any(map(_running, workers)):
                break
            time.sleep(0.1)
        else:
            raise AssertionError(f"workers {[w for w in workers if _running(w)]} outlived the run")
    finally:
        for pid in [run.pid, *workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def test_quick_runs_queue_the_longest_experiments_first():
    """Every experiment has a quick-run time, so none is queued last for want of one; the
    queue is ordered by it, an unknown name goes last, and list scheduling of the queue on
    two workers ends no later than of the registry's order."""
    from bayeskit.experiments import EXPERIMENTS
    from bayeskit.experiments.runner import QUICK_SECONDS, longest_first

    assert set(QUICK_SECONDS) == set(EXPERIMENTS)
    queue = longest_first(["other", *EXPERIMENTS])
    assert sorted(queue) == sorted(["other", *EXPERIMENTS])
    seconds = [QUICK_SECONDS.get(name, 0) for name in queue]
    assert seconds == sorted(seconds, reverse=True) and queue[-1] == "other"

    def makespan(order):
        workers = [0, 0]
        for name in order:
            workers[workers.index(min(workers))] += QUICK_SECONDS[name]
        return max(workers)

    assert makespan(longest_first(EXPERIMENTS)) <= makespan(EXPERIMENTS)


def test_quick_reproduction_hands_the_workers_the_longest_first(monkeypatch, tmp_path):
    """``reproduce --quick`` on two workers queues the longest first; a full run keeps the
    registry's order (its times are other)."""
    from bayeskit import cli
    from bayeskit.experiments import EXPERIMENTS, runner

    queues = []
    monkeypatch.setattr(runner, "run_parallel", lambda names, args, jobs: queues.append(list(names)) or [])
    assert cli.main(["reproduce", "--quick", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert cli.main(["reproduce", "--jobs", "2", "--out", str(tmp_path)]) == 0
    assert queues == [runner.longest_first(EXPERIMENTS), list(EXPERIMENTS)] and queues[0] != queues[1]


def test_the_benchmarks_folder_is_taken_in_either_spelling(tmp_path, capsys):
    """--benchmarks PATH and --benchmarks=PATH name the same folder (its report.py's models);
    a folder without report.py is refused by name."""
    (tmp_path / "report.py").write_text('SCRIPTS = {"fake": "bench_fake.py"}\n')
    for argv in (["bench", "--benchmarks", str(tmp_path), "--help"], ["bench", f"--benchmarks={tmp_path}", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert "fake" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--report", f"--benchmarks={empty}"])
    assert e.value.code == 2 and "no report.py in that folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # an abbreviation argparse accepts is the same option
        cli.main(["bench", "--report", f"--bench={empty}"])
    assert e.value.code == 2 and "no report.py in that folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["bench", "--report", "--benchmarks"])
    assert e.value.code == 2 and "expected one argument" in capsys.readouterr().err


def test_version(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    from bayeskit import __version__

    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"bayeskit {__version__}"


@pytest.fixture
def restore_sigint():
    """The test process's Ctrl-C handler as it was, after a test of a command that sets it."""
    import signal

    handler = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, handler)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_interrupted_reproduction_says_where_its_outputs_are_and_exits_130(monkeypatch, tmp_path, capsys, jobs,
                                                                              restore_sigint):
    """Ctrl-C, in serial and in parallel runs: one line (no traceback) that names the output
    folder and the experiments a rerun resumes, and the exit status 130."""
    from bayeskit.experiments import runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_serial", interrupted)
    monkeypatch.setattr(runner, "run_parallel", interrupted)
    argv = ["reproduce", "--quick", "--jobs", jobs, "--out", str(tmp_path)]
    assert cli.main([*argv, "--only", "bsml_ard", "lfrm_link_prediction", "sbmoe_synthetic"]) == 130
    line = capsys.readouterr().err.strip()
    assert "\n" not in line and line.startswith("== interrupted after") and f"are in {tmp_path}/" in line
    assert "resumes lfrm_link_prediction and sbmoe_synthetic from what they saved there" in line and "bsml_ard" not in line
    assert cli.main([*argv, "--only", "bsml_ard"]) == 130
    assert "a rerun starts the experiments again" in capsys.readouterr().err


def test_the_experiments_said_to_resume_are_those_that_read_their_earlier_results():
    """``RESUMABLE`` (named by the interrupt's message) is the experiments whose source calls
    ``earlier_results``."""
    from pathlib import Path

    from bayeskit.experiments import RESUMABLE

    folder = Path(cli.__file__).parent / "experiments"
    calling = {name for name in EXPERIMENTS if "earlier_results(" in (folder / f"{name}.py").read_text()}
    assert set(RESUMABLE) == calling

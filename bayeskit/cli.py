"""The bayeskit command: reproduce the papers' experiments and benchmark the models.

    bayeskit reproduce [--quick] [--only NAME ...] [--out DIR] [--seed N] [--jobs N]
    bayeskit list
    bayeskit bench (--all | --only MODEL ... | --report) [--device cpu|gpu] [--quick] [--bsml-peer PATH]

Help, ``list`` and argument errors import neither JAX nor an experiment: they answer at once.
"""

from __future__ import annotations

import argparse
import ast
import os
import signal
import sys
import textwrap
import time
from pathlib import Path

from bayeskit import __version__

INTERRUPTED = 130  # the exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it


def _whole_number(least: int):
    """An argparse type: a whole number >= ``least``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
        return value

    return parse


def _folder(text: str) -> str:
    """An argparse type: a folder, or a path where one can be made (not an existing file)."""
    if os.path.exists(text) and not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a file, not a folder")
    return text


def _benchmarks_dir(given: str | None) -> Path | None:
    """The checkout's benchmarks/ folder: ``given``, else ./benchmarks, else the one beside the package."""
    candidates = [Path(given).expanduser()] if given else [Path.cwd() / "benchmarks", Path(__file__).resolve().parents[1] / "benchmarks"]
    return next((c for c in candidates if (c / "report.py").exists()), None)


def _given_benchmarks(argv: list[str]) -> str | None:
    """The bench subcommand's ``--benchmarks`` in either spelling (``--benchmarks PATH``,
    ``--benchmarks=PATH``), read before the whole command is parsed."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    pre.add_argument("--benchmarks")
    try:
        return pre.parse_known_args(argv)[0].benchmarks if argv[:1] == ["bench"] else None
    except argparse.ArgumentError:  # --benchmarks without its PATH: the whole command's parser says so
        return None


def _bench_models(folder: Path | None) -> list[str]:
    """The model names of ``benchmarks/report.py`` (its ``SCRIPTS`` keys), read from its source."""
    if folder is None:
        return []
    for node in ast.parse((folder / "report.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "SCRIPTS" for t in node.targets):
            return [ast.literal_eval(k) for k in node.value.keys]
    return []


def _parser(bench_models: list[str]) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The command's parser and its subcommands' (whose errors print their own usage)."""
    parser = argparse.ArgumentParser(prog="bayeskit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"bayeskit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run the papers' experiments and print ours beside the paper's numbers")
    rep.add_argument("--quick", action="store_true", help="small settings, about a minute per experiment")
    rep.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments (see `bayeskit list`)")
    rep.add_argument("--out", type=_folder, default="reproduce_out", help="folder for the JSON, Markdown and PNG outputs")
    rep.add_argument("--seed", type=_whole_number(0), default=0)
    rep.add_argument("--jobs", type=_whole_number(1), default=None, metavar="N",
                     help="experiments run side by side in N worker processes (default: 2 with --quick where two "
                          "cores are free, else 1)")
    listing = sub.add_parser("list", help="list the experiments")
    bench = sub.add_parser("bench", help="run every model's speed benchmark against its peers and write "
                                         "benchmarks/results/REPORT.md (from a checkout)")
    which = bench.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="run every benchmark, then write the report")
    models = f": {', '.join(bench_models)}" if bench_models else " (found in a checkout's benchmarks/report.py)"
    which.add_argument("--only", nargs="+", metavar="MODEL", help=f"run these models' benchmarks, then write the report{models}")
    which.add_argument("--report", action="store_true", help="only write the report from the saved results")
    bench.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                       help="where our side runs (gpu: JAX_PLATFORMS=cuda); peers run where they always do (default: cpu)")
    bench.add_argument("--quick", action="store_true", help="the benchmarks' small settings")
    bench.add_argument("--bsml-peer", metavar="PATH", help="a checkout of the BSML author's Matlab code "
                       "(mehmetgonen/bssml), run under Octave beside ours; skipped when absent")
    bench.add_argument("--benchmarks", default=None, metavar="PATH", help="the checkout's benchmarks/ folder (default: found from here)")
    return parser, {"reproduce": rep, "list": listing, "bench": bench}


def main(argv: list[str] | None = None) -> int:
    from bayeskit.core.xla import use_safe_cpu_scheduler

    use_safe_cpu_scheduler()  # before JAX starts its backend; the subprocesses of `bench` inherit it
    argv = sys.argv[1:] if argv is None else argv
    folder = _benchmarks_dir(_given_benchmarks(argv))  # before parsing: bench's help lists the folder's models
    parser, commands = _parser(_bench_models(folder))
    args = parser.parse_args(argv)
    command = commands[args.command]
    if args.command == "bench":
        if args.benchmarks is not None:  # as parsed (an abbreviation such as --bench=PATH too), not as read before
            folder = _benchmarks_dir(args.benchmarks)
            if folder is None:
                command.error(f"--benchmarks {args.benchmarks}: no report.py in that folder")
        return _bench(command, args, folder)

    from bayeskit.experiments import EXPERIMENTS, summary

    if args.command == "list":
        try:
            for name in EXPERIMENTS:
                print(name)
                print(textwrap.fill(summary(name), width=100, initial_indent="    ", subsequent_indent="    "))
            sys.stdout.flush()
        except BrokenPipeError:  # `bayeskit list | head`: the reader left; say nothing more at exit
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
        return 0
    names = args.only or list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        command.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    from bayeskit.experiments.runner import default_jobs, longest_first, run_parallel, run_serial

    jobs = default_jobs(args.quick, len(names), args.jobs)
    start = time.perf_counter()
    try:
        if jobs == 1:
            failed = run_serial(names, (args.out, args.quick, args.seed))
        else:
            print(f"{len(names)} experiments on {jobs} worker processes; each one's tables are printed when it ends", flush=True)
            failed = run_parallel(longest_first(names) if args.quick else names, (args.out, args.quick, args.seed, True), jobs)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second interrupt (`timeout` signals the whole group) ends nothing half-way
        print(_interrupted(names, args.out, time.perf_counter() - start), file=sys.stderr, flush=True)
        return INTERRUPTED
    print(f"== {len(names) - len(failed)} of {len(names)} experiments done in {time.perf_counter() - start:.1f} s"
          + (f"; failed: {', '.join(failed)}" if failed else ""), flush=True)
    return 1 if failed else 0


def _interrupted(names: list[str], out: str, seconds: float) -> str:
    """The line that ends an interrupted reproduction: where its outputs are, and what a rerun
    does with them (the experiments that save as they go resume; the others start again)."""
    from bayeskit.experiments import RESUMABLE

    resuming = [name for name in names if name in RESUMABLE]
    listed = " and ".join([", ".join(resuming[:-1]), *resuming[-1:]] if len(resuming) > 1 else resuming)
    rerun = (f"a rerun with the same settings resumes {listed} from what {'it' if len(resuming) == 1 else 'they'} saved "
             "there and starts the others again" if resuming else "a rerun starts the experiments again")
    return f"== interrupted after {seconds:.1f} s; the outputs written so far are in {out}/; {rerun}"


def _bench(parser, args, folder: Path | None) -> int:
    """Run ``benchmarks/report.py`` of the checkout: the benchmarks live beside the package,
    not in it, because they install and call peers (R, Octave) that the package never needs."""
    import subprocess

    if folder is None:
        parser.error("bench runs from a checkout of bayeskit (no benchmarks/ folder with report.py here or beside "
                     "the package); run it there or pass --benchmarks PATH")
    unknown = [m for m in args.only or [] if m not in _bench_models(folder)]
    if unknown:
        parser.error(f"unknown model(s) {unknown}; choose from {_bench_models(folder)}")
    if args.device == "gpu":
        import jax

        if not any(d.platform == "gpu" for d in jax.devices()):
            parser.error("--device gpu: JAX sees no GPU here (install jax[cuda12] on a machine with one)")
    cmd = [sys.executable, str(folder / "report.py"), "--device", args.device] + (["--quick"] if args.quick else [])
    cmd += ["--bsml-peer", args.bsml_peer] if args.bsml_peer else []
    if not args.report:
        cmd += ["--run"] + (["--only", *args.only] if args.only else [])
    with subprocess.Popen(cmd) as report:
        try:
            return report.wait()
        except KeyboardInterrupt:  # passed on where it reached this process alone; report.py then writes the report
            report.send_signal(signal.SIGINT)
            report.wait()
            return INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

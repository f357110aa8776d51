"""The ``bayeskit`` command: reproduce the papers' experiments.

    bayeskit reproduce [--quick] [--only NAME ...] [--out DIR] [--seed N]
    bayeskit list
    bayeskit bench (--all | --only MODEL ... | --report) [--device cpu|gpu] [--quick] [--bsml-peer PATH]
"""

from __future__ import annotations

import argparse
import sys
import time


def _enable_x64() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # the papers' experiments run in float64


def main(argv: list[str] | None = None) -> int:
    from bayeskit.core.xla import use_safe_cpu_scheduler

    use_safe_cpu_scheduler()  # before JAX starts its backend; the subprocesses of `bench` inherit it
    parser = argparse.ArgumentParser(prog="bayeskit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run the papers' experiments and print ours beside the paper's numbers")
    rep.add_argument("--quick", action="store_true", help="small settings, about a minute per experiment")
    rep.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments (see `bayeskit list`)")
    rep.add_argument("--out", default="reproduce_out", help="folder for the JSON and PNG outputs")
    rep.add_argument("--seed", type=int, default=0)
    sub.add_parser("list", help="list the experiments")
    bench = sub.add_parser("bench", help="run every model's speed benchmark against its peers and write "
                                         "benchmarks/results/REPORT.md (from a checkout)")
    which = bench.add_mutually_exclusive_group(required=True)
    which.add_argument("--all", action="store_true", help="run every benchmark, then write the report")
    which.add_argument("--only", nargs="+", metavar="MODEL", help="run these models' benchmarks, then write the report")
    which.add_argument("--report", action="store_true", help="only write the report from the saved results")
    bench.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    bench.add_argument("--quick", action="store_true", help="the benchmarks' small settings")
    bench.add_argument("--bsml-peer", metavar="PATH", help="a checkout of the BSML author's Matlab code "
                       "(mehmetgonen/bssml), run under Octave beside ours; skipped when absent")
    bench.add_argument("--benchmarks", default=None, help="the checkout's benchmarks/ folder (default: found from here)")
    args = parser.parse_args(argv)
    if args.command == "bench":
        return _bench(parser, args)

    from bayeskit.experiments import EXPERIMENTS, load_experiment, summary

    if args.command == "list":
        for name in EXPERIMENTS:
            print(f"{name}: {summary(name)}")
        return 0
    names = args.only or list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    _enable_x64()
    for name in names:
        start = time.perf_counter()
        print(f"== {name} ({'quick' if args.quick else 'full'}) ==", flush=True)
        load_experiment(name).run(args.out, quick=args.quick, seed=args.seed)
        print(f"== {name} done in {time.perf_counter() - start:.1f} s; outputs in {args.out}/", flush=True)
    return 0


def _bench(parser, args) -> int:
    """Run ``benchmarks/report.py`` of the checkout: the benchmarks live beside the package,
    not in it, because they install and call peers (R, Octave) that the package never needs."""
    import subprocess
    from pathlib import Path

    candidates = [Path(args.benchmarks)] if args.benchmarks else [Path.cwd() / "benchmarks",
                                                                    Path(__file__).resolve().parents[1] / "benchmarks"]
    script = next((c / "report.py" for c in candidates if (c / "report.py").exists()), None)
    if script is None:
        parser.error(f"no benchmarks/report.py in {[str(c) for c in candidates]}; run from a checkout of bayeskit "
                     "or pass --benchmarks PATH")
    if args.device == "gpu":
        import jax

        if not any(d.platform == "gpu" for d in jax.devices()):
            parser.error("--device gpu: JAX sees no GPU here (install jax[cuda12] on a machine with one)")
    cmd = [sys.executable, str(script), "--device", args.device] + (["--quick"] if args.quick else [])
    cmd += ["--bsml-peer", args.bsml_peer] if args.bsml_peer else []
    if not args.report:
        cmd += ["--run"] + (["--only", *args.only] if args.only else [])
    return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())

"""The ``bayeskit`` command: reproduce the papers' experiments.

    bayeskit reproduce [--quick] [--only NAME ...] [--out DIR] [--seed N]
    bayeskit list
"""

from __future__ import annotations

import argparse
import sys
import time


def _enable_x64() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)  # the papers' experiments run in float64


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bayeskit", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rep = sub.add_parser("reproduce", help="run the papers' experiments and print ours beside the paper's numbers")
    rep.add_argument("--quick", action="store_true", help="small settings, about a minute per experiment")
    rep.add_argument("--only", nargs="+", metavar="NAME", help="run only these experiments (see `bayeskit list`)")
    rep.add_argument("--out", default="reproduce_out", help="folder for the JSON and PNG outputs")
    rep.add_argument("--seed", type=int, default=0)
    sub.add_parser("list", help="list the experiments")
    args = parser.parse_args(argv)

    from .experiments import EXPERIMENTS

    if args.command == "list":
        for name, module in EXPERIMENTS.items():
            print(f"{name}: {module.__doc__.strip().splitlines()[0]}")
        return 0
    names = args.only or list(EXPERIMENTS)
    unknown = [n for n in names if n not in EXPERIMENTS]
    if unknown:
        parser.error(f"unknown experiment(s) {unknown}; choose from {list(EXPERIMENTS)}")
    _enable_x64()
    for name in names:
        start = time.perf_counter()
        print(f"== {name} ({'quick' if args.quick else 'full'}) ==", flush=True)
        EXPERIMENTS[name].run(args.out, quick=args.quick, seed=args.seed)
        print(f"== {name} done in {time.perf_counter() - start:.1f} s; outputs in {args.out}/", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Speed and memory of BSML against its peers, measured in one run.

    python benchmarks/bench_bsml.py [--only tmc small restarts memory wide] [--peer PATH/TO/bssml]

* ``tmc``: TMC2007-500, R = 22, 500 iterations, in float64 (target <= 60 s on two cores;
  the author's code takes minutes) and in float32 (<= 30 s, the same hamming loss within
  0.001). Compile time reported apart.
* ``small``: Emotions and Scene, R = 6, 500 iterations: BSML against PROBIT and
  PCA + PROBIT (bayeskit), and against the author's Matlab code under GNU Octave when
  ``--peer`` points at a checkout of ``mehmetgonen/bssml`` and Octave is installed
  (``apt-get install octave octave-statistics``); skipped with a message otherwise.
* ``restarts``: eight random restarts in one ``bayeskit.sweep`` against one fit (Emotions and
  Scene, R = 6).
* ``wide``: features outnumbering samples (N = 463, D = 1185, generated bag of words):
  the Q update in its D x D form against the dense and the sparse N x N (Woodbury) forms,
  same bound trace.
* ``memory``: the compiled prediction on TMC2007's 7077 test rows never holds an
  N* x N* temporary (XLA's memory analysis of the compiled function).

Writes ``benchmarks/results/bsml.json`` and prints ratios (peer time / our time).
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import bayeskit
from bayeskit.datasets import load_mulan
from bayeskit.experiments.common import fit_bsml, fit_probit, fit_projection_probit
from bayeskit.multilabel import bsml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def bench_tmc(args) -> dict:
    X_train, Y_train, X_test, Y_test = load_mulan("tmc2007")
    report, _ = fit_bsml(X_train, Y_train, X_test, Y_test, bsml.Hyperparams(n_components=22), max_iter=500)
    out = {"bsml": report}
    print(f"TMC2007 R=22, 500 iterations, float64: run {report['train_seconds']:.1f} s, compile {report['compile_seconds']:.1f} s, "
          f"hamming {report['hamming_loss']:.4f} (target: <= 60 s)")
    low, _ = fit_bsml(X_train.astype(np.float32), Y_train, X_test.astype(np.float32), Y_test, bsml.Hyperparams(n_components=22),
                      max_iter=500)
    out["bsml_float32"] = low
    print(f"  float32: run {low['train_seconds']:.1f} s, compile {low['compile_seconds']:.1f} s, hamming {low['hamming_loss']:.4f} "
          f"({low['hamming_loss'] - report['hamming_loss']:+.4f} against float64; target: <= 30 s, within 0.001)")
    peer = _author(args, "tmc2007", 22, X_train, Y_train, X_test, Y_test)
    if peer:
        out["author"] = peer
        print(f"  author's code: {peer['train_seconds']:.1f} s -> ratio {peer['train_seconds'] / report['train_seconds']:.1f}x")
    return out


def _author(args, name, r, X_train, Y_train, X_test, Y_test):
    if not args.peer:
        print("  author's code: skipped (no --peer given)")
        return None
    import peer_octave_bsml as peer

    if not peer.octave_available():
        print("  author's code: skipped: octave not found")
        return None
    if not peer.find_peer(args.peer):
        print(f"  author's code: skipped: peer not found at {args.peer}")
        return None
    res = peer.run_author_bsml(args.peer, X_train, Y_train, X_test, n_components=r, iterations=500)
    return {"train_seconds": res["train_seconds"], "hamming_loss": peer.hamming_loss(res["proba"], Y_test)}


def bench_small(args) -> dict:
    out = {}
    for name in ("emotions", "scene"):
        X_train, Y_train, X_test, Y_test = load_mulan(name)
        ours, _ = fit_bsml(X_train, Y_train, X_test, Y_test, bsml.Hyperparams(n_components=6), max_iter=500)
        probit = fit_probit(X_train, Y_train, X_test, Y_test, max_iter=500)
        pca = fit_projection_probit("PCA", X_train, Y_train, X_test, Y_test, 6, max_iter=500)
        row = {"bsml": ours, "probit": probit, "pca_probit": pca}
        line = (f"{name} R=6: BSML {ours['train_seconds']:.2f} s (compile {ours['compile_seconds']:.1f} s, hamming "
                f"{ours['hamming_loss']:.4f}); PROBIT {probit['train_seconds']:.2f} s; PCA+PROBIT {pca['train_seconds']:.2f} s")
        print(line)
        peer = _author(args, name, 6, X_train, Y_train, X_test, Y_test)
        if peer:
            row["author"] = peer
            print(f"  author's code {peer['train_seconds']:.2f} s (hamming {peer['hamming_loss']:.4f}) -> "
                  f"ratio {peer['train_seconds'] / ours['train_seconds']:.1f}x")
        out[name] = row
    return out


def bench_restarts(args) -> dict:
    out = {}
    for name in ("emotions", "scene"):
        X_train, Y_train, _, _ = load_mulan(name)
        X, Y = jnp.asarray(X_train), jnp.asarray(Y_train, jnp.int8)
        hp = bsml.Hyperparams(n_components=6)

        def one(key, X, Y):
            return bsml.fit(key, X, Y, hp, max_iter=500, tol=0.0, throw=False)

        compiled = jax.jit(one).lower(jax.random.key(0), X, Y).compile()
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(jax.random.key(0), X, Y))
        t_one = time.perf_counter() - t0
        keys = jax.random.split(jax.random.key(0), 8)
        restarts = lambda: bayeskit.sweep(one, keys, (X, Y), in_axes=((None, None), None))  # noqa: E731
        restarts()  # compiles
        t0 = time.perf_counter()
        restarts()
        t_eight = time.perf_counter() - t0
        print(f"{name} R=6: one fit {t_one:.2f} s, eight vmapped restarts {t_eight:.2f} s -> {t_eight / t_one:.2f}x (target <= 3x)")
        out[name] = {"one_fit_seconds": t_one, "eight_restarts_seconds": t_eight, "ratio": t_eight / t_one}
    return out


def bench_memory(args) -> dict:
    X_train, Y_train, X_test, _ = load_mulan("tmc2007")
    hp = bsml.Hyperparams(n_components=22)
    state = jax.eval_shape(lambda: bsml.result_like(hp, {"n_samples": X_train.shape[0], "n_features": 500,
                                                       "n_labels": 22, "max_iter": 1, "dtype": "float64"}).state)
    state = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), state)
    compiled = jax.jit(lambda s, X: bsml.predict_proba(s, X, hp)).lower(state, jnp.asarray(X_test)).compile()
    mem = compiled.memory_analysis()
    temp = int(getattr(mem, "temp_size_in_bytes", -1))
    n = X_test.shape[0]
    print(f"prediction on {n} rows: XLA temporaries {temp / 2**20:.1f} MiB; one N* x N* float64 matrix would be "
          f"{n * n * 8 / 2**20:.0f} MiB")
    return {"n_test": n, "temp_bytes": temp, "n_by_n_bytes": n * n * 8}


def bench_wide(args) -> dict:
    """Features outnumbering samples: N = 463, D = 1185 sparse binary features (5% ones, as a
    bag of words), 6 labels, R = 6, 500 sweeps, float64; the Q update through D x D
    factorisations (the form before the N x N ones existed) against the dense N x N
    (Woodbury) form and the sparse one, whose N x N matrices come from the pairs of nonzeros
    that share a column (``fit``'s choice for such data). Same bound trace to 1e-6 relative."""
    from bayeskit.core import column_pairs, loop

    rng = np.random.default_rng(0)
    n, d, n_labels = 463, 1185, 6
    X = (rng.random((n, d)) < 0.05).astype(float)
    W = rng.normal(size=(d, n_labels)) * (rng.random((d, 1)) < 0.05)
    Y = (X @ W + 0.3 * rng.normal(size=(n, n_labels)) > 0).astype(np.int8)
    hp = loop.as_arrays(bsml.Hyperparams(n_components=6), jnp.float64)
    args_ = (jax.random.key(0), jnp.asarray(X), jnp.asarray(Y))
    t0 = time.perf_counter()
    pairs = column_pairs.column_pairs(X)
    t_pairs = time.perf_counter() - t0

    def fit(dual, pairs=None):
        def run(key, X, Y, pairs):
            data = bsml.prepare(X, Y, hp, dual=dual, pairs=pairs)
            return loop.run(lambda s: bsml.update(s, data, hp), lambda s: bsml.objective(s, data, hp),
                            bsml.init(key, data, hp), max_iter=500, tol=0.0, throw=False)
        compiled = jax.jit(run).lower(*args_, pairs).compile()
        t0 = time.perf_counter()
        result = jax.block_until_ready(compiled(*args_, pairs))
        return time.perf_counter() - t0, np.asarray(result.trace)

    (t_primal, primal), (t_dual, dual), (t_sparse, sparse) = fit(False), fit(True), fit(True, pairs)
    rel = lambda trace: float(np.max(np.abs(trace - primal) / np.abs(primal)))  # noqa: E731
    print(f"N={n}, D={d}, R=6, 500 sweeps: D x D form {t_primal:.1f} s, dense N x N form {t_dual:.1f} s "
          f"({t_primal / t_dual:.2f}x), sparse N x N form {t_sparse:.1f} s + {t_pairs:.2f} s finding "
          f"{column_pairs.count(X)} pairs ({t_primal / (t_sparse + t_pairs):.2f}x); largest relative difference "
          f"of the bound traces from the D x D one: dense {rel(dual):.1e}, sparse {rel(sparse):.1e}")
    return {"n": n, "d": d, "primal_seconds": t_primal, "dual_seconds": t_dual, "speedup_dense": t_primal / t_dual,
            "sparse_seconds": t_sparse, "pairs_seconds": t_pairs, "pairs": column_pairs.count(X),
            "speedup": t_primal / (t_sparse + t_pairs), "max_relative_trace_difference": max(rel(dual), rel(sparse)),
            "max_relative_trace_difference_dense": rel(dual), "max_relative_trace_difference_sparse": rel(sparse)}


BENCHES = {"tmc": bench_tmc, "small": bench_small, "restarts": bench_restarts, "memory": bench_memory, "wide": bench_wide}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=list(BENCHES), default=list(BENCHES))
    parser.add_argument("--peer", help="folder with the author's Matlab code (mehmetgonen/bssml)")
    parser.add_argument("--out", default=str(HERE / "results" / "bsml.json"))
    args = parser.parse_args(argv)
    results = json.loads(Path(args.out).read_text()) if Path(args.out).is_file() else {}  # other benches' results stay
    results["date"] = time.strftime("%Y-%m-%d")
    results["machine"] = {"platform": platform.platform(), "cpus": os.cpu_count(), "devices": jax.local_device_count(), "jax": jax.__version__}
    for name in args.only:
        results[name] = BENCHES[name](args)
        results.setdefault("dates", {})[name] = results["date"]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, default=float))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

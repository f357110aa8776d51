"""Peer runner: the author's Matlab BSML / BSML+ARD / BSSML code (Gönen 2014), under GNU Octave.

This is a benchmark-only helper. It lets the JAX implementation be timed and compared
against the author's reference code in the same run. Neither Octave nor the author's code
is a dependency of the package or of the tests, and neither is shipped in this repository:

* install Octave yourself (Debian/Ubuntu: ``apt-get install octave``; the
  ``octave-statistics`` package is used for ``normcdf``/``normpdf`` when present);
* clone the author's repository (``mehmetgonen/bssml`` on GitHub) into any folder and pass
  that folder as ``peer_dir`` / ``--peer``.

Everything this module writes to disk (the data as .mat files, a small driver script of our
own, and shims for functions that Octave lacks) goes into a temporary folder that is deleted
afterwards. The author's files are only put on Octave's path; they are never copied.

Conventions at the Python boundary are ours: rows are samples, ``Y`` is in {0, 1}, and -1
marks an unobserved label (semi-supervised only). The runner converts to the author's
layout: ``X`` is D x N (columns are instances), ``Y`` is L x N in {-1, +1}, NaN = unobserved.

Command line (prints the training time and the hamming loss)::

    python benchmarks/peer_octave_bsml.py --peer PATH/TO/bssml --dataset emotions \\
        --n-components 6 [--iterations 500] [--prior ard] [--semisupervised] [--data PATH]

It exits with status 0 and a "skipped: ..." message when Octave or the peer is missing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = [
    "PEER_FILES",
    "octave_available",
    "find_peer",
    "run_author_bsml",
    "hamming_loss",
    "main",
]

#: Files that identify a checkout of the author's repository.
PEER_FILES = (
    "bssml_supervised_classification_variational_train.m",
    "bssml_supervised_classification_variational_test.m",
    "bssml_semisupervised_classification_variational_train.m",
    "bssml_semisupervised_classification_variational_test.m",
)

_OCTAVE_CANDIDATES = ("octave-cli", "octave")

# ARD "surviving dimension" rule: column s is counted as pruned when its expected precision
# E[phi_s] exceeds the smallest expected precision by more than this factor.
ARD_PRUNE_RATIO = 1e3


# --------------------------------------------------------------------------------------
# discovery
# --------------------------------------------------------------------------------------
def _octave_executable(octave: str | None = None) -> str | None:
    if octave:
        return shutil.which(octave) or (octave if os.path.isfile(octave) else None)
    env = os.environ.get("OCTAVE_CLI")
    if env:
        return shutil.which(env) or (env if os.path.isfile(env) else None)
    for name in _OCTAVE_CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


def octave_available(octave: str | None = None) -> bool:
    """True when an Octave command-line interpreter can be found (and starts).

    The executable is ``octave`` if given, else ``$OCTAVE_CLI``, else ``octave-cli`` or
    ``octave`` on ``PATH``.
    """
    exe = _octave_executable(octave)
    if exe is None:
        return False
    try:
        proc = subprocess.run(
            [exe, "--version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0 and "octave" in proc.stdout.lower()


def find_peer(path) -> bool:
    """True when ``path`` is a folder holding the author's BSSML train/test ``.m`` files."""
    if path is None:
        return False
    p = Path(path)
    return p.is_dir() and all((p / f).is_file() for f in PEER_FILES)


# --------------------------------------------------------------------------------------
# Octave code of our own, written into the temporary working folder
# --------------------------------------------------------------------------------------
# 1-nearest-neighbour stand-in for Matlab's knnsearch(X, Y): for each row of Y, the index of
# the nearest row of X (Euclidean; the first one on ties). Only what the BSSML trainer needs.
_KNNSEARCH_SHIM = r"""function idx = knnsearch(X, Y)
  % 1-NN shim (benchmark runner): index into rows of X of the nearest neighbour of each row of Y.
  nq = size(Y, 1);
  idx = zeros(nq, 1);
  if nq == 0 || size(X, 1) == 0
    return;
  end
  xx = sum(X .^ 2, 2)';
  chunk = max(1, floor(2e7 / max(1, size(X, 1))));
  for first = 1:chunk:nq
    last = min(nq, first + chunk - 1);
    Yc = Y(first:last, :);
    d2 = bsxfun(@plus, sum(Yc .^ 2, 2), xx) - 2 * (Yc * X');
    [~, j] = min(d2, [], 2);
    idx(first:last) = j;
  end
end
"""

# Fallbacks used only if the statistics package (normcdf/normpdf) is not installed. They
# compute exactly what statistics-1.5.3 computes for standard arguments (checked bitwise).
_NORMCDF_SHIM = r"""function p = normcdf(x)
  % standard normal CDF shim (benchmark runner)
  p = 0.5 * erfc(-x ./ sqrt(2));
end
"""

_NORMPDF_SHIM = r"""function y = normpdf(x)
  % standard normal PDF shim (benchmark runner)
  y = (2 * pi) ^ (-1 / 2) * exp(-x .^ 2 / 2);
end
"""

_DRIVER_TEMPLATE = r"""% driver written by benchmarks/peer_octave_bsml.py
warning('off', 'all');
more off;
shim_source = 'statistics';
try
  pkg load statistics;
catch
  shim_source = 'shim';
end
if ~(exist('normcdf') && exist('normpdf'))
  addpath('{stats_shims}');
  shim_source = 'shim';
end
if ~exist('knnsearch')
  addpath('{knn_shim}');
end
addpath('{peer}');

load('{data}');

parameters = struct();
parameters.alpha_phi = alpha_phi;
parameters.beta_phi = beta_phi;
parameters.alpha_lambda = alpha_lambda;
parameters.beta_lambda = beta_lambda;
parameters.alpha_psi = alpha_psi;
parameters.beta_psi = beta_psi;
parameters.iteration = double(iteration);
parameters.R = double(R);
parameters.prior_phi = prior_phi;
parameters.progress = 0;
parameters.sample = 200;
parameters.seed = double(seed);
parameters.sigma_z = sigma_z;

tic;
state = {train}(Xtrain, Ytrain, parameters);
train_seconds = toc;
fprintf(1, '\n');

tic;
prediction = {test}(Xtest, state);
test_seconds = toc;

P = prediction.P;
if strcmp(prior_phi, 'ard')
  phi_expected = state.phi.alpha .* state.phi.beta;
else
  phi_expected = state.Phi.alpha .* state.Phi.beta;
end
q_column_norms = sqrt(sum(state.Q.mu .^ 2, 1));
octave_version = version();
save('-v7', '{results}', 'P', 'train_seconds', 'test_seconds', 'phi_expected', ...
     'q_column_norms', 'octave_version', 'shim_source');
"""


def _oct_str(path) -> str:
    """A path as the body of a single-quoted Octave string."""
    return str(path).replace("'", "''")


# --------------------------------------------------------------------------------------
# runner
# --------------------------------------------------------------------------------------
def _to_author_labels(Y: np.ndarray, *, allow_missing: bool) -> np.ndarray:
    Y = np.asarray(Y)
    if Y.ndim != 2:
        raise ValueError(f"labels must be 2-D (n, L), got shape {Y.shape}")
    values = set(np.unique(Y).tolist())
    allowed = {0, 1, -1} if allow_missing else {0, 1}
    if not values <= allowed:
        raise ValueError(f"labels must be in {sorted(allowed)}, found {sorted(values)}")
    out = np.where(Y == 1, 1.0, -1.0)
    if allow_missing:
        out[Y == -1] = np.nan
    return out.T.copy()  # L x N


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


def run_author_bsml(  # noqa: C901 (one linear script: write inputs, run Octave, read outputs)
    peer_dir,
    X_train,
    Y_train,
    X_test,
    *,
    n_components: int,
    iterations: int = 500,
    prior: str = "entrywise",
    alpha_phi: float = 1.0,
    beta_phi: float = 1.0,
    alpha_lambda: float = 1.0,
    beta_lambda: float = 1.0,
    alpha_psi: float = 1.0,
    beta_psi: float = 1.0,
    sigma_z: float = 0.1,
    seed: int = 1606,
    semisupervised: bool = False,
    X_unlabelled=None,
    timeout: float | None = 3600.0,
    octave: str | None = None,
    blas_threads: int | None = None,
    keep_workdir: bool = False,
    verbose: bool = False,
) -> dict:
    """Train and predict with the author's BSML/BSSML Matlab code under Octave.

    Parameters
    ----------
    peer_dir : folder holding the author's ``bssml_*.m`` files (see :func:`find_peer`).
    X_train : (n, D) array, rows are samples.
    Y_train : (n, L) array in {0, 1}; with ``semisupervised=True`` also -1 = unobserved.
    X_test : (n_test, D) array.
    n_components : subspace dimensionality R.
    iterations : number of variational iterations (the paper uses 500, the demos 200).
    prior : ``"entrywise"`` (BSML) or ``"ard"`` (BSML+ARD; the paper uses
        ``alpha_phi=1e-10, beta_phi=1e10`` for it).
    alpha_*, beta_* : Gamma (shape, scale) hyperparameters, as in the author's demos.
    sigma_z, seed : as in the author's demos (0.1, 1606). Octave's legacy random stream
        differs from Matlab's, so the original numbers are not reproduced bit for bit.
    semisupervised : use the BSSML trainer (labels may be unobserved).
    X_unlabelled : (m, D) extra inputs appended to the training data with every label
        unobserved (BSSML only). Pass ``X_test`` for the paper's transductive setting
        (Section 5.3).
    timeout : seconds before Octave is killed (``None``: no limit).
    octave : Octave executable (default: ``$OCTAVE_CLI``, ``octave-cli``, ``octave``).
    blas_threads : if given, sets ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS`` for Octave.
    keep_workdir : keep the temporary folder (its path is returned under ``"workdir"``).
    verbose : echo Octave's output.

    Returns
    -------
    dict with
        ``train_seconds`` : tic/toc inside Octave around the train call only;
        ``test_seconds`` : tic/toc around the test call only;
        ``wall_seconds`` : the whole Octave process, start-up and I/O included;
        ``proba`` : (n_test, L) array, the author's predicted P(y=+1) (note: the author's
            test function uses Phi(mu / var) rather than Phi(mu / sd));
        ``phi_expected`` : expected precisions of the projection prior, (R,) for ARD or
            (D, R) entrywise;
        ``q_column_norms`` : (R,) norms of the posterior-mean projection columns;
        ``n_active_components`` : ARD only, columns with
            E[phi_s] <= ARD_PRUNE_RATIO * min_s E[phi_s] (None for entrywise);
        ``octave_version``, ``normal_functions`` (``"statistics"`` or ``"shim"``),
        ``n_train``, ``n_unlabelled``, ``returncode``, ``stdout`` (Octave's combined
        output; Octave 7.3 may end it with a harmless "error: ignoring const
        execution_exception& while preparing to exit" line), and ``workdir`` if kept.
    """
    peer_dir = Path(peer_dir).resolve()
    if not find_peer(peer_dir):
        raise FileNotFoundError(f"author's BSSML code not found at {peer_dir}")
    exe = _octave_executable(octave)
    if exe is None:
        raise FileNotFoundError("octave not found (install GNU Octave, e.g. apt-get install octave)")
    if prior not in ("entrywise", "ard"):
        raise ValueError(f"prior must be 'entrywise' or 'ard', got {prior!r}")
    if X_unlabelled is not None and not semisupervised:
        raise ValueError("X_unlabelled requires semisupervised=True")

    X_train = np.asarray(X_train, dtype=np.float64)
    X_test = np.asarray(X_test, dtype=np.float64)
    if X_train.ndim != 2 or X_test.ndim != 2 or X_train.shape[1] != X_test.shape[1]:
        raise ValueError(f"X_train {X_train.shape} and X_test {X_test.shape} must be (n, D)")
    Yt = _to_author_labels(Y_train, allow_missing=semisupervised)  # L x n
    if Yt.shape[1] != X_train.shape[0]:
        raise ValueError(f"Y_train has {Yt.shape[1]} rows, X_train has {X_train.shape[0]}")
    L = Yt.shape[0]
    Xtr = X_train.T  # D x n
    n_unlab = 0
    if X_unlabelled is not None:
        Xu = np.asarray(X_unlabelled, dtype=np.float64)
        if Xu.ndim != 2 or Xu.shape[1] != X_train.shape[1]:
            raise ValueError(f"X_unlabelled {Xu.shape} must be (m, D={X_train.shape[1]})")
        n_unlab = Xu.shape[0]
        Xtr = np.concatenate([Xtr, Xu.T], axis=1)
        Yt = np.concatenate([Yt, np.full((L, n_unlab), np.nan)], axis=1)

    from scipy.io import loadmat, savemat  # benchmark-only dependency

    kind = "semisupervised" if semisupervised else "supervised"
    train_fn = f"bssml_{kind}_classification_variational_train"
    test_fn = f"bssml_{kind}_classification_variational_test"

    work = Path(tempfile.mkdtemp(prefix="peer_octave_bsml_"))
    try:
        knn_dir = work / "shim_knn"
        stats_dir = work / "shim_stats"
        knn_dir.mkdir()
        stats_dir.mkdir()
        (knn_dir / "knnsearch.m").write_text(_KNNSEARCH_SHIM)
        (stats_dir / "normcdf.m").write_text(_NORMCDF_SHIM)
        (stats_dir / "normpdf.m").write_text(_NORMPDF_SHIM)

        data_path = work / "data.mat"
        results_path = work / "results.mat"
        savemat(
            data_path,
            {
                "Xtrain": np.ascontiguousarray(Xtr),
                "Ytrain": np.ascontiguousarray(Yt),
                "Xtest": np.ascontiguousarray(X_test.T),
                "R": float(n_components),
                "iteration": float(iterations),
                "prior_phi": prior,
                "alpha_phi": float(alpha_phi),
                "beta_phi": float(beta_phi),
                "alpha_lambda": float(alpha_lambda),
                "beta_lambda": float(beta_lambda),
                "alpha_psi": float(alpha_psi),
                "beta_psi": float(beta_psi),
                "sigma_z": float(sigma_z),
                "seed": float(seed),
            },
            do_compression=False,
        )
        driver = _DRIVER_TEMPLATE.format(
            stats_shims=_oct_str(stats_dir),
            knn_shim=_oct_str(knn_dir),
            peer=_oct_str(peer_dir),
            data=_oct_str(data_path),
            results=_oct_str(results_path),
            train=train_fn,
            test=test_fn,
        )
        (work / "run_peer.m").write_text(driver)

        env = dict(os.environ)
        if blas_threads is not None:
            for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(int(blas_threads))
        cmd = [exe, "--no-gui", "--norc", "--quiet", "--no-window-system", "run_peer.m"]
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise TimeoutError(f"octave peer run exceeded {timeout} s") from None
        wall = time.perf_counter() - t0
        if verbose:
            print(out, end="")
        if not results_path.is_file():
            raise RuntimeError(
                f"octave peer run failed (exit status {proc.returncode}); output tail:\n"
                + out[-4000:]
            )
        res = loadmat(results_path, squeeze_me=False)

        proba = np.asarray(res["P"], dtype=np.float64).T  # (n_test, L)
        phi = np.asarray(res["phi_expected"], dtype=np.float64)
        if prior == "ard":
            phi = phi.ravel()
            n_active = int(np.sum(phi <= ARD_PRUNE_RATIO * np.min(phi)))
        else:
            n_active = None
        result = {
            "train_seconds": float(np.squeeze(res["train_seconds"])),
            "test_seconds": float(np.squeeze(res["test_seconds"])),
            "wall_seconds": wall,
            "proba": proba,
            "phi_expected": phi,
            "q_column_norms": np.asarray(res["q_column_norms"], dtype=np.float64).ravel(),
            "n_active_components": n_active,
            "octave_version": str(np.squeeze(res["octave_version"])),
            "normal_functions": str(np.squeeze(res["shim_source"])),
            "n_train": int(X_train.shape[0]),
            "n_unlabelled": n_unlab,
            "returncode": proc.returncode,
            "stdout": out,
        }
        if keep_workdir:
            result["workdir"] = str(work)
        return result
    finally:
        if not keep_workdir:
            shutil.rmtree(work, ignore_errors=True)


def hamming_loss(proba, Y_true, threshold: float = 0.5) -> float:
    """Mean of ``(proba > threshold) != Y_true`` over all (instance, label) entries."""
    return float(np.mean((np.asarray(proba) > threshold) != (np.asarray(Y_true) == 1)))


# --------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------
def _default_data_dir() -> Path:
    # the MULAN archives shipped with the package, relative to this repository
    return Path(__file__).resolve().parent.parent / "bayeskit" / "datasets" / "data"


def _resolve_data(data: str | None, dataset: str) -> Path:
    if data is None:
        return _default_data_dir() / f"{dataset}.npz"
    p = Path(data)
    return p / f"{dataset}.npz" if p.is_dir() else p


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description="Run the author's BSML/BSSML Matlab code under GNU Octave on a MULAN split."
    )
    ap.add_argument("--peer", required=True, help="folder with the author's bssml_*.m files")
    ap.add_argument("--dataset", required=True, help="dataset name, e.g. emotions")
    ap.add_argument(
        "--data",
        default=None,
        help="a .npz file (X_train, Y_train, X_test, Y_test) or a folder holding "
        "<dataset>.npz (default: the archives shipped in bayeskit/datasets/data)",
    )
    ap.add_argument("--n-components", "-R", type=int, required=True)
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--prior", choices=("entrywise", "ard"), default="entrywise")
    ap.add_argument(
        "--alpha-phi", type=float, default=None,
        help="default 1, or 1e-10 with --prior ard (the paper's ARD setting)",
    )
    ap.add_argument(
        "--beta-phi", type=float, default=None,
        help="default 1, or 1e10 with --prior ard (the paper's ARD setting)",
    )
    ap.add_argument("--sigma-z", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1606)
    ap.add_argument(
        "--semisupervised", action="store_true",
        help="BSSML, transductive: the test inputs are appended as unlabelled training rows",
    )
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument("--threads", type=int, default=None, help="BLAS threads for Octave")
    ap.add_argument("--octave", default=None, help="Octave executable (default octave-cli)")
    ap.add_argument("--verbose", action="store_true", help="echo Octave's output")
    args = ap.parse_args(argv)

    if not octave_available(args.octave):
        print("skipped: octave not found")
        return 0
    if not find_peer(args.peer):
        print(f"skipped: peer not found at {args.peer}")
        return 0
    path = _resolve_data(args.data, args.dataset)
    if not path.is_file():
        print(f"error: dataset file not found: {path}", file=sys.stderr)
        return 2

    ard = args.prior == "ard"
    alpha_phi = args.alpha_phi if args.alpha_phi is not None else (1e-10 if ard else 1.0)
    beta_phi = args.beta_phi if args.beta_phi is not None else (1e10 if ard else 1.0)

    with np.load(path) as d:
        X_train, Y_train, X_test, Y_test = (d[k] for k in ("X_train", "Y_train", "X_test", "Y_test"))

    res = run_author_bsml(
        args.peer,
        X_train,
        Y_train,
        X_test,
        n_components=args.n_components,
        iterations=args.iterations,
        prior=args.prior,
        alpha_phi=alpha_phi,
        beta_phi=beta_phi,
        sigma_z=args.sigma_z,
        seed=args.seed,
        semisupervised=args.semisupervised,
        X_unlabelled=X_test if args.semisupervised else None,
        timeout=args.timeout,
        octave=args.octave,
        blas_threads=args.threads,
        verbose=args.verbose,
    )
    model = "BSSML (transductive)" if args.semisupervised else ("BSML+ARD" if ard else "BSML")
    print(
        f"author {model} under Octave {res['octave_version']}: dataset={args.dataset} "
        f"R={args.n_components} iterations={args.iterations} prior={args.prior} "
        f"alpha_phi={alpha_phi:g} beta_phi={beta_phi:g} seed={args.seed}"
    )
    print(f"train_seconds: {res['train_seconds']:.3f}")
    print(f"test_seconds: {res['test_seconds']:.3f}")
    print(f"wall_seconds: {res['wall_seconds']:.3f}")
    print(f"hamming_loss: {hamming_loss(res['proba'], Y_test):.4f}")
    if res["n_active_components"] is not None:
        print(f"ard_active_components: {res['n_active_components']} of {args.n_components}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

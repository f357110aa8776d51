"""R peers of the benchmarks: kernlab's ``rvm``, glmnet's ``cv.glmnet``, glasso's ``glasso``, rrcov's
``PcaHubert`` and robustbase's ``covMcd``, run through ``Rscript`` in a subprocess.

Benchmark-only: R is not a dependency of the package or of its tests. Install it with
``bash benchmarks/setup_r_peers.sh`` (Debian/Ubuntu: r-base-core, r-cran-kernlab,
r-cran-glmnet). Callers check :func:`r_missing` first and skip with its message.

Each function runs all its fits in ONE ``Rscript --vanilla`` call. The data go to a
temporary folder as little-endian float64 files that R reads with ``readBin`` (exact, no
text round trip), the driver is a short R script written there, and the results come back
the same way; the folder is deleted afterwards. Times are measured inside R with
``proc.time()`` (elapsed, millisecond resolution) around each fit call only, so R's
start-up, package loading and the file I/O are not counted; prediction is timed apart.

* :func:`kernlab_rvm_batch`: ``rvm(x, y, kernel = "rbfdot", kpar = list(sigma = sigma))``
  on each of S stacked data sets. kernlab's rbfdot is exp(-sigma ||x - x'||^2), the
  ``gamma`` of ``bayeskit.sparse.sparse_bayes.design``; ``kpar`` is always passed, so kernlab's
  random ``sigest`` default is never used. kernlab's rvm is Tipping's (2001) re-estimation
  on the full N x N kernel (O(N^3) per iteration, at most 100 iterations, initial noise
  variance 0.1, no bias column). Each fit is wrapped in ``tryCatch``: on noisy data it
  stops with "non-conformable arrays" when its model shrinks to a single relevance vector
  (``diag(1/theta)`` of a length-1 vector is an identity of size 1/theta there); failures
  are counted and their messages returned.
* :func:`glmnet_cv_batch` / :func:`glmnet_cv`: ``cv.glmnet(x, y, nfolds = nfolds)`` (lasso,
  glmnet's own standardisation) on each split, predictions and the non-zero coefficients
  at ``lambda.min``. ``set.seed(seed)`` once before the first split fixes the folds.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

__all__ = ["rscript", "r_missing", "r_available", "kernlab_rvm_batch", "glmnet_cv_batch", "glmnet_cv", "glasso_fits",
           "pca_hubert", "cov_mcd", "r_datasets"]


def rscript() -> str | None:
    """The ``Rscript`` executable on PATH, or None."""
    return shutil.which("Rscript")


@functools.cache
def r_missing(package: str | None = None) -> str | None:
    """None when Rscript is on PATH and ``library(package)`` loads; otherwise a message
    saying what is missing and how to install it."""
    exe = rscript()
    hint = "bash benchmarks/setup_r_peers.sh"
    if exe is None:
        return f"Rscript is not on PATH ({hint})"
    if package is None:
        return None
    try:
        proc = subprocess.run([exe, "--vanilla", "-e", f"suppressPackageStartupMessages(library({package}))"],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"Rscript could not load {package}: {e}"
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        why = next((line for line in lines if "no package" in line), lines[0] if lines else "?")
        return f"the R package {package} does not load ({why}; {hint})"
    return None


def r_available(package: str | None = None) -> bool:
    """Whether Rscript is on PATH and ``library(package)`` loads."""
    return r_missing(package) is None


# ----------------------------------------------------------------------------- plumbing

_R_COMMON = r"""
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
rd <- function(name, len) readBin(file.path(dir, name), "double", n = len, size = 8, endian = "little")
wr <- function(x, name) writeBin(as.double(x), file.path(dir, name), size = 8, endian = "little")
now <- function() proc.time()[["elapsed"]]
clean <- function(s) gsub("[\r\n\t]+", " ", s)
versions <- function(pkg) writeLines(c(paste0("R\t", R.version$major, ".", R.version$minor),
                                       paste0(pkg, "\t", format(packageVersion(pkg))),
                                       paste0("BLAS\t", clean(extSoftVersion()[["BLAS"]])),
                                       paste0("LAPACK\t", clean(La_library()))), file.path(dir, "versions.txt"))
"""


def _write(path: Path, a) -> None:
    np.ascontiguousarray(a, dtype="<f8").tofile(path)


def _read(path: Path, shape) -> np.ndarray:
    return np.fromfile(path, dtype="<f8").reshape(shape)


def _run(script: str, workdir: Path, args, timeout: float) -> float:
    """Run the R script in ``workdir``; returns the subprocess's wall seconds."""
    exe = rscript()
    if exe is None:
        raise RuntimeError("Rscript is not on PATH (bash benchmarks/setup_r_peers.sh)")
    (workdir / "driver.R").write_text(_R_COMMON + script)
    t = time.perf_counter()
    proc = subprocess.run([exe, "--vanilla", str(workdir / "driver.R"), str(workdir), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"Rscript failed (status {proc.returncode}):\n{proc.stderr[-4000:]}")
    return wall


def _versions(path: Path) -> dict:
    lines = path.read_text().splitlines()
    return dict(line.split("\t", 1) for line in lines if "\t" in line)


# ------------------------------------------------------------------------ kernlab rvm

_RVM = r"""
S <- as.integer(args[2]); n <- as.integer(args[3]); d <- as.integer(args[4]); nt <- as.integer(args[5])
sigma <- as.numeric(args[6])
suppressPackageStartupMessages(library(kernlab))
X <- array(rd("X.bin", n * d * S), dim = c(n, d, S))
Y <- matrix(rd("y.bin", n * S), n, S)
Xt <- matrix(rd("Xt.bin", nt * d), nt, d)
pred <- matrix(NaN, nt, S)
nov <- rep(NaN, S); nvar <- rep(NaN, S); fit_s <- rep(NaN, S); pred_s <- rep(NaN, S)
nwarn <- integer(S); msg <- rep("", S)
for (s in seq_len(S)) {
  x <- matrix(X[, , s], n, d)
  y <- Y[, s]
  t0 <- now()
  m <- tryCatch(
    withCallingHandlers(rvm(x, y, kernel = "rbfdot", kpar = list(sigma = sigma)),
                        warning = function(w) { nwarn[s] <<- nwarn[s] + 1L; invokeRestart("muffleWarning") }),
    error = function(e) { msg[s] <<- clean(conditionMessage(e)); NULL })
  fit_s[s] <- now() - t0
  if (!is.null(m)) {
    t0 <- now()
    pred[, s] <- predict(m, Xt)
    pred_s[s] <- now() - t0
    nov[s] <- m@nRV
    nvar[s] <- m@nvar
  }
}
wr(pred, "pred.bin"); wr(nov, "nov.bin"); wr(nvar, "nvar.bin"); wr(fit_s, "fit_s.bin"); wr(pred_s, "pred_s.bin")
wr(nwarn, "nwarn.bin")
writeLines(msg, file.path(dir, "errors.txt"))
versions("kernlab")
"""


def kernlab_rvm_batch(X, y, X_test, sigma: float, *, timeout: float = 3600.0) -> dict:
    """kernlab's ``rvm`` (rbfdot, ``kpar = list(sigma = sigma)``) on each data set of
    ``X`` (S, n, d), ``y`` (S, n), predicting at the shared ``X_test`` (n_test, d); all S
    fits in one Rscript call.

    Returns a dict: ``mean`` (S, n_test) test predictions (NaN rows where the fit failed),
    ``ok`` (S,) which fits succeeded, ``nov`` (S,) relevance vectors (``nRV``; NaN when
    failed), ``noise_var`` (S,) kernlab's noise variance estimate (the ``nvar`` slot),
    ``seconds`` (S,) R's elapsed time of each ``rvm`` call (failed ones until they
    stopped), ``predict_seconds`` (S,), ``warnings`` (S,) warnings per fit, ``n_failed``,
    ``errors`` {message: count}, ``wall_seconds`` (the whole subprocess) and ``versions``.
    """
    X, y, X_test = np.asarray(X, float), np.asarray(y, float), np.asarray(X_test, float)
    if X.ndim != 3 or y.shape != X.shape[:2] or X_test.ndim != 2 or X_test.shape[1] != X.shape[2]:
        raise ValueError(f"expected X (S, n, d), y (S, n), X_test (n_test, d); got {X.shape}, {y.shape}, {X_test.shape}")
    S, n, d = X.shape
    nt = X_test.shape[0]
    with tempfile.TemporaryDirectory(prefix="bayeskit_kernlab_") as tmp:
        w = Path(tmp)
        _write(w / "X.bin", X.transpose(0, 2, 1))  # per set an n x d column-major matrix
        _write(w / "y.bin", y)
        _write(w / "Xt.bin", X_test.T)
        wall = _run(_RVM, w, [S, n, d, nt, repr(float(sigma))], timeout)
        msgs = (w / "errors.txt").read_text().splitlines()
        out = {"mean": _read(w / "pred.bin", (S, nt)), "nov": _read(w / "nov.bin", (S,)),
               "noise_var": _read(w / "nvar.bin", (S,)), "seconds": _read(w / "fit_s.bin", (S,)),
               "predict_seconds": _read(w / "pred_s.bin", (S,)), "warnings": _read(w / "nwarn.bin", (S,)).astype(int),
               "versions": _versions(w / "versions.txt"), "wall_seconds": wall}
    msgs = (msgs + [""] * S)[:S]
    out["ok"] = np.array([m == "" for m in msgs])
    out["n_failed"] = int((~out["ok"]).sum())
    out["errors"] = dict(Counter(m for m in msgs if m))
    return out


# --------------------------------------------------------------------------- glmnet

_GLMNET = r"""
K <- as.integer(args[2]); nfolds <- as.integer(args[3]); seed <- as.integer(args[4])
suppressPackageStartupMessages(library(glmnet))
sizes <- matrix(rd("sizes.bin", 3 * K), 3, K)  # rows: n_train, n_test, d
Xtr_all <- rd("Xtr.bin", sum(sizes[1, ] * sizes[3, ])); ytr_all <- rd("ytr.bin", sum(sizes[1, ]))
Xte_all <- rd("Xte.bin", sum(sizes[2, ] * sizes[3, ]))
pred <- c(); nnz <- rep(NaN, K); lam <- rep(NaN, K); fit_s <- rep(NaN, K); pred_s <- rep(NaN, K)
msg <- rep("", K)
oX <- 0; oy <- 0; oT <- 0
set.seed(seed)
for (k in seq_len(K)) {
  ntr <- sizes[1, k]; nte <- sizes[2, k]; d <- sizes[3, k]
  x <- matrix(Xtr_all[oX + seq_len(ntr * d)], ntr, d); oX <- oX + ntr * d
  y <- ytr_all[oy + seq_len(ntr)]; oy <- oy + ntr
  xt <- matrix(Xte_all[oT + seq_len(nte * d)], nte, d); oT <- oT + nte * d
  t0 <- now()
  cv <- tryCatch(cv.glmnet(x, y, nfolds = nfolds), error = function(e) { msg[k] <<- clean(conditionMessage(e)); NULL })
  fit_s[k] <- now() - t0
  p <- rep(NaN, nte)
  if (!is.null(cv)) {
    t0 <- now()
    p <- as.numeric(predict(cv, newx = xt, s = "lambda.min"))
    pred_s[k] <- now() - t0
    nnz[k] <- sum(as.numeric(coef(cv, s = "lambda.min"))[-1] != 0)
    lam[k] <- cv$lambda.min
  }
  pred <- c(pred, p)
}
wr(pred, "pred.bin"); wr(nnz, "nnz.bin"); wr(lam, "lambda.bin"); wr(fit_s, "fit_s.bin"); wr(pred_s, "pred_s.bin")
writeLines(msg, file.path(dir, "errors.txt"))
versions("glmnet")
"""


def glmnet_cv_batch(X_train, y_train, X_test, nfolds: int = 10, *, seed: int = 0, timeout: float = 3600.0) -> dict:
    """``cv.glmnet(x, y, nfolds = nfolds)`` on each split, all in one Rscript call.
    ``X_train``, ``y_train``, ``X_test``: sequences of the splits' arrays ((n_train, d),
    (n_train,), (n_test, d); a stacked 3-D / 2-D array works too).

    Returns a dict: ``mean`` a list of test predictions at ``lambda.min`` (an (K, n_test)
    array when every split has the same test size), ``nonzero`` (K,) non-zero coefficients
    at ``lambda.min`` excluding the intercept, ``lambda_min`` (K,), ``seconds`` (K,) R's
    elapsed time of each ``cv.glmnet`` call, ``predict_seconds`` (K,), ``ok``,
    ``n_failed``, ``errors``, ``wall_seconds`` and ``versions``."""
    Xtr = [np.asarray(a, float) for a in X_train]
    ytr = [np.asarray(a, float) for a in y_train]
    Xte = [np.asarray(a, float) for a in X_test]
    if not (len(Xtr) == len(ytr) == len(Xte)) or not Xtr:
        raise ValueError("X_train, y_train and X_test must hold the same (non-zero) number of splits")
    for a, b, c in zip(Xtr, ytr, Xte):
        if a.ndim != 2 or b.shape != (a.shape[0],) or c.ndim != 2 or c.shape[1] != a.shape[1]:
            raise ValueError(f"a split must be X_train (n, d), y_train (n,), X_test (m, d); got {a.shape}, {b.shape}, {c.shape}")
    K = len(Xtr)
    sizes = np.array([[a.shape[0], c.shape[0], a.shape[1]] for a, c in zip(Xtr, Xte)], float)
    with tempfile.TemporaryDirectory(prefix="bayeskit_glmnet_") as tmp:
        w = Path(tmp)
        _write(w / "sizes.bin", sizes)
        _write(w / "Xtr.bin", np.concatenate([a.T.ravel() for a in Xtr]))  # column-major per split
        _write(w / "ytr.bin", np.concatenate(ytr))
        _write(w / "Xte.bin", np.concatenate([c.T.ravel() for c in Xte]))
        wall = _run(_GLMNET, w, [K, int(nfolds), int(seed)], timeout)
        flat = np.fromfile(w / "pred.bin", dtype="<f8")
        msgs = (w / "errors.txt").read_text().splitlines()
        out = {"nonzero": _read(w / "nnz.bin", (K,)), "lambda_min": _read(w / "lambda.bin", (K,)),
               "seconds": _read(w / "fit_s.bin", (K,)), "predict_seconds": _read(w / "pred_s.bin", (K,)),
               "versions": _versions(w / "versions.txt"), "wall_seconds": wall}
    means = np.split(flat, np.cumsum([c.shape[0] for c in Xte])[:-1])
    out["mean"] = np.stack(means) if len({m.shape[0] for m in means}) == 1 else means
    msgs = (msgs + [""] * K)[:K]
    out["ok"] = np.array([m == "" for m in msgs])
    out["n_failed"] = int((~out["ok"]).sum())
    out["errors"] = dict(Counter(m for m in msgs if m))
    return out


def glmnet_cv(X_train, y_train, X_test, nfolds: int = 10, *, seed: int = 0, timeout: float = 3600.0) -> dict:
    """``cv.glmnet`` on one split: as :func:`glmnet_cv_batch` with a single split, the
    per-split entries unwrapped (``mean`` (n_test,), ``nonzero``, ``lambda_min``,
    ``seconds``, ``predict_seconds`` scalars)."""
    out = glmnet_cv_batch([X_train], [y_train], [X_test], nfolds, seed=seed, timeout=timeout)
    for key in ("nonzero", "lambda_min", "seconds", "predict_seconds", "ok"):
        out[key] = out[key][0].item()
    out["mean"] = out["mean"][0]
    return out


# ----------------------------------------------------------------------------- glasso

_GLASSO = r"""
p <- as.integer(args[2]); rho <- as.numeric(args[3]); pen_diag <- as.logical(args[4])
thrs <- as.numeric(strsplit(args[5], ",")[[1]]); calls <- as.integer(args[6])
suppressPackageStartupMessages(library(glasso))
S <- matrix(rd("S.bin", p * p), p, p)
secs <- rep(NaN, length(thrs))
for (k in seq_along(thrs)) {
  t0 <- now()
  for (c in seq_len(calls)) fit <- glasso(S, rho, thr = thrs[k], maxit = 10000, penalize.diagonal = pen_diag)
  secs[k] <- (now() - t0) / calls
  wr(fit$wi, paste0("wi", k, ".bin")); wr(fit$w, paste0("w", k, ".bin"))
}
wr(secs, "seconds.bin")
versions("glasso")
"""


def glasso_fits(S, rho: float, thresholds, *, penalize_diagonal: bool = False, calls: int = 1,
                timeout: float = 3600.0) -> dict:
    """R glasso's ``glasso(S, rho, thr, penalize.diagonal)`` at each convergence threshold
    in ``thresholds`` (one Rscript call): {"precision": [(p, p)], "covariance": [...],
    "seconds": [...] (inside R, the fit call only, the mean over ``calls`` calls: R's
    clock counts milliseconds), "versions": {...}}."""
    S = np.asarray(S, dtype=np.float64)
    p = S.shape[0]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        _write(d / "S.bin", S.T)  # R is column-major
        _run(_GLASSO, d, [p, rho, "TRUE" if penalize_diagonal else "FALSE", ",".join(map(repr, thresholds)), calls],
             timeout)
        k = len(thresholds)
        return {"precision": [_read(d / f"wi{i + 1}.bin", (p, p)).T for i in range(k)],
                "covariance": [_read(d / f"w{i + 1}.bin", (p, p)).T for i in range(k)],
                "seconds": _read(d / "seconds.bin", (k,)).tolist(), "versions": _versions(d / "versions.txt")}


# ------------------------------------------------------------------- rrcov, robustbase

_PCAHUBERT = r"""
n <- as.integer(args[2]); p <- as.integer(args[3]); k <- as.integer(args[4]); alpha <- as.numeric(args[5])
repeats <- as.integer(args[6]); seed <- as.integer(args[7]); calls <- as.integer(args[8])
suppressPackageStartupMessages(library(rrcov))
X <- matrix(rd("X.bin", n * p), n, p)
secs <- rep(NaN, repeats)
for (r in seq_len(repeats)) {
  t0 <- now()
  for (c in seq_len(calls)) {
    set.seed(seed)
    fit <- PcaHubert(X, k = k, alpha = alpha)
  }
  secs[r] <- (now() - t0) / calls
}
kk <- fit@k
wr(secs, "seconds.bin"); wr(kk, "k.bin"); wr(fit@quan, "h.bin")
wr(fit@eigenvalues[1:kk], "eigenvalues.bin"); wr(fit@loadings[, 1:kk], "loadings.bin"); wr(fit@center, "center.bin")
wr(fit@sd, "sd.bin"); wr(fit@od, "od.bin"); wr(c(fit@cutoff.sd, fit@cutoff.od), "cutoffs.bin")
versions("rrcov")
"""


def pca_hubert(X, k: int, alpha: float = 0.75, *, repeats: int = 3, seed: int = 2024, calls: int = 1,
               timeout: float = 3600.0) -> dict:
    """rrcov's ``PcaHubert(X, k, alpha)`` (``set.seed(seed)`` before each call; each of
    ``repeats`` times spans ``calls`` calls and is divided by them, below R's millisecond
    clock for fast calls): {"seconds": [...], "k", "h", "eigenvalues", "loadings" (p, k),
    "center", "sd", "od", "sd_cutoff", "od_cutoff", "versions"}."""
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    with tempfile.TemporaryDirectory(prefix="bayeskit_rrcov_") as tmp:
        d = Path(tmp)
        _write(d / "X.bin", X.T)
        _run(_PCAHUBERT, d, [n, p, k, repr(float(alpha)), repeats, seed, calls], timeout)
        kk = int(_read(d / "k.bin", (1,))[0])
        cut = _read(d / "cutoffs.bin", (2,))
        return {"seconds": _read(d / "seconds.bin", (repeats,)).tolist(), "k": kk, "h": int(_read(d / "h.bin", (1,))[0]),
                "eigenvalues": _read(d / "eigenvalues.bin", (kk,)), "loadings": _read(d / "loadings.bin", (kk, p)).T,
                "center": _read(d / "center.bin", (p,)), "sd": _read(d / "sd.bin", (n,)), "od": _read(d / "od.bin", (n,)),
                "sd_cutoff": float(cut[0]), "od_cutoff": float(cut[1]), "versions": _versions(d / "versions.txt")}


_COVMCD = r"""
n <- as.integer(args[2]); p <- as.integer(args[3]); alpha <- as.numeric(args[4])
repeats <- as.integer(args[5]); seed <- as.integer(args[6]); calls <- as.integer(args[7])
suppressPackageStartupMessages(library(robustbase))
X <- matrix(rd("X.bin", n * p), n, p)
secs <- rep(NaN, repeats)
for (r in seq_len(repeats)) {
  t0 <- now()
  for (c in seq_len(calls)) {
    set.seed(seed)
    fit <- covMcd(X, alpha = alpha)
  }
  secs[r] <- (now() - t0) / calls
}
best <- rep(0, n); best[fit$best] <- 1
wr(secs, "seconds.bin"); wr(fit$center, "center.bin"); wr(fit$cov, "cov.bin"); wr(best, "best.bin")
wr(fit$crit, "crit.bin"); wr(fit$quan, "h.bin")
versions("robustbase")
"""


def cov_mcd(X, alpha: float = 0.5, *, repeats: int = 3, seed: int = 2024, calls: int = 1,
            timeout: float = 3600.0) -> dict:
    """robustbase's ``covMcd(X, alpha)`` (``set.seed(seed)`` before each call; ``repeats``
    times of ``calls`` calls each, divided by them, as in :func:`pca_hubert`): {"seconds",
    "center", "covariance" (reweighted, with robustbase's small-sample corrections),
    "raw_support" (the h points of ``fit$best``), "log_det" (robustbase's ``crit``), "h",
    "versions"}."""
    X = np.asarray(X, dtype=np.float64)
    n, p = X.shape
    with tempfile.TemporaryDirectory(prefix="bayeskit_covmcd_") as tmp:
        d = Path(tmp)
        _write(d / "X.bin", X.T)
        _run(_COVMCD, d, [n, p, repr(float(alpha)), repeats, seed, calls], timeout)
        return {"seconds": _read(d / "seconds.bin", (repeats,)).tolist(), "center": _read(d / "center.bin", (p,)),
                "covariance": _read(d / "cov.bin", (p, p)).T, "raw_support": _read(d / "best.bin", (n,)) > 0,
                "log_det": float(_read(d / "crit.bin", (1,))[0]), "h": int(_read(d / "h.bin", (1,))[0]),
                "versions": _versions(d / "versions.txt")}


_DATASETS = r"""
names <- strsplit(args[2], ",")[[1]]
suppressPackageStartupMessages({library(robustbase); library(rrcov)})
for (nm in names) {
  e <- new.env()
  data(list = nm, envir = e)
  d <- as.data.frame(get(nm, envir = e))
  d <- d[, sapply(d, is.numeric), drop = FALSE]
  d <- as.matrix(d[complete.cases(d), , drop = FALSE])
  wr(dim(d), paste0(nm, ".dim")); wr(d, paste0(nm, ".bin"))
}
versions("rrcov")
"""


def r_datasets(names, *, timeout: float = 600.0) -> dict:
    """The data sets ``names`` that ship with robustbase and rrcov, as float64 arrays (n, p): the
    numeric columns, the rows with no missing value."""
    names = list(names)
    with tempfile.TemporaryDirectory(prefix="bayeskit_rdata_") as tmp:
        d = Path(tmp)
        _run(_DATASETS, d, [",".join(names)], timeout)
        out = {}
        for name in names:
            n, p = (int(v) for v in _read(d / f"{name}.dim", (2,)))
            out[name] = _read(d / f"{name}.bin", (p, n)).T.copy()
        return out

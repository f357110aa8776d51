#!/usr/bin/env bash
# Installs the R peers of benchmarks/bench_sparse_bayes.py, bench_glasso.py and bench_robpca.py: R itself,
# kernlab (rvm), glmnet (cv.glmnet), glasso, rrcov (PcaHubert) and robustbase (covMcd), from Debian's packages, with OpenBLAS as R's BLAS (kernlab's rvm is
# mostly dense linear algebra; on the reference BLAS it is about ten times slower). Benchmark-only: neither the package nor its
# tests need R. Run as root (or prefix with sudo) on Debian or Ubuntu:
#
#     bash benchmarks/setup_r_peers.sh
set -euo pipefail

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

$SUDO apt-get update
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
    r-base-core r-cran-kernlab r-cran-glmnet r-cran-glasso r-cran-rrcov r-cran-robustbase libopenblas0-pthread

Rscript --version
Rscript -e 'suppressPackageStartupMessages({library(kernlab); library(glmnet); library(glasso); library(rrcov)});
            cat("kernlab", format(packageVersion("kernlab")), "glmnet", format(packageVersion("glmnet")),
                "glasso", format(packageVersion("glasso")), "rrcov", format(packageVersion("rrcov")),
                "robustbase", format(packageVersion("robustbase")), "\n")'

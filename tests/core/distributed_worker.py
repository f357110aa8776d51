"""One process of the two-process sweep test (tests/core/test_sweep.py): two CPU devices per
process, joined over loopback by ``jax.distributed``; writes what it received to an .npz.

    python distributed_worker.py PROCESS_ID PORT OUT.npz
"""

import os
import sys

os.environ["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=2 --xla_backend_optimization_level=0 "
                           "--xla_cpu_enable_concurrency_optimized_scheduler=false")

import jax  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_cpu_collectives_implementation", "gloo")
process_id, port, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id)

import bayeskit  # noqa: E402
from bayeskit.covariance import glasso  # noqa: E402
from bayeskit.robust import robpca  # noqa: E402
from tests.core.test_sweep import N_STARTS, glasso_problem, robpca_problem  # noqa: E402

assert jax.device_count() == 4 and jax.local_device_count() == 2

# process-local data: each process passes its own half of the replications
keys, X = robpca_problem()
half = len(X) // 2
mine = slice(process_id * half, (process_id + 1) * half)
local = bayeskit.sweep(lambda k, x: robpca.fit(k, x, 2, n_starts=N_STARTS).state, keys[mine], (X[mine],), process_local=True)

# the whole batch on every process: the penalties, one shared covariance matrix
S, alphas = glasso_problem()
path = bayeskit.sweep(lambda S, hp: glasso.fit(S, hp, throw=False), None, (S,), glasso.Hyperparams(alphas),
                      in_axes=(None, 0))

np.savez(out, components=local.results.components, eigenvalues=local.results.eigenvalues,
         precision=path.results.state.precision, converged=np.asarray(path.status == bayeskit.core.status.Status.successful))
jax.distributed.shutdown()

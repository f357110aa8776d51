"""The persistent compilation cache: on by default in the user's cache folder, so a second
process reads the programs the first compiled (a sampler's too, with its progress bar on);
off with BAYESKIT_COMPILATION_CACHE=0; a cache the user configured is left alone."""

import json
import os
import subprocess
import sys

SCRIPT = """
import json, sys
import jax
import numpy as np
hits = []
jax.monitoring.register_event_listener(lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None)
from bayeskit.estimators import GraphicalLasso
X = np.random.default_rng(0).normal(size=(60, 8))
GraphicalLasso(alpha=0.2).fit(X)
glasso_hits = len(hits)
if "--sampler" in sys.argv:
    from bayeskit.datasets import ibp_toy_images
    from bayeskit.relational import ibp
    images = ibp_toy_images(jax.random.key(0), 10)[0]
    ibp.sample_posterior(jax.random.key(1), images, ibp.Hyperparams(k_max=10), num_warmup=2, num_samples=2, progress=True)
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir, "hits": glasso_hits, "sampler_hits": len(hits) - glasso_hits}))
"""


def _run(env, *args):
    drop = ("JAX_COMPILATION_CACHE_DIR", "BAYESKIT_CACHE_DIR", "CI")
    # every program is stored, however fast it compiled (the test suite compiles at XLA's lowest optimisation)
    env = {k: v for k, v in os.environ.items() if k not in drop} | {"JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"} | env
    out = subprocess.run([sys.executable, "-c", SCRIPT, *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_first_ones_programs(tmp_path):
    folder = tmp_path / "cache"
    first = _run({"BAYESKIT_CACHE_DIR": str(folder)}, "--sampler")
    assert first["dir"] == str(folder) and first["hits"] == first["sampler_hits"] == 0 and any(folder.iterdir())
    second = _run({"BAYESKIT_CACHE_DIR": str(folder)}, "--sampler")
    assert second["hits"] >= 1 and second["sampler_hits"] >= 1


def test_the_cache_can_be_switched_off_and_a_configured_one_is_kept(tmp_path):
    assert _run({"BAYESKIT_COMPILATION_CACHE": "0", "BAYESKIT_CACHE_DIR": str(tmp_path / "unused")})["dir"] is None
    assert not (tmp_path / "unused").exists()
    mine = tmp_path / "mine"
    assert _run({"JAX_COMPILATION_CACHE_DIR": str(mine), "BAYESKIT_CACHE_DIR": str(tmp_path / "unused")})["dir"] == str(mine)

"""The persistent compilation cache: on by default in the user's cache folder, so a second
process reads the programs the first compiled; off with BAYESKIT_COMPILATION_CACHE=0; a
cache the user configured is left alone."""

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
print(json.dumps({"dir": jax.config.jax_compilation_cache_dir, "hits": len(hits)}))
"""


def _run(env):
    env = {k: v for k, v in os.environ.items() if k not in ("JAX_COMPILATION_CACHE_DIR", "BAYESKIT_CACHE_DIR")} | env
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_second_process_reads_the_first_ones_programs(tmp_path):
    folder = tmp_path / "cache"
    first = _run({"BAYESKIT_CACHE_DIR": str(folder)})
    assert first["dir"] == str(folder) and first["hits"] == 0 and any(folder.iterdir())
    second = _run({"BAYESKIT_CACHE_DIR": str(folder)})
    assert second["hits"] >= 1


def test_the_cache_can_be_switched_off_and_a_configured_one_is_kept(tmp_path):
    assert _run({"BAYESKIT_COMPILATION_CACHE": "0", "BAYESKIT_CACHE_DIR": str(tmp_path / "unused")})["dir"] is None
    assert not (tmp_path / "unused").exists()
    mine = tmp_path / "mine"
    assert _run({"JAX_COMPILATION_CACHE_DIR": str(mine), "BAYESKIT_CACHE_DIR": str(tmp_path / "unused")})["dir"] == str(mine)

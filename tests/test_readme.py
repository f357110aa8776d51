"""Every Python block of the README runs as pasted in a fresh interpreter, under JAX's
defaults (float32, where no float64 may be requested) and on the data bayeskit ships or
generates. Sizes a reader would use
are shrunk here by exact replacements, each of which must still match its block, so the
README cannot drift from what is run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)
# (a line that identifies the block, [(text in the README, what the test runs instead)])
SMALLER = [
    ("model.transform(X_test)           # (202, 2) embeddings", [("random_state=0)", "random_state=0, max_iter=30)")]),
    ("results.status, results.objective", [("max_iter=500)", "max_iter=30)"), ("throw=False))(keys)", "throw=False, max_iter=30))(keys)")]),
    ('bayeskit.save("fit.bkz", result, hp)', [("random_state=0)", "random_state=0, max_iter=30)"),
                                              ("Y_train, hp)\n", "Y_train, hp, max_iter=30)\n")]),
    ("sbmoe_synthetic_1d(jax.random.key(0), 1000)", [("1000)", "200)"), ("n_experts=16", "n_experts=6")]),
    ("ibp_toy_images(jax.random.key(0), 100)", [("100)", "30)"), ('load_relational("kinship")', 'load_relational("nations")'),
                                                ("num_chains=4)", "num_chains=2, num_warmup=10, num_samples=10)"),
                                                ("num_chains=2, random_state=0)", "num_chains=2, num_warmup=5, num_samples=5, random_state=0)"),
                                                ("offsets=True, num_chains=2)", "offsets=True, num_chains=2, num_warmup=5, num_samples=5)")]),
    ("BayesianLassoRegressor(method=\"gibbs\")", [("method=\"gibbs\")", "method=\"gibbs\", num_warmup=100, num_samples=200)")]),
    ("zipf_corpus(10_000, 100_000, topic_size=5)", [("10_000, 100_000", "500, 2_000")]),
    ("keys = jax.random.split(jax.random.key(0), 1000)", [("1000)", "8)"), ("1000, 60, 4", "8, 60, 4")]),
    ("hsic.test(jax.random.key(0), x, y, method=\"permutation\", n_permutations=1000)", [("n_permutations=1000", "n_permutations=50")]),
]
SEVERAL_PROCESSES = "jax.distributed.initialize"  # tests/core/test_sweep.py runs that block's pattern over loopback


def _runnable(code: str) -> str:
    for marker, replacements in SMALLER:
        if marker in code:
            for old, new in replacements:
                assert old in code, f"the README block with {marker!r} no longer contains {old!r}; update SMALLER"
                code = code.replace(old, new)
    return code


def test_every_shrinking_rule_still_finds_its_block():
    for marker, _ in SMALLER:
        assert sum(marker in b for b in BLOCKS) == 1, marker


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=lambda i: f"block{i}")
def test_readme_block_runs_as_pasted(index, tmp_path):
    code = BLOCKS[index]
    if SEVERAL_PROCESSES in code:
        pytest.skip("a block for several processes or machines")
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    # a float64 request under float32 defaults (JAX truncates it, with a warning) fails the block
    run = subprocess.run([sys.executable, "-W", "error:Explicitly requested dtype", "-c", _runnable(code)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, f"README block {index}:\n{code}\n{run.stderr[-4000:]}"

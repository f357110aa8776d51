"""Speed of the LFRM sampler against a straightforward NumPy implementation of the same
sweep, measured in one run.

    python benchmarks/bench_lfrm.py [--only kinship nips234] [--sweeps 100] [--paper-scale] [--out PATH]

For each data set (kinship, global setting: R = 26, N = 104, K_max = 16; NIPS-234:
symmetric, N = 234, K_max = 48), with 20% of the cells held out as in
``bayeskit reproduce --only lfrm_link_prediction``:

* ours, one chain and 4 vmapped chains: seconds per sweep after compilation (compile
  time apart), sweeps per second, and effective samples per second of the log joint
  (numpyro's ESS over the post-burn-in half of the run);
* NumPy: the same sweep (row-wise flips scored by incremental row and column etas,
  birth-death move, HMC on (W, c) with the same mass and step, conjugate alpha and sigma_w) written
  directly in NumPy, timed over a few sweeps; it is the same Markov chain, so its ESS per
  sweep is ours and its ESS per second scales with its sweep rate;
* ``--paper-scale``: 1000 sweeps on NIPS-234, one chain (target <= 5 minutes).

Writes ``benchmarks/results/lfrm.json`` (or ``--out``). A run of some data sets (``--only``)
keeps the other data sets' entries and an earlier paper-scale run in the results file;
``dates`` says when each last ran.
"""

from __future__ import annotations

import os

os.environ.setdefault("BAYESKIT_COMPILATION_CACHE", "0")  # compile times are measured here, not read from a cache

import argparse
import json
import math
import platform
import time
from pathlib import Path

import jax
import numpy as np
from numpyro.diagnostics import effective_sample_size
from scipy.special import expit, gammaln

from bayeskit.datasets import holdout_split, load_relational
from bayeskit.relational import data as relational_data
from bayeskit.relational import lfrm
from bayeskit.relational.lfrm import gibbs

HERE = Path(__file__).resolve().parent
SETTINGS = {"kinship": dict(k_max=16, symmetric=False), "nips234": dict(k_max=48, symmetric=True)}


def problem(name: str):
    d = load_relational(name)
    Y, mask = d["Y"], d["mask"]
    if Y.ndim == 2:
        Y, mask = Y[None], mask[None]
    hp = lfrm.Hyperparams(**SETTINGS[name])
    train, _ = holdout_split(Y, mask, hp.symmetric)
    return relational_data.as_data(Y, train, hp.symmetric), hp


# ------------------------------------------------------------------ the NumPy sweep


def _np_etas(z, i, Zo, Wf, c):
    """Etas of row i's and column i's cells (the diagonal cell in the row)."""
    zW = np.einsum("k,rkl->rl", z, Wf)
    row = zW @ Zo.T + c[:, None]
    col = (Zo @ np.einsum("rkl,l->rk", Wf, z).T).T + c[:, None]
    row[:, i] = zW @ z + c
    return row, col


def _np_cells_ll(row, col, i, Y, M):
    ll = lambda y, eta: y * eta - np.logaddexp(0, eta)
    not_i = np.arange(row.shape[-1]) != i
    return np.sum(np.where(M[:, i, :], ll(Y[:, i, :], row), 0)) + np.sum(np.where(M[:, :, i] & not_i, ll(Y[:, :, i], col), 0))


def _np_row_ll(z, i, Zo, Wf, c, Y, M):
    return _np_cells_ll(*_np_etas(z, i, Zo, Wf, c), i, Y, M)


def _sym(W, symmetric):
    return np.triu(W) + np.swapaxes(np.triu(W, 1), 1, 2) if symmetric else W


def numpy_sweep(rng, Z, W, c, alpha, sigma_w, step_size, Y, M, hp):
    n, k_max = Z.shape
    for i in rng.permutation(n):
        z, Zo = Z[i].copy(), Z.copy()
        Zo[i] = 0
        m_o = Zo.sum(0)
        shared = m_o > 0
        Wf = _sym(W, hp.symmetric)
        row_gain, col_gain = np.einsum("rkl,jl->rkj", Wf, Zo), np.einsum("jl,rlk->rkj", Zo, Wf)
        row, col = _np_etas(z, i, Zo, Wf, c)
        ll = _np_cells_ll(row, col, i, Y, M)
        for k in range(k_max):  # incremental etas, as ours
            if not shared[k]:
                continue
            delta = 1.0 - 2.0 * z[k]
            z_flip = z.copy()
            z_flip[k] = 1 - z[k]
            row_f, col_f = row + delta * row_gain[:, k], col + delta * col_gain[:, k]
            row_f[:, i] = np.einsum("k,rkl,l->r", z_flip, Wf, z_flip) + c
            ll_f = _np_cells_ll(row_f, col_f, i, Y, M)
            lo = math.log(m_o[k]) - math.log(n - m_o[k]) + delta * (ll_f - ll)
            if (rng.random() < expit(lo)) != (z[k] > 0):
                z, row, col, ll = z_flip, row_f, col_f, ll_f
        free = ~shared
        counts = np.arange(k_max + 1)
        logp = np.where(counts <= free.sum(), counts * math.log(alpha / n) - gammaln(counts + 1), -np.inf)
        p = np.exp(logp - logp.max())
        n_new = rng.choice(k_max + 1, p=p / p.sum())
        z_new = z * shared + (free & (np.cumsum(free) <= n_new))
        touches = free[:, None] | free[None, :]
        W_new = np.where(touches, sigma_w * rng.normal(size=W.shape), W)
        if math.log(rng.random()) < _np_row_ll(z_new, i, Zo, _sym(W_new, hp.symmetric), c, Y, M) - ll:
            z, W = z_new, W_new
        Z[i] = z
    # HMC on (W, c) with the same mass as ours.
    Mf = M.astype(float)
    rate = np.clip((Y * Mf).sum((1, 2)) / np.maximum(Mf.sum((1, 2)), 1), 1e-3, 1 - 1e-3)
    v = rate * (1 - rate)
    touched = np.einsum("ik,rij,jl->rkl", Z, Mf, Z)
    if hp.symmetric:
        touched = touched + np.swapaxes(touched, 1, 2) - np.eye(k_max) * touched
    mass_w, mass_c = v[:, None, None] * touched + 1 / sigma_w**2, v * Mf.sum((1, 2)) + 1 / hp.bias_scale**2

    def potential_and_grad(W, c):
        Wf = _sym(W, hp.symmetric)
        eta = np.einsum("ik,rkl,jl->rij", Z, Wf, Z) + c[:, None, None]
        ll = np.sum(Mf * (Y * eta - np.logaddexp(0, eta)))
        resid = Mf * (Y - expit(eta))
        gW = np.einsum("ik,rij,jl->rkl", Z, resid, Z)
        if hp.symmetric:
            gW = np.triu(gW + np.swapaxes(gW, 1, 2) - np.eye(k_max) * gW)
        U = 0.5 * np.sum((W / sigma_w) ** 2) + 0.5 * np.sum((c / hp.bias_scale) ** 2) - ll
        return U, (W / sigma_w**2 - gW, c / hp.bias_scale**2 - resid.sum((1, 2)))

    eps = step_size * rng.uniform(0.8, 1.2)
    pw, pc = rng.normal(size=W.shape) * np.sqrt(mass_w), rng.normal(size=c.shape) * np.sqrt(mass_c)
    U0, (gw, gc) = potential_and_grad(W, c)
    K0 = 0.5 * (np.sum(pw**2 / mass_w) + np.sum(pc**2 / mass_c))
    W1, c1 = W.copy(), c.copy()
    for _ in range(hp.hmc_steps):
        pw, pc = pw - eps / 2 * gw, pc - eps / 2 * gc
        W1, c1 = W1 + eps * pw / mass_w, c1 + eps * pc / mass_c
        U1, (gw, gc) = potential_and_grad(W1, c1)
        pw, pc = pw - eps / 2 * gw, pc - eps / 2 * gc
    K1 = 0.5 * (np.sum(pw**2 / mass_w) + np.sum(pc**2 / mass_c))
    if math.log(rng.random()) < U0 + K0 - U1 - K1:
        W, c = W1, c1
    active = Z.sum(0) > 0
    alpha = rng.gamma(1 + active.sum()) / (1 + np.sum(1 / np.arange(1, n + 1)))
    used = np.broadcast_to((np.triu(np.ones((k_max, k_max), bool)) if hp.symmetric else True) & active[:, None] & active[None, :], W.shape)
    sigma_w = math.sqrt((1 + 0.5 * np.sum(W[used] ** 2)) / rng.gamma(1 + 0.5 * used.sum()))
    W = np.where(used, W, sigma_w * rng.normal(size=W.shape))
    return Z, W, c, alpha, sigma_w


# ------------------------------------------------------------------ timing


def time_ours(data, hp, sweeps: int, chains: int):
    keys = jax.random.split(jax.random.key(0), chains)
    start = jax.vmap(lambda k: gibbs.init(k, data, hp))(keys)
    run = jax.jit(lambda s, d: jax.lax.scan(lambda s, _: (jax.vmap(lambda t: gibbs.step(t, d, hp, sweeps // 2))(s),) * 2, s, None, length=sweeps))
    t = time.perf_counter()
    compiled = run.lower(start, data).compile()
    compile_s = time.perf_counter() - t
    t = time.perf_counter()
    _, trace = jax.block_until_ready(compiled(start, data))
    seconds = time.perf_counter() - t
    log_joint = np.asarray(trace.log_joint).T[:, sweeps // 2 :]  # (chain, draw)
    ess = float(np.sum(effective_sample_size(log_joint))) if log_joint.shape[1] > 3 else float("nan")
    return {"chains": chains, "sweeps": sweeps, "compile_s": compile_s, "seconds": seconds,
            "seconds_per_sweep": seconds / sweeps, "sweeps_per_second": chains * sweeps / seconds,
            "ess_log_joint": ess, "ess_per_second": ess / seconds}


def time_numpy(data, hp, sweeps: int):
    rng = np.random.default_rng(0)
    s = gibbs.init(jax.random.key(0), data, hp)
    Z, W, c = (np.asarray(a, np.float64) for a in (s.Z, s.W, s.reg.c))
    Y, M = np.asarray(data.Y, np.float64), np.asarray(data.mask)
    alpha, sigma_w, step = 1.0, 1.0, float(s.step_size)
    t = time.perf_counter()
    for _ in range(sweeps):
        Z, W, c, alpha, sigma_w = numpy_sweep(rng, Z, W, c, alpha, sigma_w, step, Y, M, hp)
    seconds = time.perf_counter() - t
    return {"sweeps": sweeps, "seconds": seconds, "seconds_per_sweep": seconds / sweeps}


def merged(path: Path, out: dict, parts) -> dict:
    """``out`` over the earlier results at ``path``: the data sets not run now and an earlier
    paper-scale run keep their entries, and ``dates`` says when each last ran ("unrecorded"
    for entries from before the dates were kept)."""
    old = json.loads(path.read_text()) if path.exists() else {}
    earlier = [*old.get("cases", {}), *(["paper_scale_nips234"] if "paper_scale_nips234" in old else [])]
    dates = {part: old.get("dates", {}).get(part, old.get("date", "unrecorded")) for part in earlier}
    return {**old, **out, "cases": {**old.get("cases", {}), **out["cases"]},
            "dates": {**dates, **{part: out["date"] for part in parts}}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    ap.add_argument("--sweeps", type=int, default=100)
    ap.add_argument("--numpy-sweeps", type=int, default=3)
    ap.add_argument("--paper-scale", action="store_true")
    ap.add_argument("--out", default=str(HERE / "results" / "lfrm.json"))
    args = ap.parse_args(argv)
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    out = {"machine": platform.platform(), "devices": [str(d) for d in jax.devices()], "date": time.strftime("%Y-%m-%d"),
           "cases": {}}
    for name in args.only:
        data, hp = problem(name)
        one = time_ours(data, hp, args.sweeps, 1)
        four = time_ours(data, hp, args.sweeps, 4)
        ref = time_numpy(data, hp, args.numpy_sweeps)
        case = {"ours_1_chain": one, "ours_4_chains": four, "numpy_1_chain": ref,
                "speedup_1_chain": ref["seconds_per_sweep"] / one["seconds_per_sweep"],
                "speedup_4_chains_per_chain_sweep": ref["seconds_per_sweep"] / (four["seconds_per_sweep"] / 4)}
        print(f"{name}: ours {one['seconds_per_sweep']:.3f} s/sweep (1 chain, compile {one['compile_s']:.1f} s), "
              f"{four['seconds_per_sweep']:.3f} s/sweep for 4 chains; NumPy {ref['seconds_per_sweep']:.2f} s/sweep; "
              f"speed-up {case['speedup_1_chain']:.1f}x (1 chain), {case['speedup_4_chains_per_chain_sweep']:.1f}x (4 chains); "
              f"ESS/s of the log joint {one['ess_per_second']:.2f} (1 chain), {four['ess_per_second']:.2f} (4 chains)", flush=True)
        out["cases"][name] = case
    if args.paper_scale:
        data, hp = problem("nips234")
        full = time_ours(data, hp, 1000, 1)
        out["paper_scale_nips234"] = full
        print(f"NIPS-234, 1000 sweeps, one chain: {full['seconds']:.0f} s after {full['compile_s']:.1f} s compile "
              f"(target <= 300 s)", flush=True)
    path.write_text(json.dumps(merged(path, out, [*args.only, *(["paper_scale_nips234"] if args.paper_scale else [])]), indent=2))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

"""The infinite relational model (Kemp, Tenenbaum, Griffiths, Yamada & Ueda, AAAI 2006)
for one type of object and R binary relations on it, by collapsed Gibbs sampling.

Model: a partition of the N objects from a Chinese restaurant process CRP(gamma); for
every relation r and ordered pair of clusters (a, b) a link probability
eta_rab ~ Beta(beta, beta); y_rij ~ Bernoulli(eta_r z_i z_j) on the observed cells. The
eta are integrated out, so a block with n1 ones and n0 zeros contributes
B(beta + n1, beta + n0) / B(beta, beta). For an undirected relation the blocks are
unordered ({a, b}) and each unordered pair of objects is counted once.

Each Gibbs step removes object i from its cluster and draws its cluster from

    Pr(z_i = a | .) proportional to n_a (existing) or gamma (one new cluster)
                    times prod over the blocks that i's cells touch of the ratio of marginals,

computed for all candidate clusters at once from block counts kept up to date. The
number of clusters is capped at ``c_max`` (static); a chain that uses them all is flagged.

Single-object moves rarely merge two clusters or split one: a chain stays in the partition
it first settles into (several restarts on the LFRM paper's data kept one 2-cluster
partition for hundreds of sweeps). Each sweep is therefore followed by ``split_merge``
Metropolis-Hastings split-merge moves, the IRM paper's remedy (Jain & Neal, 2004), here in
the sequentially allocated form (Dahl, 2005): pick two objects i and j; if they share a
cluster, propose to split it by seating i and j apart and the cluster's other members, in a
random order, each with i's or j's part with the probability of a Gibbs step among the
members seated so far; otherwise propose to merge their clusters. The acceptance ratio is
the ratio of the posteriors divided by the probability of the split's seating (a split), or
times the probability with which that seating would reproduce the current two clusters (a
merge).
"""

from __future__ import annotations

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import betaln
from jaxtyping import Array, Float, Int, PRNGKeyArray

from bayeskit.core import mcmc, validation
from bayeskit.core.mcmc import VectorisedKernel, run_chains
from bayeskit.core.notices import warn
from bayeskit.core.sampling import categorical_from_uniform
from bayeskit.relational.data import Data, as_data, by_relation, check_relations, per_relation


class Hyperparams(eqx.Module):
    """c_max: the most clusters (static); symmetric: undirected relations; gamma: CRP
    concentration; beta: symmetric Beta prior of the block link probabilities;
    split_merge: split-merge moves after each Gibbs sweep (static; 0 for Gibbs only)."""

    c_max: int = eqx.field(static=True, default=24)
    symmetric: bool = eqx.field(static=True, default=False)
    gamma: float = 1.0
    beta: float = 1.0
    split_merge: int = eqx.field(static=True, default=1)


class State(eqx.Module):
    z: Int[Array, " n"]
    rng_key: PRNGKeyArray
    log_joint: Array

    @property
    def sample(self) -> dict[str, Array]:
        n_clusters = jnp.sum(jnp.any(jax.nn.one_hot(self.z, self.z.shape[-1] + 1) > 0, axis=-2), axis=-1)
        return {"z": self.z, "n_clusters": n_clusters, "log_joint": self.log_joint}


def block_counts(z, data: Data, c_max: int, symmetric: bool):
    """(ones, zeros), each (R, C, C): observed cells per block; symmetric blocks merged
    into the upper triangle's orientation (both entries hold the unordered total)."""
    onehot = jax.nn.one_hot(z, c_max, dtype=data.Y.dtype)
    mask = data.mask.astype(data.Y.dtype)
    ones = jnp.einsum("ia,rij,jb->rab", onehot, data.Y * mask, onehot)
    total = jnp.einsum("ia,rij,jb->rab", onehot, mask, onehot)
    if symmetric:
        diag = jnp.eye(c_max, dtype=bool)
        ones = jnp.where(diag, ones, ones + jnp.swapaxes(ones, 1, 2))
        total = jnp.where(diag, total, total + jnp.swapaxes(total, 1, 2))
    return ones, total - ones


def _block_term(ones, zeros, beta):
    return betaln(beta + ones, beta + zeros) - betaln(beta, beta)


def log_joint(z, data: Data, hparams: Hyperparams) -> Array:
    """log p(Y, z): the CRP probability of the partition and the block marginals."""
    c = hparams.c_max
    ones, zeros = block_counts(z, data, c, hparams.symmetric)
    blocks = _block_term(ones, zeros, hparams.beta)
    if hparams.symmetric:
        blocks = jnp.where(jnp.triu(jnp.ones((c, c), bool)), blocks, 0.0)
    sizes = jnp.bincount(z, length=c).astype(data.Y.dtype)
    used = sizes > 0
    n = z.shape[0]
    log_crp = (used.sum() * jnp.log(hparams.gamma) + jnp.sum(jnp.where(used, jax.scipy.special.gammaln(sizes), 0.0))
               + jax.scipy.special.gammaln(hparams.gamma) - jax.scipy.special.gammaln(hparams.gamma + n))
    return log_crp + blocks.sum()


def _object_cells(i, z, data: Data, c_max: int):
    """Object i's observed cells by the other objects' clusters: row (i, j) and column
    (j, i) ones and totals (each (R, C), j != i), and the diagonal cell (R,)."""
    others = jax.nn.one_hot(z, c_max, dtype=data.Y.dtype).at[i].set(0.0)
    m = data.mask.astype(data.Y.dtype)
    row_m, col_m = m[:, i, :], m[:, :, i]
    row = (jnp.einsum("rj,ja->ra", data.Y[:, i, :] * row_m, others), jnp.einsum("rj,ja->ra", row_m, others))
    col = (jnp.einsum("rj,ja->ra", data.Y[:, :, i] * col_m, others), jnp.einsum("rj,ja->ra", col_m, others))
    diag = (data.Y[:, i, i] * m[:, i, i], m[:, i, i])
    return row, col, diag


class LogBetaTable(eqx.Module):
    """``log B(beta + n1, beta + n0) - log B(beta, beta)`` for whole counts n1, n0 by table
    lookup: ``lgamma(beta + k)`` and ``lgamma(2 beta + k)`` for k = 0 .. ``size`` - 1, so a
    Gibbs step's thousands of block terms cost gathers instead of log-gamma evaluations.
    Block counts are cell counts, whole numbers below ``size`` = N^2 + 1."""

    single: Array
    double: Array

    @staticmethod
    def build(beta, size: int, dtype) -> LogBetaTable:
        k = jnp.arange(size, dtype=dtype)
        single, double = jax.scipy.special.gammaln(beta + k), jax.scipy.special.gammaln(2 * beta + k)
        return LogBetaTable(single - single[0], double - double[0])

    def __call__(self, n1: Array, n0: Array) -> Array:
        i1, i0 = jnp.rint(n1).astype(jnp.int32), jnp.rint(n0).astype(jnp.int32)
        return self.single[i1] + self.single[i0] - self.double[i1 + i0]


def _candidate_scores(ones, zeros, row, col, diag, f, symmetric: bool):
    """log of the block-marginal ratio for putting object i into each cluster a, given
    the counts without i (row, col: i's cells by the others' clusters; diag: (i, i));
    ``f(n1, n0)`` is a block's log marginal ratio (a :class:`LogBetaTable`)."""
    (r1, rt), (c1, ct), (d1, dt) = row, col, diag
    eye = jnp.eye(ones.shape[-1], dtype=bool)
    base = f(ones, zeros)
    if symmetric:  # unordered blocks {a, b}: row and column cells join the same block
        gain = f(ones + (r1 + c1)[:, None, :], zeros + (rt - r1 + ct - c1)[:, None, :]) - base
    else:  # block (a, b) gains the row cells, block (b, a) the column cells
        gain = (f(ones + r1[:, None, :], zeros + (rt - r1)[:, None, :]) - base
                + jnp.swapaxes(f(ones + c1[:, :, None], zeros + (ct - c1)[:, :, None]) - base, 1, 2))
    d_ones, d_zeros = jnp.diagonal(ones, axis1=1, axis2=2), jnp.diagonal(zeros, axis1=1, axis2=2)
    self_gain = (f(d_ones + r1 + c1 + d1[:, None], d_zeros + (rt - r1) + (ct - c1) + (dt - d1)[:, None])
                 - f(d_ones, d_zeros))
    return jnp.sum(jnp.where(eye, 0.0, gain), axis=(0, 2)) + self_gain.sum(0)


def _move(counts, a, cells, sign, symmetric: bool):
    """Add (sign = 1) or remove (sign = -1) object i's cells as a member of cluster a."""
    ones, zeros = counts
    out = []
    for n, (row, col, diag) in ((ones, cells[0]), (zeros, cells[1])):
        if symmetric:
            v = row + col
            n = n.at[:, a, :].add(sign * v).at[:, :, a].add(sign * v).at[:, a, a].add(sign * (diag - v[:, a]))
        else:
            n = n.at[:, a, :].add(sign * row).at[:, :, a].add(sign * col).at[:, a, a].add(sign * diag)
        out.append(n)
    return tuple(out)


def _ones_and_zeros(row, col, diag):
    """Object i's cells (:func:`_object_cells`) as the ones and the zeros :func:`_move` adds."""
    return (row[0], col[0], diag[0]), (row[1] - row[0], col[1] - col[0], diag[1] - diag[0])


def _update_object(u, i, z, counts, table: LogBetaTable, data: Data, hparams: Hyperparams):
    """Object i's cluster drawn from its Gibbs conditional by the inverse CDF at the uniform ``u``."""
    c = hparams.c_max
    row, col, diag = _object_cells(i, z, data, c)
    cells = _ones_and_zeros(row, col, diag)
    ones, zeros = _move(counts, z[i], cells, -1.0, hparams.symmetric)
    sizes = jnp.bincount(z.at[i].set(c), length=c + 1)[:c]
    scores = _candidate_scores(ones, zeros, row, col, diag, table, hparams.symmetric)
    empty = sizes == 0
    first_empty = empty & (jnp.cumsum(empty) == 1)
    log_prior = jnp.where(sizes > 0, jnp.log(jnp.maximum(sizes, 1)), jnp.where(first_empty, jnp.log(hparams.gamma), -jnp.inf))
    a = categorical_from_uniform(u, log_prior + scores).astype(z.dtype)
    return z.at[i].set(a), _move((ones, zeros), a, cells, 1.0, hparams.symmetric)


def _table(z, data: Data, hparams: Hyperparams) -> LogBetaTable:
    return LogBetaTable.build(hparams.beta, z.shape[0] ** 2 + 1, data.Y.dtype)


def sweep(key, z, data: Data, hparams: Hyperparams, table: LogBetaTable | None = None):
    """One Gibbs sweep over the objects in a random order (block counts kept up to date)."""
    n = z.shape[0]
    k_perm, k_obj = jax.random.split(key)
    order = jax.random.permutation(k_perm, n)
    u = jax.random.uniform(k_obj, (n,), data.Y.dtype)  # one per object, drawn at once
    counts = block_counts(z, data, hparams.c_max, hparams.symmetric)
    table = _table(z, data, hparams) if table is None else table

    def body(t, carry):
        return _update_object(u[t], order[t], *carry, table, data, hparams)

    return jax.lax.fori_loop(0, n, body, (z, counts))[0]


def _seat(u, z_seated, counts, members, order, a, b, forced_b, forced, table: LogBetaTable, data: Data,
          hparams: Hyperparams):
    """Seat the ``members`` (absent from ``z_seated``, label ``c_max``) one by one in
    ``order`` with cluster ``a`` or ``b``, each by the Gibbs probabilities among the objects
    seated so far (``counts``: their block counts), drawn (the t-th seated with the uniform
    ``u[t]``), or where ``forced`` as ``forced_b`` (N,) says. Returns the labels and the log
    probability of the seating."""
    c = hparams.c_max

    def body(t, carry):
        z, counts, log_q = carry
        k = order[t]
        row, col, diag = _object_cells(k, z, data, c)
        cells = _ones_and_zeros(row, col, diag)
        scores = _candidate_scores(*counts, row, col, diag, table, hparams.symmetric)
        sizes = jnp.bincount(z, length=c + 1)[:c]
        logits = jnp.stack([jnp.log(sizes[a]) + scores[a], jnp.log(sizes[b]) + scores[b]])
        log_p = jax.nn.log_softmax(logits)
        to_b = jnp.where(forced, forced_b[k], u[t] < jnp.exp(log_p[1]))
        label = jnp.where(to_b, b, a).astype(z.dtype)
        seated = members[k]
        moved = _move(counts, label, cells, 1.0, hparams.symmetric)
        return (jnp.where(seated, z.at[k].set(label), z), jax.tree.map(lambda x, y: jnp.where(seated, x, y), moved, counts),
                log_q + jnp.where(seated, jnp.where(to_b, log_p[1], log_p[0]), 0.0))

    return jax.lax.fori_loop(0, z_seated.shape[0], body, (z_seated, counts, jnp.zeros((), data.Y.dtype)))


def split_merge(key, z, data: Data, hparams: Hyperparams, table: LogBetaTable | None = None):
    """One Metropolis-Hastings split-merge move (module docstring); returns (z, accepted)."""
    table = _table(z, data, hparams) if table is None else table
    z, _, accepted = _split_merge(key, z, log_joint(z, data, hparams), table, data, hparams)
    return z, accepted


def _split_merge(key, z, log_joint_z, table: LogBetaTable, data: Data, hparams: Hyperparams):
    """:func:`split_merge` given the log joint of ``z``; returns (z, its log joint, accepted)."""
    n, c = z.shape[0], hparams.c_max
    k_order, k_u = jax.random.split(key)
    u = jax.random.uniform(k_u, (n + 3,), data.Y.dtype)  # i, j, the acceptance, then one per seated object
    i = jnp.minimum(jnp.floor(u[0] * n), n - 1).astype(jnp.int32)
    j = (i + 1 + jnp.minimum(jnp.floor(u[1] * (n - 1)), max(n - 2, 0)).astype(jnp.int32)) % n  # a second object, uniformly
    objects = jnp.arange(n)
    same = z[i] == z[j]
    members = ((z == z[i]) | (z == z[j])) & (objects != i) & (objects != j)
    sizes = jnp.bincount(z, length=c)
    room = jnp.any(sizes == 0)
    a, b = z[i], jnp.where(same, jnp.argmax(sizes == 0), z[j]).astype(z.dtype)
    z_seated = jnp.where(members, c, z).at[i].set(a).at[j].set(b)
    counts = block_counts(z_seated, data, c, hparams.symmetric)
    order = jax.random.permutation(k_order, n)
    # a split draws the seating; a merge replays the current two clusters' seating
    split, _, log_q = _seat(u[3:], z_seated, counts, members, order, a, b, z == z[j], ~same, table, data, hparams)
    proposal = jnp.where(same, split, jnp.where(z == z[j], a, z))
    log_joint_proposal = log_joint(proposal, data, hparams)
    log_ratio = log_joint_proposal - log_joint_z + jnp.where(same, -log_q, log_q)
    log_ratio = jnp.where(same & ~room, -jnp.inf, log_ratio)  # no free label for the second part
    accept = (jnp.log(u[2]) < log_ratio) & (i != j)  # one object: no move
    return jnp.where(accept, proposal, z), jnp.where(accept, log_joint_proposal, log_joint_z), accept


def init(key, data: Data, hparams: Hyperparams, z=None) -> State:
    """Objects assigned uniformly at random to ``min(c_max, N) // 2`` clusters (from a
    single cluster Gibbs moves rarely open a new one), unless ``z`` is given."""
    n = data.Y.shape[1]
    k_z, k_next = jax.random.split(key)
    if z is None:
        z = jax.random.randint(k_z, (n,), 0, max(1, min(hparams.c_max, n) // 2))
    z = jnp.asarray(z, jnp.int32)
    return State(z, k_next, log_joint(z, data, hparams))


def step(state: State, data: Data, hparams: Hyperparams) -> State:
    """A Gibbs sweep, then ``hparams.split_merge`` split-merge moves."""
    k_next, k_sweep, k_moves = jax.random.split(state.rng_key, 3)
    table = _table(state.z, data, hparams)
    z = sweep(k_sweep, state.z, data, hparams, table)
    lj = log_joint(z, data, hparams)
    if hparams.split_merge:  # static: Gibbs alone traces no move

        def move(t, carry):
            return _split_merge(jax.random.fold_in(k_moves, t), *carry, table, data, hparams)[:2]

        z, lj = jax.lax.fori_loop(0, hparams.split_merge, move, (z, lj))
    return State(z, k_next, lj)


class IRMGibbs(VectorisedKernel):
    """The collapsed Gibbs sampler as a numpyro kernel (``run(key, data)``)."""

    sample_stats = ()

    def __init__(self, hparams: Hyperparams | None = None, data_per_chain: bool = False):
        super().__init__(Hyperparams() if hparams is None else hparams, data_per_chain)

    def init_one(self, key, init_params, data):
        return init(key, data, self.hparams, z=init_params)

    def step_one(self, state, data):
        return step(state, data, self.hparams)


def sample_posterior(key, Y, mask=None, hparams: Hyperparams | None = None, *, num_warmup: int = 200,
                     num_samples: int = 800, num_chains: int = 1, thinning: int = 1, separate_relations: bool = False,
                     progress: bool = False) -> dict:
    """Run vectorised IRM chains on Y (R, N, N) or (N, N) with training ``mask``; draws
    (chain, draw, ...) of z (cluster labels), n_clusters and log_joint. With
    ``separate_relations`` each relation has its own partition (one vectorised call) and
    the draws are (relation, chain, draw, ...). ``progress`` shows a bar over the sweeps
    (off under the ``CI`` environment variable)."""

    hparams = hparams or Hyperparams()
    validation.check_int_in("c_max", hparams.c_max, 1)
    validation.check_int_in("split_merge", hparams.split_merge, 0)
    for name in ("gamma", "beta"):
        value = getattr(hparams, name)
        if not np.isfinite(float(value)) or not float(value) > 0:
            raise ValueError(f"{name} must be a positive finite number; got {value!r}.")
    Y, mask = check_relations(Y, mask, hparams.symmetric)
    data = as_data(Y, mask, hparams.symmetric)
    if separate_relations:
        data = per_relation(data, num_chains)
    samples = run_chains(IRMGibbs(hparams, separate_relations), key, data, num_warmup=num_warmup, num_samples=num_samples,
                         num_chains=num_chains * (Y.shape[0] if separate_relations else 1), thinning=thinning, progress=progress)
    if separate_relations:
        samples = by_relation(samples, Y.shape[0])
    if int(np.max(np.asarray(samples["n_clusters"]))) >= hparams.c_max:
        warn(f"a chain used all c_max = {hparams.c_max} clusters; raise c_max.", RuntimeWarning)
    return samples


def predict_proba(samples: dict, Y, mask, hparams: Hyperparams, chunk_size: int = 32) -> Float[Array, "r n n"]:
    """Posterior predictive Pr(y_rij = 1) = (beta + n1) / (2 beta + n1 + n0) of the
    cell's block, averaged over the draws ((chain, draw, N), or (relation, chain, draw, N)
    from separate per-relation partitions)."""
    Y, mask = check_relations(Y, mask)
    z = samples["z"]
    if validation.is_concrete(z) and np.size(z) and int(np.max(z)) >= hparams.c_max:  # its blocks would be dropped
        raise ValueError(f"the draws use cluster {int(np.max(z))} but hparams.c_max is {hparams.c_max}: pass the "
                         "hyperparameters the draws were sampled with.")
    if jnp.ndim(samples["z"]) == 4:
        return jnp.concatenate([_predict_proba(samples["z"][r], as_data(Y[r:r + 1], mask[r:r + 1], hparams.symmetric), hparams,
                                               chunk_size) for r in range(Y.shape[0])])
    return _predict_proba(samples["z"], as_data(Y, mask, hparams.symmetric), hparams, chunk_size)


@partial(jax.jit, static_argnames="chunk_size")
def _predict_proba(z: Array, data: Data, hparams: Hyperparams, chunk_size: int) -> Float[Array, "r n n"]:
    """:func:`predict_proba` of one partition's draws (..., N), as one compiled program."""
    z = z.reshape(-1, z.shape[-1])

    def one(z):
        ones, zeros = block_counts(z, data, hparams.c_max, hparams.symmetric)
        p = (hparams.beta + ones) / (2 * hparams.beta + ones + zeros)
        onehot = jax.nn.one_hot(z, hparams.c_max, dtype=p.dtype)
        return jnp.einsum("ia,rab,jb->rij", onehot, p, onehot)

    return jax.lax.map(one, z, batch_size=chunk_size).mean(0)


def to_inference_data(samples: dict):
    """ArviZ ``InferenceData`` of the draws of :func:`sample_posterior` (chain, draw, ...),
    with IRMGibbs's sampler statistics apart; needs ``arviz``."""
    return mcmc.to_inference_data(samples, IRMGibbs.sample_stats)

"""numpyro glue for the hand-written samplers: a kernel that runs one chain's pure
``step`` or a vectorised batch of chains, a driver returning draws as (chain, draw, ...),
convergence diagnostics of those draws, and their conversion to ArviZ.
"""

from __future__ import annotations

from abc import abstractmethod
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from numpyro.diagnostics import effective_sample_size, split_gelman_rubin
from numpyro.infer.mcmc import MCMCKernel

from bayeskit.core import executables
from bayeskit.core import progress as _progress


def _is_batch_of_keys(key) -> bool:
    if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key):
        return jnp.ndim(key) > 0
    return key.ndim > 1


class VectorisedKernel(MCMCKernel):
    """A numpyro kernel from ``init_one(key, init_params, *model_args) -> state`` and
    ``step_one(state, *model_args) -> state`` (the key lives in the state). With
    ``chain_method="vectorized"`` numpyro hands ``init`` a batch of keys; the chains are
    then initialised and stepped under ``vmap`` (``init_params``, if given, then has a
    leading chain axis, as numpyro's own kernels expect). With ``data_per_chain`` every
    model argument has a leading chain axis too, so each chain runs on its own data set
    (independent models in one vectorised call). The state's ``sample`` property is what
    each draw records; ``self.num_warmup`` is known to ``step_one``. A kernel names the
    records that are sampler statistics (acceptance, births, ...) in ``sample_stats``.
    A kernel is built as ``Kernel(hparams, data_per_chain)``: :func:`run_chains` rebuilds it
    inside its compiled program with the hyperparameters as traced values.

    On several local devices the batched state's chain axis is laid over them (a
    ``NamedSharding`` constraint on every init and step), so XLA runs each device's share
    of the chains there: restarts scale out with no change to the caller."""

    sample_field = "sample"
    sample_stats: tuple[str, ...] = ()  # draw records that are sampler statistics, not parameters

    def __init__(self, hparams, data_per_chain: bool = False):
        self.hparams = hparams
        self._batched = False
        self.num_warmup = 0
        self.data_per_chain = data_per_chain

    @abstractmethod
    def init_one(self, key, init_params, *model_args):
        """The starting state of one chain."""

    @abstractmethod
    def step_one(self, state, *model_args):
        """One transition of one chain (pure; the key is in the state)."""

    def _one_chain(self, model_args):
        return jax.tree.map(lambda a: a[0], model_args) if self.data_per_chain else model_args

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        self.num_warmup = num_warmup
        self._batched = _is_batch_of_keys(rng_key)
        if not self._batched:
            return self.init_one(rng_key, init_params, *self._one_chain(model_args))
        data_axes = (0 if self.data_per_chain else None,) * len(model_args)
        if init_params is None:
            return _spread(jax.vmap(lambda k, *a: self.init_one(k, None, *a), (0, *data_axes))(rng_key, *model_args))
        return _spread(jax.vmap(lambda k, p, *a: self.init_one(k, p, *a), (0, 0, *data_axes))(rng_key, init_params, *model_args))

    def sample(self, state, model_args, model_kwargs):
        if not self._batched:
            return self.step_one(state, *self._one_chain(model_args))
        data_axes = (0 if self.data_per_chain else None,) * len(model_args)
        return _spread(jax.vmap(lambda s, *a: self.step_one(s, *a), (0, *data_axes))(state, *model_args))


def _spread(state):
    """Constrain a batch of chain states to lie along this process's devices: axis 0 split
    over the most devices that divide the number of chains evenly; the identity on one."""
    devices = jax.local_devices()
    n_chains = jax.tree.leaves(state)[0].shape[0]
    n = max(d for d in range(1, len(devices) + 1) if n_chains % d == 0)
    if n == 1:
        return state
    sharding = NamedSharding(Mesh(np.asarray(devices[:n]), ("chain",)), PartitionSpec("chain"))
    return jax.lax.with_sharding_constraint(state, sharding)


def run_chains(kernel: VectorisedKernel, key, *model_args, num_warmup: int, num_samples: int, num_chains: int = 1,
               thinning: int = 1, init_params=None, progress: bool = False) -> dict:
    """Run ``num_chains`` vectorised chains of ``kernel``; draws as (chain, draw, ...).

    The same transitions as numpyro's ``MCMC(kernel, chain_method="vectorized")`` (chain c
    starts from ``split(key, num_chains)[c]``; one chain from ``key``), compiled once per
    kernel type, static settings and shapes: the kernel's continuous hyperparameters and
    the data are values, so a new prior or new data of the same shapes compiles nothing.
    ``num_samples`` transitions follow the warm-up and every ``thinning``-th is kept. A 2-D
    ``init_params`` (one start for all chains) is repeated along the chain axis. With
    ``kernel.data_per_chain`` the model arguments carry the chain axis.

    ``progress`` (off under ``CI``) shows a bar over the transitions. The chains then run
    in about ``PROGRESS_STEPS`` segments of one compiled program, and the bar moves on the
    host between them: the same draws as without the bar, no host callback inside the
    program (one would change its key in the persistent compilation cache in every
    process), and a bar that compiles once, not once per call."""
    if init_params is not None and num_chains > 1:
        init_params = jax.tree.map(lambda a: jnp.broadcast_to(a, (num_chains,) + jnp.shape(a)[-2:]) if jnp.ndim(a) == 2 else a, init_params)
    hparams = jax.tree.map(lambda v: v if isinstance(v, jax.Array) else np.asarray(v), kernel.hparams)
    static = dict(kernel_type=type(kernel), data_per_chain=kernel.data_per_chain, num_warmup=num_warmup, num_chains=num_chains)
    if not _progress.enabled(progress):
        return _run_program(hparams, key, model_args, init_params, num_samples=num_samples, thinning=thinning, **static)
    return _run_in_segments(hparams, key, model_args, init_params, num_samples=num_samples, thinning=thinning, **static)


PROGRESS_STEPS = 50  # segments of a run with a progress bar


def _kernel(hparams, kernel_type, data_per_chain, num_warmup, num_chains) -> VectorisedKernel:
    """The kernel inside a compiled program, as its ``init`` leaves it."""
    kernel = kernel_type(hparams, data_per_chain)
    kernel.num_warmup, kernel._batched = num_warmup, num_chains > 1
    return kernel


def _start(kernel, key, model_args, init_params, num_warmup, num_chains):
    keys = jax.random.split(key, num_chains) if num_chains > 1 else key
    return kernel.init(keys, num_warmup, init_params, model_args, {})


@partial(jax.jit, static_argnames="num_chains")
def _layout(draws, num_chains):
    """(draw, [chain], ...) as (chain, draw, ...), one program (not an eager op per leaf)."""
    if num_chains > 1:
        return jax.tree.map(lambda a: jnp.swapaxes(a, 0, 1), draws)
    return jax.tree.map(lambda a: a[None], draws)


def _starting(hparams, key, model_args, init_params, kernel_type, data_per_chain, num_warmup, num_kept, num_chains):
    """The kernel, the chains' starting state and an empty buffer for ``num_kept`` draws."""
    kernel = _kernel(hparams, kernel_type, data_per_chain, num_warmup, num_chains)
    state = _start(kernel, key, model_args, init_params, num_warmup, num_chains)
    buffer = jax.tree.map(lambda a: jnp.zeros((num_kept,) + a.shape, a.dtype), getattr(state, kernel.sample_field))
    return kernel, state, buffer


def _transitions(kernel, state, buffer, model_args, start, stop, num_warmup, thinning):
    """Transitions ``start .. stop - 1`` in one loop (one traced copy of the kernel's step),
    each ``thinning``-th after the warm-up written into its slot of ``buffer``."""
    def transition(i, carry):
        state, buffer = carry
        state = kernel.sample(state, model_args, {})
        after = i - num_warmup + 1  # sampling transitions done, this one included
        keep = (after > 0) & (after % thinning == 0)
        slot = jnp.maximum(after // thinning - 1, 0)
        record = getattr(state, kernel.sample_field)
        buffer = jax.tree.map(lambda b, r: b if b.shape[0] == 0 else b.at[slot].set(jnp.where(keep, r, b[slot])), buffer, record)
        return state, buffer

    return jax.lax.fori_loop(start, stop, transition, (state, buffer))


def _run(hparams, key, model_args, init_params, *, kernel_type, data_per_chain, num_warmup, num_samples, num_chains, thinning):
    num_kept = num_samples // thinning
    kernel, state, buffer = _starting(hparams, key, model_args, init_params, kernel_type, data_per_chain, num_warmup, num_kept,
                                      num_chains)
    _, buffer = _transitions(kernel, state, buffer, model_args, 0, num_warmup + num_kept * thinning, num_warmup, thinning)
    return _layout(buffer, num_chains)


@partial(executables.jit, static_argnames=("kernel_type", "data_per_chain", "num_warmup", "num_kept", "num_chains"))
def _init_segments(hparams, key, model_args, init_params, *, kernel_type, data_per_chain, num_warmup, num_kept, num_chains):
    """The chains' starting state and an empty buffer for ``num_kept`` draws."""
    return _starting(hparams, key, model_args, init_params, kernel_type, data_per_chain, num_warmup, num_kept, num_chains)[1:]


def _segment(hparams, state, buffer, model_args, start, stop, *, kernel_type, data_per_chain, num_warmup, num_chains, thinning):
    """Transitions ``start .. stop - 1`` written into ``buffer`` as :func:`_transitions`
    does (``start`` and ``stop`` traced, so every segment is one program)."""
    kernel = _kernel(hparams, kernel_type, data_per_chain, num_warmup, num_chains)
    return _transitions(kernel, state, buffer, model_args, start, stop, num_warmup, thinning)


# ``_run`` and ``_segment`` at XLA's default optimisation level, not as loop programs
# (``bayeskit.core.xla.loop_program`` says why)
_run_program = executables.jit(_run, static_argnames=("kernel_type", "data_per_chain", "num_warmup", "num_samples", "num_chains",
                                                      "thinning"))
_segment_program = executables.jit(_segment, static_argnames=("kernel_type", "data_per_chain", "num_warmup", "num_chains",
                                                              "thinning"), donate_argnums=(1, 2))


def _run_in_segments(hparams, key, model_args, init_params, *, kernel_type, data_per_chain, num_warmup, num_samples, num_chains,
                     thinning):
    from tqdm.auto import tqdm

    static = dict(kernel_type=kernel_type, data_per_chain=data_per_chain, num_warmup=num_warmup, num_chains=num_chains)
    num_kept = num_samples // thinning
    total = num_warmup + num_kept * thinning
    state, buffer = _init_segments(hparams, key, model_args, init_params, num_kept=num_kept, **static)
    size = max(1, -(-total // PROGRESS_STEPS))
    with tqdm(total=total, desc="sample", leave=True) as bar:
        for start in range(0, total, size):
            stop = min(total, start + size)
            state, buffer = _segment_program(hparams, state, buffer, model_args, start, stop, thinning=thinning, **static)
            jax.block_until_ready(jax.tree.leaves(state)[0])
            bar.update(stop - start)
    return _layout(buffer, num_chains)


def diagnostics(samples: dict, names=None) -> dict:
    """Split R-hat and effective sample size of the named scalar draws (chain, draw), e.g.
    the log joint and K+ (default: every scalar draw of ``samples``, those laid out (chain,
    draw)); with one chain R-hat is NaN, and both are NaN for constant draws or fewer than
    four draws per chain."""
    out = {}
    for name in names if names is not None else [k for k, v in samples.items() if np.ndim(v) == 2]:
        x = np.asarray(samples[name], np.float64)
        if x.ndim != 2:
            raise ValueError(f"{name} must be scalar draws laid out (chain, draw); got shape {x.shape}.")
        enough = x.shape[1] >= 4 and np.ptp(x) > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            rhat = float(split_gelman_rubin(x)) if enough and x.shape[0] > 1 else float("nan")
            ess = float(effective_sample_size(x)) if enough else float("nan")
        out[name] = {"r_hat": rhat, "ess": ess, "mean": float(x.mean())}
    return out


def to_inference_data(samples: dict, sample_stats=(), log_joint: str | None = "log_joint"):
    """ArviZ ``InferenceData`` of draws laid out (chain, draw, ...): the records named in
    ``sample_stats`` (a kernel's ``sample_stats``) as ``sample_stats``, with the log joint
    as ``lp`` when there is one, everything else, the log joint included, as
    ``posterior``. Needs ``arviz`` (``pip install bayeskit[arviz]``)."""
    try:
        import arviz
    except ImportError as err:
        raise ImportError("to_inference_data needs arviz: pip install 'bayeskit[arviz]'.") from err
    arrays = {k: np.asarray(v) for k, v in samples.items()}
    stats = {k: v for k, v in arrays.items() if k in sample_stats}
    if log_joint in arrays:
        stats["lp"] = arrays[log_joint]
    posterior = {k: v for k, v in arrays.items() if k not in sample_stats}
    return arviz.from_dict(posterior=posterior, sample_stats=stats)

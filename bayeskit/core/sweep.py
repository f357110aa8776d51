"""Sweeps: one fit over a batch of keys, data sets and hyperparameters, sharded over devices.

``sweep(fit_fn, keys, datasets, hparams)`` runs ``fit_fn(key, *dataset, hparams)`` for every
element of a batch as one ``jit(vmap(fit_fn))``. The batch axis is laid out over all devices
with a ``NamedSharding`` (each device fits its own slice; nothing is communicated while the
fits run), and within a device the elements are vmapped ``chunk_size`` at a time when they
do not fit in memory at once. The results come back to the host
(NumPy) with a status per element.

The same call runs on several machines: start every process with
``jax.distributed.initialize(...)``; the devices of all processes then form one mesh, each
process fits the elements on its own devices, and every process receives all results. The
inputs are either the whole batch on every process (the default: each process takes its
devices' rows), or, with ``process_local=True``, this process's share of the batch (as in
``jax.make_array_from_process_local_data``), in process order.

Elements are independent, so a sharded sweep gives the same numbers as an unsharded
``vmap`` up to the floating-point effects of a different batch size inside XLA (and, for a
fit whose batching rule couples the elements, such as the graphical lasso's lockstep
sweeps, up to its tolerance). Fit functions must not raise under ``vmap``: call them with
``throw=False`` and read the status.

On a CPU split into more virtual devices (``--xla_force_host_platform_device_count``) than
it has cores, XLA's CPU runtime has deadlocked on large vmapped loops (FAST-MCD's 500 starts
on two virtual devices of two cores). Virtual devices are for testing the layout.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import PyTree

from bayeskit.core import loop
from bayeskit.core.chunks import map_blocks
from bayeskit.core.status import Status


class Swept(NamedTuple):
    """The outcome of a :func:`sweep`.

    Attributes
    ----------
    results : PyTree
        ``fit_fn``'s output with a leading batch axis, as NumPy arrays on the host
        (random keys come back as JAX key arrays).
    status : Status
        Per element: the fit's own ``status`` when its result has one (a ``FitResult``),
        otherwise ``successful`` where every floating output is finite and ``nonfinite``
        elsewhere.
    """

    results: PyTree
    status: Status

    @property
    def ok(self) -> np.ndarray:
        """True for the elements that succeeded or stopped at ``max_iter``."""
        return np.asarray((self.status == Status.successful) | (self.status == Status.max_iter_reached))


def default_mesh() -> Mesh:
    """A one-axis mesh named ``batch`` over every device of every process."""
    return jax.make_mesh((jax.device_count(),), ("batch",))


def sweep(
    fit_fn: Callable[..., PyTree],
    keys=None,
    datasets: tuple = (),
    hparams: PyTree = None,
    *,
    in_axes: tuple = (0, 0),
    mesh: Mesh | None = None,
    chunk_size: int | None = None,
    process_local: bool = False,
    compiler_options: dict | None = None,
) -> Swept:
    """Run ``fit_fn(key, *dataset, hparams)`` for every element of a batch.

    Parameters
    ----------
    fit_fn : callable
        ``fit_fn(key, *dataset, hparams) -> PyTree`` for one element; without ``keys``
        the key is left out, and without ``hparams`` so are they. Pure and traceable.
    keys : key array of shape (B,), optional
        One typed key per element (``jax.random.split(key, B)``).
    datasets : tuple of arrays (or PyTrees)
        The data arguments; batched ones have the batch axis first.
    hparams : PyTree, optional
        The hyperparameters; batched leaves have the batch axis first.
    in_axes : (axis of datasets, axis of hparams)
        0 (batched) or None (the same for every element), as in ``jax.vmap``; the first
        may be a tuple with one entry per data argument, the second a PyTree prefix of
        ``hparams`` with 0 or None leaves (:func:`hparam_axes` builds one that batches
        named fields). With 0 for the hyperparameters, their scalar leaves (which have no
        batch axis) are shared by every element, so a batch of one field's values sweeps
        that field: ``eqx.tree_at(lambda h: h.sigma_z, hp, jnp.array([0.05, 0.1, 0.2]))``.
    mesh : Mesh, optional
        The devices to shard over; the batch is split over all of its axes. Default: one
        axis over every device (:func:`default_mesh`).
    chunk_size : int, optional
        Elements vmapped together on one device; the device's elements run in sequential
        chunks of this size (:func:`bayeskit.core.chunks.map_blocks`). Default: all at once.
    process_local : bool
        The batched inputs hold only this process's share of the batch (under
        ``jax.distributed``); every process must pass the same number of elements, and the
        mesh must hold as many devices of each process, each process's together and in
        process order (:func:`default_mesh` does).
    compiler_options : dict, optional
        XLA options (scalar values) of the compiled program, as ``jax.jit``'s (e.g.
        :func:`bayeskit.core.xla.loop_program` for a fit that is a loop of small steps).
        A sweep runs at the top level (it gathers its results on the host; inside ``jit``
        or ``vmap`` it is refused), where JAX takes them.
    """
    mesh = default_mesh() if mesh is None else mesh
    _check_arguments(keys, datasets, hparams, chunk_size)
    datasets = tuple(datasets)
    if not isinstance(in_axes, tuple) or len(in_axes) != 2:
        raise ValueError("in_axes must be a pair (axis of the datasets, axis of the hyperparameters), each 0 (batched) or "
                         "None, the first possibly a tuple with one entry per data argument, the second a PyTree prefix of the "
                         f"hyperparameters; got {in_axes!r}.")
    data_axes, hp_axis = in_axes
    if not isinstance(data_axes, tuple):
        data_axes = (data_axes,) * len(datasets)
    if len(data_axes) != len(datasets):
        raise ValueError(f"in_axes[0] has {len(data_axes)} entries for {len(datasets)} data arguments.")
    if any(a not in (0, None) for a in data_axes):
        raise ValueError(f"in_axes entries must be 0 or None, got {in_axes}.")
    hp_batched = _leaf_axes(hparams, hp_axis)  # before unwrapping: a key's shape is that of its key array
    keys, *datasets, hparams = _unwrap_keys((keys, *datasets, hparams))
    hp_leaves, hp_def = jax.tree.flatten(hparams)  # one leaf per key still (its raw data)
    args = (keys, *datasets, [x for x, b in zip(hp_leaves, hp_batched) if b], [x for x, b in zip(hp_leaves, hp_batched) if not b])
    batched = (keys is not None, *(a == 0 for a in data_axes), any(hp_batched), False)
    if not any(batched):
        shared = " (the hyperparameters' scalar leaves are shared by every element: a batched field needs its batch axis first)"
        raise ValueError("nothing is batched: pass keys, or a data set or hyperparameters with in_axes 0"
                         + (shared if hparams is not None and _is_zero(hp_axis) else "") + ".")

    n = _batch_size(args, batched)
    n_shards = mesh.devices.size
    if process_local:
        _check_process_order(mesh)
        sizes = multihost_utils.process_allgather(np.asarray(n))
        if np.any(sizes != n):
            raise ValueError(f"with process_local=True every process must pass the same batch size, got {sizes.tolist()}.")
        n_local_shards = n_shards // jax.process_count()
        padded = -(-n // n_local_shards) * n_local_shards
    else:
        padded = -(-n // n_shards) * n_shards

    spec = PartitionSpec(mesh.axis_names)
    placed = tuple(
        _place(a, NamedSharding(mesh, spec if b else PartitionSpec()), padded - n if b else 0, process_local and b)
        for a, b in zip(args, batched)
    )
    compiled = _compiled(fit_fn, mesh, batched, keys is not None, None if hparams is None else (hp_def, hp_batched), chunk_size,
                         tuple(sorted((compiler_options or {}).items())))
    out = compiled(*placed)
    if not jax.tree.leaves(out):
        raise ValueError("fit_fn returned no arrays: a sweep gathers each element's results (and reads their status from them).")
    out = _gather(out)
    if process_local:
        out = jax.tree.map(lambda x: x.reshape(jax.process_count(), padded, *x.shape[1:])[:, :n].reshape(-1, *x.shape[1:]), out)
    else:
        out = jax.tree.map(lambda x: x[:n], out)
    return Swept(_wrap_keys(out), _status(out))


def _check_arguments(keys, datasets, hparams, chunk_size) -> None:
    """Refuse, by name, what :func:`sweep` cannot take: inputs traced by an enclosing ``jit``
    or ``vmap`` (a sweep places its batch on the devices and gathers the results on the host:
    inside a program, ``jax.vmap`` the fit itself), a single key where a batch of keys is
    needed, one array as ``datasets`` (which would be read as one data argument per row), and
    a ``chunk_size`` that is not a positive integer."""
    if any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves((keys, datasets, hparams))):
        raise ValueError("bayeskit.sweep runs at the top level (it lays the batch over the devices and gathers the results "
                         "on the host), not inside jit or vmap; inside a program, jax.vmap the fit itself.")
    if getattr(keys, "ndim", None) is not None:
        typed = jax.dtypes.issubdtype(keys.dtype, jax.dtypes.prng_key)
        if keys.ndim < (1 if typed else 2):
            raise ValueError(f"keys must be a batch of keys, one per element (jax.random.split(key, B)); got a single key "
                             f"of shape {np.shape(keys)}.")
    if isinstance(datasets, (np.ndarray, jax.Array)) or hasattr(datasets, "shape"):
        raise ValueError(f"datasets must be a tuple of the data arguments, e.g. (X,) or (X, y); got one array of shape "
                         f"{np.shape(datasets)}.")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, (int, np.integer))
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")


def _check_process_order(mesh: Mesh) -> None:
    """With ``process_local``, each process's share is placed on its own devices and the
    gathered results are read back process by process: the mesh must list every process's
    devices together, in process order, the same number for each."""
    owners = np.array([d.process_index for d in mesh.devices.flat])
    counts = np.bincount(owners, minlength=jax.process_count())
    if np.any(np.diff(owners) < 0) or np.any(counts != counts[0]):
        raise ValueError("with process_local=True the mesh must hold the same number of devices from every process, each "
                         "process's devices together and in process order (as default_mesh() does); got devices of "
                         f"processes {owners.tolist()}.")


def _unwrap_keys(tree):
    """Key arrays replaced by their raw data (placeable like any array) and their impl."""

    def unwrap(x):
        if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            return _KeyData(jax.random.key_data(x), str(jax.random.key_impl(x)))
        return x

    return jax.tree.map(unwrap, tree)


class _KeyData(eqx.Module):
    data: jax.Array
    impl: str = eqx.field(static=True)


def _is_key_data(x) -> bool:
    return isinstance(x, _KeyData)


def hparam_axes(hparams: PyTree, *batched: Callable[[PyTree], PyTree]) -> PyTree:
    """An ``in_axes`` entry for :func:`sweep`'s hyperparameters: 0 at the fields each
    ``batched`` selector picks (as ``eqx.tree_at``'s ``where``), None elsewhere. Needed
    where a field that stays shared is not a scalar (a per-feature penalty, say), which
    axis 0 alone would read as batched too.

    ``hparam_axes(hp, lambda h: h.alpha)``

    Raises
    ------
    ValueError
        If a selected field holds no array (None).
    """
    axes = jax.tree.map(lambda _: None, hparams)
    for where in batched:
        if not jax.tree.leaves(where(hparams)):
            raise ValueError("hparam_axes: a selected field holds no array to batch (it is None or empty).")
        axes = eqx.tree_at(where, axes, replace_fn=lambda _: 0, is_leaf=lambda x: x is None)
    return axes


def _is_zero(axis) -> bool:
    """``axis`` is the integer 0 (a NumPy integer too, a bool not)."""
    return isinstance(axis, (int, np.integer)) and not isinstance(axis, (bool, np.bool_)) and axis == 0


def _leaf_axes(hparams, axis) -> tuple[bool, ...]:
    """Per leaf of ``hparams`` (a key array is one leaf): batched or not. ``axis`` 0 batches
    every leaf that is not a scalar, None none, and a PyTree prefix of ``hparams`` gives its
    subtrees' axes."""
    leaves = jax.tree.leaves(hparams)
    if axis is None or _is_zero(axis):
        return tuple(axis is not None and np.ndim(x) > 0 for x in leaves)
    is_none = lambda x: x is None  # noqa: E731
    prefix = jax.tree.structure(axis, is_leaf=is_none)
    try:
        subtrees = prefix.flatten_up_to(hparams)
    except (ValueError, TypeError) as e:
        raise ValueError(f"in_axes[1] must be 0, None or a PyTree prefix of the hyperparameters with 0 / None leaves: {e}") from None
    flags = []
    for ax, sub in zip(jax.tree.leaves(axis, is_leaf=is_none), subtrees):
        if not (ax is None or _is_zero(ax)):
            raise ValueError(f"in_axes[1]'s leaves must be 0 or None, got {ax!r}.")
        for x in jax.tree.leaves(sub):
            if ax is not None and np.ndim(x) == 0:
                raise ValueError("in_axes[1] batches a scalar leaf of the hyperparameters: batched leaves need the batch axis first.")
            flags.append(ax is not None)
    return tuple(flags)


def _batch_size(args, batched) -> int:
    sizes = {np.shape(leaf)[0] if np.ndim(leaf) else None for a, b in zip(args, batched) if b for leaf in jax.tree.leaves(a)}
    if None in sizes:
        raise ValueError("a batched argument has a scalar leaf; batched leaves need the batch axis first.")
    if len(sizes) != 1:
        raise ValueError(f"the batched arguments disagree on the batch size: {sorted(sizes)}.")
    (n,) = sizes
    if n == 0:
        raise ValueError("the batch is empty.")
    return n


def _place(tree, sharding: NamedSharding, pad: int, local: bool):
    """Put every leaf on the mesh, padding a batched leaf with copies of its first row."""

    def one(x):
        xp = jnp if jax.process_count() == 1 else np  # several processes build global arrays from host data
        x = xp.asarray(x)
        if pad:
            x = xp.concatenate([x, xp.repeat(x[:1], pad, 0)])
        if xp is jnp:
            return jax.device_put(x, sharding)
        if local:
            return jax.make_array_from_process_local_data(sharding, x)
        return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])

    return jax.tree.map(one, tree)


@functools.lru_cache(maxsize=64)
def _compiled(fit_fn, mesh, batched, has_keys, hp_layout, chunk_size, options):
    """``jit(shard_map(per-device chunked vmap of fit_fn))``, cached per setting (a key's
    impl is a static field of its ``_KeyData``, so jit tells impls apart). The
    hyperparameters arrive as their batched and their shared leaves; ``hp_layout`` (their
    treedef and which leaves are batched) puts them back together."""

    def call(*args):
        key, *data, hp_batched, hp_shared = args
        hp = None
        if hp_layout is not None:
            hp_def, flags = hp_layout
            batched_leaves, shared_leaves = iter(hp_batched), iter(hp_shared)
            hp = jax.tree.unflatten(hp_def, [next(batched_leaves) if b else next(shared_leaves) for b in flags])
        key, data, hp = _wrap_keys((key, data, hp))
        with loop.batched("bayeskit.core.sweep"):
            out = fit_fn(*([key] if has_keys else []), *data, *([hp] if hp_layout is not None else []))
        return _unwrap_keys(out)

    def per_device(*args):
        mapped = [a for a, b in zip(args, batched) if b]

        def one(xs):
            it = iter(xs)
            return call(*(next(it) if b else a for a, b in zip(args, batched)))

        return map_blocks(jax.vmap(one), mapped, chunk_size)

    spec = PartitionSpec(mesh.axis_names)
    in_specs = tuple(spec if b else PartitionSpec() for b in batched)
    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=in_specs, out_specs=spec, check_vma=False),
                   compiler_options=dict(options) or None)


def _gather(out):
    if jax.process_count() == 1:
        return jax.device_get(out)
    return multihost_utils.process_allgather(out, tiled=True)


def _wrap_keys(tree):
    """The inverse of :func:`_unwrap_keys`."""
    return jax.tree.map(lambda x: jax.random.wrap_key_data(x.data, impl=x.impl) if _is_key_data(x) else x, tree,
                        is_leaf=_is_key_data)


def _status(out) -> Status:
    status = getattr(out, "status", None)
    if isinstance(status, type(Status.successful)):
        return status
    leaves = [np.asarray(x) for x in jax.tree.leaves(out) if np.issubdtype(np.asarray(x).dtype, np.inexact)]
    finite = np.ones(jax.tree.leaves(out)[0].shape[0], bool)
    for x in leaves:
        finite &= np.isfinite(x.reshape(x.shape[0], -1)).all(1)
    return jax.vmap(lambda f: Status.where(f, Status.successful, Status.nonfinite))(jnp.asarray(finite))


__all__ = ["sweep", "Swept", "default_mesh", "hparam_axes"]

"""Save and load fitted results: leaves with ``eqx.tree_serialise_leaves``, the
hyperparameters, shapes and version as JSON beside them.

A model module that supports saving provides ``result_like(hparams, shapes)``, which
returns a pytree of the same structure (``jax.eval_shape`` of its fit) for loading.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from pathlib import Path

import equinox as eqx
import jax
import numpy as np

FORMAT = 1


def zeros_like_fit(fit, shapes: dict):
    """Zeros with the structure of ``fit(key, X, Y)``'s result for data of the given
    ``shapes`` (``n_samples``, ``n_features``, ``n_labels``, ``dtype``): a template for
    :func:`load`, traced with ``jax.eval_shape`` and never run."""
    import jax.numpy as jnp

    dtype = jnp.dtype(shapes["dtype"])
    X = jax.ShapeDtypeStruct((shapes["n_samples"], shapes["n_features"]), dtype)
    Y = jax.ShapeDtypeStruct((shapes["n_samples"], shapes["n_labels"]), jnp.int8)
    like = jax.eval_shape(fit, jax.random.key(0), X, Y)
    return jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), like)


def _to_json(value):
    if isinstance(value, eqx.Module):
        return {f.name: _to_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return np.asarray(value).tolist()


def save(path, result, hparams, *, shapes: dict | None = None) -> Path:
    """Write ``result`` (a ``FitResult``) and ``hparams`` to the folder ``path``.

    ``shapes`` (sizes the model's ``result_like`` needs) defaults to what the model's
    ``result_shapes(result)`` reads off the result.
    """
    from bayeskit import __version__

    module_name = type(hparams).__module__
    module = importlib.import_module(module_name)
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    eqx.tree_serialise_leaves(path / "result.eqx", result)
    meta = {
        "format": FORMAT,
        "bayeskit_version": __version__,
        "model": module_name,
        "hparams_class": type(hparams).__name__,
        "hparams": _to_json(hparams),
        "shapes": shapes if shapes is not None else module.result_shapes(result),
    }
    (path / "meta.json").write_text(json.dumps(meta, indent=2))
    return path


def load(path):
    """Read back ``(result, hparams)`` written by :func:`save`."""
    path = Path(path)
    meta = json.loads((path / "meta.json").read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"{path} was written in format {meta.get('format')}; this bayeskit reads format {FORMAT}.")
    module = importlib.import_module(meta["model"])
    hparams = getattr(module, meta["hparams_class"])(**meta["hparams"])
    like = module.result_like(hparams, meta["shapes"])
    result = eqx.tree_deserialise_leaves(path / "result.eqx", like)
    return result, hparams

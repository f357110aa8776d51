"""``bayeskit.save`` and ``bayeskit.load``: fitted estimators and fit results in one safe
file (a zip of ``.npy`` arrays and a versioned JSON header; no pickle).

``load`` builds objects only from :func:`allowed_classes`, the allow-list of bayeskit's
own classes, generated from the package itself:

- every class in ``bayeskit.estimators.__all__``, as ``"bayeskit.estimators.<Name>"``;
- every public ``eqx.Module``, ``eqx.Enumeration`` and named-tuple class defined in a
  module of ``bayeskit.core`` or of a family package (multilabel, density, relational,
  sparse, covariance, robust), as ``"<defining module>.<Name>"`` (for example
  ``"bayeskit.core.status.FitResult"``, ``"bayeskit.multilabel.bsml.Hyperparams"``);
- the named-tuple states of the optax optimisers that those modules define at module
  level (SBMoE's default Adam keeps ``ScaleByAdamState`` and ``EmptyState`` in its
  fitted state).

A name in a file is only ever looked up in that mapping: loading imports nothing and
calls nothing named by the file, apart from the allow-listed constructors. The family
modules are imported when the allow-list is first needed, not on ``import bayeskit``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

from bayeskit.core import io as _io

FAMILIES = ("core", "multilabel", "density", "relational", "sparse", "covariance", "robust")


def save(path, obj, hparams=None) -> Path:
    """Save a fitted estimator, a ``FitResult`` (vmapped ones too) or another result of a
    bayeskit model, with its hyperparameters if given, to the file ``path``.

    Parameters
    ----------
    path : str or Path
        The file to write (its folder must exist; ``~`` is the home folder); an existing
        file is replaced. Any name works; ``.bkz`` is a good suffix.
    obj
        A fitted estimator of :mod:`bayeskit.estimators`, or a pytree of arrays (NumPy
        or JAX), typed PRNG keys, Python scalars and strings, tuples, lists, dicts, and
        bayeskit's Modules, enumeration items and named tuples.
    hparams : optional
        The model's hyperparameters; :func:`load` then returns ``(obj, hparams)``.

    Returns
    -------
    Path
        The file written (``path`` with ``~`` expanded).

    Raises
    ------
    TypeError
        If anything in ``obj`` or ``hparams`` cannot be stored safely (a function, an
        optax optimiser given as a parameter, a class that is not bayeskit's, an object
        array of arbitrary objects); nothing is written then.
    FileNotFoundError, IsADirectoryError
        If ``path``'s folder does not exist, or ``path`` is a folder.
    """
    from bayeskit import __version__

    return _io.save(path, obj, hparams, classes=allowed_classes(), version=__version__)


def load(path):
    """Load what :func:`save` wrote: the object, or ``(obj, hparams)`` when
    hyperparameters were saved with it. Estimators come back fitted, of the same class,
    with the same parameters and every fitted attribute equal bit for bit.

    Raises
    ------
    ValueError
        If the file is not a bayeskit file, is truncated or corrupted, was written in a
        newer format, or names a class that is not one of bayeskit's own (the message
        names the file and the bad part).
    """
    return _io.load(path, classes=allowed_classes())


def _family_modules():
    """``bayeskit.core`` and the family packages with every module below them."""
    for family in FAMILIES:
        package = importlib.import_module(f"bayeskit.{family}")
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            yield importlib.import_module(info.name)


def _is_saveable_class(obj) -> bool:
    import equinox as eqx

    return isinstance(obj, type) and (issubclass(obj, eqx.Module) or isinstance(obj, type(eqx.Enumeration))
                                      or (issubclass(obj, tuple) and hasattr(obj, "_fields")))


def _optimizer_state_classes(optimizer) -> set[type]:
    """The named-tuple classes in ``optimizer.init``'s state (traced, never run)."""
    import jax
    import jax.numpy as jnp

    found: set[type] = set()

    def walk(x):
        if isinstance(x, tuple) and hasattr(type(x), "_fields"):
            found.add(type(x))
        if isinstance(x, (tuple, list)):
            for item in x:
                walk(item)
        elif isinstance(x, dict):
            for item in x.values():
                walk(item)

    walk(jax.eval_shape(optimizer.init, {"params": jax.ShapeDtypeStruct((1,), jnp.float32)}))
    return found


@functools.cache
def allowed_classes() -> Mapping[str, type]:
    """The allow-list ``{stable name: class}`` of everything :func:`load` may build."""
    import optax

    import bayeskit.estimators as estimators

    classes: dict[str, type] = {f"bayeskit.estimators.{name}": getattr(estimators, name) for name in estimators.__all__}
    for module in _family_modules():
        for name, obj in vars(module).items():
            if isinstance(obj, optax.GradientTransformation):
                # named as optax exports them ("optax.ScaleByAdamState"), not by optax's private modules
                classes.update({f"optax.{cls.__name__}" if getattr(optax, cls.__name__, None) is cls else _io.class_name(cls): cls
                                for cls in _optimizer_state_classes(obj)})
            elif not name.startswith("_") and _is_saveable_class(obj) and obj.__module__ == module.__name__:
                classes[_io.class_name(obj)] = obj
    return MappingProxyType(classes)

"""``bayeskit.save`` and ``bayeskit.load``: fitted estimators and fit results in one safe
file (a zip of ``.npy`` arrays and a versioned JSON header; no pickle).

``load`` builds objects only from :func:`allowed_classes`, the allow-list of bayeskit's
own classes and of optax's optimiser states, generated from the two packages:

- every class in ``bayeskit.estimators.__all__``, as ``"bayeskit.estimators.<Name>"``;
- every public ``eqx.Module``, ``eqx.Enumeration`` and named-tuple class defined in a
  module of ``bayeskit.core`` or of a family package (multilabel, density, relational,
  sparse, covariance, robust), as ``"<defining module>.<Name>"`` (for example
  ``"bayeskit.core.status.FitResult"``, ``"bayeskit.multilabel.bsml.Hyperparams"``);
- optax's optimiser states, which a functional fit keeps (SBMoE's gate optimiser):
  every public named-tuple and ``eqx.Module`` class defined in a module of the
  ``optax`` package (its tests aside), except ``GradientTransformation`` and its
  subclasses (pairs of functions), as the outermost optax package exports it
  (``"optax.TraceState"``, ``"optax.contrib.DoGState"``) or else as
  ``"<defining module>.<Name>"``.

A name in a file is only ever looked up in that mapping: loading imports nothing and
calls nothing named by the file, apart from the allow-listed constructors. The family
modules are imported when the allow-list is first needed, not on ``import bayeskit``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import sys
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
        bayeskit's Modules, enumeration items and named tuples, and optax's optimiser
        states.
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
        optax optimiser given as a parameter, a class that :func:`load` may not build,
        an object array of arbitrary objects); nothing is written then.
    FileNotFoundError, NotADirectoryError, IsADirectoryError
        If ``path``'s folder does not exist, is a file, or ``path`` is a folder.
    """
    import optax

    from bayeskit import __version__

    if isinstance(getattr(obj, "optimizer", None), optax.GradientTransformation):  # SBMoERegressor(optimizer=...)
        raise TypeError(f"cannot save this {type(obj).__name__}: its optimizer is an optax optimiser, made of functions, which "
                        "no file can hold. Keep the default optimizer (None: Adam, learning rate 0.05), or fit with "
                        "bayeskit.density.sbmoe.fit(..., optimizer=...) and save the result it returns (its optimiser state saves).")
    return _io.save(path, obj, hparams, classes=allowed_classes(), version=__version__)


def load(path):
    """Load what :func:`save` wrote: the object, or ``(obj, hparams)`` when
    hyperparameters were saved with it. Estimators come back fitted, of the same class,
    with the same parameters and every fitted attribute equal bit for bit.

    Raises
    ------
    FileNotFoundError
        If there is no file ``path``.
    ValueError
        If the file is not a bayeskit file, is truncated or corrupted, was written in a
        newer format, or names a class that is not in :func:`allowed_classes` (the
        message names the file and the bad part).
    """
    return _io.load(path, classes=allowed_classes())


def _family_modules():
    """``bayeskit.core`` and the family packages with every module below them."""
    for family in FAMILIES:
        package = importlib.import_module(f"bayeskit.{family}")
        yield package
        for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            yield importlib.import_module(info.name)


def _optax_modules():
    """The imported modules of optax, its tests aside: ``import optax`` imports all the
    others (``pkgutil`` cannot list them, as ``optax._src`` is a namespace package)."""
    import optax

    return [module for name, module in list(sys.modules.items())
            if name.partition(".")[0] == optax.__name__ and not name.endswith("_test")]


def _is_saveable_class(obj) -> bool:
    import equinox as eqx

    return isinstance(obj, type) and (issubclass(obj, eqx.Module) or isinstance(obj, type(eqx.Enumeration))
                                      or (issubclass(obj, tuple) and hasattr(obj, "_fields")))


def _defined_classes(modules):
    """The public Module, enumeration and named-tuple classes that ``modules`` define."""
    for module in modules:
        for name, obj in vars(module).items():
            if not name.startswith("_") and _is_saveable_class(obj) and obj.__module__ == module.__name__:
                yield obj


def _optax_name(cls: type) -> str:
    """``cls``'s name in the outermost optax package that exports it
    (``"optax.TraceState"``), or in its defining module if none does."""
    parts = cls.__module__.split(".")
    for n in range(1, len(parts)):
        package = sys.modules[".".join(parts[:n])]
        if vars(package).get(cls.__name__) is cls:  # vars: no deprecated alias is looked up
            return f"{package.__name__}.{cls.__name__}"
    return _io.class_name(cls)


@functools.cache
def allowed_classes() -> Mapping[str, type]:
    """The allow-list ``{stable name: class}`` of everything :func:`load` may build."""
    import optax

    import bayeskit.estimators as estimators

    classes: dict[str, type] = {f"bayeskit.estimators.{name}": getattr(estimators, name) for name in estimators.__all__}
    classes.update({_io.class_name(cls): cls for cls in _defined_classes(_family_modules())})
    classes.update({_optax_name(cls): cls for cls in _defined_classes(_optax_modules())
                    if not issubclass(cls, optax.GradientTransformation)})
    return MappingProxyType(classes)

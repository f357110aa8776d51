"""A tqdm progress bar driven from inside jitted (and vmapped) loops.

The bar lives on the host; the loop reports its iteration through
``jax.debug.callback``. Under ``vmap`` the callback runs once per batch element, so the
bar shows the furthest iteration reached by any element. Progress is switched off when
the ``CI`` environment variable is set, or ``BAYESKIT_PROGRESS=0`` (the workers of
``bayeskit reproduce --jobs``, whose output is captured).
"""

from __future__ import annotations

import itertools
import os

_bars: dict[int, object] = {}
_tokens = itertools.count()


def enabled(progress: bool | None) -> bool:
    """Whether to show a bar: only when asked, not under CI and not switched off."""
    return bool(progress) and not os.environ.get("CI") and os.environ.get("BAYESKIT_PROGRESS", "1") != "0"


def new_token() -> int:
    """A fresh identifier for one bar (a static value baked into the compiled loop)."""
    return next(_tokens)


def _update(token: int, total: int, iteration, objective) -> None:
    from tqdm.auto import tqdm

    bar = _bars.get(token)
    if bar is None:
        bar = _bars[token] = tqdm(total=total, desc="fit", leave=True)
    done = int(iteration) + 1
    if done > bar.n:
        bar.update(done - bar.n)
        bar.set_postfix(objective=f"{float(objective):.6g}", refresh=False)


def _close(token: int) -> None:
    bar = _bars.pop(token, None)
    if bar is not None:
        bar.close()


def report(token: int, total: int, iteration, objective) -> None:
    """Inside a traced loop: move bar ``token`` to ``iteration`` (0-based)."""
    import jax  # here, so that :func:`enabled` can be asked without starting JAX

    jax.debug.callback(lambda i, o: _update(token, total, i, o), iteration, objective)


def close(token: int, after) -> None:
    """Inside a traced function: close bar ``token`` once ``after`` is computed."""
    import jax

    jax.debug.callback(lambda _: _close(token), after)

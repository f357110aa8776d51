"""Warnings attributed to the caller: :func:`warn` names the first frame outside bayeskit
(the user's line, or the library that called bayeskit), however many of the package's own
frames lie between (an estimator's lock, ``score`` calling ``predict``, a functional fit
called by an estimator), so that the printed location and ``filterwarnings(module=...)``
refer to the caller."""

from __future__ import annotations

import os
import sys
import warnings

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the bayeskit folder


def warn(message: str, category: type[Warning]) -> None:
    """``warnings.warn(message, category)`` at the first frame outside bayeskit."""
    frame, level = sys._getframe(0), 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)


__all__ = ["warn"]

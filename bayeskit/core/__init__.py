"""Shared machinery that knows no model: fit results and the fit driver, the loop, special
functions, linear algebra, validation, chunks, sweeps, MCMC glue and safe save/load."""

from bayeskit.core import cache as _cache

_cache.enable()

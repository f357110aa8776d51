"""Write ``truncnorm_reference.json``: high-precision mpmath values for tests/core/test_special.py.

Run from the repository root (takes a few seconds)::

    python tests/data/make_truncnorm_reference.py

Every abscissa is exactly representable in float32 (multiples of 1/16 plus a few
dyadic points next to the branch switches of ``bayeskit.core.special``), so the same
table serves the float32 and the float64 tests. Values are computed with
``mp.dps = 60`` and stored as decimal strings with 20 significant digits; ``float()``
of such a string is the true value to within an ulp (0.0 where it underflows).

Tables: ``lower`` (the moments of N(0, 1) truncated to (a, inf) on a grid over
[-40, 40]) and ``log_ndtr`` (x from -300 to 40).

The formulas are the textbook ones, written so that mpmath never subtracts nearly
equal numbers at a precision that matters:

* one-sided ``(a, inf)``: ``Z = Phi(-a)``; ``log Z = log1p(-Phi(a))`` for ``a < 0`` and
  ``log(Phi(-a))`` otherwise; ``lambda = phi(a) / Z``; ``var = 1 + a lambda - lambda^2``;
  ``entropy = log(sqrt(2 pi e) Z) + a lambda / 2``.

At 60 digits the worst cancellation here (``var`` for ``a = 40``, about 3 digits) still
leaves far more than double precision.
"""

from __future__ import annotations

import json
import pathlib

import mpmath as mp
import numpy as np

mp.mp.dps = 60
DIGITS = 20
OUT = pathlib.Path(__file__).with_name("truncnorm_reference.json")

# Branch switches of bayeskit.core.special (float32 tail, float64 tail, erfc -> the asymptotic series).
SWITCHES = (2.0, 4.0, 12.0)


def _s(x) -> str:
    """Decimal string of an mpf (or +-inf)."""
    if mp.isinf(x):
        return "inf" if x > 0 else "-inf"
    return mp.nstr(x, DIGITS)


def phi(x):
    if mp.isinf(x):
        return mp.mpf(0)
    return mp.npdf(x)


def xphi(x):
    return mp.mpf(0) if mp.isinf(x) else x * mp.npdf(x)


def upper_prob(a):
    """P(X > a) = Phi(-a), with relative accuracy everywhere (mpmath erfc is relative)."""
    if mp.isinf(a):
        return mp.mpf(1) if a < 0 else mp.mpf(0)
    return mp.erfc(a / mp.sqrt(2)) / 2


def lower_prob(b):
    """P(X < b) = Phi(b)."""
    return upper_prob(-b)


def one_sided(a):
    a = mp.mpf(a)
    if a < 0:
        log_z = mp.log1p(-lower_prob(a))  # Phi(a) is tiny here
    else:
        log_z = mp.log(upper_prob(a))
    z = mp.exp(log_z)
    lam = phi(a) / z
    var = 1 + a * lam - lam * lam
    ent = mp.log(mp.sqrt(2 * mp.pi * mp.e)) + log_z + a * lam / 2
    return log_z, lam, var, ent


def grid() -> list[float]:
    pts = set((np.arange(-40 * 16, 40 * 16 + 1) / 16.0).tolist())
    for s in SWITCHES:
        for sign in (1.0, -1.0):
            for eps in (0.0, 2.0**-20, -(2.0**-20), 2.0**-10, -(2.0**-10)):
                pts.add(sign * (s + eps))
    pts.update([2.0**-20, -(2.0**-20), 2.0**-40, -(2.0**-40)])
    out = sorted(pts)
    assert all(float(np.float32(x)) == x for x in out)
    return out


def main() -> None:
    xs = grid()
    lower = [one_sided(x) for x in xs]
    # log Phi(x) far out on both sides (float64 range), beyond the +-40 grid.
    lnd_x = sorted(set(np.linspace(-300.0, 40.0, 341).tolist() + xs))
    lnd = [mp.log(lower_prob(x)) if x <= 0 else mp.log1p(-upper_prob(x)) for x in lnd_x]
    table = {
        "description": "mpmath reference values for tests/core/test_special.py; see make_truncnorm_reference.py",
        "mp_dps": mp.mp.dps,
        "lower": {
            "a": xs,
            "log_z": [_s(v[0]) for v in lower],
            "mean": [_s(v[1]) for v in lower],
            "var": [_s(v[2]) for v in lower],
            "entropy": [_s(v[3]) for v in lower],
        },
        "log_ndtr": {"x": lnd_x, "value": [_s(v) for v in lnd]},
    }
    OUT.write_text(json.dumps(table, indent=0) + "\n")
    print(f"wrote {OUT} ({len(xs)} grid points)")


if __name__ == "__main__":
    main()

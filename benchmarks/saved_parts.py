"""A benchmark's results file written in parts (``--only``): the parts not run keep their saved
entries, ``dates`` says when each part last ran, and a part whose saved entry was measured
against a peer that cannot run here is not rerun, since ours alone would replace the peer's
numbers."""

from __future__ import annotations

import json
from pathlib import Path


def merged(path: Path, out: dict, parts, all_parts) -> dict:
    """``out`` (with its ``date``) over the earlier results at ``path``: the parts not run keep
    their entries, and ``dates`` says when each part last ran ("unrecorded" for a file from
    before the dates were kept)."""
    old = json.loads(path.read_text()) if path.exists() else {}
    dates = old.get("dates") or {part: old.get("date", "unrecorded") for part in all_parts if part in old}
    return {**old, **out, "dates": {**dates, **{part: out["date"] for part in parts}}}


def parts_to_run(parts, kept: dict[str, str], path, peer: str) -> list[str]:
    """``parts`` without those in ``kept`` (part: why its peer cannot run), each named with
    the reason its saved entry stays."""
    for part, why in kept.items():
        print(f"{part}: not run ({why}); its saved entry, measured against {peer}, is kept unchanged in {path}")
    return [part for part in parts if part not in kept]

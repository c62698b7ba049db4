"""Reading `mkb solutions` evidence JSON (bench/h200/*/solutions-*.json): the experts' and
torch.compile's median times per problem. Shared by mkb_eval.copyceiling and mkb_eval.adopt."""

from __future__ import annotations

import json
from pathlib import Path


def expert_times(path: Path) -> dict[tuple[str, str], float]:
    """(problem id, dsl) -> the expert's median us, and (problem id, "compile") -> torch.compile's
    median us in the same judge, from a `mkb solutions` evidence JSON."""
    d = json.loads(path.read_text())
    out: dict[tuple[str, str], float] = {}
    for r in d.get("results", []):
        rep = r.get("report") or {}
        med = (rep.get("runtime") or {}).get("median_us")
        if isinstance(med, int | float) and med > 0:
            out[(str(r["problem"]), str(r["dsl"]))] = float(med)
        for b in rep.get("baselines") or []:
            comp = (b.get("timing") or {}).get("median_us") if b.get("kind") == "compile" else None
            if isinstance(comp, int | float) and comp > 0:
                out.setdefault((str(r["problem"]), "compile"), float(comp))
    return out

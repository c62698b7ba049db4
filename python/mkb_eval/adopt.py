"""Adoption of tuned expert variants: which variant of a tuning run replaces an expert solution.

    python -m mkb_eval.adopt TUNE.json [TUNE.json ...] [--reference SOLUTIONS.json ...]
        [--bar 0.99] [--max-iqr 0.05] [--variants DIR --apply] [--out adopted.json]

TUNE.json is the output of `python -m mkb_eval.selfcheck --variants DIR [--with-experts] --out`
(targets labelled `tune/<problem folder>/<dsl>/<name>`, the expert as `<name>` = `expert`).
SOLUTIONS.json is an `mkb solutions` evidence file (its experts' medians are a second reference).

The rule, per (problem folder, dsl): the expert's time is the smaller of its median in the same
tuning run (when it was timed there) and in the reference tables; a variant is adopted when its
verdict is `correct`, its IQR is at most --max-iqr of its median (a stable timing), and its median
is at most --bar x the expert's time; among those, the fastest. Without an expert time (neither
timed nor in a reference) nothing is adopted. --apply copies each winner DIR/<folder>/<dsl>/<name>.py
over problems/<family>/<folder>/<dsl>/solution.py. The printout lists every variant with its
verdict, median and IQR, then one decision line per (folder, dsl).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .evidence import expert_times

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Decision:
    """The outcome for one (problem folder, dsl)."""

    folder: str
    dsl: str
    expert_same_run_us: float | None
    expert_reference_us: float | None
    adopted: str | None
    adopted_us: float | None
    lines: list[str]


def reference_times(paths: list[Path]) -> dict[str, float]:
    """`<problem id>/<dsl>` -> median us of each expert in `mkb solutions` evidence files (the
    smallest where several files have it)."""
    out: dict[str, float] = {}
    for p in paths:
        try:
            if "results" not in json.loads(p.read_text()):
                raise KeyError("results")
            times = expert_times(p)
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"{p}: not an `mkb solutions` evidence file ({e})") from None
        for (pid, dsl), med in times.items():
            if dsl != "compile":
                out[f"{pid}/{dsl}"] = min(med, out.get(f"{pid}/{dsl}", med))
    return out


def tune_rows(paths: list[Path]) -> dict[tuple[str, str], dict[str, dict[str, Any]]]:
    """(folder, dsl) -> variant name -> row, over selfcheck outputs (a later file's row wins)."""
    out: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for p in paths:
        try:
            rows = json.loads(p.read_text())["rows"]
        except (OSError, ValueError, KeyError) as e:
            raise ValueError(f"{p}: not a selfcheck --out file ({e})") from None
        for row in rows:
            parts = str(row.get("target", "")).split("/")
            if len(parts) != 4 or parts[0] != "tune":
                continue  # an expert or fixture target of a plain selfcheck
            _, folder, dsl, name = parts
            out.setdefault((folder, dsl), {})[name] = row
    return out


def _us(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def decide(rows: dict[tuple[str, str], dict[str, dict[str, Any]]], reference: dict[str, float],
           bar: float = 0.99, max_iqr: float = 0.05) -> list[Decision]:
    """Apply the rule of the module docstring to every (folder, dsl) of the tuning rows."""
    decisions = []
    for (folder, dsl), variants in sorted(rows.items()):
        exp = variants.get("expert")
        same = exp["median_us"] if exp and exp.get("verdict") == "correct" else None
        ref = reference.get(f"{folder.split('_')[0]}/{dsl}")
        known = [x for x in (same, ref) if x is not None]
        base = min(known) if known else None
        lines, best = [], None
        for name, r in sorted(variants.items()):
            med, iqr = r.get("median_us"), r.get("iqr_us")
            lines.append(f"  {folder}/{dsl}/{name}: {r.get('verdict')} {r.get('reason') or ''}".rstrip()
                         + (f" {med:.1f} us (IQR {iqr:.1f})" if med is not None and iqr is not None else ""))
            if name == "expert" or base is None or r.get("verdict") != "correct" or med is None or iqr is None:
                continue
            if iqr > max_iqr * med or med > bar * base:
                continue
            if best is None or med < variants[best]["median_us"]:
                best = name
        lines.append(f"{folder}/{dsl}: expert {_us(same)} us (reference {_us(ref)}) -> "
                     + (f"{best} {variants[best]['median_us']:.1f} us" if best else "keep"))
        decisions.append(Decision(folder, dsl, same, ref, best, variants[best]["median_us"] if best else None,
                                  lines))
    return decisions


def apply(decisions: list[Decision], variants_dir: Path, problems: Path) -> list[str]:
    """Copy each adopted variant over its expert's solution.py; the copies made, as lines."""
    done = []
    for d in decisions:
        if d.adopted is None:
            continue
        src = variants_dir / d.folder / d.dsl / f"{d.adopted}.py"
        dst = next(iter(sorted(problems.glob(f"*/{d.folder}/{d.dsl}/solution.py"))), None)
        if not src.is_file() or dst is None:
            raise ValueError(f"{src}: cannot apply (variant file or {d.folder}/{d.dsl}/solution.py missing)")
        shutil.copyfile(src, dst)
        done.append(f"applied {src} -> {dst}")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tune", type=Path, nargs="+", help="selfcheck --out files of tuning runs")
    ap.add_argument("--reference", type=Path, action="append", default=[], help="`mkb solutions` evidence JSON")
    ap.add_argument("--bar", type=float, default=0.99, help="adopt at most this fraction of the expert's time")
    ap.add_argument("--max-iqr", type=float, default=0.05, help="largest IQR as a fraction of the median")
    ap.add_argument("--variants", type=Path, help="the tuning folder (needed by --apply)")
    ap.add_argument("--problems", type=Path, default=REPO / "problems")
    ap.add_argument("--apply", action="store_true", help="copy the winners over the experts' solution.py")
    ap.add_argument("--out", type=Path, help="write the adoptions as JSON")
    args = ap.parse_args(argv)
    if args.apply and args.variants is None:
        ap.error("--apply needs --variants DIR")
    try:
        decisions = decide(tune_rows(args.tune), reference_times(args.reference), args.bar, args.max_iqr)
        for d in decisions:
            print("\n".join(d.lines))
        if args.apply:
            for line in apply(decisions, args.variants, args.problems):
                print(line)
    except ValueError as e:
        print(f"adopt: {e}", file=sys.stderr)
        return 2
    if args.out:
        args.out.write_text(json.dumps({f"{d.folder}/{d.dsl}": {
            "adopted": d.adopted, "median_us": d.adopted_us, "expert_same_run_us": d.expert_same_run_us,
            "expert_reference_us": d.expert_reference_us} for d in decisions if d.adopted}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

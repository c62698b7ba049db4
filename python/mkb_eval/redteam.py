"""Runs the red-team set (tests/adversarial/manifest.toml) through a real judge and prints a table of
expected vs. reached verdicts; writes the rows as JSON with --out. The manifest is parsed and
checked by mkb only (crates/mkb-eval/src/redteam.rs): the cases come from `mkb redteam --list`
(mkb_eval.bundle), like the problem specs, so mkb must be built (or MKB_BIN set).

On a GPU machine every case runs in full mode (or --mode). Without a GPU, cases that need one run
in compile mode and are expected to pass it (they must reach the layer they are aimed at).

    python -m mkb_eval.redteam                        # all cases, full mode on a GPU
    python -m mkb_eval.redteam --out bench/h200/redteam.json --only s,d
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .adapters import dsl_names
from .bundle import REPO, BundleError, run_mkb
from .cli import JudgeClient

DEFAULT_MANIFEST = REPO / "tests" / "adversarial" / "manifest.toml"


@dataclass(frozen=True)
class Case:
    """One case as mkb resolved it (RedteamCase of crates/mkb-eval/src/redteam.rs)."""

    file: str  # relative to the manifest's folder
    problem: str  # as the manifest names it
    problem_id: str
    dsl: str
    verdict: str
    reasons: list[str]  # acceptable reason prefixes
    layer: str
    needs_gpu: bool
    what: str
    mode: str = "test"  # the mode on a GPU machine
    limits: dict[str, float] = field(default_factory=dict)

    def path(self, root: Path) -> Path:
        return root / self.file


CASE_FIELDS = tuple(f.name for f in dataclasses.fields(Case))


def cases_from_json(d: Any, base: Path = REPO) -> tuple[Path, list[Case]]:
    """(the folder of the case files, the cases) from `mkb redteam --list` output; a missing or an
    unknown field is an error naming it."""
    if not isinstance(d, Mapping) or set(d) != {"root", "cases"}:
        raise BundleError(f"red-team cases: expected the fields root, cases; got {d!r:.200}")
    cases = []
    for i, c in enumerate(d["cases"]):
        if not isinstance(c, Mapping):
            raise BundleError(f"red-team case {i}: not an object")
        for k in CASE_FIELDS:
            if k not in c:
                raise BundleError(f"red-team case {i}: field `{k}` is missing")
        for k in c:
            if k not in CASE_FIELDS:
                raise BundleError(f"red-team case {i}: field `{k}` is unknown")
        cases.append(Case(**{**c, "reasons": list(c["reasons"]), "limits": dict(c["limits"])}))
    root = Path(d["root"])
    return (root if root.is_absolute() else base / root), cases


def load_manifest(path: Path = DEFAULT_MANIFEST) -> list[Case]:
    """The cases of `path`, parsed and checked by `mkb redteam --list`."""
    return cases_from_json(run_mkb(["redteam", "--list", "--manifest", str(path)]))[1]


def reached(verdict: str, reason: str | None, expect_verdict: str, expect_reasons: list[str]) -> bool:
    """The verdict is the expected one, and so is the reason (by prefix; none for `correct`)."""
    if verdict != expect_verdict:
        return False
    if expect_verdict == "correct":
        return reason is None
    return any((reason or "").startswith(r) for r in expect_reasons if r)


def run_cases(judge: JudgeClient, cases: list[Case], root: Path, can_run: bool, mode: str | None,
              seed: int = 20261129, echo: bool = True) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        if can_run:
            m = mode or "full"
            expect_verdict, expect_reason = c.verdict, c.reasons
        elif c.needs_gpu:
            m, expect_verdict, expect_reason = "compile", "correct", [""]
        else:
            m, expect_verdict, expect_reason = "compile", c.verdict, c.reasons
        t0 = time.monotonic()
        resp = judge.evaluate(c.problem_id, c.dsl, m, {"case": c.path(root)}, seed=seed,
                              limits=c.limits or None)
        rep = resp["reports"][0]["report"] if resp.get("ok") else {"verdict": "protocol_error", "reason": None,
                                                                    "message": resp.get("error", "")}
        ok = reached(rep["verdict"], rep["reason"], expect_verdict, expect_reason)
        row = {"file": c.file, "problem": c.problem, "dsl": c.dsl, "layer": c.layer, "mode": m,
               "expected": f"{expect_verdict}/{'|'.join(r for r in expect_reason if r) or '-'}",
               "got": f"{rep['verdict']}/{rep['reason'] or '-'}", "ok": ok, "seconds": round(time.monotonic() - t0, 1),
               "message": rep.get("message", "")[:400], "what": c.what}
        if not ok:
            row["log_tail"] = str(rep.get("log") or "")[-1500:]
        rows.append(row)
        if echo:
            print(f"{'ok  ' if ok else 'FAIL'} {c.file:32} {m:8} expected {row['expected']:40} got {row['got']}",
                  file=sys.stderr, flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    head = f"{'case':32} {'dsl':5} {'layer':12} {'mode':8} {'expected':44} {'got':44} {'ok':4} {'s':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['file']:32} {r['dsl']:5} {r['layer']:12} {r['mode']:8} {r['expected']:44} {r['got']:44} "
                     f"{'yes' if r['ok'] else 'NO':4} {r['seconds']:6.1f}")
    n_ok = sum(r["ok"] for r in rows)
    lines.append(f"{n_ok} of {len(rows)} cases reached the expected verdict")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", type=Path, default=DEFAULT_MANIFEST)
    ap.add_argument("--mode", choices=("compile", "test", "bench", "full"), help="default: full on a GPU")
    ap.add_argument("--only", help="run only cases whose file name starts with one of these comma-separated "
                    "prefixes (e.g. s,d or g0)")
    ap.add_argument("--dsl", choices=dsl_names(), help="run only the cases of this DSL")
    ap.add_argument("--out", type=Path, help="write the rows (and the judge's hello) as JSON here")
    ap.add_argument("--judge-arg", action="append", default=[])
    args = ap.parse_args(argv)
    root, cases = cases_from_json(run_mkb(["redteam", "--list", "--manifest", str(args.manifest)]))
    if args.dsl:
        cases = [c for c in cases if c.dsl == args.dsl]
    if args.only:
        prefixes = tuple(p.strip() for p in args.only.split(",") if p.strip())
        cases = [c for c in cases if c.file.startswith(prefixes)]
    t0 = time.monotonic()
    with JudgeClient(args.judge_arg) as judge:
        hello = judge.request("hello", timeout=600)
        rows = run_cases(judge, cases, root, bool(hello["can_run"]), args.mode)
    print(table(rows))
    print(f"[{time.monotonic() - t0:.0f} s, gpu: {hello.get('gpu')}]")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"hello": hello, "rows": rows, "cases": [asdict(c) for c in cases]}, indent=2))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Runs the red-team set (tests/adversarial/manifest.toml) through a real judge and prints a table of
expected vs. reached verdicts; writes the rows as JSON with --out.

On a GPU machine every case runs in full mode (or --mode). Without a GPU, cases that need one run
in compile mode and are expected to pass it (they must reach the layer they are aimed at).

    python -m mkb_eval.redteam                        # all cases, full mode on a GPU
    python -m mkb_eval.redteam --out bench/h200/redteam.json --only s,d
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .cli import JudgeClient

REPO = Path(__file__).resolve().parents[2]
DEFAULT_MANIFEST = REPO / "tests" / "adversarial" / "manifest.toml"
LAYERS = ("static", "sandbox", "deadline", "dynamic", "correctness", "timing", "crash")
VERDICTS = ("compile_error", "static_check_failed", "incorrect", "timeout", "crashed", "correct")


@dataclass
class Case:
    file: str
    problem: str
    dsl: str
    verdict: str
    reason: list[str]
    layer: str
    needs_gpu: bool
    what: str
    mode: str = "test"
    limits: dict[str, float] = field(default_factory=dict)

    def path(self, root: Path) -> Path:
        return root / self.file


def load_manifest(path: Path = DEFAULT_MANIFEST) -> list[Case]:
    data = tomllib.loads(path.read_text())
    cases = []
    for i, c in enumerate(data.get("case", [])):
        reason = c.get("reason", "")
        cases.append(Case(file=c["file"], problem=c["problem"], dsl=c["dsl"], verdict=c["verdict"],
                          reason=[reason] if isinstance(reason, str) else list(reason), layer=c["layer"],
                          needs_gpu=bool(c["needs_gpu"]), what=c.get("what", ""), mode=c.get("mode", "test"),
                          limits=dict(c.get("limits", {}))))
        if cases[-1].verdict not in VERDICTS or cases[-1].layer not in LAYERS:
            raise ValueError(f"{path}: case {i} ({c['file']}): bad verdict or layer")
    return cases


def reached(verdict: str, reason: str | None, expect_verdict: str, expect_reasons: list[str]) -> bool:
    """The verdict is the expected one, and so is the reason (by prefix; none for `correct`)."""
    if verdict != expect_verdict:
        return False
    if expect_verdict == "correct":
        return reason is None
    return any((reason or "").startswith(r) for r in expect_reasons if r)


def run_cases(judge: JudgeClient, cases: list[Case], root: Path, problems: Path, can_run: bool,
              mode: str | None, seed: int = 20261129, echo: bool = True) -> list[dict[str, Any]]:
    rows = []
    for c in cases:
        if can_run:
            m = mode or "full"
            expect_verdict, expect_reason = c.verdict, c.reason
        elif c.needs_gpu:
            m, expect_verdict, expect_reason = "compile", "correct", [""]
        else:
            m, expect_verdict, expect_reason = "compile", c.verdict, c.reason
        t0 = time.monotonic()
        resp = judge.evaluate(problems / c.problem, c.dsl, m, {"case": c.path(root)}, seed=seed,
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
    ap.add_argument("--problems", type=Path, default=REPO / "problems")
    ap.add_argument("--mode", choices=("compile", "test", "bench", "full"), help="default: full on a GPU")
    ap.add_argument("--only", help="run only cases whose file name starts with one of these comma-separated "
                    "prefixes (e.g. s,d or g0)")
    ap.add_argument("--dsl", choices=("cute", "tirx"), help="run only the cases of this DSL")
    ap.add_argument("--out", type=Path, help="write the rows (and the judge's hello) as JSON here")
    ap.add_argument("--judge-arg", action="append", default=[])
    args = ap.parse_args(argv)
    cases = load_manifest(args.manifest)
    if args.dsl:
        cases = [c for c in cases if c.dsl == args.dsl]
    if args.only:
        prefixes = tuple(p.strip() for p in args.only.split(",") if p.strip())
        cases = [c for c in cases if c.file.startswith(prefixes)]
    t0 = time.monotonic()
    with JudgeClient(args.judge_arg) as judge:
        hello = judge.request("hello", timeout=600)
        rows = run_cases(judge, cases, args.manifest.parent, args.problems, bool(hello["can_run"]), args.mode)
    print(table(rows))
    print(f"[{time.monotonic() - t0:.0f} s, gpu: {hello.get('gpu')}]")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"hello": hello, "rows": rows, "cases": [asdict(c) for c in cases]}, indent=2))
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

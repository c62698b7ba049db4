"""GPU self-check: evaluates every expert solution (problems/*/*/{cute,tirx}/solution.py) and the
known-correct test fixtures through a real judge, in full mode on a GPU (compile mode without
one), and prints a compact table; --out writes every report as JSON.

    python -m mkb_eval.selfcheck                       # all solutions + fixtures, full mode
    python -m mkb_eval.selfcheck --only A01 --mode test --out bench/h200/selfcheck.json
    python -m mkb_eval.selfcheck --sandbox --out bench/h200/sandbox-selfcheck.json
    python -m mkb_eval.selfcheck --variants tune --only tune/ --mode bench   # variants of experts

--variants DIR adds every DIR/<problem folder>/<dsl>/<name>.py (e.g. a solution with other tile
sizes) as a target labelled `tune/<problem folder>/<dsl>/<name>`: one judge times many versions
of a kernel in one process, for tuning on a GPU whose time is scarce. --with-experts adds, for each
(problem folder, dsl) with variants, that expert's solution.py as `tune/<problem folder>/<dsl>/expert`
(first), so a variant is compared with its expert in the same run; python -m mkb_eval.adopt then
picks the winners.

--sandbox checks the OS sandbox (docs/threat-model.md) instead: the judge reports bubblewrap (not
the unsafe opt-out); the A01 expert solutions of every available DSL are still `correct` in full
mode (the judge's buffers reach the sandboxed, unprivileged runner through mkb_eval.ipc) with the
runner under the sandbox uid and alone in its /proc; and every escape case of tests/adversarial
(e*.py) reaches its blocked verdict in full mode. Exit status 0 only when all of that holds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from .adapters import dsl_names
from .cli import JudgeClient

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "python" / "tests" / "fixtures"


def find_targets(problems: Path, include_fixtures: bool) -> list[tuple[str, Path, str, Path]]:
    """(label, problem dir, dsl, candidate) for every solution of a registered DSL, plus the fixtures of A01."""
    registered = dsl_names()
    out = []
    for sol in sorted(problems.glob("*/*/*/solution.py")):
        dsl = sol.parent.name
        if dsl in registered:
            out.append((f"{sol.parents[1].name}/{dsl}/solution", sol.parents[1], dsl, sol))
    a01 = problems / "A" / "A01_bias_gelu"
    if include_fixtures and a01.is_dir():
        for dsl in registered:
            f = FIXTURES / f"a01_{dsl}_ok.py"
            if f.is_file():
                out.append((f"A01_bias_gelu/{dsl}/fixture", a01, dsl, f))
    return out


def find_variants(problems: Path, variants: Path, with_experts: bool = False) -> list[tuple[str, Path, str, Path]]:
    """(label, problem dir, dsl, candidate) for every variants/<problem folder>/<dsl>/<name>.py whose
    problem folder exists under problems/ and whose DSL is registered; with_experts: each such
    (folder, dsl)'s expert solution.py first, labelled `expert` (a variant file of that name is
    refused: the label would be ambiguous)."""
    registered = dsl_names()
    folders = {d.name: d for d in problems.glob("*/*") if d.is_dir()}
    out: list[tuple[str, Path, str, Path]] = []
    seen: set[tuple[str, str]] = set()
    for f in sorted(variants.glob("*/*/*.py")):
        folder, dsl = f.parents[1].name, f.parent.name
        if folder not in folders or dsl not in registered:
            continue
        if with_experts and (folder, dsl) not in seen:
            seen.add((folder, dsl))
            if f.stem == "expert" or (f.parent / "expert.py").exists():
                raise ValueError(f"{f.parent / 'expert.py'}: with --with-experts the label `expert` is the "
                                 "expert's solution.py; rename this variant")
            sol = folders[folder] / dsl / "solution.py"
            if sol.is_file():
                out.append((f"tune/{folder}/{dsl}/expert", folders[folder], dsl, sol))
        out.append((f"tune/{folder}/{dsl}/{f.stem}", folders[folder], dsl, f))
    return out


def fmt(x: Any, spec: str = ".1f") -> str:
    return "-" if x is None else format(x, spec)


def row_of(label: str, dsl: str, rep: dict[str, Any], seconds: float) -> dict[str, Any]:
    rt = rep.get("runtime") or {}
    return {"target": label, "dsl": dsl, "verdict": rep.get("verdict"), "reason": rep.get("reason"),
            "median_us": rt.get("median_us"), "iqr_us": rt.get("iqr_us"), "wall_us": rt.get("wall_us_per_call"),
            "t_ref_us": rep.get("t_ref_us"), "t_ref_name": rep.get("t_ref_name"),
            "speedup_eager": rep.get("speedup_eager"), "speedup_compile": rep.get("speedup_compile"),
            "floor_us": rep.get("floor_us"), "compile_s": rep.get("compile_s"), "seconds": round(seconds, 1),
            "message": (rep.get("message") or "")[:300]}


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'target':44} {'verdict':20} {'reason':20} {'median_us':>10} {'iqr':>7} {'t_ref_us':>9} "
            f"{'x_eager':>8} {'x_comp':>7} {'floor':>6} {'build_s':>7}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['target']:44} {r['verdict'] or '-':20} {(r['reason'] or '-')[:20]:20} "
                     f"{fmt(r['median_us']):>10} {fmt(r['iqr_us']):>7} {fmt(r['t_ref_us']):>9} "
                     f"{fmt(r['speedup_eager'], '.2f'):>8} {fmt(r['speedup_compile'], '.2f'):>7} "
                     f"{fmt(r['floor_us']):>6} {fmt(r['compile_s'], '.1f'):>7}")
    return "\n".join(lines)


def sandbox_check(args: argparse.Namespace) -> int:
    """The OS sandbox on this machine: see the module docstring."""
    from .redteam import DEFAULT_MANIFEST, load_manifest, run_cases

    rows: list[dict[str, Any]] = []
    with JudgeClient(args.judge_arg) as judge:
        hello = judge.request("hello", timeout=900)
        if not hello.get("ok"):
            print(f"the judge refused: {hello.get('error')}")
            return 1
        sb = hello.get("sandbox") or {}
        mode = args.mode or ("full" if hello["can_run"] else "compile")
        rows.append({"check": "judge sandbox", "ok": sb.get("tool") == "bubblewrap" and sb.get("unsafe") is False
                     and (sb.get("gpu_nodes") is True or not hello["can_run"]), "detail": json.dumps(sb)})
        for dsl, info in sorted((hello.get("dsls") or {}).items()):
            if not info.get("available"):
                continue
            pdir = args.problems / "A" / "A01_bias_gelu"
            resp = judge.evaluate(pdir, dsl, mode, {"c": pdir / dsl / "solution.py"}, seed=args.seed)
            rep = resp["reports"][0]["report"] if resp.get("ok") else {"verdict": "protocol_error",
                                                                        "message": resp.get("error")}
            ident = ((rep.get("env") or {}).get("runner") or {}).get("identity") or {}
            want_uid = sb.get("uid")
            ok = (rep.get("verdict") == "correct" and ident.get("uid") == want_uid and ident.get("euid") == want_uid
                  and (ident.get("visible_pids") or 99) <= 2 and int(str(ident.get("CapEff", "1")), 16) == 0)
            if not ok:
                print(f"--- log of the A01 {dsl} expert ---\n{str(rep.get('log', ''))[-3000:]}")
            rows.append({"check": f"A01 {dsl} expert, {mode} mode, sandboxed", "ok": ok,
                         "detail": f"{rep.get('verdict')}/{rep.get('reason')}: {str(rep.get('message'))[:200]}; "
                                   f"runner {json.dumps(ident)}"})
        cases = [c for c in load_manifest(DEFAULT_MANIFEST) if c.file.startswith("e")]
        available = {d for d, i in (hello.get("dsls") or {}).items() if i.get("available")}
        cases = [c for c in cases if c.dsl in available]
        for r in run_cases(judge, cases, DEFAULT_MANIFEST.parent, bool(hello["can_run"]), mode, seed=args.seed):
            rows.append({"check": f"escape {r['file']} ({r['mode']})", "ok": r["ok"],
                         "detail": f"expected {r['expected']}, got {r['got']}: {r['message'][:200]}"})
    for r in rows:
        print(f"{'ok  ' if r['ok'] else 'FAIL'} {r['check']:52} {r['detail'][:160]}")
    print(f"[sandbox self-check, mode {mode}, gpu {hello.get('gpu')}]")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"hello": hello, "mode": mode, "rows": rows}, indent=2))
    return 0 if rows and all(r["ok"] for r in rows) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=Path, default=REPO / "problems")
    ap.add_argument("--mode", choices=("compile", "test", "bench", "full"), help="default: full on a GPU")
    ap.add_argument("--only", help="only targets whose label contains this (e.g. A01, tirx)")
    ap.add_argument("--no-fixtures", action="store_true", help="skip the known-correct A01 test fixtures")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--judge-arg", action="append", default=[])
    ap.add_argument("--sandbox", action="store_true", help="check the OS sandbox instead (see above)")
    ap.add_argument("--variants", type=Path, help="also evaluate DIR/<problem folder>/<dsl>/<name>.py (see above)")
    ap.add_argument("--with-experts", action="store_true",
                    help="with --variants: also time each varied (folder, dsl)'s expert as `expert`")
    args = ap.parse_args(argv)
    if args.sandbox:
        return sandbox_check(args)
    targets = find_targets(args.problems, not args.no_fixtures)
    if args.variants is not None:
        try:
            targets += find_variants(args.problems, args.variants, args.with_experts)
        except ValueError as e:
            print(f"selfcheck: {e}", file=sys.stderr)
            return 2
    if args.only:
        targets = [t for t in targets if args.only in t[0]]
    if not targets:
        print("nothing to check", file=sys.stderr)
        return 1
    rows, reports = [], {}
    t_all = time.monotonic()
    with JudgeClient(args.judge_arg) as judge:
        hello = judge.request("hello", timeout=600)
        mode = args.mode or ("full" if hello["can_run"] else "compile")
        for label, pdir, dsl, cand in targets:
            t0 = time.monotonic()
            resp = judge.evaluate(pdir, dsl, mode, {"c": cand}, seed=args.seed)
            rep = resp["reports"][0]["report"] if resp.get("ok") else {"verdict": "protocol_error",
                                                                        "message": resp.get("error")}
            reports[label] = {"response_session": resp.get("session"), "report": rep}
            row = row_of(label, dsl, rep, time.monotonic() - t0)
            rows.append(row)
            # The timing on every progress line and the --out file after every target: a sweep cut
            # short (a step timeout, a lost machine) keeps what it measured.
            print(f"{label}: {rep.get('verdict')} {rep.get('reason') or ''} median {fmt(row['median_us'])} us "
                  f"(IQR {fmt(row['iqr_us'])}) ({time.monotonic() - t0:.0f} s)", file=sys.stderr, flush=True)
            if args.out:
                args.out.parent.mkdir(parents=True, exist_ok=True)
                args.out.write_text(json.dumps({"hello": hello, "mode": mode, "rows": rows, "reports": reports,
                                                "complete": False}, indent=2))
    print(table(rows))
    print(f"[mode {mode}, gpu {hello.get('gpu')}, {time.monotonic() - t_all:.0f} s]")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"hello": hello, "mode": mode, "rows": rows, "reports": reports,
                                        "complete": True}, indent=2))
    return 0 if all(r["verdict"] == "correct" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

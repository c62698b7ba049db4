"""Check that every kernel the hand-written replay conversations write compiles, or fails, the
way the conversations say: runs the real evaluator (python -m mkb_eval.cli, compile mode,
sm_90a, every shape set) on src/kernels/*.py and compares each verdict with src/kernels.toml.

Usage (from the repository root; about 30 minutes on 2 CPU cores):
    .venv/bin/python examples/replay/verify_kernels.py                 # every kernel
    .venv/bin/python examples/replay/verify_kernels.py A01_cute_v1 ... # some kernels
    .venv/bin/python examples/replay/verify_kernels.py --mode test     # on a GPU machine:
        also runs every kernel that must compile through the correctness suite

Exit status 0 only if every verdict is the expected one.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
KERNELS = HERE / "src" / "kernels"
EXPECT = {"ok": "correct", "static": "static_check_failed", "compile_error": "compile_error"}


def problem_dir(problem: str) -> Path:
    """problems/<family>/<id>_<slug> of a problem id like A01."""
    hits = sorted(ROOT.glob(f"problems/*/{problem}_*"))
    if len(hits) != 1:
        raise SystemExit(f"problem {problem}: expected one folder, found {hits}")
    return hits[0]


def evaluate(problem: str, dsl: str, names: list[str], mode: str, python: str) -> dict[str, dict]:
    """Run one judge session over several candidates; key -> report."""
    cmd = [python, "-m", "mkb_eval.cli", "--problem-dir", str(problem_dir(problem)), "--dsl", dsl,
           "--mode", mode, "--quiet", "--full-response"]
    for n in names:
        cmd += ["--candidate", f"{n}={KERNELS / (n + '.py')}"]
    proc = subprocess.run(cmd, cwd=ROOT / "python", capture_output=True, text=True, check=False)
    start = proc.stdout.find("{")
    if start < 0:
        raise SystemExit(f"evaluator printed no JSON (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    resp = json.loads(proc.stdout[start:])
    return {r["key"]: r["report"] for r in resp.get("reports", [])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*", help="kernel names (file stems); default: all")
    ap.add_argument("--mode", choices=["compile", "test"], default="compile")
    ap.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    ap.add_argument("--json", type=Path, help="also write the verdicts here")
    args = ap.parse_args()

    expected = tomllib.loads((HERE / "src" / "kernels.toml").read_text())
    names = args.names or sorted(p.stem for p in KERNELS.glob("*.py"))
    unknown = sorted(set(expected) - {p.stem for p in KERNELS.glob("*.py")})
    if unknown:
        print(f"kernels.toml lists missing kernels: {unknown}")
        return 1
    groups: dict[tuple[str, str], list[str]] = {}
    for n in names:
        problem, dsl, _ = n.split("_", 2)
        groups.setdefault((problem, dsl), []).append(n)

    failures = 0
    results = []
    for (problem, dsl), group in sorted(groups.items()):
        reports = evaluate(problem, dsl, group, "compile", args.python)
        if args.mode == "test":
            must_compile = [n for n in group if n not in expected]
            if must_compile:
                reports.update(evaluate(problem, dsl, must_compile, "test", args.python))
        for n in group:
            r = reports.get(n)
            want = expected.get(n, {}).get("expect", "ok")
            want_verdict = "correct" if args.mode == "test" and want == "ok" else EXPECT[want]
            if r is None:
                ok, verdict, text = False, "missing", ""
            else:
                verdict = r["verdict"]
                text = f"{r.get('message', '')}\n{r.get('log', '')}"
                ok = verdict == want_verdict
                if ok and want != "ok":
                    ok = expected[n]["error"] in text
            failures += not ok
            first = next((ln.strip() for ln in text.splitlines() if expected.get(n, {}).get("error", "\0") in ln), "")
            results.append({"kernel": n, "expected": want_verdict, "verdict": verdict, "ok": ok,
                            "error_line": first, "compile_s": (r or {}).get("compile_s")})
            print(f"{'ok  ' if ok else 'FAIL'} {n:<14} expected {want_verdict:<19} got {verdict:<19} {first[:110]}", flush=True)
            if not ok and r is not None:
                print("     " + text.strip().replace("\n", "\n     ")[:3000], flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    print(f"{len(results) - failures} of {len(results)} as expected")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

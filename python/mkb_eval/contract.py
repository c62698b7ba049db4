"""The Python end of the contract test between mkb and mkb_eval (crates/mkb-eval/tests/contract.rs):
JSON lines on stdin, one answer per line on stdout. Nothing here is used by the judge itself; it
drives the judge's own code on what mkb sends.

    {"op": "problem", "request": EVALUATE}   -> {"ok": true, "spec": ...} the request's problem read
        into mkb_eval.problem.Problem (as the judge reads it) and written back canonically
    {"op": "reports", "request": EVALUATE, "kinds": [{"key", "verdict", "reason"}, ...]}
        -> the evaluate response the judge would send, one report per kind, each built by
        GroupEvaluation.report (mkb_eval.evaluation) from the request's template; a kind with
        reason null passes (in bench or full mode with timing, baselines, floor and roofline);
        "whole_group": true builds it as the judge does for a group it cannot run (infra_report)

Errors are answered as {"ok": false, "error": "..."}, never raised.

    python -m mkb_eval.contract < requests.jsonl
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace
from typing import IO, Any

from . import PROTOCOL_VERSION
from .judge import _finite


def session_for(mode: str) -> Any:
    """The parts of a judge Session that building a report reads (no GPU, no runners)."""
    from .evaluation import JudgeOptions
    from .problem import problem_from_spec

    return SimpleNamespace(options=JudgeOptions(), problem=problem_from_spec, gpu_name="Contract GPU",
                           can_run=mode != "compile", versions={"python": "3", "torch": "x", "cuda": None},
                           sandbox_info={"tool": "none", "unsafe": True}, collect_ipc=lambda: None,
                           baseline_cache={})


def echo_problem(req: dict[str, Any]) -> dict[str, Any]:
    from .problem import problem_from_spec, problem_to_spec

    return {"ok": True, "spec": problem_to_spec(problem_from_spec(req["problem"]))}


def build_reports(req: dict[str, Any], kinds: list[dict[str, Any]]) -> dict[str, Any]:
    """What the judge answers to `req` when its candidates end as `kinds` (module docstring)."""
    from .correctness import CandidateFailure
    from .evaluation import INFRA_REASONS, GroupEvaluation, baseline_summary, infra_report

    mode = req["mode"]
    req = {**req, "candidates": [{"key": k["key"], "path": f"/contract/{k['key']}.py"} for k in kinds]}
    ge = GroupEvaluation(session_for(mode), req, lambda msg: None)
    bench = ge.problem.benchmark_shape
    timed = mode in ("bench", "full")
    if timed:
        entry = {"eager": {n: [100.0 + i, 101.0 + i, 99.0 + i] for i, n in enumerate(ge.problem.eager)},
                 "compile": (ge.problem.compile_baseline, [90.0, 91.0, 92.0]) if mode == "full" else None,
                 "floor": [3.0, 3.1, 2.9]}
        ge.baseline_set = baseline_summary(entry)
        ge.ceilings = {"bandwidth_bytes_per_s": 4.2e12, "bf16_flops_per_s": 7.87e14}
    reports = []
    t0 = time.monotonic()
    for k, c in zip(kinds, ge.cands, strict=True):
        reason = k.get("reason")
        if reason is None:
            c.compile_s, c.shapes_built, c.kernels = 1.5, len(ge.problem.shapes), ["contract_kernel_0"]
            c.checks = {s.name: {"trials": 3, "max_abs_err": 0.0} for s in ge.problem.shapes}
            c.phases.update(static=0.01, load=0.2, build=1.5, correctness=0.4)
            if timed:
                c.times, c.wall_us, c.rounds, c.checked_reps = [50.0, 51.0, 49.5, 50.5], 52.0, 3, 9
                c.phases.update(baselines=0.3, timing=0.8, recheck=0.05)
        elif reason in INFRA_REASONS and k["verdict"] == "crashed" and k.get("whole_group"):
            reports.append({"key": c.key, "report": infra_report(ge.template, mode, reason, f"contract {reason}")})
            continue
        else:
            ge.fail(c, CandidateFailure(k["verdict"], reason, f"contract {k['verdict']}/{reason} on {bench.name!r}",
                                        log="Traceback: contract"))
        reports.append({"key": c.key, "report": ge.report(c, t0)})
    return {"ok": True, "reports": reports, "session": ge.session_info}


def answer(msg: Any) -> dict[str, Any]:
    if not isinstance(msg, dict):
        return {"ok": False, "error": "a message must be a JSON object"}
    op = msg.get("op")
    try:
        if op == "problem":
            return echo_problem(msg["request"])
        if op == "reports":
            return build_reports(msg["request"], msg["kinds"])
    except Exception as e:  # noqa: BLE001 - the test reads the error
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    return {"ok": False, "error": f"unknown op {op!r}"}


def serve(inp: IO[str], out: IO[str]) -> int:
    for line in inp:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
        except ValueError as e:
            reply: dict[str, Any] = {"ok": False, "error": f"bad JSON: {e}"}
        else:
            reply = answer(msg)
        out.write(json.dumps(_finite({"v": PROTOCOL_VERSION, **reply}), allow_nan=False, default=str) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.stdin, sys.stdout))

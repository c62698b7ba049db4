"""A fake judge for the sessions benchmark (scripts/bench-sessions.sh): speaks the judge's
JSON-lines protocol (docs/protocol.md) like `python -m mkb_eval.judge`, never touches a GPU or
a DSL, and answers each evaluation after a randomized time that stands in for real work:
compile 2-5 s, test 2-6 s, benchmark 4-8 s (uniform), and for a final evaluation 2-8 s plus
0.1 s per candidate. Every kernel is `correct`; timed modes get a made-up runtime.

It claims a GPU when mkb gives it one (CUDA_VISIBLE_DEVICES set and not empty), so that the
agents' test and benchmark tools and the final evaluations go through the GPU queue. Each
evaluation is appended to $MKB_EVAL_BENCH_JUDGE_LOG as one JSON line (judge pid, mode, start, end).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from typing import Any

PROTOCOL = 2
SECONDS = {"compile": (2.0, 5.0), "test": (2.0, 6.0), "bench": (4.0, 8.0), "full": (2.0, 8.0)}


def send(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def duration(mode: str, n_candidates: int) -> float:
    lo, hi = SECONDS.get(mode, (2.0, 8.0))
    extra = 0.1 * (n_candidates - 1) if n_candidates > 1 else 0.0
    return random.uniform(lo, hi) + extra


def report(template: dict[str, Any], mode: str, seconds: float) -> dict[str, Any]:
    r = {**template, "verdict": "correct", "mode": mode, "reason": None, "message": "fake judge"}
    r["eval_s"] = seconds
    r["phases"] = {"total": seconds}
    if mode in ("bench", "full"):
        median = random.uniform(20.0, 40.0)
        r["runtime"] = {"median_us": median, "iqr_us": 0.5, "reps": 100, "timer": "fake"}
        r["t_ref_us"] = 50.0
        r["t_ref_name"] = "eager"
        r["speedup_eager"] = 50.0 / median
    return r


def main() -> None:
    log = os.environ.get("MKB_EVAL_BENCH_JUDGE_LOG")
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    random.seed(os.getpid() ^ time.time_ns())
    for line in sys.stdin:
        req = json.loads(line)
        rid, op = req.get("id"), req.get("op")
        if op == "hello":
            send({"v": PROTOCOL, "id": rid, "ok": True, "pid": os.getpid(), "python": "fake",
                  "gpu": f"fake GPU {gpu} (no GPU is used)" if gpu else None,
                  "can_run": bool(gpu), "sandbox": {"unsafe": False},
                  "dsls": {"cute": {"available": True}, "tirx": {"available": True}}})
        elif op == "evaluate":
            mode = req["mode"]
            cands = req["candidates"]
            start = time.time()
            seconds = duration(mode, len(cands))
            time.sleep(seconds)
            reports = [{"key": c["key"], "report": report(req["report"], mode, seconds / len(cands))}
                       for c in cands]
            send({"v": PROTOCOL, "id": rid, "ok": True, "reports": reports, "session": {}})
            if log:
                with open(log, "a", encoding="utf-8") as f:
                    f.write(json.dumps({"pid": os.getpid(), "gpu": gpu, "mode": mode,
                                        "candidates": len(cands), "start": start,
                                        "end": time.time()}) + "\n")
        elif op == "shutdown":
            send({"v": PROTOCOL, "id": rid, "ok": True})
            break
        else:
            send({"v": PROTOCOL, "id": rid, "ok": False, "error": f"unknown op {op!r}"})


if __name__ == "__main__":
    main()

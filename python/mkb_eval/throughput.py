"""Throughput of the evaluator on a GPU: one judge, a queue of full evaluations of the expert
solutions (each expert `--repeat` times, round robin, every request a fresh candidate with a fresh
seed), then per request the wall seconds and per expert the runtime medians. Prints and writes a
JSON summary: median eval seconds, evaluations per GPU-hour (requests / queue wall time), the
coefficient of variation of each expert's runtime medians, the median phase breakdown.

    python -m mkb_eval.throughput --dsl cute --repeat 10 --out bench.json [--problems A01 C01 D01]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from .adapters import dsl_names
from .cli import JudgeClient, iter_reports

REPO = Path(__file__).resolve().parents[2]


def find_problem(pid: str) -> Path:
    hits = [p for p in (REPO / "problems").glob("*/*") if p.name.split("_")[0].upper() == pid.upper()]
    if len(hits) != 1:
        raise SystemExit(f"no single problem folder for {pid!r}")
    return hits[0]


def summarize(rows: list[dict[str, Any]], wall_s: float) -> dict[str, Any]:
    evals = [r["eval_s"] for r in rows]
    out: dict[str, Any] = {
        "requests": len(rows), "queue_wall_s": wall_s,
        "median_eval_s": statistics.median(evals) if evals else None,
        "evals_per_gpu_hour": 3600.0 * len(rows) / wall_s if wall_s > 0 else None,
        "verdicts": {v: sum(r["verdict"] == v for r in rows) for v in sorted({r["verdict"] for r in rows})},
        "experts": {},
    }
    for key in sorted({r["expert"] for r in rows}):
        med = [r["median_us"] for r in rows if r["expert"] == key and r["median_us"]]
        out["experts"][key] = {
            "runs": sum(r["expert"] == key for r in rows), "medians_us": med,
            "cv": statistics.stdev(med) / statistics.mean(med) if len(med) >= 2 else None,
            "median_eval_s": statistics.median([r["eval_s"] for r in rows if r["expert"] == key]),
        }
    phases = [r["phases"] for r in rows if r.get("phases")]
    if phases:
        out["median_phases_s"] = {k: statistics.median(p.get(k, 0.0) for p in phases) for k in phases[0]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsl", required=True, choices=dsl_names())
    ap.add_argument("--problems", nargs="*", default=["A01", "C01", "D01"])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--mode", default="full")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--seed", type=int, default=None,
                    help="one seed for every request (the same inputs each time: tells noise from input data)")
    ap.add_argument("--judges", type=int, default=1,
                    help="judges sharing the GPU (one at a time holds it: mkb_eval.gpulock); the others build")
    ap.add_argument("--judge-arg", action="append", default=[], help="extra judge argument (repeatable)")
    args = ap.parse_args(argv)
    experts = [(pid, find_problem(pid)) for pid in args.problems]
    rows: list[dict[str, Any]] = []
    queue = [(i, pid, pdir) for i in range(args.repeat) for pid, pdir in experts]
    lock = threading.Lock()
    judges = [JudgeClient(list(args.judge_arg)) for _ in range(args.judges)]
    try:
        hellos = [j.request("hello", timeout=900) for j in judges]
        hello = hellos[0]
        t0 = time.monotonic()

        def work(judge: JudgeClient) -> None:
            while True:
                with lock:
                    if not queue:
                        return
                    i, pid, pdir = queue.pop(0)
                t1 = time.monotonic()
                resp = judge.evaluate(pdir, args.dsl, args.mode, {f"{pid}-{i}": pdir / args.dsl / "solution.py"},
                                      seed=args.seed)
                for _key, rep in iter_reports(resp):
                    env = rep.get("env") or {}
                    r = {"expert": pid, "run": i, "judge": judges.index(judge), "verdict": rep["verdict"],
                         "reason": rep.get("reason"), "eval_s": rep.get("eval_s"), "request_s": time.monotonic() - t1,
                         "median_us": (rep.get("runtime") or {}).get("median_us"),
                         "reps": (rep.get("runtime") or {}).get("reps"), "ideal_us": rep.get("ideal_us"),
                         "phases": rep.get("phases"), "gpu_wait_s": env.get("gpu_wait_s", 0.0),
                         "correctness_s": env.get("correctness_s"), "clocks": env.get("clocks"),
                         "deciles_us": (env.get("timing") or {}).get("deciles_us")}
                    with lock:
                        rows.append(r)
                    print(f"{pid} #{i} (judge {r['judge']}): {r['verdict']} {r['reason'] or ''} eval {r['eval_s']:.2f} s "
                          f"(waited {r['gpu_wait_s']:.2f} s for the GPU), median {r['median_us']} us, {r['reps']} reps, "
                          f"phases {r['phases']}, correctness {r['correctness_s']}", flush=True)

        threads = [threading.Thread(target=work, args=(j,)) for j in judges]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
    finally:
        for j in judges:
            j.close()
    summary = {"dsl": args.dsl, "mode": args.mode, "judges": args.judges, "gpu": hello.get("gpu"), "torch": hello.get("torch"),
               "command": " ".join(sys.argv), **summarize(rows, wall), "rows": rows}
    print(json.dumps({k: v for k, v in summary.items() if k != "rows"}, indent=2))
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

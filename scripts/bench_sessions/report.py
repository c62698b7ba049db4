"""The numbers of one sessions benchmark (scripts/bench-sessions.sh), from what the run left in
its work folder: the run's store (attempts, meta `eval_queue`), the stub model server's call
log, the fake judges' evaluation log, the /proc samples of the `mkb` process and the output of
`/usr/bin/time -v`. Writes results.json and prints a Markdown summary.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from pathlib import Path
from typing import Any


def lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def quantile(v: list[float], q: float) -> float:
    """Nearest-rank quantile (0 for no data)."""
    if not v:
        return 0.0
    s = sorted(v)
    k = max(1, min(len(s), int(-(-q * len(s) // 1))))
    return s[k - 1]


def overlap_profile(spans: list[tuple[float, float]]) -> tuple[int, float, float]:
    """Peak count of overlapping spans, their time-averaged count over [first start, last end],
    and the seconds during which at least 64 overlapped."""
    if not spans:
        return 0, 0.0, 0.0
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    cur = peak = 0
    area = at64 = 0.0
    last = events[0][0]
    for t, d in events:
        area += cur * (t - last)
        if cur >= 64:
            at64 += t - last
        last = t
        cur += d
        peak = max(peak, cur)
    span = events[-1][0] - events[0][0]
    return peak, (area / span if span > 0 else 0.0), at64


def from_outside(calls: list[dict[str, Any]], evals: list[dict[str, Any]], n_gpu: int,
                 n_cpu: int) -> dict[str, float]:
    """The queues as seen from outside mkb, for a cross-check of its own accounts and for what
    they cannot see: a request is submitted when the model call asking for it ends (stub log)
    and taken when a fake judge starts on it (judge log). Seconds summed over judges: GPU judges
    idle while a test/benchmark request waited, GPU-less judges idle while a compile waited,
    and GPU judges idle while a compile waited (work a GPU judge could do, but the pool sends
    compile-only requests to GPU-less judges alone); and the wall seconds compiles waited while
    at least one GPU judge was idle. Final evaluations (not asked for by a model call) count
    as busy time only."""
    ev: list[tuple[float, str, int]] = []
    for c in calls:
        if c["tool"] == "compile":
            ev.append((c["end"], "cpu_wait", 1))
        elif c["tool"] in ("test", "benchmark"):
            ev.append((c["end"], "gpu_wait", 1))
    for e in evals:
        q = "gpu" if e["gpu"] else "cpu"
        if e["mode"] != "full":
            ev.append((e["start"], f"{q}_wait", -1))
        ev.append((e["start"], f"{q}_busy", 1))
        ev.append((e["end"], f"{q}_busy", -1))
    ev.sort(key=lambda x: (x[0], x[2]))
    state = {"cpu_wait": 0, "gpu_wait": 0, "cpu_busy": 0, "gpu_busy": 0}
    out = {"gpu_idle_while_gpu_waited_s": 0.0, "cpu_idle_while_cpu_waited_s": 0.0,
           "gpu_idle_while_compile_waited_s": 0.0, "wall_s_compiles_waited_beside_idle_gpu_judge": 0.0}
    last = ev[0][0] if ev else 0.0
    for t, k, d in ev:
        dt = t - last
        gpu_idle = max(0, n_gpu - state["gpu_busy"])
        cpu_idle = max(0, n_cpu - state["cpu_busy"])
        if state["gpu_wait"] > 0:
            out["gpu_idle_while_gpu_waited_s"] += gpu_idle * dt
        if state["cpu_wait"] > 0:
            out["cpu_idle_while_cpu_waited_s"] += cpu_idle * dt
            out["gpu_idle_while_compile_waited_s"] += min(gpu_idle, state["cpu_wait"]) * dt
            if gpu_idle > 0:
                out["wall_s_compiles_waited_beside_idle_gpu_judge"] += dt
        state[k] += d
        last = t
    return {k: round(v, 2) for k, v in out.items()}


def time_v(path: Path) -> dict[str, float]:
    """The numbers of `/usr/bin/time -v` output that matter here."""
    out: dict[str, float] = {}
    if not path.exists():
        return out
    keys = {"User time (seconds)": "user_s", "System time (seconds)": "sys_s",
            "Maximum resident set size (kbytes)": "max_rss_kib",
            "Percent of CPU this job got": "cpu_percent",
            "Elapsed (wall clock) time (h:mm:ss or m:ss)": "wall"}
    for line in path.read_text(encoding="utf-8").splitlines():
        k, _, v = line.strip().rpartition(": ")
        if k in keys:
            v = v.strip().rstrip("%")
            if keys[k] == "wall":
                parts = [float(x) for x in v.split(":")]
                secs = 0.0
                for p in parts:
                    secs = secs * 60 + p
                out["wall_s"] = secs
            else:
                out[keys[k]] = float(v)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="the benchmark's work folder")
    ap.add_argument("--run-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="results.json to write")
    a = ap.parse_args()
    w = a.work
    facts = json.loads((w / "facts.json").read_text(encoding="utf-8"))

    db = sqlite3.connect(f"file:{a.run_dir / 'mkb.sqlite'}?mode=ro", uri=True)
    attempts = db.execute("SELECT condition, end_reason, turns, tool_evals, wall_s, eval_wait_s "
                          "FROM attempts").fetchall()
    n_final = db.execute("SELECT COUNT(*) FROM final_evals").fetchone()[0]
    meta = dict(db.execute("SELECT key, value FROM meta").fetchall())
    queue = json.loads(meta.get("eval_queue", "null"))

    calls = lines(w / "llm-calls.jsonl")
    evals = lines(w / "judge-evals.jsonl")
    samples = lines(w / "procmon.jsonl")
    tv = time_v(w / "time-v.txt")

    # Sessions: from their first model call's start to their last call's end (distillation
    # included), as the stub server saw them.
    by_session: dict[str, list[float]] = {}
    for c in calls:
        s = by_session.setdefault(c["session"], [c["start"], c["end"]])
        s[0], s[1] = min(s[0], c["start"]), max(s[1], c["end"])
    spans = [(s, e) for s, e in by_session.values()]
    peak_sessions, mean_sessions, at64 = overlap_profile(spans)
    peak_calls, mean_calls, _ = overlap_profile([(c["start"], c["end"]) for c in calls])
    t_first = min((s for s, _ in spans), default=0.0)
    t_last = max((e for _, e in spans), default=0.0)
    phase_s = t_last - t_first

    # mkb's own CPU: the last /proc sample (children excluded), and the busiest 10 s.
    cpu_s = (samples[-1]["utime_s"] + samples[-1]["stime_s"]) if samples else 0.0
    # VmHWM is updated lazily by the kernel: take the larger of it and any sampled VmRSS.
    hwm = max((max(s["hwm_kib"], s["rss_kib"]) for s in samples), default=0)
    busiest = 0.0
    for i, s in enumerate(samples):
        j = i
        while j + 1 < len(samples) and samples[j + 1]["t"] - s["t"] <= 10.0:
            j += 1
        dt = samples[j]["t"] - s["t"]
        if dt >= 5.0:
            used = (samples[j]["utime_s"] + samples[j]["stime_s"]) - (s["utime_s"] + s["stime_s"])
            busiest = max(busiest, used / dt)
    threads = max((s["threads"] for s in samples), default=0)
    loads = [s["load1"] for s in samples]

    judge_busy = sum(e["end"] - e["start"] for e in evals)
    modes: dict[str, int] = {}
    for e in evals:
        modes[e["mode"]] = modes.get(e["mode"], 0) + 1
    tools: dict[str, int] = {}
    for c in calls:
        tools[c["tool"]] = tools.get(c["tool"], 0) + 1

    res: dict[str, Any] = {
        "facts": facts,
        "mkb_wall_s": round(facts["mkb_end"] - facts["mkb_start"], 1),
        "exit_code": facts.get("exit_code"),
        "attempts": len(attempts),
        "attempts_by_end_reason": {r: sum(1 for x in attempts if x[1] == r)
                                   for r in sorted({x[1] for x in attempts})},
        "final_evals": n_final,
        "sessions_seen_by_stub": len(by_session),
        "sessions_peak_concurrent": peak_sessions,
        "sessions_mean_concurrent": round(mean_sessions, 1),
        "seconds_with_64_or_more_sessions": round(at64, 1),
        "attempt_phases_s": round(phase_s, 1),
        "attempts_per_minute": round(len(attempts) / phase_s * 60, 2) if phase_s else 0.0,
        "model_calls": len(calls),
        "model_calls_by_tool": tools,
        "model_calls_per_s": round(len(calls) / phase_s, 3) if phase_s else 0.0,
        "model_calls_peak_in_flight": peak_calls,
        "model_calls_mean_in_flight": round(mean_calls, 1),
        "model_latency_s": {"p50": round(quantile([c["latency_s"] for c in calls], 0.5), 2),
                            "p95": round(quantile([c["latency_s"] for c in calls], 0.95), 2),
                            "max": round(max((c["latency_s"] for c in calls), default=0.0), 2)},
        "request_kib": {"p50": round(quantile([c["in_bytes"] / 1024 for c in calls], 0.5), 1),
                        "max": round(max((c["in_bytes"] / 1024 for c in calls), default=0.0), 1)},
        "evaluations": len(evals),
        "evaluations_by_mode": modes,
        "judge_busy_s": round(judge_busy, 1),
        "attempt_eval_wait_s": {
            "p50": round(quantile([x[5] or 0.0 for x in attempts], 0.5), 1),
            "max": round(max((x[5] or 0.0 for x in attempts), default=0.0), 1)},
        "attempt_wall_s": {"p50": round(quantile([x[4] for x in attempts], 0.5), 1),
                           "max": round(max((x[4] for x in attempts), default=0.0), 1)},
        "mkb_process": {"cpu_s": round(cpu_s, 2),
                        "cpu_s_per_attempt": round(cpu_s / len(attempts), 3) if attempts else 0.0,
                        "cpu_s_per_model_call": round(cpu_s / len(calls), 4) if calls else 0.0,
                        "mean_cores": round(cpu_s / (facts["mkb_end"] - facts["mkb_start"]), 3),
                        "busiest_10s_cores": round(busiest, 3),
                        "peak_rss_mib": round(hwm / 1024, 1), "peak_threads": threads},
        "load1_during_run": {"min": min(loads, default=0.0), "max": max(loads, default=0.0),
                             "mean": round(sum(loads) / len(loads), 2) if loads else 0.0},
        "time_v_mkb_and_children": tv,
        "eval_queue": queue,
    }
    if queue:
        qs = {"cpu": queue["cpu"], **({"gpu": queue["gpu"]} if queue.get("gpu") else {})}
        res["idle_while_waiting_s"] = {
            k: round(sum(j["idle_while_waiting_s"] for j in q["judges"]), 3) for k, q in qs.items()}
        n_gpu = len(queue["gpu"]["judges"]) if queue.get("gpu") else 0
        res["from_outside"] = from_outside(calls, evals, n_gpu, len(queue["cpu"]["judges"]))
    finals = [e for e in evals if e["mode"] == "full"]
    if finals:
        res["final_phase"] = {
            "requests": len(finals), "candidates": sum(e["candidates"] for e in finals),
            "wall_s": round(max(e["end"] for e in finals) - min(e["start"] for e in finals), 1),
            "judge_busy_s": round(sum(e["end"] - e["start"] for e in finals), 1)}
    a.out.write_text(json.dumps(res, indent=2) + "\n", encoding="utf-8")
    print(summary(res))


def summary(r: dict[str, Any]) -> str:
    m = r["mkb_process"]
    tv = r["time_v_mkb_and_children"]
    ld = r["load1_during_run"]
    f = r["facts"]
    out = [
        f"- machine: {f['nproc']} cores ({f['cpu']}), {f['memory_before']}; 1-minute load "
        f"{ld['min']}-{ld['max']} (mean {ld['mean']}) during the run (other jobs share the cores)",
        f"- attempts: {r['attempts']} ({r['attempts_by_end_reason']}), final evaluations: "
        f"{r['final_evals']}, exit code {r['exit_code']}; mkb wall {r['mkb_wall_s']} s",
        f"- sessions: peak {r['sessions_peak_concurrent']} concurrent, mean "
        f"{r['sessions_mean_concurrent']} over the attempt phases ({r['attempt_phases_s']} s), "
        f">= 64 at once for {r['seconds_with_64_or_more_sessions']} s",
        f"- throughput: {r['attempts_per_minute']} attempts/min, {r['model_calls_per_s']} model "
        f"calls/s ({r['model_calls']} calls, peak {r['model_calls_peak_in_flight']} in flight, "
        f"latency p50 {r['model_latency_s']['p50']} s / p95 {r['model_latency_s']['p95']} s)",
        f"- evaluations: {r['evaluations']} {r['evaluations_by_mode']}, judges busy "
        f"{r['judge_busy_s']} s in all",
        f"- mkb process alone (/proc): {m['cpu_s']} CPU s ({m['cpu_s_per_attempt']} per attempt, "
        f"{m['cpu_s_per_model_call']} per model call), mean {m['mean_cores']} cores, busiest 10 s "
        f"{m['busiest_10s_cores']} cores, peak RSS {m['peak_rss_mib']} MiB, {m['peak_threads']} threads",
        f"- mkb and its judges (/usr/bin/time -v): user {tv.get('user_s')} s, sys {tv.get('sys_s')} s, "
        f"max RSS {round(tv.get('max_rss_kib', 0) / 1024, 1)} MiB (largest single process)",
    ]
    q = r.get("eval_queue")
    if q:
        for name in ("cpu", "gpu"):
            s = q.get(name)
            if not s:
                continue
            out.append(
                f"- {name} queue: {s['requests']} requests, wait p50 {s['wait_p50_s']} s / p95 "
                f"{s['wait_p95_s']} s / max {s['wait_max_s']} s, at most {s['max_waiting']} waiting; "
                f"judges idle while a request waited: {r['idle_while_waiting_s'][name]} s in all "
                f"(busy {round(sum(j['busy_s'] for j in s['judges']), 1)} s, idle "
                f"{round(sum(j['idle_s'] for j in s['judges']), 1)} s)")
    else:
        out.append("- eval_queue: not recorded in the store")
    o = r.get("from_outside")
    if o:
        out.append(
            f"- from outside (stub and judge logs): GPU judges idle while a test/benchmark waited "
            f"{o['gpu_idle_while_gpu_waited_s']} s, GPU-less judges idle while a compile waited "
            f"{o['cpu_idle_while_cpu_waited_s']} s; GPU judges idle while a compile waited "
            f"{o['gpu_idle_while_compile_waited_s']} judge-s (compiles waited beside an idle GPU "
            f"judge for {o['wall_s_compiles_waited_beside_idle_gpu_judge']} s of wall time)")
    f = r.get("final_phase")
    if f:
        out.append(f"- final evaluations: {f['requests']} requests ({f['candidates']} kernels) "
                   f"one after another, {f['wall_s']} s of wall time")
    return "\n".join(out)


if __name__ == "__main__":
    main()

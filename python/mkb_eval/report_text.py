"""The report of an evaluation: the template Rust sends filled in (verdict, runtime, baselines,
env, phases) and the pass message; the reason codes that mean an infrastructure failure. A
mixin of GroupEvaluation and the helpers the judge uses."""

from __future__ import annotations

import copy
import time
from typing import TYPE_CHECKING, Any

from .timing import candidate_spin_cycles, host_summary, quantile
from .timing import summarize as summarize_times

if TYPE_CHECKING:
    from .evaluation import Candidate

LOG_LIMIT = 8000
PHASES = ("static", "load", "build", "correctness", "baselines", "timing", "recheck", "total")
# Failures that say nothing about the candidate (verdict `crashed`): mkb retries them and records
# "not evaluated" if they persist (crates/mkb-core/src/eval.rs INFRA_REASONS is the same list).
INFRA_REASONS = ("no_gpu", "dsl_unavailable", "judge_error", "profiler_error", "runner_killed", "host_overload")


def infra_report(template: dict[str, Any], mode: str, reason: str, message: str) -> dict[str, Any]:
    """A report for something that is not the candidate's doing: verdict `crashed` with one of
    INFRA_REASONS; Rust retries these and records "not evaluated" if they persist."""
    if reason not in INFRA_REASONS:
        raise ValueError(f"{reason!r} is not an infrastructure reason")
    rep = empty_report(template, "crashed", mode, reason, message)
    rep["env"] = {"infrastructure": True}
    return rep


def empty_report(template: dict[str, Any], verdict: str, mode: str, reason: str | None,
                 message: str) -> dict[str, Any]:
    """A fresh copy of the report template mkb sent with the request (EvalReport::template of
    crates/mkb-core/src/eval.rs, the report's one field list) with the verdict filled in; mkb
    refuses a report with a field the template lacks or without one it has."""
    return {**copy.deepcopy(template), "verdict": verdict, "mode": mode, "reason": reason, "message": message}


def summary_of(r: dict[str, Any]) -> str:
    """The runner's one-line summary of a failure, else the last line of its traceback."""
    if r.get("summary"):
        return str(r["summary"])
    err = str(r.get("error", "")).replace("\x00", "").strip()
    return err.splitlines()[-1] if err else "unknown error"


def trim_log(text: str, limit: int = LOG_LIMIT) -> str:
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"[trimmed: the first {cut} of {len(text)} characters were cut]\n" + text[-limit:]


class Reporting:
    def report(self, c: Candidate, t0: float) -> dict[str, Any]:
        if c.failure is not None:
            rep = empty_report(self.template, c.failure.verdict, self.mode, c.failure.reason, c.failure.message)
        else:
            rep = empty_report(self.template, "correct", self.mode, None, self.pass_message(c))
        rep["compile_s"] = c.compile_s
        rep["kernels"] = list(c.kernels)
        if c.failure is not None and c.failure.reason in INFRA_REASONS:
            rep["message"] += " [infrastructure failure: not a result of the candidate; retry]"
        rep["checks"] = c.checks
        rep["env"] = {
            "gpu": self.session.gpu_name,
            "timer": "cuda_event",
            "versions": {**self.session.versions, "dsl": self.dsl, "dsl_version": c.ready.get("version")},
            "runner": {k: c.ready.get(k) for k in ("pid", "net", "compile_only", "python", "identity")} if c.ready else None,
            "sandbox": getattr(self.session, "sandbox_info", None),
            "clocks": self.session_info.get("clocks", {}),
            "limits": self.limits,
            "compiled_kernels": [k[:200] for k in c.compiled[:20]],
        }
        if c.failure is not None and c.failure.reason in INFRA_REASONS:
            rep["env"]["infrastructure"] = True
        if self.gpu_wait_s:
            rep["env"]["gpu_wait_s"] = round(self.gpu_wait_s, 4)  # waiting for another judge's GPU work
        clock = c.checker.clock if c.checker is not None else c.clock
        if clock:  # where the checks' time went (correctness trials and the re-check)
            rep["env"]["correctness_s"] = {k: round(v, 4) for k, v in sorted(clock.items())}
        if self.mode in ("bench", "full"):
            ideal = self.ideal()
            if ideal is not None:
                rep["ideal_us"] = ideal["ideal_us"]
                rep["env"]["ceilings"] = {"bandwidth_bytes_per_s": ideal["bw"],
                                          f"{ideal['flops_format']}_flops_per_s": ideal["peak"],
                                          "bytes": ideal["bytes"], "flops": ideal["flops"]}
            if c.rounds:
                srt = sorted(c.times)
                rep["env"]["timing"] = {"rounds": c.rounds, "checked_reps": c.checked_reps,
                                        "fresh_inputs_every_rep": True, "options": dict(self.timing),
                                        # the shape of the distribution: quantiles 0, 0.1, ..., 1
                                        "deciles_us": [round(quantile(srt, q / 10), 3) for q in range(11)]
                                        if srt else [],
                                        # reported by the runner: a diagnostic, never judged
                                        "host_enqueue": host_summary(
                                            c.host_us, candidate_spin_cycles(float(self.timing["wake_us"])))}
        if self.mode in ("bench", "full") and self.baseline_set is not None:
            bl = self.baseline_set
            rep["baselines"] = bl["baselines"]
            rep["t_ref_us"], rep["t_ref_name"] = bl["t_ref_us"], bl["t_ref_name"]
            rep["floor_us"] = bl["floor_us"]
            if bl.get("compile_error"):
                rep["env"]["compile_baseline_error"] = bl["compile_error"][:500]
            if c.failure is None and c.times:
                rt = summarize_times(c.times, c.wall_us)
                rep["runtime"] = rt
                t = rt["median_us"]
                if t > 0 and bl["t_ref_us"]:
                    rep["speedup_eager"] = bl["t_ref_us"] / t
                if t > 0 and bl.get("t_compile_us"):
                    rep["speedup_compile"] = bl["t_compile_us"] / t
        log = ""
        if self.cache_notes:
            log += "\n".join(self.cache_notes) + "\n"
        if c.error_log:
            log += c.error_log.rstrip() + "\n"
        if c.notes:
            log += "\n".join(c.notes) + "\n"
        if c.log:
            log += "--- runner log ---\n" + c.log
        rep["log"] = trim_log(log)
        rep["eval_s"] = time.monotonic() - t0
        c.phases["total"] = rep["eval_s"]
        rep["phases"] = {k: round(c.phases.get(k, 0.0), 4) for k in PHASES}
        return rep

    def pass_message(self, c: Candidate) -> str:
        n = c.shapes_built
        if self.mode == "compile":
            return (f"static check passed; build() compiled {n} shape set{'s' if n != 1 else ''} for sm_90a in "
                    f"{c.compile_s or 0:.2f} s (compile only: nothing ran)")
        trials = sum(v.get("trials", 0) for v in c.checks.values())
        msg = (f"passed {trials} trials on {len(c.checks)} shape sets (dynamic check, input perturbation, fresh "
               f"buffers)")
        if self.mode in ("bench", "full") and c.times and self.baseline_set:
            st = summarize_times(c.times, c.wall_us)
            bl = self.baseline_set
            msg += (f"; runtime median {st['median_us']:.1f} us (IQR {st['iqr_us']:.1f}, {st['reps']} reps on fresh "
                    f"inputs, {c.checked_reps} of them verified in secret, re-checked after timing)")
            ideal = self.ideal()
            if ideal is not None:
                msg += f"; roofline ideal {ideal['ideal_us']:.1f} us ({ideal['ideal_us'] / st['median_us']:.0%} of it)"
            if bl.get("t_ref_us"):
                msg += f"; t_ref {bl['t_ref_us']:.1f} us ({bl['t_ref_name']}), speedup {bl['t_ref_us'] / st['median_us']:.2f}x"
            if bl.get("floor_us") is not None:
                msg += f"; floor {bl['floor_us']:.1f} us"
        return msg

    # -- the whole group --------------------------------------------------------------------------

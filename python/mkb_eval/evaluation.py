"""One `evaluate` request: a group of candidates of one problem and one DSL, judged in the order of
docs/evaluator.md (static check -> load -> build -> correctness -> timing), with the timing of the
group interleaved round by round with the PyTorch baselines and the empty-kernel floor, then a
re-check; every failure becomes a verdict in an EvalReport (crates/mkb-core/src/eval.rs)."""

from __future__ import annotations

import math
import random
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .correctness import CandidateFailure, CorrectnessChecker, call_with_params
from .dynamic import compare_kernel_sets, judge_record
from .pool import RunnerError, RunnerHandle
from .problem import (
    InputGenerator,
    Problem,
    ShapeSet,
    TensorDecl,
    allocate,
    derive_seed,
    make_spec,
    spec_to_wire,
)
from .static_check import check_source, summarize
from .timing import summarize as summarize_times
from .timing import wall_mismatch

MODES = ("compile", "test", "bench", "full")
DEFAULT_LIMITS: dict[str, float] = {"build_s": 300.0, "call_s": 60.0, "total_s": 1200.0, "rss_mb": 32768.0}
DEFAULT_TIMING: dict[str, float] = {"min_reps": 100, "min_time_s": 1.0, "warmup": 10, "rounds": 5, "checkpoints": 3}
LOG_LIMIT = 8000
INFRA_REASONS = ("no_gpu", "dsl_unavailable", "judge_error", "profiler_error")


@dataclass
class JudgeOptions:
    check_trials: int = 5
    bench_trials: int = 2
    max_reps: int = 20000
    calib_reps: int = 5
    wall_calls: int = 20
    runner_start_s: float = 600.0
    read_policy: str = "enforce"


@dataclass
class Candidate:
    key: str
    path: str
    started: float = field(default_factory=time.monotonic)
    budget: float = 0.0  # seconds left of limits.total_s, spent only while the runner works for it
    failure: CandidateFailure | None = None
    runner: RunnerHandle | None = None
    ready: dict[str, Any] = field(default_factory=dict)
    compile_s: float | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    kernels: list[str] = field(default_factory=list)
    checker: CorrectnessChecker | None = None
    times: list[float] = field(default_factory=list)
    wall_us: float | None = None
    est_us: float = 0.0
    profile: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    error_log: str = ""
    pool: Any = None
    log: str = ""
    shapes_built: int = 0
    compiled: list[str] = field(default_factory=list)  # kernel names the DSL compiled in the runner

    @property
    def alive(self) -> bool:
        return self.failure is None


def infra_report(mode: str, reason: str, message: str) -> dict[str, Any]:
    """A report for something that is not the candidate's doing: verdict `crashed` with an
    infrastructure reason (no_gpu, dsl_unavailable, judge_error, profiler_error); Rust treats
    these as "not evaluated" (EvalReport::infrastructure)."""
    return empty_report("crashed", mode, reason, message)


def empty_report(verdict: str, mode: str, reason: str | None, message: str) -> dict[str, Any]:
    return {"verdict": verdict, "mode": mode, "reason": reason, "message": message, "compile_s": None,
            "runtime": None, "baselines": [], "t_ref_us": None, "t_ref_name": None, "speedup_eager": None,
            "speedup_compile": None, "floor_us": None, "kernels": [], "env": {}, "checks": {}, "log": "",
            "eval_s": 0.0}


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


class RunnerTarget:
    """The correctness Target backed by a runner process."""

    def __init__(self, ev: GroupEvaluation, c: Candidate):
        self.ev = ev
        self.c = c

    def bind(self, shape: ShapeSet, inputs: Sequence[Any], outputs: Sequence[Any]) -> None:
        r = self.ev.rq(self.c, {"op": "bind", "shape": shape.name, "inputs": list(inputs), "outputs": list(outputs)},
                       self.ev.limits["call_s"], "call_timeout", f"binding buffers of shape set {shape.name!r}")
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"binding buffers failed: {r.get('error', '')[:300]}",
                                   log=r.get("error", ""))

    def call(self, shape: ShapeSet, checked: bool) -> dict[str, Any] | None:
        what = f"run() on shape set {shape.name!r}"
        r = self.ev.rq(self.c, {"op": "call", "shape": shape.name, "checked": checked},
                       self.ev.limits["call_s"] + (30.0 if checked else 0.0), "call_timeout", what)
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"{what} raised: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        return r.get("record")


class GroupEvaluation:
    def __init__(self, session: Any, req: dict[str, Any], emit: Callable[[dict[str, Any]], None]):
        self.session = session
        self.opts: JudgeOptions = session.options
        self.emit = emit
        self.req_id = req.get("id")
        self.problem: Problem = session.problem(req["problem_dir"])
        self.dsl: str = req["dsl"]
        self.mode: str = req["mode"]
        self.seed = int(req["seed"])
        self.limits = {**DEFAULT_LIMITS, **{k: float(v) for k, v in (req.get("limits") or {}).items()
                                            if k in DEFAULT_LIMITS}}
        self.timing = {**DEFAULT_TIMING, **{k: v for k, v in (req.get("timing") or {}).items() if k in DEFAULT_TIMING}}
        self.cands = [Candidate(str(c["key"]), str(c["path"])) for c in req["candidates"]]
        self.gen = InputGenerator(self.problem, self.seed)
        self.rng = random.Random(derive_seed(self.seed, "timing-plan", self.problem.id))
        self.reference_mod: Any = None
        self.session_info: dict[str, Any] = {"gpu": session.gpu_name, "floor_us": None, "baselines": [], "clocks": {}}
        self.baseline_set: dict[str, Any] | None = None

    # -- helpers ----------------------------------------------------------------------------------
    def progress(self, c: Candidate, phase: str) -> None:
        self.emit({"v": 1, "id": self.req_id, "event": "progress", "key": c.key, "phase": phase})

    def rq(self, c: Candidate, msg: dict[str, Any], phase_s: float, timeout_reason: str, what: str,
           on_event: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        """One request to the candidate's runner under the phase and total deadlines, followed by
        the integrity checks every answer gets (sandbox violations, replaced timer functions)."""
        assert c.runner is not None
        remaining = c.budget
        if remaining <= 0:
            raise CandidateFailure("timeout", "total_timeout", f"{what}: the candidate used up its "
                                   f"{self.limits['total_s']:.0f} s (limits.total_s)")
        timeout, reason = (phase_s, timeout_reason) if phase_s <= remaining else (remaining, "total_timeout")
        t0 = time.monotonic()
        try:
            r = c.runner.request(msg, timeout, self.limits["rss_mb"], on_event)
        except RunnerError as e:
            raise self.runner_failure(c, e, what, timeout, reason) from None
        finally:
            c.budget -= time.monotonic() - t0
        self.integrity(c, r, what)
        if not r.get("ok") and r.get("reason") == "harness_error":
            raise CandidateFailure("crashed", "judge_error", f"{what}: the runner's harness failed: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        return r

    def runner_failure(self, c: Candidate, e: RunnerError, what: str, timeout: float, reason: str) -> CandidateFailure:
        assert c.runner is not None
        if e.kind == "timeout":
            c.runner.kill()
            return CandidateFailure("timeout", reason, f"{what} did not finish within {timeout:.0f} s; the runner "
                                    "was killed")
        if e.kind == "memory":
            return CandidateFailure("crashed", "memory_limit", f"{what}: {e.message}")
        rc = c.runner.proc.poll()
        if rc is not None and rc < 0 and -rc == 24:  # SIGXCPU from RLIMIT_CPU
            return CandidateFailure("timeout", "total_timeout", f"{what}: the runner ran out of CPU time "
                                    f"(RLIMIT_CPU from limits.total_s)")
        return CandidateFailure("crashed", "process_died", f"{what}: {e.message}")

    def integrity(self, c: Candidate, r: dict[str, Any], what: str) -> None:
        v = list(dict.fromkeys(str(x) for x in (r.get("violations") or [])))
        if v:
            raise CandidateFailure("incorrect", "sandbox_violation", f"{what}: the sandbox refused: "
                                   + "; ".join(v[:5]), log=str(r.get("error", "")))
        ids, base = r.get("ids") or {}, c.ready.get("ids") or {}
        changed = sorted(k for k in base if ids.get(k) != base[k])
        if changed:
            raise CandidateFailure("incorrect", "timing_mismatch", f"{what}: harness functions were replaced: "
                                   + ", ".join(changed[:6]))

    def fail(self, c: Candidate, f: CandidateFailure) -> None:
        if c.failure is None:
            c.failure = f
            if f.log:
                c.error_log = f.log
        self.release(c)

    def release(self, c: Candidate) -> None:
        if c.runner is not None:
            c.log = c.runner.log(LOG_LIMIT)
            c.runner.close()
        if c.checker is not None:
            c.checker.buffers.clear()
            c.checker = None
        c.pool = None
        self.session.collect_ipc()

    # -- phases -----------------------------------------------------------------------------------
    def prepare(self, c: Candidate) -> None:
        """Static check, load, build every shape set, correctness: sets c.failure on failure."""
        try:
            self._prepare(c)
        except CandidateFailure as f:
            self.fail(c, f)
        except Exception as e:  # noqa: BLE001 - a judge bug must not take the judge down
            self.fail(c, CandidateFailure("crashed", "judge_error", f"the judge failed: {e}",
                                          log=traceback.format_exc()))

    def _prepare(self, c: Candidate) -> None:
        try:
            source = Path(c.path).read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise CandidateFailure("compile_error", "load_error", f"cannot read the candidate file {c.path}: {e}") from None
        self.progress(c, "static check")
        violations = check_source(source, self.dsl)
        if violations and violations[0].rule == "syntax_error":
            raise CandidateFailure("compile_error", "load_error", f"the file does not parse: {violations[0].message}")
        if violations:
            raise CandidateFailure("static_check_failed", violations[0].code, summarize(violations))
        self.progress(c, "load")
        c.runner = self.session.pool.acquire(self.dsl)
        try:
            ready = c.runner.wait_ready(self.opts.runner_start_s)
        except RunnerError as e:
            raise CandidateFailure("crashed", "dsl_unavailable", f"the {self.dsl} runner did not start: {e.message}",
                                   log=c.runner.log()) from None
        if not ready.get("ready"):
            raise CandidateFailure("crashed", "dsl_unavailable", f"the {self.dsl} runner could not import the DSL",
                                   log=str(ready.get("error", "")))
        c.ready = ready
        Path(c.runner.scratch, "kernel.py").write_text(source)
        c.budget = self.limits["total_s"]
        r = self.rq(c, {"op": "load", "limits": self.limits, "read_policy": self.opts.read_policy},
                    self.limits["build_s"], "build_timeout", "importing the candidate")
        if not r.get("ok"):
            reason = "missing_build" if r.get("reason") == "missing_build" else "load_error"
            raise CandidateFailure("compile_error", reason, f"importing the candidate failed: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        shapes = list(self.problem.shapes) if self.mode != "test" else self.problem.check_shapes
        c.compile_s = 0.0
        for shape in shapes:
            self.progress(c, f"build {shape.name}")
            r = self.rq(c, {"op": "build", "spec": spec_to_wire(make_spec(self.problem, shape))},
                        self.limits["build_s"], "build_timeout", f"build() for shape set {shape.name!r}")
            c.compile_s += float(r.get("compile_s") or 0.0)
            c.compiled = [str(k) for k in (r.get("kernels") or [])]
            if not r.get("ok"):
                raise CandidateFailure("compile_error", "build_error",
                                       f"build() failed for shape set {shape.name!r}: {summary_of(r)}",
                                       log=str(r.get("error", "")))
            c.shapes_built += 1
        if self.mode == "compile":
            return
        c.checker = self.make_checker(c)
        target = RunnerTarget(self, c)
        shapes = self.problem.check_shapes + ([self.problem.benchmark_shape] if self.mode in ("bench", "full") else [])
        for i, shape in enumerate(shapes):
            self.progress(c, f"check {shape.name}")
            trials = self.opts.bench_trials if shape.kind == "benchmark" else self.opts.check_trials
            rep = c.checker.check_shape(target, shape, trials, perturb_input=i, fresh=True, dynamic=True)
            c.checks[shape.name] = rep.to_json(self.problem)
            if rep.kernels and not c.kernels:
                c.kernels = rep.kernels

    def make_checker(self, c: Candidate) -> CorrectnessChecker:

        if self.reference_mod is None:
            self.reference_mod = self.problem.load_reference()
        c.pool = self.session.shared_pool(self.cands.index(c))

        def alloc(decls: Sequence[TensorDecl], shape: ShapeSet) -> list[Any]:
            return self.session.alloc_in_pool(c.pool, decls, shape)

        def dyn(record: dict[str, Any], where: str) -> list[str]:
            return judge_record(record, where)

        return CorrectnessChecker(self.problem, self.reference_mod.reference, self.gen, self.session.device,
                                  alloc_shared=alloc, dynamic_judge=dyn, synchronize=self.session.synchronize)

    # -- timing -----------------------------------------------------------------------------------
    def reps_for(self, est_us: float) -> int:
        est = max(est_us, 1.0)
        n = max(int(self.timing["min_reps"]), math.ceil(float(self.timing["min_time_s"]) * 1e6 / est))
        return int(min(n, max(self.opts.max_reps, int(self.timing["min_reps"]))))

    def time_candidates(self, cands: list[Candidate]) -> None:

        from . import gpuinfo

        bench = self.problem.benchmark_shape
        rounds = max(1, int(self.timing["rounds"]))
        warmup = int(self.timing["warmup"])
        self.session_info["clocks"]["before"] = gpuinfo.clocks()
        baselines = self.prepare_baselines(bench)
        # Calibrate: an estimate of each candidate's time sets its number of repetitions.
        for c in cands:
            try:
                self.progress(c, "calibrate")
                r = self.time_request(c, warmup, self.opts.calib_reps, [], None)
                c.est_us = sorted(r["times_us"])[len(r["times_us"]) // 2] if r["times_us"] else 1.0
            except CandidateFailure as f:
                self.fail(c, f)
        plans: dict[str, dict[str, Any]] = {}
        for c in [c for c in cands if c.alive]:
            n = self.reps_for(c.est_us)
            per = math.ceil(n / rounds)
            total = per * rounds
            k = min(int(self.timing["checkpoints"]), total)
            ck = sorted(self.rng.sample(range(total), k)) if k else []
            prof = self.rng.randrange(total)
            plans[c.key] = {"per": per, "ck": ck, "prof": prof}
        items: list[tuple[str, Any]] = [("cand", c) for c in cands if c.alive] + [("base", b) for b in baselines]
        for rnd in range(rounds):
            order = list(items)
            self.rng.shuffle(order)
            for kind, obj in order:
                if kind == "base":
                    obj.run_round(rnd)
                    continue
                c = obj
                if not c.alive:
                    continue
                p = plans[c.key]
                lo, hi = rnd * p["per"], (rnd + 1) * p["per"]
                ck = [i - lo for i in p["ck"] if lo <= i < hi]
                prof = p["prof"] - lo if lo <= p["prof"] < hi else None
                try:
                    self.progress(c, f"time round {rnd + 1}/{rounds}")
                    r = self.time_request(c, 1, p["per"], ck, prof)
                    c.times.extend(float(t) for t in r["times_us"])
                    if r.get("profile") is not None:
                        c.profile = r["profile"]
                except CandidateFailure as f:
                    self.fail(c, f)
        for c in [c for c in cands if c.alive]:
            try:
                self.progress(c, "wall-clock check")
                r = self.rq(c, {"op": "time", "shape": bench.name, "warmup": 0, "reps": 0, "flush": False,
                                "wall_calls": self.opts.wall_calls},
                            self.limits["call_s"] + self.opts.wall_calls * c.est_us * 4e-6, "call_timeout",
                            "the wall-clock check")
                if not r.get("ok"):
                    raise CandidateFailure("crashed", "runtime_error", "run() failed in the wall-clock check",
                                           log=str(r.get("error", "")))
                c.wall_us = r.get("wall_us_per_call")
                self.judge_timing(c, bench)
                self.progress(c, "re-check")
                self.recheck(c, bench)
            except CandidateFailure as f:
                self.fail(c, f)
        self.finish_baselines(bench, baselines)
        self.session.synchronize()
        self.session_info["clocks"]["after"] = gpuinfo.clocks()

    def prepare_baselines(self, bench: ShapeSet) -> list[TimedBaseline]:
        """Baselines not yet in the session cache (eager + floor once per problem and shape; the
        torch.compile baseline once, in full mode), ready to be timed in this group's rounds."""
        key = (str(self.problem.dir), bench.name)
        cached = self.session.baseline_cache.get(key)
        with_eager = cached is None
        with_compile = self.mode == "full" and (cached is None or not cached.get("compile_tried"))
        if not (with_eager or with_compile):
            return []
        items, err = build_baselines(self, bench, with_eager, with_compile, self.session.flush_buffer())
        self._compile_error = err
        self._with_compile = with_compile
        return items

    def finish_baselines(self, bench: ShapeSet, items: list[TimedBaseline]) -> None:
        key = (str(self.problem.dir), bench.name)
        entry = self.session.baseline_cache.setdefault(key, {"eager": {}, "floor": [], "compile": None,
                                                             "compile_tried": False, "compile_error": None})
        for b in items:
            if b.kind == "eager":
                entry["eager"][b.name] = b.times
            elif b.kind == "floor":
                entry["floor"] = b.times
            elif b.kind == "compile":
                entry["compile"] = (b.name, b.times)
        if getattr(self, "_with_compile", False):
            entry["compile_tried"] = True
            entry["compile_error"] = getattr(self, "_compile_error", None)
        self.baseline_set = baseline_summary(entry)

    def time_request(self, c: Candidate, warmup: int, reps: int, checkpoints: list[int],
                     profile_at: int | None) -> dict[str, Any]:
        assert c.checker is not None
        bench = self.problem.benchmark_shape
        checker = c.checker
        pending: dict[str, Any] = {}

        def on_event(ev: dict[str, Any]) -> dict[str, Any] | None:
            if ev.get("event") != "checkpoint":
                return None
            bufs = checker.buffers[bench.name]
            if ev.get("phase") == "before":
                pending["clones"], pending["refs"] = checker.prepare(bufs, bench, f"checkpoint-{len(c.times)}-{ev.get('rep')}")
                return {"op": "go"}
            try:
                checker.verify(bufs, pending["clones"], pending["refs"],
                               f"shape set {bench.name!r}, checkpoint inside the timing loop", None)
            except CandidateFailure as f:
                pending["failure"] = CandidateFailure("incorrect", "recheck_failed", f"{f.message} ({f.reason})")
                return {"op": "abort"}
            return {"op": "continue"}

        est_s = max(c.est_us, 50.0) * 1e-6
        timeout = self.limits["call_s"] + (warmup + reps) * est_s * 4 + reps * 0.002 + 10.0 * (len(checkpoints) + 1)
        msg = {"op": "time", "shape": bench.name, "warmup": warmup, "reps": reps, "checkpoints": checkpoints,
               "profile_at": profile_at, "flush": True}
        r = self.rq(c, msg, timeout, "call_timeout", "the timing loop", on_event)
        if "failure" in pending:
            raise pending["failure"]
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"run() raised while timing: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        return r

    def judge_timing(self, c: Candidate, bench: ShapeSet) -> None:
        where = f"shape set {bench.name!r}, a profiled call inside the timing loop"
        if c.profile is None:
            raise CandidateFailure("crashed", "judge_error", "no profiled call came back from the timing loop")
        timed = judge_record(c.profile, where)
        checked = c.checker.kernels.get(bench.name, []) if c.checker else []
        compare_kernel_sets(checked, timed, where)
        st = summarize_times(c.times)
        if c.wall_us is not None and wall_mismatch(st["median_us"], c.wall_us):
            raise CandidateFailure("incorrect", "timing_mismatch", f"per-call wall time {c.wall_us:.1f} us over a "
                                   f"device-synchronized batch exceeds 1.5 x the event median {st['median_us']:.1f} us "
                                   "+ 30 us: work escapes the timed stream")

    def recheck(self, c: Candidate, bench: ShapeSet) -> None:
        assert c.checker is not None
        try:
            c.checker.trial(RunnerTarget(self, c), bench, "recheck", label="re-check after timing")
        except CandidateFailure as f:
            if f.verdict == "incorrect":
                raise CandidateFailure("incorrect", "recheck_failed", f"{f.message} ({f.reason})") from None
            raise

    # -- reports ----------------------------------------------------------------------------------
    def report(self, c: Candidate, t0: float) -> dict[str, Any]:
        if c.failure is not None:
            rep = empty_report(c.failure.verdict, self.mode, c.failure.reason, c.failure.message)
        else:
            rep = empty_report("correct", self.mode, None, self.pass_message(c))
        rep["compile_s"] = c.compile_s
        rep["kernels"] = list(c.kernels)
        rep["checks"] = c.checks
        rep["env"] = {
            "gpu": self.session.gpu_name,
            "timer": "cuda_event",
            "versions": {**self.session.versions, "dsl": self.dsl, "dsl_version": c.ready.get("version")},
            "runner": {k: c.ready.get(k) for k in ("pid", "net", "compile_only", "python")} if c.ready else None,
            "clocks": self.session_info.get("clocks", {}),
            "limits": self.limits,
            "compiled_kernels": [k[:200] for k in c.compiled[:20]],
        }
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
        if c.error_log:
            log += c.error_log.rstrip() + "\n"
        if c.notes:
            log += "\n".join(c.notes) + "\n"
        if c.log:
            log += "--- runner log ---\n" + c.log
        rep["log"] = trim_log(log)
        rep["eval_s"] = time.monotonic() - t0
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
            msg += (f"; runtime median {st['median_us']:.1f} us (IQR {st['iqr_us']:.1f}, {st['reps']} reps, re-checked "
                    f"at checkpoints and after timing)")
            if bl.get("t_ref_us"):
                msg += f"; t_ref {bl['t_ref_us']:.1f} us ({bl['t_ref_name']}), speedup {bl['t_ref_us'] / st['median_us']:.2f}x"
            if bl.get("floor_us") is not None:
                msg += f"; floor {bl['floor_us']:.1f} us"
        return msg

    # -- the whole group --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t0 = time.monotonic()
        avail = self.session.dsls.get(self.dsl, {})
        if self.mode != "compile" and not self.session.can_run:
            msg = (f"mode {self.mode!r} needs a GPU and this judge has none (hello: can_run=false); nothing was "
                   "evaluated: run it on a GPU judge, or use mode \"compile\" here")
            reports = [infra_report(self.mode, "no_gpu", msg) for _ in self.cands]
        elif not avail.get("available"):
            msg = f"the DSL {self.dsl!r} is not available in this judge: {avail.get('error')}"
            reports = [infra_report(self.mode, "dsl_unavailable", msg) for _ in self.cands]
        else:
            for c in self.cands:
                self.prepare(c)
            alive = [c for c in self.cands if c.alive]
            if self.mode in ("bench", "full") and alive:
                try:
                    self.time_candidates(alive)
                except Exception as e:  # noqa: BLE001
                    for c in alive:
                        self.fail(c, CandidateFailure("crashed", "judge_error", f"the judge failed while timing: {e}",
                                                      log=traceback.format_exc()))
            for c in self.cands:
                if c.alive:
                    self.release(c)
            if self.baseline_set is None and self.mode in ("bench", "full"):
                cached = self.session.baseline_cache.get((str(self.problem.dir), self.problem.benchmark_shape.name))
                if cached is not None:
                    self.baseline_set = baseline_summary(cached)
            reports = [self.report(c, t0) for c in self.cands]
        if self.baseline_set is not None:
            self.session_info["floor_us"] = self.baseline_set.get("floor_us")
            self.session_info["baselines"] = self.baseline_set.get("baselines", [])
        return {"reports": [{"key": c.key, "report": r} for c, r in zip(self.cands, reports, strict=True)],
                "session": self.session_info}


def baseline_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """Report fields from a cache entry of raw baseline times."""
    eager = [{"name": n, "kind": "eager", "timing": summarize_times(t)} for n, t in entry["eager"].items() if t]
    out: dict[str, Any] = {"baselines": list(eager), "t_ref_us": None, "t_ref_name": None, "floor_us": None,
                           "t_compile_us": None, "compile_error": entry.get("compile_error")}
    if eager:
        best = min(eager, key=lambda b: b["timing"]["median_us"])
        out["t_ref_us"], out["t_ref_name"] = best["timing"]["median_us"], best["name"]
    if entry.get("compile"):
        name, times = entry["compile"]
        t = summarize_times(times)
        out["baselines"].append({"name": name, "kind": "compile", "timing": t})
        out["t_compile_us"] = t["median_us"]
    if entry.get("floor"):
        out["floor_us"] = summarize_times(entry["floor"])["median_us"]
    return out


class TimedBaseline:
    """A callable timed in the judge the way candidates are timed (eager, torch.compile, floor)."""

    def __init__(self, name: str, kind: str, fn: Callable[[], Any], flush: Any, rounds: int, reps_for: Callable[[float], int],
                 warmup: int):
        from . import timing

        self.name, self.kind, self.fn, self.flush = name, kind, fn, flush
        self.times: list[float] = []
        for _ in range(max(warmup, 1)):
            fn()
        est = timing.timed_reps(fn, 5, flush)
        self.per = math.ceil(reps_for(sorted(est)[2]) / rounds)

    def run_round(self, rnd: int) -> None:
        from . import timing

        self.fn()
        self.times.extend(timing.timed_reps(self.fn, self.per, self.flush))


def build_baselines(ev: GroupEvaluation, bench: ShapeSet, with_eager: bool, with_compile: bool,
                    flush: Any) -> tuple[list[TimedBaseline], str | None]:
    """The eager formulations, torch.compile of the compile baseline, and the floor, on one set of
    judge-owned inputs of the benchmark shape."""
    import torch

    if ev.reference_mod is None:
        ev.reference_mod = ev.problem.load_reference()
    inputs = allocate(ev.problem.inputs, bench, ev.session.device)
    ev.gen.fill(inputs, bench, "baseline")
    params = dict(ev.problem.params)
    rounds = max(1, int(ev.timing["rounds"]))
    warmup = int(ev.timing["warmup"])
    out: list[TimedBaseline] = []
    compile_error = None
    with torch.no_grad():
        if with_eager:
            for name in ev.problem.eager:
                fn = getattr(ev.reference_mod, name)
                out.append(TimedBaseline(name, "eager", lambda fn=fn: call_with_params(fn, inputs, params), flush,
                                         rounds, ev.reps_for, warmup))
            out.append(TimedBaseline("floor", "floor", lambda: torch.cuda._sleep(0), flush, rounds, ev.reps_for, warmup))
        if with_compile:
            name = ev.problem.compile_baseline or ev.problem.eager[0]
            try:
                compiled = torch.compile(getattr(ev.reference_mod, name))
                out.append(TimedBaseline(f"torch.compile({name})", "compile",
                                         lambda: call_with_params(compiled, inputs, params), flush, rounds, ev.reps_for,
                                         warmup))
            except Exception as e:  # noqa: BLE001 - a missing baseline is reported, not fatal
                compile_error = f"{type(e).__name__}: {e}"
    return out, compile_error

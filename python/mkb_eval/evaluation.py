"""One `evaluate` request: a group of candidates of one problem and one DSL, judged in the order of
docs/evaluator.md (static check -> load -> build -> correctness -> timing -> re-check). The load
and build of later candidates overlap the correctness checks of earlier ones (runners are separate
processes); timing rounds of the group are interleaved, every timed repetition runs on fresh
inputs and poisoned outputs and a secret subset of them is verified; repetitions stop adaptively;
the baselines, the floor and the GPU ceilings come from a disk cache (mkb_eval.baselines); a
median below the roofline ideal or the floor is impossible. Every failure becomes a verdict in an
EvalReport (crates/mkb-core/src/eval.rs), with the wall time of each phase."""

from __future__ import annotations

import math
import os
import random
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .correctness import CandidateFailure, CorrectnessChecker, call_with_params, compare_output
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
    poison_,
    spec_to_wire,
)
from .sandbox import CandidateTooLarge, read_candidate
from .static_check import check_source, summarize
from .timing import PLAUSIBLE_FRACTION, ci_converged, ideal_us, wall_mismatch
from .timing import summarize as summarize_times

MODES = ("compile", "test", "bench", "full")
DEFAULT_LIMITS: dict[str, float] = {"build_s": 300.0, "call_s": 60.0, "total_s": 1200.0, "rss_mb": 32768.0}
# Timing: at least `rounds` interleaved rounds and `min_reps` timed repetitions, then more rounds
# until the median's 95% CI half-width is under `ci_rel` x the median, at most `max_reps`; `checked`
# repetitions of every round (at least 3) are verified in secret. Older clients' `min_time_s` and
# `checkpoints` are accepted and ignored.
DEFAULT_TIMING: dict[str, float] = {"min_reps": 100, "max_reps": 1000, "warmup": 10, "rounds": 3, "checked": 3,
                                    "ci_rel": 0.005}
MIN_CHECKED = 3
LOG_LIMIT = 8000
# Failures that say nothing about the candidate (verdict `crashed`): mkb retries them and records
# "not evaluated" if they persist (crates/mkb-core/src/eval.rs INFRA_REASONS is the same list).
INFRA_REASONS = ("no_gpu", "dsl_unavailable", "judge_error", "profiler_error", "runner_killed", "host_overload")
PHASES = ("static", "load", "build", "correctness", "baselines", "timing", "recheck", "total")
# host_overload: a missed deadline while the runner got under this share of a CPU and the load
# average exceeded the core count.
OVERLOAD_CPU_SHARE = 0.25


@dataclass
class JudgeOptions:
    check_trials: int = 5
    bench_trials: int = 2
    max_reps: int = 20000  # hard cap over the request's timing.max_reps
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
    source: str = ""
    tree: list[int] = field(default_factory=list)  # the runner's process tree (CPU accounting)
    phases: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    call_wall_s: dict[str, float] = field(default_factory=dict)  # fastest checked call per shape set
    pending: CandidateFailure | None = None  # a failure met in the load/build thread
    stash: list[list[Any]] | None = None  # judge-private copies of timed outputs (k checked slots + scratch)
    regen: list[Any] | None = None  # judge-private inputs regenerated for the checked reps
    rounds: int = 0
    checked_reps: int = 0

    @property
    def alive(self) -> bool:
        return self.failure is None


def infra_report(mode: str, reason: str, message: str) -> dict[str, Any]:
    """A report for something that is not the candidate's doing: verdict `crashed` with one of
    INFRA_REASONS; Rust retries these and records "not evaluated" if they persist."""
    if reason not in INFRA_REASONS:
        raise ValueError(f"{reason!r} is not an infrastructure reason")
    rep = empty_report("crashed", mode, reason, message)
    rep["env"] = {"infrastructure": True}
    return rep


def runner_pids(pid: int) -> list[int]:
    """`pid` and its descendants (the sandbox's bwrap, its init, the runner)."""
    try:
        from .pool import process_tree

        return process_tree(pid)
    except Exception:  # noqa: BLE001 - no tree walk: the process alone
        return [pid]


def proc_cpu_s(pid: int, pids: list[int] | None = None) -> float | None:
    """CPU seconds (user + system, with waited-for children) of `pid` and its descendants (or of
    `pids`, a tree walked earlier: reading a few stat files is cheap, walking /proc is not)."""
    if pids is None:
        pids = runner_pids(pid)
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total, seen = 0.0, False
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        try:
            total += sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
            seen = True
        except (ValueError, IndexError):
            continue
    return total if seen else None


def host_overloaded() -> tuple[bool, str]:
    """Is the 1-minute load average above the number of cores?"""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return False, "load average unknown"
    cores = os.cpu_count() or 1
    return load > cores, f"load average {load:.1f} on {cores} cores"


def empty_report(verdict: str, mode: str, reason: str | None, message: str) -> dict[str, Any]:
    return {"verdict": verdict, "mode": mode, "reason": reason, "message": message, "compile_s": None,
            "runtime": None, "baselines": [], "t_ref_us": None, "t_ref_name": None, "speedup_eager": None,
            "speedup_compile": None, "floor_us": None, "kernels": [], "env": {}, "checks": {}, "log": "",
            "eval_s": 0.0, "ideal_us": None, "phases": None}


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
        # Plain JSON descriptors of the judge's buffers (Session.export_buffers, mkb_eval.ipc).
        share = self.ev.session.export_buffers
        descs = {"inputs": share(inputs), "outputs": share(outputs)}
        r = self.ev.rq(self.c, {"op": "bind", "shape": shape.name, **descs},
                       self.ev.limits["call_s"], "call_timeout", f"binding buffers of shape set {shape.name!r}")
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"binding buffers failed: {r.get('error', '')[:300]}",
                                   log=r.get("error", ""))

    def call(self, shape: ShapeSet, checked: bool) -> dict[str, Any] | None:
        what = f"run() on shape set {shape.name!r}"
        t0 = time.monotonic()
        r = self.ev.rq(self.c, {"op": "call", "shape": shape.name, "checked": checked},
                       self.ev.limits["call_s"] + (30.0 if checked else 0.0), "call_timeout", what)
        if not checked:  # an upper bound of the call's time (IPC and sync included): timing deadlines
            dt = time.monotonic() - t0
            self.c.call_wall_s[shape.name] = min(dt, self.c.call_wall_s.get(shape.name, dt))
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"{what} raised: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        return r.get("record")


class GroupEvaluation:
    def __init__(self, session: Any, req: dict[str, Any], emit: Callable[[dict[str, Any]], None]):
        self.session = session
        self.opts: JudgeOptions = session.options
        self._emit_lock = threading.Lock()
        self._emit = emit
        self.req_id = req.get("id")
        self.problem: Problem = session.problem(req["problem_dir"])
        self.dsl: str = req["dsl"]
        self.mode: str = req["mode"]
        self.seed = int(req["seed"])
        self.limits = {**DEFAULT_LIMITS, **{k: float(v) for k, v in (req.get("limits") or {}).items()
                                            if k in DEFAULT_LIMITS}}
        self.timing = {**DEFAULT_TIMING, **{k: v for k, v in (req.get("timing") or {}).items() if k in DEFAULT_TIMING}}
        self.timing["checked"] = max(MIN_CHECKED, int(self.timing["checked"]))
        self.cands = [Candidate(str(c["key"]), str(c["path"])) for c in req["candidates"]]
        self.gen = InputGenerator(self.problem, self.seed)
        self.rng = random.Random(derive_seed(self.seed, "timing-plan", self.problem.id))
        self.reference_mod: Any = None
        self.session_info: dict[str, Any] = {"gpu": session.gpu_name, "floor_us": None, "baselines": [], "clocks": {}}
        self.baseline_set: dict[str, Any] | None = None
        self.ceilings: dict[str, Any] | None = None
        self.cache_notes: list[str] = []

    # -- helpers ----------------------------------------------------------------------------------
    def emit(self, msg: dict[str, Any]) -> None:
        with self._emit_lock:  # load/build threads report progress too
            self._emit(msg)

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
        pid = getattr(c.runner, "pid", None)
        if isinstance(pid, int) and pid > 0 and not c.tree:
            c.tree = runner_pids(pid)
        cpu0 = proc_cpu_s(pid, c.tree) if isinstance(pid, int) and pid > 0 else None
        try:
            r = c.runner.request(msg, timeout, self.limits["rss_mb"], on_event)
        except RunnerError as e:
            cpu1 = proc_cpu_s(pid, c.tree) if cpu0 is not None and isinstance(pid, int) else None
            cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
            raise self.runner_failure(c, e, what, timeout, reason, cpu, time.monotonic() - t0, cpu0) from None
        finally:
            c.budget -= time.monotonic() - t0
        self.integrity(c, r, what)
        if not r.get("ok") and r.get("reason") == "harness_error":
            raise CandidateFailure("crashed", "judge_error", f"{what}: the runner's harness failed: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        return r

    def runner_failure(self, c: Candidate, e: RunnerError, what: str, timeout: float, reason: str,
                       cpu_s: float | None = None, wall_s: float = 0.0, cpu_before: float | None = None
                       ) -> CandidateFailure:
        """The verdict for a runner that missed a deadline or died. Two cases are the machine's,
        not the candidate's (INFRA_REASONS): a deadline missed while the runner got under
        OVERLOAD_CPU_SHARE of a CPU on a host loaded beyond its cores (`host_overload`), and a
        SIGKILL that neither the judge (deadline, memory limit) nor RLIMIT_CPU sent (`runner_killed`)."""
        assert c.runner is not None
        if e.kind == "timeout":
            c.runner.kill()
            over, load = host_overloaded()
            if cpu_s is not None and wall_s > 0 and cpu_s < OVERLOAD_CPU_SHARE * wall_s and over:
                return CandidateFailure("crashed", "host_overload", f"{what} did not finish within {timeout:.0f} s "
                                        f"while the runner got {cpu_s:.1f} s of CPU in {wall_s:.0f} s ({load}): the "
                                        "host was overloaded; not evaluated")
            return CandidateFailure("timeout", reason, f"{what} did not finish within {timeout:.0f} s; the runner "
                                    "was killed")
        if e.kind == "memory":
            return CandidateFailure("crashed", "memory_limit", f"{what}: {e.message}")
        rc = c.runner.proc.poll()
        if rc is not None and rc < 0 and -rc == 24:  # SIGXCPU from RLIMIT_CPU
            return CandidateFailure("timeout", "total_timeout", f"{what}: the runner ran out of CPU time "
                                    f"(RLIMIT_CPU from limits.total_s)")
        if rc is not None and rc in (-9, 128 + 9):  # SIGKILL (directly, or as reported by the sandbox's init)
            # RLIMIT_CPU's hard limit (limits.total_s + 30 s of CPU) also sends SIGKILL: only when
            # the runner cannot have reached it (CPU before this request + wall x cores) is it foreign.
            bound = None if cpu_before is None else cpu_before + wall_s * (os.cpu_count() or 1)
            if bound is not None and bound < self.limits["total_s"] + 30.0:
                return CandidateFailure("crashed", "runner_killed", f"{what}: the runner was killed by SIGKILL from "
                                        "outside the judge (not a deadline, not the memory limit: e.g. the kernel's "
                                        "OOM killer or an operator); not evaluated")
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
        if f.reason in INFRA_REASONS and f.verdict != "crashed":
            f = CandidateFailure("crashed", f.reason, f.message, f.log)
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
            c.checker.last.clear()
            c.checker = None
        c.stash = None
        c.regen = None
        c.pool = None
        self.session.collect_ipc()

    # -- phases -----------------------------------------------------------------------------------
    def guarded(self, c: Candidate, step: Callable[[Candidate], None], defer: bool = False) -> None:
        """Run one phase; a failure becomes c's verdict (in a load/build thread it is kept in
        c.pending and applied by the main thread, which owns the GPU-side clean-up)."""
        try:
            step(c)
        except CandidateFailure as f:
            if defer:
                c.pending = f
            else:
                self.fail(c, f)
        except Exception as e:  # noqa: BLE001 - a judge bug must not take the judge down
            f = CandidateFailure("crashed", "judge_error", f"the judge failed: {e}", log=traceback.format_exc())
            if defer:
                c.pending = f
            else:
                self.fail(c, f)

    def front(self, c: Candidate) -> None:
        """Static check (judge-side, parse only) and a warm runner from the pool."""
        t0 = time.monotonic()
        try:
            source = read_candidate(c.path)
        except CandidateTooLarge as e:
            raise CandidateFailure("compile_error", "file_too_large", str(e)) from None
        except (OSError, UnicodeDecodeError) as e:
            raise CandidateFailure("compile_error", "load_error", f"cannot read the candidate file {c.path}: {e}") from None
        self.progress(c, "static check")
        violations = check_source(source, self.dsl)
        c.phases["static"] += time.monotonic() - t0
        if violations and violations[0].rule == "syntax_error":
            raise CandidateFailure("compile_error", "load_error", f"the file does not parse: {violations[0].message}")
        if violations:
            raise CandidateFailure("static_check_failed", violations[0].code, summarize(violations))
        c.source = source
        c.runner = self.session.pool.acquire(self.dsl)

    def load_build(self, c: Candidate) -> None:
        """Wait for the runner, import the candidate, build() every shape set. Runs in a thread of
        its own per candidate, so later candidates load and build while earlier ones are checked;
        every request keeps its deadline (RunnerHandle.request measures it)."""
        assert c.runner is not None
        t0 = time.monotonic()
        self.progress(c, "load")
        try:
            ready = c.runner.wait_ready(self.opts.runner_start_s)
        except RunnerError as e:
            raise CandidateFailure("crashed", "dsl_unavailable", f"the {self.dsl} runner did not start: {e.message}",
                                   log=c.runner.log()) from None
        if not ready.get("ready"):
            raise CandidateFailure("crashed", "dsl_unavailable", f"the {self.dsl} runner could not import the DSL",
                                   log=str(ready.get("error", "")))
        c.ready = ready
        Path(c.runner.scratch, "kernel.py").write_text(c.source)
        c.budget = self.limits["total_s"]
        try:
            r = self.rq(c, {"op": "load", "limits": self.limits, "read_policy": self.opts.read_policy},
                        self.limits["build_s"], "build_timeout", "importing the candidate")
        finally:
            c.phases["load"] += time.monotonic() - t0
        if not r.get("ok"):
            reason = "missing_build" if r.get("reason") == "missing_build" else "load_error"
            raise CandidateFailure("compile_error", reason, f"importing the candidate failed: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        shapes = list(self.problem.shapes) if self.mode != "test" else self.problem.check_shapes
        c.compile_s = 0.0
        t0 = time.monotonic()
        try:
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
        finally:
            c.phases["build"] += time.monotonic() - t0

    def correctness(self, c: Candidate) -> None:
        """The trials of every shape set (docs/evaluator.md "Correctness"), on the GPU."""
        t0 = time.monotonic()
        try:
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
            c.est_us = c.call_wall_s.get(self.problem.benchmark_shape.name, 0.0) * 1e6
        finally:
            c.phases["correctness"] += time.monotonic() - t0

    def prepare_all(self) -> None:
        """front() for every candidate, then load + build in one thread per candidate while the
        main thread runs the correctness checks in order (GPU work stays on the main thread)."""
        for c in self.cands:
            self.guarded(c, self.front)
        threads: dict[str, threading.Thread] = {}
        for c in self.cands:
            if c.alive:
                th = threading.Thread(target=self.guarded, args=(c, self.load_build, True), daemon=True,
                                      name=f"mkb-build-{c.key}")
                th.start()
                threads[c.key] = th
        for c in self.cands:
            th = threads.get(c.key)
            if th is None:
                continue
            th.join()
            if c.pending is not None:
                self.fail(c, c.pending)
                continue
            if self.mode != "compile":
                self.guarded(c, self.correctness)

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
    def rep_limits(self) -> tuple[int, int, int, int]:
        """(min_reps, cap, per-round reps, min_rounds) from the request's timing options."""
        min_rounds = max(1, int(self.timing["rounds"]))
        min_reps = max(1, int(self.timing["min_reps"]))
        cap = max(min_reps, min(int(self.timing["max_reps"]), int(self.opts.max_reps)))
        return min_reps, cap, max(1, math.ceil(min_reps / min_rounds)), min_rounds

    def enough(self, times: list[float], rounds: int) -> bool:
        """The adaptive stop rule: at least min_rounds rounds and min_reps reps, then the median's
        95% CI half-width under ci_rel x median, or the cap."""
        min_reps, cap, _, min_rounds = self.rep_limits()
        if rounds < min_rounds:
            return False
        return len(times) >= cap or (len(times) >= min_reps and ci_converged(times, float(self.timing["ci_rel"])))

    def time_candidates(self, cands: list[Candidate]) -> None:
        from . import gpuinfo

        bench = self.problem.benchmark_shape
        self.session_info["clocks"]["before"] = gpuinfo.clocks()
        t0 = time.monotonic()
        self.ensure_baselines(bench)
        dt = time.monotonic() - t0
        for c in cands:
            c.phases["baselines"] += dt
        min_reps, cap, per, min_rounds = self.rep_limits()
        warmup = int(self.timing["warmup"])
        # One timed rep of one of the first rounds is a profiled call instead (kernel_set_changed).
        prof = {c.key: (self.rng.randrange(min_rounds), self.rng.randrange(per)) for c in cands}
        max_rounds = math.ceil(cap / max(per - 1, 1)) + min_rounds
        active = [c for c in cands if c.alive]
        rnd = 0
        while active and rnd < max_rounds:
            order = list(active)
            self.rng.shuffle(order)
            for c in order:
                if not c.alive:
                    continue
                t1 = time.monotonic()
                try:
                    self.progress(c, f"time round {rnd + 1}")
                    p_round, p_rep = prof[c.key]
                    self.time_round(c, rnd, warmup if rnd == 0 else 1, per, p_rep if rnd == p_round else None)
                except CandidateFailure as f:
                    self.fail(c, f)
                finally:
                    c.phases["timing"] += time.monotonic() - t1
            rnd += 1
            active = [c for c in active if c.alive and not self.enough(c.times, rnd)]
        for c in [c for c in cands if c.alive]:
            t1 = time.monotonic()
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
            except CandidateFailure as f:
                self.fail(c, f)
            finally:
                c.phases["timing"] += time.monotonic() - t1
            if not c.alive:
                continue
            t1 = time.monotonic()
            try:
                self.progress(c, "re-check")
                self.recheck(c, bench)
            except CandidateFailure as f:
                self.fail(c, f)
            finally:
                c.phases["recheck"] += time.monotonic() - t1
        self.session.synchronize()
        self.session_info["clocks"]["after"] = gpuinfo.clocks()

    def time_round(self, c: Candidate, rnd: int, warmup: int, reps: int, profile_at: int | None) -> None:
        """One round of `reps` timed repetitions. Before each one (the runner's "rep" event) the
        judge stashes the previous rep's outputs, writes fresh inputs from its secret seed (label:
        candidate, round, rep) and poisons the outputs, then answers "go". Every rep is handled the
        same way; only the stash slot differs: `checked` reps (chosen here, never sent) go to their
        own slots and are verified against the reference after the round."""
        assert c.checker is not None
        bench = self.problem.benchmark_shape
        bufs = c.checker.buffers[bench.name]
        k = min(int(self.timing["checked"]), reps)
        checked = sorted(self.rng.sample(range(reps), k))
        slot = {i: j for j, i in enumerate(checked)}
        if c.stash is None or len(c.stash) < k + 1:
            c.stash = [allocate(self.problem.outputs, bench, self.session.device) for _ in range(k + 1)]
        stash = c.stash
        state: dict[str, Any] = {"next": 0}

        def keep(i: int) -> None:
            for dst, out in zip(stash[slot.get(i, k)], bufs.outputs, strict=True):
                dst.copy_(out)

        def on_event(ev: dict[str, Any]) -> dict[str, Any] | None:
            if ev.get("event") != "rep":
                return None
            i = ev.get("rep")
            if i != state["next"] or not isinstance(i, int) or i >= reps:
                state["failure"] = CandidateFailure("crashed", "judge_error", f"the runner announced rep {i!r}, "
                                                    f"expected {state['next']}")
                return {"op": "abort"}
            if i > 0:
                keep(i - 1)
            self.gen.fill_fast(bufs.inputs, bench, (c.key, rnd, i))
            for o in bufs.outputs:
                poison_(o)
            self.session.synchronize()
            state["next"] = i + 1
            return {"op": "go"}

        est_s = max(c.est_us, 50.0) * 1e-6
        rep_judge_s = 0.02 + self.bench_bytes() / 5e10  # the judge's fill + poison + stash, generously
        timeout = (self.limits["call_s"] + (warmup + reps) * est_s * 4 + reps * rep_judge_s
                   + (30.0 if profile_at is not None else 0.0))
        msg = {"op": "time", "shape": bench.name, "warmup": warmup, "reps": reps, "profile_at": profile_at,
               "flush": True}
        r = self.rq(c, msg, timeout, "call_timeout", "the timing loop", on_event)
        if "failure" in state:
            raise state["failure"]
        if not r.get("ok"):
            raise CandidateFailure("crashed", "runtime_error", f"run() raised while timing: {summary_of(r)}",
                                   log=str(r.get("error", "")))
        if state["next"] != reps:
            raise CandidateFailure("crashed", "judge_error", f"the timing loop ran {state['next']} of {reps} reps")
        keep(reps - 1)
        self.session.synchronize()
        c.times.extend(float(x) for x in r.get("times_us") or [])
        if r.get("profile") is not None:
            c.profile = r["profile"]
        c.rounds += 1
        c.checked_reps += k
        self.verify_stash(c, rnd, checked, stash)

    def verify_stash(self, c: Candidate, rnd: int, checked: list[int], stash: list[list[Any]]) -> None:
        """Regenerate the inputs of the checked reps (deterministic from their labels) and compare
        the stashed outputs with the reference."""
        assert c.checker is not None
        bench = self.problem.benchmark_shape
        if c.regen is None:
            c.regen = allocate(self.problem.inputs, bench, self.session.device)
        for j, i in enumerate(checked):
            self.gen.fill_fast(c.regen, bench, (c.key, rnd, i))
            refs = c.checker.expected(c.regen, bench)
            self.session.synchronize()
            where = (f"shape set {bench.name!r}, timed repetition {i + 1} of round {rnd + 1} (fresh inputs, poisoned "
                     "outputs; checked in secret)")
            for out, ref, decl in zip(stash[j], refs, self.problem.outputs, strict=True):
                try:
                    compare_output(decl.name, out, ref, decl.tolerance(), where)
                except CandidateFailure as f:
                    raise CandidateFailure("incorrect", "timing_check_failed", f"{f.message} ({f.reason}): the "
                                           "candidate did not compute this timed repetition") from None

    def bench_bytes(self) -> int:
        bench = self.problem.benchmark_shape
        return sum(math.prod(t.resolve(bench.dims)) * t.torch_dtype.itemsize
                   for t in (*self.problem.inputs, *self.problem.outputs))

    # -- baselines, floor, ceilings (disk cache) ------------------------------------------------
    def cache_env(self) -> dict[str, Any]:
        from . import baselines as bl
        from .gpuinfo import driver_version

        return bl.env_key(self.session.gpu_name, _driver(driver_version), self.session.versions)

    def ensure_baselines(self, bench: ShapeSet) -> None:
        """The baselines and the floor of this problem's benchmark shape and this GPU's ceilings:
        from the session's memory, else the disk cache, else measured (and stored in both)."""
        from . import baselines as bl
        from . import timing

        cache = bl.DiskCache()
        env = self.cache_env()
        self.ceilings = _CEILINGS.get(repr(sorted(env.items())))
        if self.ceilings is None:
            self.ceilings = cache.get("ceilings", env)
            if self.ceilings is not None and not bl.valid_ceilings(self.ceilings):
                cache.warn("ignoring a malformed ceilings entry")
                self.ceilings = None
            if self.ceilings is None:
                self.ceilings = timing.measure_ceilings()
                cache.put("ceilings", env, self.ceilings)
            _CEILINGS[repr(sorted(env.items()))] = self.ceilings
        key = bl.baseline_key(env, self.problem.content_hash(), bench.name, dict(bench.dims))
        mem_key = (self.problem.content_hash(), bench.name)
        entry = self.session.baseline_cache.get(mem_key)
        if entry is None:
            entry = cache.get("baselines", key)
            if entry is not None and not bl.valid_baseline_entry(entry):
                cache.warn("ignoring a malformed baselines entry")
                entry = None
        with_eager = entry is None
        with_compile = self.mode == "full" and (entry is None or not entry.get("compile_tried"))
        if with_eager or with_compile:
            entry = entry or {"eager": {}, "floor": [], "compile": None, "compile_tried": False, "compile_error": None}
            self.measure_baselines(bench, entry, with_eager, with_compile)
            cache.put("baselines", key, entry)
        self.session.baseline_cache[mem_key] = entry
        self.cache_notes = list(cache.warnings)
        self.baseline_set = baseline_summary(entry)

    def measure_baselines(self, bench: ShapeSet, entry: dict[str, Any], with_eager: bool, with_compile: bool) -> None:
        import torch

        if self.reference_mod is None:
            self.reference_mod = self.problem.load_reference()
        inputs = allocate(self.problem.inputs, bench, self.session.device)
        self.gen.fill(inputs, bench, "baseline")
        params = dict(self.problem.params)
        flush = self.session.flush_buffer()
        with torch.no_grad():
            if with_eager:
                for name in self.problem.eager:
                    fn = getattr(self.reference_mod, name)
                    entry["eager"][name] = self.time_baseline(lambda fn=fn: call_with_params(fn, inputs, params), flush)
                entry["floor"] = self.time_baseline(lambda: torch.cuda._sleep(0), flush)
            if with_compile:
                name = self.problem.compile_baseline or self.problem.eager[0]
                try:
                    compiled = torch.compile(getattr(self.reference_mod, name))
                    times = self.time_baseline(lambda: call_with_params(compiled, inputs, params), flush)
                    entry["compile"] = [f"torch.compile({name})", times]
                except Exception as e:  # noqa: BLE001 - a missing baseline is reported, not fatal
                    entry["compile_error"] = f"{type(e).__name__}: {e}"
                entry["compile_tried"] = True

    def time_baseline(self, fn: Callable[[], Any], flush: Any) -> list[float]:
        """A judge-side callable timed like candidates (flush, sync, events), with the same
        adaptive stop rule."""
        from . import timing

        _, cap, per, _ = self.rep_limits()
        for _ in range(max(int(self.timing["warmup"]), 1)):
            fn()
        times: list[float] = []
        rounds = 0
        while not self.enough(times, rounds) and len(times) < cap:
            fn()
            times.extend(timing.timed_reps(fn, per, flush))
            rounds += 1
        return times

    def ideal(self) -> dict[str, float] | None:
        """The roofline of the benchmark shape on this GPU, from the measured ceilings."""
        if not self.ceilings:
            return None
        bench = self.problem.benchmark_shape
        nbytes, flops = self.problem.min_bytes(bench), self.problem.flop_count(bench)
        bw, peak = float(self.ceilings["bandwidth_bytes_per_s"]), float(self.ceilings["bf16_flops_per_s"])
        return {"ideal_us": ideal_us(nbytes, flops, bw, peak), "bytes": nbytes, "flops": flops, "bw": bw, "peak": peak}

    def judge_timing(self, c: Candidate, bench: ShapeSet) -> None:
        where = f"shape set {bench.name!r}, a profiled call inside the timing loop"
        if c.profile is None:
            raise CandidateFailure("crashed", "judge_error", "no profiled call came back from the timing loop")
        timed = judge_record(c.profile, where)
        checked = c.checker.kernels.get(bench.name, []) if c.checker else []
        compare_kernel_sets(checked, timed, where)
        st = summarize_times(c.times)
        med = st["median_us"]
        if c.wall_us is not None and wall_mismatch(med, c.wall_us):
            raise CandidateFailure("incorrect", "timing_mismatch", f"per-call wall time {c.wall_us:.1f} us over a "
                                   f"device-synchronized batch exceeds 1.5 x the event median {med:.1f} us "
                                   "+ 30 us: work escapes the timed stream")
        self.plausible(med)

    def plausible(self, med: float) -> None:
        """A median below PLAUSIBLE_FRACTION x the roofline ideal, or below the empty-kernel
        floor, is physically impossible: the candidate skipped work the judge could not see."""
        ideal = self.ideal()
        floor = (self.baseline_set or {}).get("floor_us")
        if ideal is not None and med < PLAUSIBLE_FRACTION * ideal["ideal_us"]:
            raise CandidateFailure(
                "incorrect", "timing_impossible",
                f"median {med:.1f} us is below {PLAUSIBLE_FRACTION} x the roofline ideal {ideal['ideal_us']:.1f} us of "
                f"this GPU (max of {ideal['bytes'] / 1e6:.1f} MB at {ideal['bw'] / 1e12:.2f} TB/s = "
                f"{ideal['bytes'] / ideal['bw'] * 1e6:.1f} us and {ideal['flops'] / 1e9:.1f} GFLOP at "
                f"{ideal['peak'] / 1e12:.0f} TFLOP/s = {ideal['flops'] / ideal['peak'] * 1e6:.1f} us): impossible")
        if floor is not None and med < floor:
            raise CandidateFailure("incorrect", "timing_impossible", f"median {med:.1f} us is below the empty-kernel "
                                   f"floor {floor:.1f} us timed the same way: impossible")

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
        if self.mode in ("bench", "full"):
            ideal = self.ideal()
            if ideal is not None:
                rep["ideal_us"] = ideal["ideal_us"]
                rep["env"]["ceilings"] = {"bandwidth_bytes_per_s": ideal["bw"], "bf16_flops_per_s": ideal["peak"],
                                          "bytes": ideal["bytes"], "flops": ideal["flops"]}
            if c.rounds:
                rep["env"]["timing"] = {"rounds": c.rounds, "checked_reps": c.checked_reps,
                                        "fresh_inputs_every_rep": True, "options": dict(self.timing)}
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
            self.prepare_all()
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
                cached = self.session.baseline_cache.get((self.problem.content_hash(),
                                                          self.problem.benchmark_shape.name))
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


_CEILINGS: dict[str, dict[str, Any]] = {}  # this process's ceilings per cache environment
_DRIVER: list[str | None] = []


def _driver(probe: Callable[[], str | None]) -> str | None:
    """The driver version, asked once per process."""
    if not _DRIVER:
        _DRIVER.append(probe())
    return _DRIVER[0]

"""One `evaluate` request: a group of candidates of one problem and one DSL, judged in the order of
docs/evaluator.md (static check -> load -> build -> correctness -> timing -> re-check). The load
and build of later candidates overlap the correctness checks of earlier ones (runners are separate
processes); timing rounds of the group are interleaved, every timed repetition runs on fresh
inputs and poisoned outputs and a secret subset of them is verified; repetitions stop adaptively;
the baselines, the floor and the GPU ceilings come from a disk cache (mkb_eval.baselines); a
median below the roofline ideal or the floor is impossible. Every failure becomes a verdict in an
EvalReport (crates/mkb-core/src/eval.rs), with the wall time of each phase."""

from __future__ import annotations

import os
import random
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import PROTOCOL_VERSION
from .correctness import CandidateFailure, CorrectnessChecker
from .dynamic import judge_record, judge_session
from .phase_baselines import BaselinePhase, baseline_summary
from .phase_timing import TimingPhase
from .pool import RunnerError, RunnerHandle
from .problem import (
    InputGenerator,
    Problem,
    ShapeSet,
    TensorDecl,
    derive_seed,
    make_spec,
    spec_to_wire,
)
from .report_text import (  # noqa: F401  (re-exported: judge.py and the tests use them from here)
    INFRA_REASONS,
    LOG_LIMIT,
    PHASES,
    Reporting,
    empty_report,
    infra_report,
    summary_of,
    trim_log,
)
from .sandbox import CandidateTooLarge, read_candidate
from .static_check import check_source, summarize
from .timing import CANDIDATE_WAKE_US

MODES = ("compile", "test", "bench", "full")
DEFAULT_LIMITS: dict[str, float] = {"build_s": 300.0, "call_s": 60.0, "total_s": 1200.0, "rss_mb": 32768.0}
# Timing: at least `rounds` interleaved rounds and `min_reps` timed repetitions, then more rounds
# until the median's 95% CI half-width is under `ci_rel` x the median, at most `max_reps`; `checked`
# repetitions of every round (at least 3) are verified in secret. Older clients' `min_time_s` and
# `checkpoints` are accepted and ignored.
# `wake_us`: the spin before each candidate's window (timing.CANDIDATE_WAKE_US, docs/evaluator.md).
DEFAULT_TIMING: dict[str, float] = {"min_reps": 100, "max_reps": 1000, "warmup": 10, "rounds": 3, "checked": 3,
                                    "ci_rel": 0.005,
                                    "wake_us": float(os.environ.get("MKB_WAKE_US") or CANDIDATE_WAKE_US)}
MIN_CHECKED = 3
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
    clock: dict[str, float] = field(default_factory=dict)  # the checker's, kept after release
    times: list[float] = field(default_factory=list)
    wall_us: float | None = None
    host_us: list[float] = field(default_factory=list)  # the runner's host time per timed rep (diagnostic)
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

    def collect(self) -> dict[str, Any] | None:
        """End the runner's profiler session (its first checked call started it): the record of
        every call since."""
        r = self.ev.rq(self.c, {"op": "collect"}, self.ev.limits["call_s"] + 30.0, "call_timeout",
                       "collecting the dynamic check's record")
        if not r.get("ok"):
            raise CandidateFailure("crashed", "profiler_error", f"the dynamic check's record could not be collected: "
                                   f"{summary_of(r)}", log=str(r.get("error", "")))
        return r.get("record")


class GroupEvaluation(TimingPhase, BaselinePhase, Reporting):
    """One evaluate request (module doc); the timing rounds, the baselines and the report text are
    the mixins' jobs (mkb_eval.phase_timing, mkb_eval.phase_baselines, mkb_eval.report_text)."""

    def __init__(self, session: Any, req: dict[str, Any], emit: Callable[[dict[str, Any]], None]):
        self.session = session
        self.opts: JudgeOptions = session.options
        self._emit_lock = threading.Lock()
        self._emit = emit
        self.req_id = req.get("id")
        self.problem: Problem = session.problem(req["problem"])
        self.template: dict[str, Any] = req["report"]
        self.dsl: str = req["dsl"]
        self.mode: str = req["mode"]
        self.seed = int(req["seed"])
        self.limits = {**DEFAULT_LIMITS, **{k: float(v) for k, v in (req.get("limits") or {}).items()
                                            if k in DEFAULT_LIMITS}}
        self.timing = {**DEFAULT_TIMING, **(req.get("timing") or {})}
        self.timing["checked"] = max(MIN_CHECKED, int(self.timing["checked"]))
        self.cands = [Candidate(str(c["key"]), str(c["path"])) for c in req["candidates"]]
        self.gen = InputGenerator(self.problem, self.seed)
        self.rng = random.Random(derive_seed(self.seed, "timing-plan", self.problem.id))
        self.reference_mod: Any = None
        self.session_info: dict[str, Any] = {"gpu": session.gpu_name, "floor_us": None, "baselines": [], "clocks": {}}
        self.baseline_set: dict[str, Any] | None = None
        self.ceilings: dict[str, Any] | None = None
        self.cache_notes: list[str] = []
        self.lease_taken = False
        self.gpu_wait_s = 0.0

    # -- helpers ----------------------------------------------------------------------------------
    def emit(self, msg: dict[str, Any]) -> None:
        with self._emit_lock:  # load/build threads report progress too
            self._emit(msg)

    def progress(self, c: Candidate, phase: str) -> None:
        self.emit({"v": PROTOCOL_VERSION, "id": self.req_id, "event": "progress", "key": c.key, "phase": phase})

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
            c.clock = dict(c.checker.clock)
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

    def take_gpu(self) -> None:
        """Take this GPU's lease (mkb_eval.gpulock) before the group's first GPU work; held until
        the group's timing and re-checks are done (run()). Other judges of the GPU build meanwhile."""
        if not self.lease_taken:
            self.gpu_wait_s += self.session.gpu_lease.acquire()
            self.lease_taken = True

    def correctness(self, c: Candidate) -> None:
        """The trials of every shape set (docs/evaluator.md "Correctness"), on the GPU."""
        self.take_gpu()
        t0 = time.monotonic()
        try:
            c.checker = self.make_checker(c)
            target = RunnerTarget(self, c)
            shapes = self.problem.check_shapes + ([self.problem.benchmark_shape] if self.mode in ("bench", "full") else [])
            try:
                for i, shape in enumerate(shapes):
                    self.progress(c, f"check {shape.name}")
                    trials = self.opts.bench_trials if shape.kind == "benchmark" else self.opts.check_trials
                    rep = c.checker.check_shape(target, shape, trials, perturb_input=i, fresh=True, dynamic=True)
                    c.checks[shape.name] = rep.to_json(self.problem)
            except CandidateFailure as f:
                # The dynamic check's verdict comes first (as when each shape set's first trial was
                # judged at once): a forbidden op or kernel is reported even if an output was wrong.
                try:
                    c.checker.finish_dynamic(target)
                except CandidateFailure as g:
                    if g.verdict == "incorrect":
                        raise g from f
                raise
            c.checker.finish_dynamic(target)
            for shape in shapes:
                ks = c.checker.kernels.get(shape.name)
                if ks:
                    c.kernels = list(ks)
                    break
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
                                  alloc_shared=alloc, dynamic_judge=dyn, synchronize=self.session.synchronize,
                                  session_judge=judge_session)

    # -- timing -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        t0 = time.monotonic()
        avail = self.session.dsls.get(self.dsl, {})
        if self.mode != "compile" and not self.session.can_run:
            msg = (f"mode {self.mode!r} needs a GPU and this judge has none (hello: can_run=false); nothing was "
                   "evaluated: run it on a GPU judge, or use mode \"compile\" here")
            reports = [infra_report(self.template, self.mode, "no_gpu", msg) for _ in self.cands]
        elif not avail.get("available"):
            msg = f"the DSL {self.dsl!r} is not available in this judge: {avail.get('error')}"
            reports = [infra_report(self.template, self.mode, "dsl_unavailable", msg) for _ in self.cands]
        else:
            try:
                self.prepare_all()
                alive = [c for c in self.cands if c.alive]
                if self.mode in ("bench", "full") and alive:
                    self.take_gpu()
                    try:
                        self.time_candidates(alive)
                    except Exception as e:  # noqa: BLE001
                        for c in alive:
                            self.fail(c, CandidateFailure("crashed", "judge_error",
                                                          f"the judge failed while timing: {e}",
                                                          log=traceback.format_exc()))
                for c in self.cands:
                    if c.alive:
                        self.release(c)
            finally:
                if self.lease_taken:
                    self.session.gpu_lease.release()
                    self.lease_taken = False
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


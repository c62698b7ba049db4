"""The GPU orchestration of an `evaluate` request (correctness, the timing loop with fresh inputs
and secretly checked repetitions, adaptive repetitions, the profiled timed call, the wall-clock
check, the plausibility guard, re-check, baselines and ceilings with their disk cache, phases,
infrastructure reasons, report assembly), run on CPU: the runner processes are replaced by
in-process fakes that speak the runner's message protocol (the same messages mkb_eval.runner
answers) around plain Python callables, and CUDA-only calls are patched out. What this cannot see
is everything below the messages (CUDA IPC, the profiler, events): that is what
mkb_eval.selfcheck and mkb_eval.redteam check on the GPU."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import BUNDLE, FIXTURES

from mkb_eval import evaluation, ipc, phase_baselines, timing
from mkb_eval.dynamic import MARKER_KERNEL
from mkb_eval.evaluation import GroupEvaluation, JudgeOptions
from mkb_eval.gpulock import GpuLease
from mkb_eval.pool import RunnerError
from mkb_eval.problem import allocate

A01 = BUNDLE.spec("A01")
KERNEL = "bias_gelu_kernel"
IDS = {"torch.cuda.Event.elapsed_time": 1, "time.perf_counter": 2}
SHARED: dict[int, torch.Tensor] = {}  # fake IPC: descriptor id -> the judge's tensor
# The fake GPU's ceilings: the A01 benchmark shape below (T=48, H=512) moves 99,328 bytes; this
# bandwidth makes its roofline ideal 20 us (tests change it through FAKE["ideal_us"]).
FAKE: dict[str, float] = {"ideal_us": 20.0}
BENCH_BYTES = 4 * 48 * 512 + 2 * 512


def gelu(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    v = x.float() + b.float()
    y.copy_((0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))).to(torch.bfloat16))


class Behaviour:
    """What a fake runner's candidate does: its run(), the streams and kernels a profiler would
    see, its event times and wall time, and whether it replaces timer functions."""

    def __init__(self, run: Callable[..., None], time_us: float | Callable[[int], float] = 50.0,
                 wall_us: float | Callable[[int], float] = 40.0,
                 stream: int = 7, patch_after_calls: int | None = None, kernels: tuple[str, ...] = (KERNEL,),
                 allowed: tuple[str, ...] = (KERNEL,), fail_op: tuple[str, str, int] | None = None):
        self.run, self.time_us, self.wall_us, self.stream = run, time_us, wall_us, stream
        self.patch_after_calls, self.kernels, self.allowed = patch_after_calls, kernels, allowed
        self.fail_op = fail_op  # (op, RunnerError kind, exit status the process then shows)
        self.calls = 0
        self.timed = 0
        self.walls = 0
        self.unleased: list[str] = []  # GPU ops that ran while the judge did not hold the GPU lease

    def rep_time(self) -> float:
        self.timed += 1
        return self.time_us(self.timed) if callable(self.time_us) else self.time_us

    def wall_time(self) -> float:
        """The wall time per call of the n-th wall-clock request (n from 1)."""
        self.walls += 1
        return self.wall_us(self.walls) if callable(self.wall_us) else self.wall_us


class FakeRunner:
    """Answers load/build/bind/call/time like mkb_eval.runner, in-process, on CPU tensors."""

    def __init__(self, b: Behaviour, tmp: Path):
        self.b = b
        self.scratch = str(tmp)
        self.bound: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.ready = {"ready": True, "version": "fake", "ids": dict(IDS), "pid": 0}
        self.closed = False
        self.rc: int | None = None
        self.proc = type("P", (), {"poll": staticmethod(lambda: self.rc)})()
        self.pid = 424242
        self.time_msgs: list[dict[str, Any]] = []  # every `time` request, as the runner received it
        self.lease: GpuLease | None = None  # the judge's GPU lease (FakeSession)
        self.session: dict[str, Any] | None = None  # the open profiler session's record
        self.answers: list[tuple[int, Any]] = []  # (rep, the judge's answer to its "rep" event)

    def wait_ready(self, timeout: float) -> dict[str, Any]:
        return self.ready

    def log(self, limit: int = 8000) -> str:
        return "fake runner log"

    def kill(self) -> None:
        self.closed = True

    def close(self, remove_scratch: bool = True) -> None:
        self.closed = True

    def _call(self, shape: str) -> list[str]:
        """One run(); the kernels a profiler would see (none when run() says it skipped the work)."""
        ins, outs = self.bound[shape]
        self.b.calls += 1
        skipped = self.b.run(*ins, *outs) is False
        return [] if skipped else list(self.b.kernels)

    def _record(self, kernels: list[str]) -> dict[str, Any]:
        acts = [{"name": MARKER_KERNEL, "kind": "kernel", "stream": 7}]
        acts += [{"name": k, "kind": "kernel", "stream": self.b.stream} for k in kernels]
        acts.append({"name": MARKER_KERNEL, "kind": "kernel", "stream": 7})
        return {"ops": ["aten.view.default"], "activities": acts, "allowed_kernels": list(self.b.allowed)}

    def request(self, msg: dict[str, Any], timeout: float, rss_mb: float = 0,
                on_event: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        op = msg["op"]
        reply: dict[str, Any] = {"ok": True}
        if op in ("call", "time") and not (self.lease is not None and self.lease.held):
            self.b.unleased.append(op)
        if self.b.fail_op is not None and op == self.b.fail_op[0]:
            self.rc = self.b.fail_op[2]
            raise RunnerError(self.b.fail_op[1], "the fake runner failed")
        if op == "build":
            reply["compile_s"] = 0.01
        elif op == "bind":
            self.bound[msg["shape"]] = ([SHARED[d["fake"]] for d in msg["inputs"]],
                                        [SHARED[d["fake"]] for d in msg["outputs"]])
        elif op == "call":
            # Like mkb_eval.runner: the first checked call opens a session that records every
            # later call (between markers) until "collect".
            if msg.get("checked") and self.session is None:
                self.session = {"calls": [], "activities": [], "allowed_kernels": list(self.b.allowed)}
            try:
                k = self._call(msg["shape"])
            except Exception as e:  # the runner reports a raising run() like this
                return {"ok": False, "reason": "runtime_error", "error": repr(e), "summary": f"{type(e).__name__}: {e}",
                        "ids": self.ids(), "violations": []}
            if self.session is not None:
                rec = self._record(k)
                self.session["calls"].append({"shape": msg["shape"], "ops": rec["ops"]})
                self.session["activities"] += rec["activities"]
            reply["record"] = None
        elif op == "collect":
            reply["record"], self.session = self.session, None
        elif op == "time":
            self.time_msgs.append(dict(msg))
            for _ in range(msg.get("warmup", 0)):
                self._call(msg["shape"])
            times, profile = [], None
            for i in range(msg["reps"]):  # mkb_eval.runner.op_time: an event and a "go" before every rep
                assert on_event is not None
                ans = on_event({"event": "rep", "rep": i})
                self.answers.append((i, ans))
                if ans != {"op": "go"}:
                    return {"ok": False, "reason": "aborted", "error": "stopped", "ids": self.ids(), "violations": []}
                if msg.get("profile_at") == i:
                    profile = self._record(self._call(msg["shape"]))
                    continue
                self._call(msg["shape"])
                times.append(self.b.rep_time())
            reply.update(times_us=times, profile=profile,
                         wall_us_per_call=self.b.wall_time() if msg.get("wall_calls") else None)
        reply["ids"] = self.ids()
        reply["violations"] = []
        return reply

    def ids(self) -> dict[str, int]:
        ids = dict(IDS)
        if self.b.patch_after_calls is not None and self.b.calls > self.b.patch_after_calls:
            ids["torch.cuda.Event.elapsed_time"] = 99
        return ids


class FakePool:
    def __init__(self, behaviours: list[Behaviour], tmp: Path):
        self.queue = [FakeRunner(b, tmp) for b in behaviours]
        self.lease: GpuLease | None = None
        self.used: list[FakeRunner] = []

    def acquire(self, dsl: str) -> FakeRunner:
        r = self.queue.pop(0)
        r.lease = self.lease
        self.used.append(r)
        return r


class FakeSession:
    def __init__(self, behaviours: list[Behaviour], tmp: Path):
        self.options = JudgeOptions(check_trials=3, bench_trials=2, max_reps=400, wall_calls=5)
        self.gpu_name = "Fake GPU"
        self.can_run = True
        self.device = "cpu"
        self.versions = {"python": "3", "torch": torch.__version__, "cuda": None}
        self.dsls = {"cute": {"available": True, "version": "fake"}, "tirx": {"available": True, "version": "fake"}}
        self.pool = FakePool(behaviours, tmp)
        self.baseline_cache: dict[Any, Any] = {}
        self.gpu_lease = GpuLease("fake-gpu", str(tmp / "locks"))
        self.pool.lease = self.gpu_lease

    def problem(self, spec: dict[str, Any]) -> Any:
        from mkb_eval.problem import problem_from_spec
        return problem_from_spec(spec)

    def synchronize(self) -> None:
        pass

    def collect_ipc(self) -> None:
        pass

    def export_buffers(self, tensors: Any) -> list[Any]:
        return [ipc.export(t) for t in tensors]  # the fake export below (the runner is in-process)

    def shared_pool(self, slot: int) -> None:
        return None

    def alloc_in_pool(self, pool: Any, decls: Any, shape: Any) -> list[torch.Tensor]:
        return allocate(decls, shape, "cpu")

    def flush_buffer(self) -> None:
        return None


@pytest.fixture(autouse=True)
def cpu_timing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Baselines are timed in the judge with CUDA events: on CPU, a wall clock stands in; the
    ceilings are fake; the disk cache lives in this test's folder; buffers are "shared" by id."""
    monkeypatch.setenv("MKB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(phase_baselines, "_CEILINGS", {})
    monkeypatch.setattr(phase_baselines, "_DRIVER", ["fake-driver 1.0"])
    monkeypatch.setattr(timing, "measure_ceilings", lambda: {
        "bandwidth_bytes_per_s": BENCH_BYTES / (FAKE["ideal_us"] * 1e-6), "bf16_flops_per_s": 1e15})

    def export(tensor: torch.Tensor) -> dict[str, int]:
        SHARED[id(tensor)] = tensor
        return {"fake": id(tensor)}
    monkeypatch.setattr(ipc, "export", export)
    FAKE["ideal_us"] = 20.0
    def wall_reps(fn: Callable[[], Any], reps: int, flush: Any, *a: Any, **k: Any) -> list[float]:
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e6)
        return out
    monkeypatch.setattr(timing, "timed_reps", wall_reps)
    monkeypatch.setattr(timing, "_sync", lambda: None)  # warm_up syncs the device between calls
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    # The benchmark shape of A01 is large for a CPU: shrink it for this test.
    orig = evaluation.GroupEvaluation.__init__

    def small_bench(self: GroupEvaluation, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        from dataclasses import replace
        from types import MappingProxyType
        small = {"dims": MappingProxyType({"T": 48, "H": 512}), "bytes": 4 * 48 * 512 + 2 * 512,
                 "sizes": MappingProxyType({"x": (48, 512), "b": (512,), "y": (48, 512)})}
        shapes = tuple(replace(s, **small) if s.kind == "benchmark" else s for s in self.problem.shapes)
        self.problem = replace(self.problem, shapes=shapes)
        self.gen.problem = self.problem
    monkeypatch.setattr(evaluation.GroupEvaluation, "__init__", small_bench)


def evaluate(behaviours: dict[str, Behaviour], mode: str, tmp: Path, session: FakeSession | None = None,
             timing_cfg: dict[str, Any] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Any], FakeSession]:
    session = session or FakeSession(list(behaviours.values()), tmp)
    if not session.pool.queue:
        session.pool = FakePool(list(behaviours.values()), tmp)
    events: list[dict[str, Any]] = []
    req = {"id": "e1", "problem": A01, "report": BUNDLE.template(mode), "dsl": "cute", "mode": mode, "seed": 99,
           "candidates": [{"key": k, "path": str(FIXTURES / "a01_cute_ok.py")} for k in behaviours],
           "timing": timing_cfg or {"min_reps": 40, "max_reps": 200, "warmup": 2, "rounds": 3, "checked": 3}}
    out = GroupEvaluation(session, req, events.append).run()
    assert events and all(e["event"] == "progress" for e in events)
    return {r["key"]: r["report"] for r in out["reports"]}, out["session"], session


def test_full_mode_group(tmp_path: Path) -> None:
    def skip_after(n: int) -> Callable[..., None]:
        state = {"calls": 0}

        def run(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
            state["calls"] += 1
            if state["calls"] <= n:
                gelu(x, b, y)
        return run

    behaviours = {
        "good": Behaviour(gelu, time_us=80.0, wall_us=60.0),
        "skipper": Behaviour(skip_after(60)),
        "side": Behaviour(gelu, stream=13),
        "patcher": Behaviour(gelu, patch_after_calls=40),
        "escapes": Behaviour(gelu, time_us=10.0, wall_us=500.0),
    }
    reports, session_info, session = evaluate(behaviours, "full", tmp_path)
    good = reports["good"]
    assert good["verdict"] == "correct", good
    assert good["runtime"]["median_us"] == 80.0 and good["runtime"]["reps"] >= 40
    assert good["runtime"]["wall_us_per_call"] == 60.0 and good["runtime"]["timer"] == "cuda_event"
    names = {(b["name"], b["kind"]) for b in good["baselines"]}
    assert names == {("gelu_of_sum", "eager"), ("torch.compile(gelu_of_sum)", "compile")}
    assert good["t_ref_name"] == "gelu_of_sum" and good["t_ref_us"] > 0
    assert good["speedup_eager"] == pytest.approx(good["t_ref_us"] / 80.0)
    assert good["speedup_compile"] is not None and good["floor_us"] is not None
    assert good["kernels"] == [KERNEL] and set(good["checks"]) == {"small", "ragged", "wide", "benchmark"}
    assert good["checks"]["benchmark"]["trials"] == 3 and good["checks"]["small"]["fresh_buffers"]
    assert "speedup" in good["message"]
    assert reports["skipper"]["verdict"] == "incorrect"
    # Every timed rep has poisoned outputs; the secretly checked ones find the skipped work.
    assert reports["skipper"]["reason"] == "timing_check_failed", reports["skipper"]
    assert "timed repetition" in reports["skipper"]["message"]
    assert reports["side"]["reason"] == "side_stream" and reports["side"]["runtime"] is None
    assert reports["patcher"]["reason"] == "timing_mismatch" and "elapsed_time" in reports["patcher"]["message"]
    assert reports["escapes"]["reason"] == "timing_mismatch" and "wall time" in reports["escapes"]["message"]
    assert session_info["floor_us"] == good["floor_us"] and session_info["baselines"] == good["baselines"]
    assert all(r["env"]["gpu"] == "Fake GPU" for r in reports.values())
    assert set(good["phases"]) == set(evaluation.PHASES) and good["phases"]["total"] == pytest.approx(good["eval_s"], abs=1e-3)
    assert good["phases"]["timing"] > 0 and good["phases"]["correctness"] > 0 and good["phases"]["recheck"] > 0
    assert good["ideal_us"] == pytest.approx(20.0) and "roofline ideal" in good["message"]
    assert good["env"]["timing"]["checked_reps"] >= 9 and good["env"]["timing"]["rounds"] >= 3
    # Every GPU op of every candidate ran under the judge's GPU lease, and the lease is given back.
    assert all(not b.unleased for b in behaviours.values()), {k: b.unleased for k, b in behaviours.items()}
    assert not session.gpu_lease.held
    assert set(good["env"]["correctness_s"]) >= {"fill", "reference", "call", "call_checked", "verify", "bind"}
    # The baselines are cached per session: a second request does not time them again.
    cached = session.baseline_cache
    assert len(cached) == 1 and next(iter(cached.values()))["compile_tried"]
    reports2, _, _ = evaluate({"again": Behaviour(gelu, time_us=40.0)}, "full", tmp_path, session=session)
    assert reports2["again"]["verdict"] == "correct"
    assert reports2["again"]["t_ref_us"] == good["t_ref_us"]
    assert reports2["again"]["speedup_eager"] == pytest.approx(good["t_ref_us"] / 40.0)


def test_test_mode_builds_and_checks_only_the_check_shapes(tmp_path: Path) -> None:
    reports, session_info, session = evaluate({"c": Behaviour(gelu)}, "test", tmp_path)
    rep = reports["c"]
    assert rep["verdict"] == "correct" and rep["runtime"] is None and rep["baselines"] == []
    assert set(rep["checks"]) == {"small", "ragged", "wide"} and session.baseline_cache == {}


def test_candidate_failures_in_bench_mode(tmp_path: Path) -> None:
    def boom(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    behaviours = {"boom": Behaviour(boom), "foreign": Behaviour(gelu, kernels=("triton_poi_fused_0",)),
                  "ok": Behaviour(gelu)}
    reports, _, _ = evaluate(behaviours, "bench", tmp_path)
    assert reports["boom"]["verdict"] == "crashed" and reports["boom"]["reason"] == "runtime_error"
    assert "illegal memory access" in reports["boom"]["message"]
    assert reports["foreign"]["reason"] == "forbidden_kernel"
    assert reports["ok"]["verdict"] == "correct" and reports["ok"]["speedup_compile"] is None


def skip_when_timed(pattern: Callable[[int], bool]) -> Callable[..., Any]:
    """Computes in correctness (outputs there are checked), then, from the first call that comes
    with the timing loop's pacing (here: after the 27 correctness calls of bench mode),
    skips the work on the calls where pattern(n) holds."""
    state = {"calls": 0}

    def run(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> bool | None:
        state["calls"] += 1
        if state["calls"] > 27 and pattern(state["calls"]):
            return False
        gelu(x, b, y)
        return None
    return run


def test_timed_reps_are_checked_in_secret(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen_checked: dict[str, list[list[int]]] = {}
    orig = GroupEvaluation.verify_stash

    def spy(self: GroupEvaluation, c: Any, rnd: int, checked: list[int], stash: Any) -> None:
        seen_checked.setdefault(c.key, []).append(list(checked))
        orig(self, c, rnd, checked, stash)
    monkeypatch.setattr(GroupEvaluation, "verify_stash", spy)
    behaviours = {"honest": Behaviour(gelu, time_us=80.0, wall_us=60.0),
                  "sometimes": Behaviour(skip_when_timed(lambda n: n % 5 < 3)),  # skips 60% of timed reps
                  "rarely": Behaviour(skip_when_timed(lambda n: n % 2 == 0), time_us=80.0)}
    reports, _, session = evaluate(behaviours, "bench", tmp_path)
    assert reports["honest"]["verdict"] == "correct", reports["honest"]["message"]
    for k in ("sometimes", "rarely"):
        assert reports[k]["verdict"] == "incorrect" and reports[k]["reason"] == "timing_check_failed", reports[k]
        assert "unwritten_output" in reports[k]["message"], reports[k]["message"]
    runner = next(r for r in session.pool.used if r.b is behaviours["honest"])
    # The runner-side sequence: every rep gets the same answer, whether the judge checks it or not,
    # and no request carries anything about which reps are checked.
    rounds = seen_checked["honest"]
    assert len(rounds) >= 3 and all(len(ck) >= 3 for ck in rounds)
    per_round = [m["reps"] for m in runner.time_msgs if m["reps"]]
    flat_checked = set()
    base = 0
    for reps, ck in zip(per_round, rounds, strict=False):
        flat_checked |= {base + i for i in ck}
        base += reps
    answers = [a for _, a in runner.answers]
    assert answers and all(a == {"op": "go"} for a in answers)
    checked_answers = [a for n, a in enumerate(answers) if n in flat_checked]
    unchecked_answers = [a for n, a in enumerate(answers) if n not in flat_checked]
    assert checked_answers and unchecked_answers and {str(a) for a in checked_answers} == {str(a) for a in unchecked_answers}
    for m in runner.time_msgs:
        assert set(m) <= {"op", "shape", "warmup", "reps", "profile_at", "flush", "wall_calls", "spin_cycles"}, m
    # the spin before the window is the judge's constant, the same in every round
    spins = {m.get("spin_cycles") for m in runner.time_msgs if m.get("reps")}
    assert spins == {timing.candidate_spin_cycles(timing.CANDIDATE_WAKE_US)}, spins


def test_adaptive_repetitions(tmp_path: Path) -> None:
    cfg = {"min_reps": 30, "max_reps": 150, "warmup": 1, "rounds": 2, "checked": 3, "ci_rel": 0.005}
    steady = Behaviour(gelu, time_us=80.0)
    noisy = Behaviour(gelu, time_us=lambda n: 80.0 + 40.0 * ((n * 7919) % 13) / 13.0)
    reports, _, _ = evaluate({"steady": steady, "noisy": noisy}, "bench", tmp_path, timing_cfg=cfg)
    # Constant times: the CI is zero wide, so it stops at the first point allowed: rounds of 15
    # reps, one rep being the profiled call (no time), so 2 rounds give 29 < 30 and a third is run.
    assert reports["steady"]["verdict"] == "correct"
    assert reports["steady"]["runtime"]["reps"] == 3 * 15 - 1
    # Times spread over +-25%: the CI never gets under 0.5%, so it runs to the cap.
    assert reports["noisy"]["verdict"] == "correct"
    assert 150 <= reports["noisy"]["runtime"]["reps"] <= 150 + 15


def test_stop_rule_and_ci() -> None:
    med, lo, hi = timing.median_ci([float(x) for x in range(1, 101)])
    assert med == 50.5 and 39 <= lo <= 41 and 60 <= hi <= 62
    assert timing.ci_converged([100.0] * 100, 0.005)
    assert not timing.ci_converged([100.0 + (i % 10) for i in range(100)], 0.005)
    assert timing.ci_converged([1000.0 + (i % 10) for i in range(400)], 0.005)


def test_plausibility_guard(tmp_path: Path) -> None:
    FAKE["ideal_us"] = 100.0
    behaviours = {"fast": Behaviour(gelu, time_us=90.0, wall_us=60.0),   # 90 < 0.95 x 100
                  "ok": Behaviour(gelu, time_us=96.0, wall_us=60.0),     # within the allowance
                  "slow": Behaviour(gelu, time_us=250.0, wall_us=60.0)}
    reports, _, _ = evaluate(behaviours, "bench", tmp_path)
    fast = reports["fast"]
    assert fast["verdict"] == "incorrect" and fast["reason"] == "timing_impossible", fast
    assert "90.0 us" in fast["message"] and "100.0 us" in fast["message"] and "TB/s" in fast["message"]
    assert fast["ideal_us"] == pytest.approx(100.0)
    assert reports["ok"]["verdict"] == "correct" and reports["slow"]["verdict"] == "correct"


def test_wall_clock_check_is_measured_again_before_it_fails(tmp_path: Path) -> None:
    # A host stall in one wall-clock measurement (500 us per call, then 60) passes on the second;
    # work hidden from the events slows both measurements and fails; a clean first one is not
    # repeated.
    stalls = {"stall": 0, "hidden": 0, "clean": 0}

    def wall(name: str, first: float, later: float) -> Callable[[int], float]:
        def f(n: int) -> float:
            stalls[name] = n
            return first if n == 1 else later
        return f

    behaviours = {"stall": Behaviour(gelu, time_us=80.0, wall_us=wall("stall", 500.0, 60.0)),
                  "hidden": Behaviour(gelu, time_us=80.0, wall_us=wall("hidden", 500.0, 450.0)),
                  "clean": Behaviour(gelu, time_us=80.0, wall_us=wall("clean", 60.0, 60.0))}
    reports, _, _ = evaluate(behaviours, "bench", tmp_path)
    assert reports["stall"]["verdict"] == "correct", reports["stall"]
    assert reports["stall"]["runtime"]["wall_us_per_call"] == 60.0
    hidden = reports["hidden"]
    assert hidden["verdict"] == "incorrect" and hidden["reason"] == "timing_mismatch", hidden
    assert "450.0 us" in hidden["message"]
    assert stalls == {"stall": 2, "hidden": 2, "clean": 1}


def test_below_the_floor_is_impossible(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    FAKE["ideal_us"] = 1.0
    orig = GroupEvaluation.time_baseline

    def slow_floor(self: GroupEvaluation, fn: Callable[[], Any], flush: Any) -> list[float]:
        times = orig(self, fn, flush)
        return [30.0] * len(times) if fn.__code__.co_name == "<lambda>" and not fn.__defaults__ else times
    monkeypatch.setattr(GroupEvaluation, "time_baseline", slow_floor)
    reports, _, _ = evaluate({"c": Behaviour(gelu, time_us=20.0, wall_us=10.0)}, "bench", tmp_path)
    assert reports["c"]["floor_us"] == 30.0
    assert reports["c"]["reason"] == "timing_impossible" and "floor" in reports["c"]["message"], reports["c"]


def test_disk_cache_of_baselines_and_ceilings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured: list[str] = []
    orig = GroupEvaluation.measure_baselines

    def count(self: GroupEvaluation, *a: Any, **k: Any) -> None:
        measured.append(self.session.gpu_name)
        orig(self, *a, **k)
    monkeypatch.setattr(GroupEvaluation, "measure_baselines", count)
    ceil_calls: list[int] = []
    fake_ceil = timing.measure_ceilings

    def count_ceil() -> dict[str, Any]:
        ceil_calls.append(1)
        return fake_ceil()
    monkeypatch.setattr(timing, "measure_ceilings", count_ceil)
    first, _, _ = evaluate({"a": Behaviour(gelu, time_us=80.0)}, "bench", tmp_path)
    assert measured == ["Fake GPU"] and ceil_calls == [1]
    files = sorted((tmp_path / "cache").rglob("*.json"))
    assert [p.parent.name for p in files] == ["baselines", "ceilings"]
    # A new judge (empty memory): the disk entry is used, nothing is timed again.
    monkeypatch.setattr(phase_baselines, "_CEILINGS", {})
    second, _, _ = evaluate({"b": Behaviour(gelu, time_us=80.0)}, "bench", tmp_path)
    assert measured == ["Fake GPU"] and ceil_calls == [1]
    assert second["b"]["t_ref_us"] == first["a"]["t_ref_us"] and second["b"]["floor_us"] == first["a"]["floor_us"]
    # Another driver: another key, measured again.
    monkeypatch.setattr(phase_baselines, "_DRIVER", ["fake-driver 2.0"])
    monkeypatch.setattr(phase_baselines, "_CEILINGS", {})
    evaluate({"c": Behaviour(gelu, time_us=80.0)}, "bench", tmp_path)
    assert len(measured) == 2 and len(ceil_calls) == 2
    # A corrupt entry is ignored with a warning, then measured and rewritten.
    base_file = next(p for p in sorted((tmp_path / "cache" / "baselines").glob("*.json"))
                     if p.stat().st_mtime == max(q.stat().st_mtime for q in (tmp_path / "cache" / "baselines").glob("*.json")))
    base_file.write_text('{"key": {"trunc')
    fourth, _, _ = evaluate({"d": Behaviour(gelu, time_us=80.0)}, "bench", tmp_path)
    assert len(measured) == 3 and fourth["d"]["verdict"] == "correct"
    assert "corrupt cache entry" in fourth["d"]["log"]
    assert json.loads(base_file.read_text())["value"]["eager"]


def test_infrastructure_reasons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import signal

    assert set(evaluation.INFRA_REASONS) == {"no_gpu", "dsl_unavailable", "judge_error", "profiler_error",
                                             "runner_killed", "host_overload"}
    behaviours = {"killed": Behaviour(gelu, fail_op=("build", "died", -signal.SIGKILL)),
                  "crash": Behaviour(gelu, fail_op=("build", "died", -signal.SIGSEGV)),
                  "slow": Behaviour(gelu, fail_op=("build", "timeout", None)),  # type: ignore[arg-type]
                  "ok": Behaviour(gelu)}
    monkeypatch.setattr(evaluation, "proc_cpu_s", lambda pid, pids=None: 5.0)  # no CPU used during the phase
    monkeypatch.setattr(evaluation, "host_overloaded", lambda: (False, "load average 0.1 on 2 cores"))
    reports, _, _ = evaluate(behaviours, "test", tmp_path)
    assert (reports["killed"]["verdict"], reports["killed"]["reason"]) == ("crashed", "runner_killed")
    assert reports["killed"]["env"].get("infrastructure") is True and "retry" in reports["killed"]["message"]
    assert (reports["crash"]["verdict"], reports["crash"]["reason"]) == ("crashed", "process_died")
    assert not reports["crash"]["env"].get("infrastructure")
    assert (reports["slow"]["verdict"], reports["slow"]["reason"]) == ("timeout", "build_timeout")
    assert reports["ok"]["verdict"] == "correct"
    # The same missed deadline on an overloaded host, with the runner starved of CPU.
    monkeypatch.setattr(evaluation, "host_overloaded", lambda: (True, "load average 9.0 on 2 cores"))
    reports, _, _ = evaluate({"slow": Behaviour(gelu, fail_op=("build", "timeout", None))},  # type: ignore[arg-type]
                             "test", tmp_path)
    assert (reports["slow"]["verdict"], reports["slow"]["reason"]) == ("crashed", "host_overload")
    assert "load average 9.0" in reports["slow"]["message"]
    # A bug in the judge is judge_error, never a verdict about the candidate.
    monkeypatch.setattr(GroupEvaluation, "correctness", lambda self, c: 1 / 0)
    reports, _, _ = evaluate({"x": Behaviour(gelu)}, "test", tmp_path)
    assert (reports["x"]["verdict"], reports["x"]["reason"]) == ("crashed", "judge_error")

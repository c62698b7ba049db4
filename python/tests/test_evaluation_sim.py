"""The GPU orchestration of an `evaluate` request (correctness, interleaved timing rounds with
checkpoints, the profiled timed call, the wall-clock check, re-check, baselines and their session
cache, report assembly), run on CPU: the runner processes are replaced by in-process fakes that
speak the runner's message protocol (the same messages mkb_eval.runner answers) around plain
Python callables, and CUDA-only calls are patched out. What this cannot see is everything below
the messages (CUDA IPC, the profiler, events): that is what mkb_eval.selfcheck and
mkb_eval.redteam check on the GPU."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import FIXTURES, PROBLEMS

from mkb_eval import evaluation, timing
from mkb_eval.dynamic import MARKER_KERNEL
from mkb_eval.evaluation import GroupEvaluation, JudgeOptions
from mkb_eval.problem import allocate

A01 = PROBLEMS / "A/A01_bias_gelu"
KERNEL = "bias_gelu_kernel"
IDS = {"torch.cuda.Event.elapsed_time": 1, "time.perf_counter": 2}


def gelu(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    v = x.float() + b.float()
    y.copy_((0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))).to(torch.bfloat16))


class Behaviour:
    """What a fake runner's candidate does: its run(), the streams and kernels a profiler would
    see, its event times and wall time, and whether it replaces timer functions."""

    def __init__(self, run: Callable[..., None], time_us: float = 50.0, wall_us: float = 40.0,
                 stream: int = 7, patch_after_calls: int | None = None, kernels: tuple[str, ...] = (KERNEL,),
                 allowed: tuple[str, ...] = (KERNEL,)):
        self.run, self.time_us, self.wall_us, self.stream = run, time_us, wall_us, stream
        self.patch_after_calls, self.kernels, self.allowed = patch_after_calls, kernels, allowed
        self.calls = 0


class FakeRunner:
    """Answers load/build/bind/call/time like mkb_eval.runner, in-process, on CPU tensors."""

    def __init__(self, b: Behaviour, tmp: Path):
        self.b = b
        self.scratch = str(tmp)
        self.bound: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.ready = {"ready": True, "version": "fake", "ids": dict(IDS), "pid": 0}
        self.closed = False
        self.proc = type("P", (), {"poll": staticmethod(lambda: 0)})()

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
        if op == "build":
            reply["compile_s"] = 0.01
        elif op == "bind":
            self.bound[msg["shape"]] = (list(msg["inputs"]), list(msg["outputs"]))
        elif op == "call":
            try:
                k = self._call(msg["shape"])
            except Exception as e:  # the runner reports a raising run() like this
                return {"ok": False, "reason": "runtime_error", "error": repr(e), "summary": f"{type(e).__name__}: {e}",
                        "ids": self.ids(), "violations": []}
            reply["record"] = self._record(k) if msg.get("checked") else None
        elif op == "time":
            for _ in range(msg.get("warmup", 0)):
                self._call(msg["shape"])
            times, profile = [], None
            ck = set(msg.get("checkpoints", []))
            for i in range(msg["reps"]):
                if i in ck:
                    assert on_event is not None
                    assert on_event({"event": "checkpoint", "phase": "before", "rep": i}) == {"op": "go"}
                self._call(msg["shape"])
                times.append(self.b.time_us)
                if i in ck and on_event({"event": "checkpoint", "phase": "after", "rep": i}) != {"op": "continue"}:
                    return {"ok": False, "reason": "aborted", "error": "stopped", "ids": self.ids(), "violations": []}
                if msg.get("profile_at") == i:
                    profile = self._record(self._call(msg["shape"]))
            reply.update(times_us=times, profile=profile,
                         wall_us_per_call=self.b.wall_us if msg.get("wall_calls") else None)
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

    def acquire(self, dsl: str) -> FakeRunner:
        return self.queue.pop(0)


class FakeSession:
    def __init__(self, behaviours: list[Behaviour], tmp: Path):
        self.options = JudgeOptions(check_trials=3, bench_trials=2, max_reps=400, calib_reps=5, wall_calls=5)
        self.gpu_name = "Fake GPU"
        self.can_run = True
        self.device = "cpu"
        self.versions = {"python": "3", "torch": torch.__version__, "cuda": None}
        self.dsls = {"cute": {"available": True, "version": "fake"}, "tirx": {"available": True, "version": "fake"}}
        self.pool = FakePool(behaviours, tmp)
        self.baseline_cache: dict[Any, Any] = {}

    def problem(self, d: str) -> Any:
        from mkb_eval.problem import load_problem
        return load_problem(d)

    def synchronize(self) -> None:
        pass

    def collect_ipc(self) -> None:
        pass

    def shared_pool(self, slot: int) -> None:
        return None

    def alloc_in_pool(self, pool: Any, decls: Any, shape: Any) -> list[torch.Tensor]:
        return allocate(decls, shape, "cpu")

    def flush_buffer(self) -> None:
        return None


@pytest.fixture(autouse=True)
def cpu_timing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Baselines are timed in the judge with CUDA events: on CPU, a wall clock stands in."""
    def wall_reps(fn: Callable[[], Any], reps: int, flush: Any, *a: Any, **k: Any) -> list[float]:
        out = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t0) * 1e6)
        return out
    monkeypatch.setattr(timing, "timed_reps", wall_reps)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: fn)
    # The benchmark shape of A01 is large for a CPU: shrink it for this test.
    orig = evaluation.GroupEvaluation.__init__

    def small_bench(self: GroupEvaluation, *a: Any, **k: Any) -> None:
        orig(self, *a, **k)
        from dataclasses import replace
        from types import MappingProxyType
        shapes = tuple(replace(s, dims=MappingProxyType({"T": 48, "H": 512})) if s.kind == "benchmark" else s
                       for s in self.problem.shapes)
        self.problem = replace(self.problem, shapes=shapes)
        self.gen.problem = self.problem
    monkeypatch.setattr(evaluation.GroupEvaluation, "__init__", small_bench)


def evaluate(behaviours: dict[str, Behaviour], mode: str, tmp: Path, session: FakeSession | None = None,
             timing_cfg: dict[str, Any] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, Any], FakeSession]:
    session = session or FakeSession(list(behaviours.values()), tmp)
    if not session.pool.queue:
        session.pool = FakePool(list(behaviours.values()), tmp)
    events: list[dict[str, Any]] = []
    req = {"id": "e1", "problem_dir": str(A01), "dsl": "cute", "mode": mode, "seed": 99,
           "candidates": [{"key": k, "path": str(FIXTURES / "a01_cute_ok.py")} for k in behaviours],
           "timing": timing_cfg or {"min_reps": 40, "min_time_s": 0.0, "warmup": 2, "rounds": 3, "checkpoints": 2}}
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
    assert reports["skipper"]["reason"] in ("recheck_failed", "kernel_set_changed"), reports["skipper"]
    assert reports["side"]["reason"] == "side_stream" and reports["side"]["runtime"] is None
    assert reports["patcher"]["reason"] == "timing_mismatch" and "elapsed_time" in reports["patcher"]["message"]
    assert reports["escapes"]["reason"] == "timing_mismatch" and "wall time" in reports["escapes"]["message"]
    assert session_info["floor_us"] == good["floor_us"] and session_info["baselines"] == good["baselines"]
    assert all(r["env"]["gpu"] == "Fake GPU" for r in reports.values())
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

"""Dynamic-check decisions on synthetic records, timing statistics and the wall-clock rule, and the
TIRx adapter's kernel-name extraction (pure functions, no GPU)."""

from __future__ import annotations

from typing import Any

import pytest

from mkb_eval import timing
from mkb_eval.adapters.tirx import kernel_names
from mkb_eval.correctness import CandidateFailure
from mkb_eval.dynamic import (
    MARKER_KERNEL,
    compare_kernel_sets,
    judge_record,
    judge_session,
    kernel_allowed,
    op_packet,
)
from mkb_eval.timing import quantile, summarize, wake_cycles, wall_mismatch

KERN = "kernel_cutlass_bias_gelu_kernel_tensorptrbf16_0"


def act(name: str, stream: int = 7, kind: str = "kernel") -> dict[str, Any]:
    return {"name": name, "kind": kind, "stream": stream}


def record(*acts: dict[str, Any], ops: list[str] | None = None, allowed: list[str] | None = None) -> dict[str, Any]:
    return {"ops": ops or [], "allowed_kernels": [KERN] if allowed is None else allowed,
            "activities": [act(MARKER_KERNEL), *acts, act(MARKER_KERNEL)]}


def reason(rec: dict[str, Any]) -> str:
    with pytest.raises(CandidateFailure) as ei:
        judge_record(rec, "here")
    return ei.value.reason


def test_clean_record() -> None:
    ops = ["aten.view.default", "aten.t.default", "aten.empty.memory_format", "aten.as_strided.default",
           "aten.sym_size.int"]
    assert judge_record(record(act(KERN), act(KERN), act("Memset (Device)", kind="memset"), ops=ops), "x") == [KERN, KERN]


@pytest.mark.parametrize("op", ["aten.add.Tensor", "aten.gelu.default", "aten.copy_.default", "aten.mm.default",
                                "aten._to_copy.default", "aten.zero_.default", "aten._local_scalar_dense.default"])
def test_forbidden_ops(op: str) -> None:
    assert reason(record(act(KERN), ops=["aten.view.default", op])) == "forbidden_torch_op"


def test_unnamed_and_sync_activities_are_not_judged() -> None:
    rec = record(act(KERN), act("INVALID", stream=0, kind="unnamed"), act("Event Sync", stream=99, kind="sync"))
    assert judge_record(rec, "x") == [KERN]


def test_foreign_kernels_memcpy_and_streams() -> None:
    assert reason(record(act("void at::native::vectorized_elementwise_kernel<4>"))) == "forbidden_kernel"
    assert reason(record(act("triton_poi_fused_add_0"))) == "forbidden_kernel"
    assert reason(record(act("Memcpy DtoD (Device -> Device)", kind="memcpy"))) == "forbidden_kernel"
    assert reason(record(act(KERN, stream=13))) == "side_stream"
    assert reason(record(act("Memset (Device)", stream=13, kind="memset"))) == "side_stream"
    # The candidate launching the harness's own marker kernel.
    assert reason(record(act(MARKER_KERNEL), act(KERN))) == "forbidden_kernel"
    # Markers on two streams: the current stream changed during the call.
    r = record(act(KERN))
    r["activities"][-1] = act(MARKER_KERNEL, stream=13)
    assert reason(r) == "side_stream"
    # No markers at all: the profiler did not work; that is not the candidate's fault.
    with pytest.raises(CandidateFailure) as ei:
        judge_record({"ops": [], "activities": [act(KERN)], "allowed_kernels": [KERN]}, "x")
    assert ei.value.verdict == "crashed" and ei.value.reason == "profiler_error"


def session(*calls: tuple[str, list[dict[str, Any]], list[str]], between: list[dict[str, Any]] | None = None,
            after: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A session record over several calls: (shape, activities inside the markers, ops) each;
    `between` goes after the first call's end marker, `after` after the last."""
    acts: list[dict[str, Any]] = []
    for i, (_, inside, _) in enumerate(calls):
        acts += [act(MARKER_KERNEL), *inside, act(MARKER_KERNEL)]
        if i == 0 and between:
            acts += between
    acts += after or []
    return {"calls": [{"shape": sh, "ops": ops} for sh, _, ops in calls], "activities": acts,
            "allowed_kernels": [KERN]}


def session_reason(rec: dict[str, Any]) -> str:
    with pytest.raises(CandidateFailure) as ei:
        judge_session(rec, "here")
    return ei.value.reason


def test_session_is_judged_call_by_call() -> None:
    ok = session(("small", [act(KERN)], ["aten.view.default"]), ("small", [act(KERN), act(KERN)], []),
                 ("bench", [act(KERN)], []))
    assert judge_session(ok, "x") == {"small": [KERN], "bench": [KERN]}  # the first call of each shape set
    # Any call of the session, not only the first of a shape set, is held to the rules.
    assert session_reason(session(("small", [act(KERN)], []), ("small", [act(KERN)], ["aten.mm.default"]))) \
        == "forbidden_torch_op"
    assert session_reason(session(("small", [act(KERN)], []), ("bench", [act("ampere_sgemm")], []))) \
        == "forbidden_kernel"
    assert session_reason(session(("small", [act(KERN)], []), ("bench", [act(KERN, stream=13)], []))) \
        == "side_stream"
    assert session_reason(session(("s", [act("Memcpy DtoD", kind="memcpy")], []))) == "forbidden_kernel"


def test_session_work_outside_calls_and_marker_counts() -> None:
    # Work still running after run() returned (between two calls or after the last one).
    assert session_reason(session(("a", [act(KERN)], []), ("a", [act(KERN)], []), between=[act(KERN)])) \
        == "forbidden_kernel"
    assert session_reason(session(("a", [act(KERN)], []), after=[act(KERN, stream=13)])) == "side_stream"
    # Sync and unnamed activities outside calls are not judged.
    assert judge_session(session(("a", [act(KERN)], []), after=[act("", kind="unnamed"),
                                                                act("Event Sync", kind="sync")]), "x") == {"a": [KERN]}
    # A candidate that launches the marker kernel itself, and a profiler that lost markers.
    extra = session(("a", [act(KERN), act(MARKER_KERNEL), act(MARKER_KERNEL)], []))
    assert session_reason(extra) == "forbidden_kernel"
    lost = session(("a", [act(KERN)], []), ("a", [act(KERN)], []))
    lost["activities"] = lost["activities"][:-1]
    with pytest.raises(CandidateFailure) as ei:
        judge_session(lost, "here")
    assert ei.value.verdict == "crashed" and ei.value.reason == "profiler_error"


def test_kernel_name_matching() -> None:
    assert kernel_allowed("bias_gelu_kernel", ["bias_gelu_kernel"])
    assert kernel_allowed("bias_gelu_kernel(float*, int)", ["bias_gelu_kernel"])
    assert kernel_allowed("_Z16bias_gelu_kernelPfi", ["bias_gelu_kernel"])
    assert not kernel_allowed("bias_gelu_kernel2", ["bias_gelu_kernel"])
    assert not kernel_allowed("my_bias_gelu_kernel", ["bias_gelu_kernel"])
    assert op_packet("aten.view.default") == "aten.view" and op_packet("aten.empty.memory_format") == "aten.empty"


def test_kernel_set_comparison() -> None:
    compare_kernel_sets(["a", "b"], ["b", "a", "a"], "x")
    with pytest.raises(CandidateFailure) as ei:
        compare_kernel_sets(["a", "b"], ["a"], "x")
    assert ei.value.reason == "kernel_set_changed"
    with pytest.raises(CandidateFailure):
        compare_kernel_sets(["a"], [], "x")


def test_timing_stats() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    st = summarize([5.0, 1.0, 3.0, 2.0, 4.0], wall_us_per_call=2.0)
    assert st == {"median_us": 3.0, "iqr_us": 2.0, "reps": 5, "timer": "cuda_event", "wall_us_per_call": 2.0}


def test_wall_clock_rule() -> None:
    assert not wall_mismatch(100.0, 120.0)
    assert not wall_mismatch(10.0, 44.0)  # 1.5 * 10 + 30 = 45
    assert wall_mismatch(10.0, 46.0)
    assert wall_mismatch(100.0, 400.0)


def test_wake_spin_covers_the_host_enqueue_time() -> None:
    # a fast host path keeps the default spin; a slow one gets a spin of 2x its enqueue time + 25 us
    assert wake_cycles(None) == timing.WAKE_CYCLES
    assert wake_cycles(float("nan")) == timing.WAKE_CYCLES
    assert wake_cycles(5.0) == timing.WAKE_CYCLES
    slow = wake_cycles(175.0)  # torch.compile(C12)'s measured enqueue time on the H200
    assert slow == int((2 * 175.0 + 25.0) * timing.SPIN_CYCLES_PER_US)
    assert slow / timing.SPIN_CYCLES_PER_US > 2 * 175.0
    assert wake_cycles(1e9) == timing.MAX_WAKE_CYCLES


def test_candidate_spin_is_the_judges_constant_within_bounds() -> None:
    c = timing.candidate_spin_cycles(timing.CANDIDATE_WAKE_US)
    assert c == int(timing.CANDIDATE_WAKE_US * timing.SPIN_CYCLES_PER_US)
    assert c / timing.SPIN_CYCLES_PER_US >= 150.0  # covers the runner's measured cold host path (p90 ~140 us)
    assert timing.candidate_spin_cycles(0.0) == timing.WAKE_CYCLES
    assert timing.candidate_spin_cycles(float("inf")) == timing.WAKE_CYCLES
    assert timing.candidate_spin_cycles(1e12) == timing.MAX_WAKE_CYCLES


def test_warm_up_measures_the_median_enqueue_time(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"t": 0.0}
    host_us = iter([500.0, 40.0, 60.0, 50.0, 45.0])  # the first call is slow (a JIT), the rest ~50 us
    calls: list[str] = []

    def fn() -> None:
        calls.append("call")
        clock["t"] += next(host_us) * 1e-6

    monkeypatch.setattr(timing, "_perf", lambda: clock["t"])
    monkeypatch.setattr(timing, "_sync", lambda: calls.append("sync"))
    assert timing.warm_up(fn, 5) == pytest.approx(50.0)
    # every call starts on a synchronized device, and at least three calls are made
    assert calls[:2] == ["sync", "call"] and calls.count("call") == 5
    host_us = iter([10.0, 20.0, 30.0])
    calls.clear()
    assert timing.warm_up(fn, 0) == pytest.approx(20.0) and calls.count("call") == 3


def test_wall_clock_check_takes_the_best_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"t": 0.0, "calls": 0}

    def fn() -> None:  # 100 us per call, with one 5 ms stall during the first batch
        clock["calls"] += 1
        clock["t"] += 100e-6 + (5e-3 if clock["calls"] == 7 else 0.0)

    monkeypatch.setattr(timing, "_perf", lambda: clock["t"])
    monkeypatch.setattr(timing, "_sync", lambda: None)
    assert timing.wall_per_call_us(fn, 20) == pytest.approx(100.0)
    assert clock["calls"] == 60
    # one batch only: the stall counts (the old rule), and the check would fire on a 100 us median
    clock.update(t=0.0, calls=0)
    one = timing.wall_per_call_us(fn, 20, batches=1)
    assert one == pytest.approx(350.0) and wall_mismatch(100.0, one)


def test_timed_reps_report_the_host_time_of_each_window(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = {"t": 0.0}
    host = iter([20.0, 80.0, 30.0])  # one call whose host path outlasts the 50 us spin

    class FakeEvent:
        def __init__(self, enable_timing: bool = False) -> None:
            self.at = 0.0

    def record(ev: FakeEvent) -> None:
        ev.at = clock["t"]

    def fn() -> None:
        clock["t"] += next(host) * 1e-6

    monkeypatch.setattr(timing, "_perf", lambda: clock["t"])
    monkeypatch.setattr(timing, "_sync", lambda: None)
    monkeypatch.setattr(timing, "_sleep", lambda cycles: None)
    monkeypatch.setattr(timing, "_Event", FakeEvent)
    monkeypatch.setattr(timing, "_ev_record", record)
    monkeypatch.setattr(timing, "_ev_sync", lambda ev: None)
    monkeypatch.setattr(timing, "_ev_elapsed", lambda a, b: (b.at - a.at) * 1e3)
    host_us: list[float] = []
    times = timing.timed_reps(fn, 3, None, host_us=host_us)
    assert times == pytest.approx([20.0, 80.0, 30.0])
    assert host_us == pytest.approx([20.0, 80.0, 30.0])
    s = timing.host_summary(host_us)
    assert s["median_us"] == pytest.approx(30.0) and s["max_us"] == pytest.approx(80.0)
    assert s["reps_over_spin"] == 1 and s["reps"] == 3
    assert s["spin_us"] == pytest.approx(timing.WAKE_CYCLES / timing.SPIN_CYCLES_PER_US, abs=0.01)
    assert timing.host_summary([])["median_us"] is None


def test_tirx_kernel_names() -> None:
    src = ('extern "C" __global__ void __launch_bounds__(256) bias_gelu_kernel(float* x, int n);\n'
           'extern "C" __global__ void __launch_bounds__(256) bias_gelu_kernel(float* x, int n) { }\n'
           '__global__ void other_kernel(int* p) {}\n__device__ void helper() {}\n')
    assert kernel_names(src) == ["bias_gelu_kernel", "other_kernel"]

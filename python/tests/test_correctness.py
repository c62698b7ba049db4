"""The judge's correctness logic on CPU: plain Python callables stand in for a runner. A correct
function passes; each kind of broken or cheating function fails with the right reason."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
import torch
from conftest import problem

from mkb_eval.correctness import CandidateFailure, CorrectnessChecker, compare_output
from mkb_eval.dynamic import MARKER_KERNEL, judge_record
from mkb_eval.problem import InputGenerator, ShapeSet, Tolerance, poison_

A01 = problem("A01")
C01 = problem("C01")
REF_A01 = A01.load_reference()
REF_C01 = C01.load_reference()


class LocalTarget:
    """Runs a callable in-process on the bound CPU tensors; optionally returns a fake record."""

    def __init__(self, fn: Callable[..., None], record: dict[str, Any] | None = None):
        self.fn = fn
        self.record = record
        self.bound: dict[str, tuple[Sequence[torch.Tensor], Sequence[torch.Tensor]]] = {}
        self.calls = 0

    def bind(self, shape: ShapeSet, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> None:
        self.bound[shape.name] = (inputs, outputs)

    def call(self, shape: ShapeSet, checked: bool) -> dict[str, Any] | None:
        ins, outs = self.bound[shape.name]
        self.calls += 1
        self.fn(*ins, *outs)
        return self.record if checked else None


def checker(problem: Any = A01, ref: Any = REF_A01, seed: int = 1234) -> CorrectnessChecker:
    return CorrectnessChecker(problem, ref.reference, InputGenerator(problem, seed), "cpu", dynamic_judge=judge_record)


def gelu_bf16(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    v = x.float() + b.float()
    return (0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476))).to(torch.bfloat16)


def correct(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    y.copy_(gelu_bf16(x, b))


def expect(fn: Callable[..., None], reason: str, shape: str = "small", problem: Any = A01, ref: Any = REF_A01,
           record: dict[str, Any] | None = None) -> CandidateFailure:
    with pytest.raises(CandidateFailure) as ei:
        checker(problem, ref).check_shape(LocalTarget(fn, record), problem.shape(shape), trials=5)
    assert ei.value.reason == reason, ei.value.message
    assert ei.value.verdict == "incorrect"
    return ei.value


@pytest.mark.parametrize("shape", ["small", "ragged"])
def test_correct_function_passes(shape: str) -> None:
    t = LocalTarget(correct)
    rep = checker().check_shape(t, A01.shape(shape), trials=5)
    assert rep.trials == 6 and rep.fresh_buffers and rep.perturbation and rep.repeat
    assert rep.stats["y"].max_err_over_bound <= 1.0
    assert t.calls == 5 + 1 + 2 + 1  # trials, repeat, perturbation (base + perturbed), fresh buffers


def test_eager_formulation_passes_too() -> None:
    def eager(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(REF_A01.gelu_of_sum(x, b))
    checker().check_shape(LocalTarget(eager), A01.shape("ragged"), trials=3)


def test_softmax_correct_and_wrong() -> None:
    def sm(x: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_(torch.softmax(x.double(), -1).float())
    checker(C01, REF_C01).check_shape(LocalTarget(sm), C01.shape("ragged"), trials=3)

    def sm_half(x: torch.Tensor, y: torch.Tensor) -> None:  # precision downgrade: fp16 math
        y.copy_(torch.softmax(x.half(), -1).float())
    expect(sm_half, "mismatch", "ragged", C01, REF_C01)


def test_writes_half_the_output() -> None:
    def half(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        n = y.shape[0] // 2
        y[:n].copy_(gelu_bf16(x[:n], b))
    f = expect(half, "unwritten_output")
    assert "never written" in f.message and "trial 0" in f.message


def test_cached_by_pointer() -> None:
    cache: dict[int, torch.Tensor] = {}

    def cached(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        key = x.data_ptr()
        if key not in cache:
            cache[key] = gelu_bf16(x, b)
        y.copy_(cache[key])
    f = expect(cached, "mismatch")
    assert "trial 1" in f.message


def test_cached_by_shape() -> None:
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def cached(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        if tuple(x.shape) not in cache:
            cache[tuple(x.shape)] = gelu_bf16(x, b)
        y.copy_(cache[tuple(x.shape)])
    expect(cached, "mismatch")


def test_skips_work_when_called_again() -> None:
    seen: list[int] = []

    def lazy(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        seen.append(1)
        if len(seen) == 1:
            y.copy_(gelu_bf16(x, b))
    expect(lazy, "unwritten_output")


def test_memoizes_unchanged_inputs() -> None:
    """Keeps private copies of the inputs and skips the work when they are bitwise unchanged
    (what a kernel can do on the device): every trial has fresh inputs, so only the repeat trial
    (same inputs again, outputs poisoned again) sees it."""
    memo: dict[str, torch.Tensor] = {}

    def memoizing(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        if "x" in memo and torch.equal(memo["x"], x) and torch.equal(memo["b"], b):
            return
        memo["x"], memo["b"] = x.clone(), b.clone()
        correct(x, b, y)
    f = expect(memoizing, "unwritten_output")
    assert "repeat trial" in f.message


def test_mutates_input() -> None:
    def mutate(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        correct(x, b, y)
        x.mul_(0.5)
    f = expect(mutate, "input_mutated")
    assert "input x" in f.message

    def mutate_bias(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        correct(x, b, y)
        b.view(torch.int16)[0] ^= 1  # a single flipped bit
    expect(mutate_bias, "input_mutated")


def test_nan_output() -> None:
    def nan(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        correct(x, b, y)
        y.view(-1)[7] = float("nan")
    f = expect(nan, "nan_or_inf")
    assert "[0, 7]" in f.message

    def inf(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        correct(x, b, y)
        y.view(-1)[3] = float("inf")
    expect(inf, "nan_or_inf")


def test_slightly_off() -> None:
    def off(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        y.copy_((gelu_bf16(x, b).float() * 1.08).to(torch.bfloat16))
    f = expect(off, "mismatch")
    assert "beyond tolerance" in f.message

    def tanh_approx(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        # The tanh-approximate GELU differs from erf GELU by ~1e-3 relative: within bf16 tolerance.
        y.copy_(torch.nn.functional.gelu(x.float() + b.float(), approximate="tanh").to(torch.bfloat16))
    checker().check_shape(LocalTarget(tanh_approx), A01.shape("small"), trials=3)


def test_returns_zeros_fails() -> None:
    expect(lambda x, b, y: y.zero_(), "mismatch")


def test_stale_output_under_perturbation() -> None:
    """Recomputes only when a sampled element changed: full fresh inputs pass, a perturbation of
    a few elements elsewhere does not."""
    state: dict[str, Any] = {}

    def sampled(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        key = (float(x[0, 0]), float(x[-1, -1]), float(b[0]))
        if state.get("key") != key:
            state["key"] = key
            state["out"] = gelu_bf16(x, b)
        y.copy_(state["out"])
    f = expect(sampled, "perturbation", "ragged")
    assert "did not change" in f.message


def test_fresh_buffers_catch_a_stored_output_tensor() -> None:
    """Keeps the first output tensor it saw and writes there (a "wrap once" cache)."""
    first: dict[str, torch.Tensor] = {}

    def wrap_once(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        first.setdefault("x", x)
        first.setdefault("b", b)
        first.setdefault("y", y)
        correct(first["x"], first["b"], first["y"])
    f = expect(wrap_once, "unwritten_output")
    assert "fresh buffers" in f.message


def test_dynamic_record_is_judged_on_the_first_trial() -> None:
    def act(name: str, stream: int = 7, kind: str = "kernel") -> dict[str, Any]:
        return {"name": name, "kind": kind, "stream": stream}
    good = {"ops": ["aten.view.default"], "allowed_kernels": ["my_kernel"],
            "activities": [act(MARKER_KERNEL), act("my_kernel"), act(MARKER_KERNEL)]}
    c = checker()
    c.check_shape(LocalTarget(correct, good), A01.shape("small"), trials=2)
    assert c.kernels["small"] == ["my_kernel"]
    bad = {**good, "ops": ["aten.gelu.default"]}
    expect(correct, "forbidden_torch_op", record=bad)
    side = {**good, "activities": [act(MARKER_KERNEL), act("my_kernel", stream=13), act(MARKER_KERNEL)]}
    expect(correct, "side_stream", record=side)


def test_compare_output_details() -> None:
    ref = torch.tensor([1.0, -2.0, 3.0, 0.0])
    tol = Tolerance(1e-2, 1e-2)
    st = compare_output("y", ref.clone(), ref, tol, "here")
    assert st.max_abs_err == 0.0
    # atol scales with the reference RMS: an error of 0.5% of the RMS passes even where ref is 0.
    rms = float(ref.pow(2).mean().sqrt())
    near = ref.clone()
    near[3] = 0.005 * rms
    assert compare_output("y", near, ref, tol, "here").max_err_over_bound < 1.0
    far = ref.clone()
    far[3] = 0.02 * rms
    with pytest.raises(CandidateFailure, match="beyond tolerance"):
        compare_output("y", far, ref, tol, "here")
    with pytest.raises(CandidateFailure) as ei:
        compare_output("y", ref[:3].clone(), ref, tol, "here")
    assert ei.value.reason == "mismatch"
    ints = torch.tensor([1, 2, 3], dtype=torch.int32)
    compare_output("i", ints.clone(), ints, Tolerance(0, 0), "here")
    with pytest.raises(CandidateFailure) as ei:
        compare_output("i", ints + 1, ints, Tolerance(0, 0), "here")
    assert ei.value.reason == "mismatch"
    un = ints.clone()
    poison_(un)
    with pytest.raises(CandidateFailure) as ei:
        compare_output("i", un, ints, Tolerance(0, 0), "here")
    assert ei.value.reason == "unwritten_output"


def test_perturbation_keeps_uniform_inputs_in_their_range() -> None:
    """A perturbed uniform input stays inside [lo, hi]: B10's running variances in [0, 1e-4] moved
    by 3 + |x| went negative, the reference became NaN and every correct kernel failed."""
    import random

    from mkb_eval.correctness import perturb_
    from mkb_eval.problem import Distribution

    dist = Distribution(kind="uniform", lo=0.0, hi=1e-4, jitter=False)
    g = torch.Generator().manual_seed(3)
    t = torch.rand(1000, generator=g) * 1e-4
    before = t.clone()
    perturb_(t, dist, "float32", random.Random(1), k=8)
    changed = (t != before).nonzero().flatten()
    assert len(changed) == 8
    assert float(t.min()) >= 0.0 and float(t.max()) <= 1e-4
    # Each moved element moved by at least a quarter of the range.
    assert float((t[changed] - before[changed]).abs().min()) >= 0.25e-4 - 1e-12
    # Unbounded (normal) inputs still move by 3 + |x|.
    n = torch.zeros(100)
    perturb_(n, Distribution(kind="normal"), "float32", random.Random(2), k=4)
    assert int((n.abs() >= 3.0).sum()) == 4

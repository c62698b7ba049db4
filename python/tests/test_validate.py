"""mkb_eval.validate, the dynamic checks of `mkb problems validate`, on CPU: the planted fixture
(fixtures/validate/A/A90_planted: an input that does not matter, a slip the tolerance cannot see)
is reported with its numbers; the ratio is the judge's; a NaN or random reference, a broken
formulation and a bad starter fail their checks. The same fixture goes through mkb itself in
crates/mkb-cli/tests/validate_cli.rs."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest
import torch
from conftest import FIXTURES, problem

from mkb_eval.correctness import tolerance_bound
from mkb_eval.problem import Problem, problem_to_spec
from mkb_eval.validate import check_starter, judged_ratio, validate_job

PLANTED = FIXTURES / "validate" / "A" / "A90_planted"


def fixture_problem(reference: Path, inputs: int = 3) -> Problem:
    """A90's declaration, built from A01's spec as mkb sends it (x, b, y) plus the input z."""
    base = problem("A01")
    x, b = base.inputs
    z = dataclasses.replace(x, name="z")
    extra = {"z": 0} if inputs == 3 else {}
    shapes = tuple(dataclasses.replace(s, sizes=MappingProxyType({**s.sizes, **{k: s.sizes["x"] for k in extra}}))
                   for s in base.shapes)
    return dataclasses.replace(base, id="A90", slug="planted", dir=reference.parent, reference=reference,
                               eager=("eager_add_mul",), compile_baseline="eager_add_mul",
                               params=MappingProxyType({"alpha": 0.3}), inputs=(x, b, z)[:inputs],
                               outputs=(dataclasses.replace(base.outputs[0], rtol=3.2e-2),), shapes=shapes)


def run_job(p: Problem, correct: list[str], wrong: list[str], starters: dict[str, str] | None = None
            ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    lines: list[dict[str, Any]] = []
    job = {"format": 1, "device": "cpu", "seed": 7, "correct_max_ratio": 0.25, "compile_near_ideal": 1.1,
           "problems": [{"spec": problem_to_spec(p), "validate": {"correct": correct, "wrong": wrong},
                         "starters": starters or {}, "ideal_us": 100.0}]}
    validate_job(job, lines.append)
    rows = {m["row"]["check"]: m["row"] for m in lines if "row" in m}
    return rows, lines


def test_the_planted_faults_are_reported_with_their_numbers() -> None:
    p = fixture_problem(PLANTED / "reference.py")
    rows, lines = run_job(p, ["alt_fp64", "alt_distributed"], ["wrong_no_bias", "wrong_bias_row", "wrong_tiny_scale"],
                          {"cute": str(PLANTED / "cute" / "starter.py"), "tirx": str(PLANTED / "tirx" / "starter.py")})
    assert lines[-1] == {"problem": "A90", "done": True}
    assert all(r["problem"] == "A90" for r in rows.values())
    # An input that does not matter: a fresh draw moves nothing.
    z = rows["influence:z"]
    assert (z["status"], z["measured"]) == ("fail", 0.0), z
    assert "does z matter" in z["detail"]
    for name in ("x", "b"):
        assert rows[f"influence:{name}"]["status"] == "pass" and rows[f"influence:{name}"]["measured"] > 1
    # A slip the tolerance cannot see: it passes everywhere, so its check fails, with its ratio.
    tiny = rows["wrong:wrong_tiny_scale"]
    assert tiny["status"] == "fail" and 0 < tiny["measured"] <= 1, tiny
    assert "small" in tiny["detail"] and "ragged" in tiny["detail"]
    for name in ("wrong_no_bias", "wrong_bias_row"):
        assert rows[f"wrong:{name}"]["status"] == "pass" and rows[f"wrong:{name}"]["measured"] > 1
    for name in ("alt_fp64", "alt_distributed"):
        r = rows[f"correct:{name}"]
        assert r["status"] == "pass" and 0 <= r["measured"] <= 0.25, r
    assert rows["correct:alt_distributed"]["measured"] > 0, "alpha = 0.3 rounds: the two paths differ somewhere"
    for check in ("finite", "deterministic", "reference", "starter_syntax:cute", "starter_syntax:tirx"):
        assert rows[check]["status"] == "pass", rows[check]
    failed = sorted(c for c, r in rows.items() if r["status"] == "fail")
    assert failed == ["influence:z", "wrong:wrong_tiny_scale"]


def test_a_correct_formulation_outside_the_margin_fails(tmp_path: Path) -> None:
    # alpha off by 1.2%: within the tolerance (rtol 3.2e-2), not within its 4x margin.
    ref = write_reference(tmp_path, "def reference(x, b, y, alpha):\n    y.copy_((x.float() + b.float()) * alpha)\n\n\n"
                                    "def eager_add_mul(x, b, alpha):\n    return x\n\n\n"
                                    "def alt_loose(x, b, alpha):\n    return (x.float() + b.float()) * (alpha * 1.012)\n")
    rows, _ = run_job(fixture_problem(ref, inputs=2), ["alt_loose"], ["alt_loose"])
    r = rows["correct:alt_loose"]
    assert r["status"] == "fail" and 0.25 < r["measured"] <= 1, r
    # The same function listed as a slip passes nowhere either: its check fails too.
    w = rows["wrong:alt_loose"]
    assert w["status"] == "fail" and w["measured"] == r["measured"], w


def test_the_ratio_is_the_judges() -> None:
    p = fixture_problem(PLANTED / "reference.py")
    g = torch.Generator().manual_seed(0)
    ref = torch.randn(64, 100, generator=g).to(torch.bfloat16)
    tol = p.outputs[0].tolerance()
    bound = tolerance_bound(ref, tol)
    inputs = [torch.zeros(64, 100, dtype=torch.bfloat16), torch.zeros(100, dtype=torch.bfloat16),
              torch.zeros(64, 100, dtype=torch.bfloat16)]
    for k in (0.5, 3.0, 250.0):  # inside, outside, far outside the tolerance
        out = (ref.float() + k * bound * torch.sign(torch.randn(64, 100, generator=g))).to(torch.bfloat16)
        expect = float(((out.float() - ref.float()).abs() / bound).max())
        ratio, msg = judged_ratio(p, torch.device("cpu"), inputs, [out], [ref], "test")
        assert math.isclose(ratio, expect, rel_tol=1e-6), (k, ratio, expect)
        assert (msg == "") == (expect <= 1), (k, msg)
    nan = ref.clone()
    nan[3, 4] = float("nan")
    ratio, msg = judged_ratio(p, torch.device("cpu"), inputs, [nan], [ref], "test")
    assert math.isinf(ratio) and "NaN" in msg


def write_reference(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "reference.py"
    path.write_text("import torch\n\n\n" + body)
    return path


def test_a_nan_or_random_reference_fails(tmp_path: Path) -> None:
    nan = write_reference(tmp_path, "def reference(x, b, y, alpha):\n"
                                    "    y.copy_((x.float() + b.float()) * alpha)\n    y[0, 0] = float('nan')\n\n\n"
                                    "def eager_add_mul(x, b, alpha):\n    return x\n")
    rows, _ = run_job(fixture_problem(nan, inputs=2), [], [])
    assert rows["finite"]["status"] == "fail" and rows["finite"]["measured"] >= 2, rows["finite"]
    (tmp_path / "r2").mkdir()
    rnd = write_reference(tmp_path / "r2", "def reference(x, b, y, alpha):\n    y.copy_(torch.randn(y.shape))\n\n\n"
                                          "def eager_add_mul(x, b, alpha):\n    return x\n")
    rows, _ = run_job(fixture_problem(rnd, inputs=2), [], [])
    d = rows["deterministic"]
    assert d["status"] == "fail" and d["measured"] > 1, d


def test_a_broken_formulation_fails_with_its_error(tmp_path: Path) -> None:
    ref = write_reference(tmp_path, "def reference(x, b, y, alpha):\n    y.copy_((x.float() + b.float()) * alpha)\n\n\n"
                                    "def eager_add_mul(x, b, alpha):\n    return x\n\n\n"
                                    "def alt_two(x, b, alpha):\n    return x, x\n\n\n"
                                    "def alt_raises(x, b, alpha):\n    raise ValueError('boom')\n\n\n"
                                    "def wrong_shape(x, b, alpha):\n    return x[:, :1]\n")
    rows, _ = run_job(fixture_problem(ref, inputs=2), ["alt_two", "alt_raises", "alt_missing"], ["wrong_shape"])
    assert "returned 2 outputs" in rows["correct:alt_two"]["detail"]
    assert "boom" in rows["correct:alt_raises"]["detail"]
    assert rows["reference"]["status"] == "fail" and "alt_missing" in rows["reference"]["detail"]
    assert rows["correct:alt_missing"]["status"] == "fail"
    # A slip that cannot even run is no evidence that the check catches it.
    assert rows["wrong:wrong_shape"]["status"] == "fail" and "shape" in rows["wrong:wrong_shape"]["detail"]
    assert all(rows[c]["status"] == "fail" for c in ("correct:alt_two", "correct:alt_raises"))


@pytest.mark.parametrize(("src", "problem_text"), [
    ("def build(spec):\n    pass\n", None),
    ("def build(spec:\n", "1: "),
    ("def other(spec):\n    pass\n", "no top-level"),
    ("def build(spec, extra):\n    pass\n", "exactly one argument"),
])
def test_starters_must_parse_and_define_build(tmp_path: Path, src: str, problem_text: str | None) -> None:
    f = tmp_path / "starter.py"
    f.write_text(src)
    err = check_starter(str(f))
    if problem_text is None:
        assert err is None
    else:
        assert err is not None and problem_text in err, err


def test_the_gpu_timing_goes_through_the_judges_baseline_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    """The cuda part's glue, on CPU: the judge's BaselinePhase (eager formulations, torch.compile,
    floor, ceilings, disk cache) with the GPU-only pieces replaced by fixed numbers; t_ref is the
    fastest eager formulation, and torch.compile within 10% of the ideal time is flagged."""
    from mkb_eval import timing
    from mkb_eval.validate import ProblemValidation

    monkeypatch.setenv("MKB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(timing, "measure_ceilings", lambda: {"bandwidth_bytes_per_s": 4.0e12, "bf16_flops_per_s": 7e14})
    monkeypatch.setattr(timing, "l2_flush_buffer", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda n: None)
    monkeypatch.setattr(torch, "compile", lambda fn: fn)
    p = fixture_problem(PLANTED / "reference.py")
    small = next(s for s in p.shapes if s.kind == "check")  # timed on CPU: keep it small
    bench = dataclasses.replace(small, name="benchmark", kind="benchmark", bytes=10**9)
    p = dataclasses.replace(p, eager=("eager_add_mul", "alt_fp64"),
                            shapes=(bench, *(s for s in p.shapes if s.kind == "check")))
    calls: list[str] = []

    def fake_reps(fn: Any, reps: int, flush: Any, *args: Any, **kwargs: Any) -> list[float]:
        fn()
        calls.append("reps")
        return [float(len(calls) * 10 + i % 3) for i in range(reps)]

    monkeypatch.setattr(timing, "timed_reps", fake_reps)
    monkeypatch.setattr(timing, "_sync", lambda: None)  # warm_up syncs the device between calls
    bench_us = p.benchmark_shape.bytes / 4.2e12 * 1e6
    lines: list[dict[str, Any]] = []
    job = {"format": 1, "device": "cpu", "seed": 1, "correct_max_ratio": 0.25, "compile_near_ideal": 1.1,
           "problems": []}
    pv = ProblemValidation({"spec": problem_to_spec(p), "validate": {}, "starters": {}, "ideal_us": bench_us}, job,
                           lines.append)
    pv.timing(p, p.load_reference())
    t = next(m["timing"] for m in lines if "timing" in m)
    rows = {m["row"]["check"]: m["row"] for m in lines if "row" in m}
    assert set(t["eager_us"]) == {"eager_add_mul", "alt_fp64"}
    assert t["t_ref_us"] == min(t["eager_us"].values()) and t["t_ref_name"] in t["eager_us"]
    assert t["t_compile_us"] is not None and t["floor_us"] is not None
    assert t["ideal_us"] == bench_us and t["ideal_measured_us"] == pytest.approx(p.benchmark_shape.bytes / 4.0e12 * 1e6)
    assert rows["timing"]["status"] == "pass" and rows["timing"]["measured"] == t["t_ref_us"]
    ratio = t["t_compile_us"] / t["ideal_measured_us"]  # the judge's roofline, not the nominal one
    head = rows["compile_headroom"]
    assert head["measured"] == pytest.approx(ratio)
    assert head["status"] == ("pass" if ratio > 1.1 else "warn")
    # The same, with torch.compile as fast as the ideal: flagged, never failed.
    lines.clear()
    pv.near = 1e9  # every time is "near" the ideal
    monkeypatch.setenv("MKB_CACHE_DIR", str(tmp_path / "cache2"))
    pv.timing(p, p.load_reference())
    head = next(m["row"] for m in lines if "row" in m and m["row"]["check"] == "compile_headroom")
    assert head["status"] == "warn" and "cannot beat" in head["detail"]

"""mkb_eval.copyceiling's CPU side: problem selection, the tensor byte split, the per-problem line
(ideal, copy score, experts over the copy time), the per-family bound on the geomean speed-up
over torch.compile and the reading of `mkb solutions` evidence."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from conftest import BUNDLE, problem

from mkb_eval import copyceiling

IDS = [str(s["id"]) for s in BUNDLE.problems]


def test_select_takes_ids_and_family_letters_in_registry_order() -> None:
    assert copyceiling.select(["A01", "A02", "C01", "C02", "D01"], ["C", "a01"]) == ["A01", "C01", "C02"]
    assert copyceiling.select(IDS, ["D"]) == [i for i in IDS if i.startswith("D")]


def test_select_rejects_an_unknown_name() -> None:
    with pytest.raises(SystemExit, match="no problem or family 'Z9'"):
        copyceiling.select(IDS, ["Z9"])


def test_tensor_split_of_bias_gelu_is_one_to_one_plus_the_bias() -> None:
    p = problem("A01")
    dims = p.benchmark_shape.dims
    rows, hidden = dims["T"], dims["H"]
    ins, outs = copyceiling.tensor_split(p)
    # x [T, H] bf16 and b [H] bf16 in, y [T, H] bf16 out
    assert outs == 2 * rows * hidden
    assert ins == outs + 2 * hidden


def test_row_scores_a_kernel_at_the_copy_rate_and_the_experts() -> None:
    bw = 4.0e12
    t = {"copy_us": 125.0, "read_us": 110.0, "write_us": 100.0}
    r = copyceiling.row("B01", 400_000_000, (200_000_000, 200_000_000), bw, t, {("B01", "cute"): 130.0, ("B01", "compile"): 125.0})
    assert r["ideal_us"] == pytest.approx(100.0)
    assert r["copy_pct_of_ideal"] == pytest.approx(80.0)
    assert r["cute_pct_of_copy"] == pytest.approx(100.0 * 125.0 / 130.0)
    assert r["cute_pct_of_ideal"] == pytest.approx(100.0 * 100.0 / 130.0)
    assert "tirx_us" not in r
    md = copyceiling.markdown([r], {"command": "x", "gpu": "g", "torch": "t", "bandwidth_bytes_per_s": bw, "reps": 5})
    assert "| B01 | 400.0 | 200.0 / 200.0 | 100.0 | 125.0 | 110.0 | 100.0 | 80.0 | 130.0 (96.2) | - | 125.0 (100.0) |" in md


def test_expert_times_reads_solutions_evidence_and_skips_failures(tmp_path: Path) -> None:
    ev = {"results": [
        {"problem": "B01", "dsl": "cute", "report": {"runtime": {"median_us": 133.9}, "baselines": [
            {"kind": "eager", "timing": {"median_us": 150.0}}, {"kind": "compile", "timing": {"median_us": 140.5}}]}},
        {"problem": "B01", "dsl": "tirx", "report": {"runtime": None}},
        {"problem": "B02", "dsl": "tirx", "report": {}},
    ]}
    f = tmp_path / "s.json"
    f.write_text(json.dumps(ev))
    assert copyceiling.expert_times(f) == {("B01", "cute"): 133.9, ("B01", "compile"): 140.5}


def _row(pid: str, copy: float, compile_us: float, cute: float, tirx: float | None = None) -> dict[str, float | str]:
    t = {"copy_us": copy, "read_us": copy, "write_us": copy}
    ex = {(pid, "cute"): cute, (pid, "compile"): compile_us}
    if tirx is not None:
        ex[(pid, "tirx")] = tirx
    return copyceiling.row(pid, 400_000_000, (200_000_000, 200_000_000), 4.0e12, t, ex)


def test_family_bounds_take_the_best_measured_time_per_problem() -> None:
    rows = [
        _row("A01", copy=110.0, compile_us=200.0, cute=120.0, tirx=125.0),  # the copy is best: 200/110
        _row("A02", copy=130.0, compile_us=100.0, cute=104.0, tirx=102.0),  # torch.compile is best: 1.0
        _row("B01", copy=130.0, compile_us=150.0, cute=120.0, tirx=119.0),  # tirx is best: 150/119
    ]
    a, b = copyceiling.family_bounds(rows)
    assert (a["family"], a["problems"], b["family"], b["problems"]) == ("A", 2, "B", 1)
    assert a["bound"] == pytest.approx(math.sqrt(200.0 / 110.0 * 1.0))
    assert a["cute"] == pytest.approx(math.sqrt(200.0 / 120.0 * 100.0 / 104.0))
    assert a["tirx"] == pytest.approx(math.sqrt(200.0 / 125.0 * 100.0 / 102.0))
    assert a["needed_over_best"] == pytest.approx(1.1 / a["bound"])
    assert b["bound"] == pytest.approx(150.0 / 119.0)
    md = copyceiling.markdown(rows, {"command": "x", "gpu": "g", "torch": "t", "bandwidth_bytes_per_s": 4.0e12, "reps": 5})
    assert f"| A | 2 | {a['cute']:.3f} | {a['tirx']:.3f} | {a['bound']:.3f} | {a['needed_over_best']:.3f} |" in md


def test_family_bounds_skip_problems_without_torch_compile_and_dsls_with_gaps() -> None:
    rows = [_row("C01", copy=100.0, compile_us=120.0, cute=105.0), _row("C02", copy=100.0, compile_us=90.0, cute=95.0, tirx=96.0)]
    rows.append(copyceiling.row("C03", 1000, (500, 500), 4.0e12, {"copy_us": 1.0, "read_us": 1.0, "write_us": 1.0}, {}))
    (c,) = copyceiling.family_bounds(rows)
    assert c["problems"] == 2
    assert "tirx" not in c  # C01 has no TIRx time: no geomean over a subset
    assert c["bound"] == pytest.approx(math.sqrt(120.0 / 100.0 * 1.0))

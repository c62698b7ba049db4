"""mkb_eval.copyceiling's CPU side: problem selection, the tensor byte split, the per-problem line
(ideal, copy score, experts over the copy time) and the reading of `mkb solutions` evidence."""

from __future__ import annotations

import json
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

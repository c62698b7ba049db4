"""The red-team set (tests/adversarial): the manifest is complete and well-formed, every case that
can be judged without a GPU reaches its expected verdict through the real judge in compile mode,
and every case that needs a GPU passes the static check and compiles here (so on the GPU it
reaches the defence it is aimed at rather than an earlier one)."""

from __future__ import annotations

import json

import pytest
from conftest import BUNDLE, REDTEAM_CASES, REPO

from mkb_eval.bundle import BundleError
from mkb_eval.cli import JudgeClient
from mkb_eval.redteam import cases_from_json, reached, run_cases

# The cases as `mkb redteam --list` gives them (mkb alone parses the manifest).
ROOT, CASES = cases_from_json(json.loads(REDTEAM_CASES.read_text()), REPO)


def test_manifest_is_complete() -> None:
    assert ROOT == REPO / "tests" / "adversarial"
    files = sorted(p.name for p in ROOT.glob("*.py"))
    listed = [c.file for c in CASES]
    assert sorted(listed) == files and len(set(listed)) == len(listed)
    assert len(CASES) >= 12
    for c in CASES:
        assert BUNDLE.spec(c.problem_id)["id"] == c.problem_id, c.file
        assert c.dsl in ("cute", "tirx") and c.reasons and all(c.reasons)
        assert (ROOT / c.file).read_text().startswith('"""Red team'), c.file
    # The required kinds of attack are all present.
    whats = " ".join(c.what for c in CASES).lower()
    for needle in ("reference", "pointer", "shape", "half of the rows", "over the input", "stream", "event",
                   "environment", "/proc", "socket", "busy loop", "sleep", "illegal", "precision", "triton"):
        assert needle in whats, needle
    assert {c.layer for c in CASES} >= {"static", "sandbox", "deadline", "dynamic", "correctness", "timing", "crash"}


def test_cases_from_mkb_are_read_strictly() -> None:
    d = json.loads(REDTEAM_CASES.read_text())
    d["cases"][0]["severity"] = "high"
    with pytest.raises(BundleError, match="`severity` is unknown"):
        cases_from_json(d)
    del d["cases"][0]["severity"]
    del d["cases"][0]["layer"]
    with pytest.raises(BundleError, match="`layer` is missing"):
        cases_from_json(d)


def test_reached_rule() -> None:
    assert reached("incorrect", "recheck_failed", "incorrect", ["recheck_failed", "kernel_set_changed"])
    assert reached("static_check_failed", "static:torch_call", "static_check_failed", ["static:"])
    assert not reached("incorrect", "mismatch", "incorrect", ["recheck_failed"])
    assert not reached("correct", "x", "correct", [""])


@pytest.mark.parametrize("group", ["cpu", pytest.param("gpu", marks=pytest.mark.slow)])
def test_cases_in_compile_mode(judge: JudgeClient, group: str) -> None:
    hello = judge.request("hello", timeout=600)
    assert hello["can_run"] is False, "this test is for a machine without a GPU"
    cases = [c for c in CASES if c.needs_gpu == (group == "gpu")]
    rows = run_cases(judge, cases, ROOT, can_run=False, mode=None, echo=False)
    bad = [r for r in rows if not r["ok"]]
    assert not bad, "\n".join(f"{r['file']}: expected {r['expected']}, got {r['got']}: {r['message']}" for r in bad)

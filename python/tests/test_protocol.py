"""The protocol against a real judge subprocess (python -m mkb_eval.judge), in compile mode on this
CPU machine: hello, evaluate (starter, correct CuTe and TIRx kernels, build and NVRTC errors, a
group), malformed requests (error responses, the judge keeps serving), a candidate printing onto
its stdout, the no-GPU answer for test mode, version mismatch, shutdown."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLE, FIXTURES, PROBLEMS, SPEC_BUNDLE

from mkb_eval import PROTOCOL_VERSION
from mkb_eval.cli import JudgeClient

A01 = PROBLEMS / "A/A01_bias_gelu"


def one_report(resp: dict[str, Any], key: str = "c") -> dict[str, Any]:
    assert resp["ok"] is True and resp["v"] == PROTOCOL_VERSION, resp
    reports = {r["key"]: r["report"] for r in resp["reports"]}
    rep = reports[key]
    assert set(rep) == set(BUNDLE.report), "exactly the fields of the template mkb sent"
    return rep


def test_hello(judge: JudgeClient) -> None:
    h = judge.request("hello", timeout=300)
    # The judge fixture is shared by the session: this request's id is h<number of requests so far>.
    assert h["ok"] is True and h["v"] == PROTOCOL_VERSION and h["id"] == f"h{judge._n}"
    assert isinstance(h["pid"], int) and h["python"].startswith("3.")
    assert h["torch"].startswith("2.") and h["gpu"] is None and h["can_run"] is False
    assert h["dsls"]["cute"] == {"available": True, "version": "4.8.1"}
    assert h["dsls"]["tirx"]["available"] is True and h["dsls"]["tirx"]["version"] == "0.1.0a4"


def test_starter_fails_the_static_check(judge: JudgeClient) -> None:
    """An untouched starter raises NotImplementedError in build(), but it never gets that far: it
    defines no DSL kernel and never calls the compiler, so the static check decides."""
    for dsl in ("cute", "tirx"):
        rep = one_report(judge.evaluate(A01, dsl, "compile", {"c": A01 / dsl / "starter.py"}, seed=1))
        assert rep["verdict"] == "static_check_failed" and rep["reason"] == "static:missing_dsl_kernel", rep
        assert "static:missing_dsl_compile" in rep["message"] and rep["compile_s"] is None


@pytest.mark.parametrize("dsl", ["cute", "tirx"])
def test_correct_kernel_compiles(judge: JudgeClient, dsl: str) -> None:
    rep = one_report(judge.evaluate(A01, dsl, "compile", {"c": FIXTURES / f"a01_{dsl}_ok.py"}, seed=7))
    assert rep["verdict"] == "correct" and rep["reason"] is None, rep
    assert rep["mode"] == "compile" and rep["compile_s"] > 0 and "4 shape sets" in rep["message"]
    assert rep["runtime"] is None and rep["baselines"] == [] and rep["eval_s"] > 0
    assert rep["env"]["runner"]["compile_only"] is True
    assert rep["env"]["versions"]["dsl"] == dsl


def test_build_raising_not_implemented_is_a_compile_error(judge: JudgeClient) -> None:
    rep = one_report(judge.evaluate(A01, "cute", "compile", {"c": FIXTURES / "a01_cute_build_raises.py"}, seed=3))
    assert rep["verdict"] == "compile_error" and rep["reason"] == "build_error", rep
    assert "NotImplementedError" in rep["message"] and "write the CuTe DSL kernel" in rep["log"]


def test_nvrtc_errors_come_back(judge: JudgeClient) -> None:
    rep = one_report(judge.evaluate(A01, "tirx", "compile", {"c": FIXTURES / "a01_tirx_nvrtc_error.py"}, seed=3))
    assert rep["verdict"] == "compile_error" and rep["reason"] == "build_error", rep
    assert "this_is_not_declared" in rep["message"] and "NVRTC" in rep["log"]


def test_group_and_wrong_dsl(judge: JudgeClient, tmp_path: Path) -> None:
    syntax = tmp_path / "broken.py"
    syntax.write_text("def build(spec:\n")
    resp = judge.evaluate(A01, "tirx", "compile", {"cute_file": FIXTURES / "a01_cute_ok.py", "syntax": syntax,
                                                   "missing": tmp_path / "nope.py"}, seed=5)
    assert [r["key"] for r in resp["reports"]] == ["cute_file", "syntax", "missing"]
    wrong = one_report(resp, "cute_file")
    assert wrong["verdict"] == "static_check_failed" and wrong["reason"].startswith("static:")
    assert "static:forbidden_import" in wrong["message"]
    assert one_report(resp, "syntax")["verdict"] == "compile_error"
    assert one_report(resp, "syntax")["reason"] == "load_error"
    assert one_report(resp, "missing")["reason"] == "load_error"


def test_candidate_output_never_reaches_the_channel(judge: JudgeClient) -> None:
    judge.events.clear()
    resp = judge.evaluate(A01, "cute", "compile", {"c": FIXTURES / "a01_cute_prints.py"}, seed=9)
    rep = one_report(resp)  # every line the judge wrote parsed as JSON, and this is the real answer
    assert rep["verdict"] == "correct", rep
    assert "noise line 1999" in rep["log"] and "trimmed" in rep["log"]
    assert len(rep["log"]) < 8200
    assert all(e["event"] == "progress" and e["key"] == "c" for e in judge.events)
    assert {"static check", "load", "build benchmark"} <= {e["phase"] for e in judge.events}


def test_gpu_modes_without_a_gpu(judge: JudgeClient) -> None:
    for mode in ("test", "bench", "full"):
        rep = one_report(judge.evaluate(A01, "cute", mode, {"c": FIXTURES / "a01_cute_ok.py"}, seed=1))
        assert rep["verdict"] == "crashed" and rep["reason"] == "no_gpu", rep
        assert "needs a GPU" in rep["message"] and rep["mode"] == mode


def test_malformed_requests_get_errors_and_the_judge_keeps_serving(judge: JudgeClient) -> None:
    judge.send_raw("{this is not json")
    r = judge.read(60)
    assert r == {"v": PROTOCOL_VERSION, "id": None, "ok": False, "error": r["error"]} and "bad JSON" in r["error"]
    judge.send_raw("[1, 2, 3]")
    assert judge.read(60)["ok"] is False
    judge.send_raw(json.dumps({"v": PROTOCOL_VERSION, "id": "x1", "op": "fly"}))
    r = judge.read(60)
    assert r["id"] == "x1" and r["ok"] is False and "unknown op" in r["error"]
    spec = BUNDLE.spec("A01")
    base = {"v": PROTOCOL_VERSION, "op": "evaluate", "problem": spec, "report": BUNDLE.template("compile"),
            "dsl": "cute", "mode": "compile", "candidates": [{"key": "c", "path": str(FIXTURES / "a01_cute_ok.py")}],
            "seed": 1}
    bad_requests = {
        "x2": ({k: v for k, v in base.items() if k != "seed"}, "missing field"),
        "x3": ({**base, "dsl": "triton"}, "unknown DSL"),
        "x4": ({**base, "mode": "fast"}, "unknown mode"),
        "x5": ({**base, "candidates": []}, "non-empty"),
        "x6": ({**base, "problem": {**spec, "colour": 1}}, "bad problem spec"),
        "x9": ({**base, "problem": {**spec, "reference": "/nonexistent/reference.py"}}, "not a file"),
        "x10": ({k: v for k, v in base.items() if k != "report"}, "missing field 'report'"),
        "x11": ({**base, "report": {"verdict": "correct"}}, "report template"),
        "x7": ({**base, "candidates": [{"key": "a", "path": "p"}, {"key": "a", "path": "q"}]}, "duplicate"),
        "x8": ({**base, "seed": "secret"}, "seed"),
        "x12": ({**base, "timing": {"min_time_s": 1.0}}, "timing.min_time_s is not an option"),
        "x13": ({**base, "timing": {"rounds": "five"}}, "timing.rounds must be a number"),
        "x14": ({**base, "limits": {"gpu_s": 3}}, "limits.gpu_s is not an option"),
    }
    for rid, (req, why) in bad_requests.items():
        judge.send_raw(json.dumps({**req, "id": rid}))
        r = judge.read(60)
        assert r["id"] == rid and r["ok"] is False and why in r["error"], r
    h = judge.request("hello", timeout=60)
    assert h["ok"] is True


def test_version_mismatch_and_shutdown() -> None:
    client = JudgeClient(["--no-prewarm"], stderr=subprocess.DEVNULL)
    client.send_raw(json.dumps({"v": PROTOCOL_VERSION - 1, "id": "old", "op": "hello"}))
    r = client.read(300)
    assert r["id"] == "old" and r["ok"] is False and "version" in r["error"]
    assert client.proc.wait(60) == 2
    client2 = JudgeClient(["--no-prewarm"], stderr=subprocess.DEVNULL)
    assert client2.request("shutdown", timeout=300) == {"v": PROTOCOL_VERSION, "id": "s1", "ok": True}
    assert client2.proc.wait(60) == 0


def test_cli_compile_mode() -> None:
    p = subprocess.run([sys.executable, "-m", "mkb_eval.cli", "--problem-dir", str(A01), "--dsl", "cute",
                        "--candidate", str(A01 / "cute/starter.py"), "--mode", "compile", "--judge-arg=--no-prewarm",
                        "--quiet", "--spec-bundle", str(SPEC_BUNDLE)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["verdict"] == "static_check_failed"


def test_total_deadline_and_memory_limit(judge: JudgeClient) -> None:
    busy = PROBLEMS.parent / "tests/adversarial/d03_busy_build.py"
    rep = one_report(judge.evaluate(A01, "cute", "compile", {"c": busy}, seed=1,
                                    limits={"build_s": 120, "total_s": 8}))
    assert rep["verdict"] == "timeout" and rep["reason"] == "total_timeout", rep
    rep = one_report(judge.evaluate(A01, "cute", "compile", {"c": FIXTURES / "a01_cute_memory_hog.py"}, seed=1,
                                    limits={"rss_mb": 2500, "build_s": 120}))
    assert rep["verdict"] == "crashed" and rep["reason"] == "memory_limit", rep
    assert "2500" in rep["message"]
    assert judge.request("hello", timeout=60)["ok"] is True


def test_stale_scratch_roots_are_removed() -> None:
    import os
    import tempfile

    from mkb_eval.judge import remove_stale_roots

    stale = Path(tempfile.gettempdir()) / "mkb-judge-999999999-test"
    (stale / "cute-x").mkdir(parents=True, exist_ok=True)
    (stale / "cute-x" / "kernel.py").write_text("x = 1\n")
    other = Path(tempfile.gettempdir()) / "mkb-judgement-999999999-keep"
    other.mkdir(exist_ok=True)
    remove_stale_roots()
    assert not stale.exists() and other.exists()
    os.rmdir(other)

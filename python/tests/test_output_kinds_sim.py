"""An output updated in place through the whole evaluate orchestration on CPU (the fake runners of
test_evaluation_sim.py): correctness, the timing loop refilling the in-place input before every
timed repetition, and the secretly checked repetitions judged on the change from the
regenerated before-value."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from conftest import FIXTURES, REPO
from test_evaluation_sim import Behaviour, FakeSession, cpu_timing  # noqa: F401  (autouse fixture)

from mkb_eval.bundle import Bundle
from mkb_eval.evaluation import GroupEvaluation

KINDS = Bundle.from_file(FIXTURES / "kinds" / "spec-bundle.json", REPO)


def gelu_inplace(x: torch.Tensor, b: torch.Tensor) -> None:
    x.copy_(torch.nn.functional.gelu(x.float() + b.float()).bfloat16())


def evaluate_a98(behaviours: dict[str, Behaviour], tmp: Path) -> dict[str, dict[str, Any]]:
    session = FakeSession(list(behaviours.values()), tmp)
    req = {"id": "e1", "problem": KINDS.spec("A98"), "report": KINDS.template("bench"), "dsl": "cute",
           "mode": "bench", "seed": 5, "candidates": [{"key": k, "path": str(FIXTURES / "a01_cute_ok.py")}
                                                      for k in behaviours],
           "timing": {"min_reps": 30, "max_reps": 60, "warmup": 2, "rounds": 3, "checked": 3}}
    out = GroupEvaluation(session, req, lambda e: None).run()
    return {r["key"]: r["report"] for r in out["reports"]}


def test_in_place_through_timing(tmp_path: Path) -> None:
    seen: list[torch.Tensor] = []

    def honest(x: torch.Tensor, b: torch.Tensor) -> None:
        seen.append(x.clone())
        gelu_inplace(x, b)

    lazy_b = Behaviour(lambda x, b: None)

    def lazy(x: torch.Tensor, b: torch.Tensor) -> bool | None:
        """Right in correctness, then skips every second timed repetition (x keeps its values)."""
        if lazy_b.timed and lazy_b.timed % 2 == 0:
            return False
        gelu_inplace(x, b)
        return None
    lazy_b.run = lazy
    honest_b = Behaviour(honest, time_us=80.0, wall_us=60.0)
    reports = evaluate_a98({"honest": honest_b, "lazy": lazy_b}, tmp_path)
    assert reports["honest"]["verdict"] == "correct", reports["honest"]["message"]
    assert reports["honest"]["runtime"]["reps"] >= 30
    # Every call saw fresh values in x: the timing loop refilled it before each repetition, so no
    # call got the previous call's result (gelu applied twice).
    starts = {t.view(torch.int16).sum().item() for t in seen}
    assert len(starts) > 0.9 * len(seen), (len(starts), len(seen))
    lazy_rep = reports["lazy"]
    assert lazy_rep["verdict"] == "incorrect" and lazy_rep["reason"] == "timing_check_failed", lazy_rep
    assert "its change from the input before the call" in lazy_rep["message"]

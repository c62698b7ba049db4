"""mkb_eval.adopt (which tuned variant replaces an expert) and selfcheck's --with-experts targets."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from mkb_eval.adopt import apply, decide, main, reference_times, tune_rows
from mkb_eval.selfcheck import find_variants


def row(name: str, verdict: str = "correct", med: float | None = 100.0, iqr: float | None = 1.0,
        folder: str = "C03_log_softmax", dsl: str = "cute") -> dict:
    return {"target": f"tune/{folder}/{dsl}/{name}", "verdict": verdict, "reason": None if verdict == "correct"
            else "mismatch", "median_us": med, "iqr_us": iqr}


def write(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_the_fastest_stable_correct_variant_under_the_bar_is_adopted(tmp_path: Path) -> None:
    rows = tune_rows([write(tmp_path / "t.json", [
        row("expert", med=200.0),
        row("v1", med=197.0),                 # 1.5% faster: under the 0.99 bar
        row("v2", med=195.0, iqr=12.0),       # faster, but IQR 6% of the median: unstable
        row("v3", "incorrect", None, None),   # wrong
        row("v4", med=199.0),                 # 0.5% faster: not enough
    ])])
    (d,) = decide(rows, {})
    assert (d.adopted, d.adopted_us, d.expert_same_run_us) == ("v1", 197.0, 200.0)
    assert d.lines[-1] == "C03_log_softmax/cute: expert 200.0 us (reference -) -> v1 197.0 us"
    assert "  C03_log_softmax/cute/v3: incorrect mismatch" in d.lines


def test_the_smaller_of_same_run_and_reference_time_is_the_bar(tmp_path: Path) -> None:
    rows = tune_rows([write(tmp_path / "t.json", [row("expert", med=200.0), row("v1", med=197.0)])])
    # The expert measured 196 us in a reference table: 197 is not 1% below that.
    (d,) = decide(rows, {"C03/cute": 196.0})
    assert d.adopted is None and d.expert_reference_us == 196.0
    # Without any expert time nothing is adopted.
    rows = tune_rows([write(tmp_path / "u.json", [row("v1", med=1.0, iqr=0.01)])])
    assert decide(rows, {})[0].adopted is None
    # A reference alone is enough.
    assert decide(rows, {"C03/cute": 2.0})[0].adopted == "v1"


def test_reference_times_read_solutions_evidence_and_reject_other_files(tmp_path: Path) -> None:
    sol = tmp_path / "s.json"
    sol.write_text(json.dumps({"results": [
        {"problem": "C03", "dsl": "cute", "report": {"runtime": {"median_us": 201.7}}},
        {"problem": "C03", "dsl": "tirx", "report": {"verdict": "crashed"}},
    ]}))
    assert reference_times([sol]) == {"C03/cute": 201.7}
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ValueError, match="bad.json"):
        reference_times([bad])
    with pytest.raises(ValueError, match="bad.json"):
        tune_rows([bad])


def test_apply_copies_the_winner_over_the_solution_and_main_writes_the_adoptions(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    sol = problems / "C" / "C03_log_softmax" / "cute" / "solution.py"
    sol.parent.mkdir(parents=True)
    sol.write_text("old = 1\n")
    tune = tmp_path / "tune"
    (tune / "C03_log_softmax" / "cute").mkdir(parents=True)
    (tune / "C03_log_softmax" / "cute" / "v1.py").write_text("new = 2\n")
    tj = write(tmp_path / "t.json", [row("expert", med=200.0), row("v1", med=190.0)])
    out = tmp_path / "adopted.json"
    assert main([str(tj), "--variants", str(tune), "--problems", str(problems), "--apply", "--out", str(out)]) == 0
    assert sol.read_text() == "new = 2\n"
    assert json.loads(out.read_text())["C03_log_softmax/cute"]["adopted"] == "v1"
    # A decision whose variant file is gone is an error naming the file, not a crash.
    (tune / "C03_log_softmax" / "cute" / "v1.py").unlink()
    with pytest.raises(ValueError, match="v1.py"):
        apply(decide(tune_rows([tj]), {}), tune, problems)
    assert main([str(tj), "--variants", str(tune), "--problems", str(problems), "--apply"]) == 2


def test_with_experts_puts_each_varied_expert_first(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    for dsl in ("cute", "tirx"):
        (problems / "A" / "A01_bias_gelu" / dsl).mkdir(parents=True)
        (problems / "A" / "A01_bias_gelu" / dsl / "solution.py").write_text("")
    tune = tmp_path / "tune"
    for rel in ("A01_bias_gelu/cute/v1.py", "A01_bias_gelu/cute/v2.py"):
        (tune / rel).parent.mkdir(parents=True, exist_ok=True)
        (tune / rel).write_text("")
    got = [(label, cand.name) for label, _, _, cand in find_variants(problems, tune, with_experts=True)]
    # Only the varied (folder, dsl) gets its expert: A01 tirx has no variants.
    assert got == [("tune/A01_bias_gelu/cute/expert", "solution.py"), ("tune/A01_bias_gelu/cute/v1", "v1.py"),
                   ("tune/A01_bias_gelu/cute/v2", "v2.py")]
    (tune / "A01_bias_gelu/cute/expert.py").write_text("")
    with pytest.raises(ValueError, match="expert.py"):
        find_variants(problems, tune, with_experts=True)

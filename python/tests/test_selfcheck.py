"""mkb_eval.selfcheck's target discovery: expert solutions and tuning variants."""
from __future__ import annotations

from pathlib import Path

from mkb_eval.selfcheck import find_targets, find_variants


def test_variants_are_found_by_problem_folder_and_dsl(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    (problems / "A" / "A01_bias_gelu" / "cute").mkdir(parents=True)
    (problems / "A" / "A01_bias_gelu" / "cute" / "solution.py").write_text("")
    tune = tmp_path / "tune"
    for rel in ("A01_bias_gelu/cute/rows8.py", "A01_bias_gelu/tirx/block512.py",
                "A01_bias_gelu/nodsl/x.py", "Z99_missing/cute/y.py"):
        (tune / rel).parent.mkdir(parents=True, exist_ok=True)
        (tune / rel).write_text("")
    got = [(label, pdir.name, dsl, cand.name) for label, pdir, dsl, cand in find_variants(problems, tune)]
    # Unknown DSLs and problem folders are left out.
    assert got == [("tune/A01_bias_gelu/cute/rows8", "A01_bias_gelu", "cute", "rows8.py"),
                   ("tune/A01_bias_gelu/tirx/block512", "A01_bias_gelu", "tirx", "block512.py")]
    assert [t[0] for t in find_targets(problems, False)] == ["A01_bias_gelu/cute/solution"]

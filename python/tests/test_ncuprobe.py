"""mkb_eval.ncuprobe's CPU side: argument checks, the no-GPU exit and the solution loader's errors
(the profiled run itself needs an H200: scripts/h200-job.sh ncu)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mkb_eval import ncuprobe


def test_calls_below_one_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as e:
        ncuprobe.main(["F08", "--calls", "0"])
    assert e.value.code == 2


def test_unknown_dsl_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as e:
        ncuprobe.main(["F08", "--dsl", "triton"])
    assert e.value.code == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the exit without a GPU")
def test_without_a_gpu_it_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert ncuprobe.main(["F08"]) == 2
    assert "no CUDA device" in capsys.readouterr().err


def test_load_solution_names_a_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "v1.py"
    with pytest.raises(FileNotFoundError, match="v1.py: no such solution file"):
        ncuprobe.load_solution(missing, "m")


def test_load_solution_returns_the_module_with_its_build(tmp_path: Path) -> None:
    f = tmp_path / "sol.py"
    f.write_text("def build(spec):\n    return lambda *a: spec\n")
    m = ncuprobe.load_solution(f, "mkb_test_sol")
    assert m.build(7)() == 7

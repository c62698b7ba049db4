"""Shared test set-up: paths, single-threaded CPU torch (OpenMP spinning on a busy 2-core machine is
slower than one thread), what mkb hands the Python side (the problem specs, the report template and
the red-team cases, committed under fixtures/rust/ and kept current by crates/mkb-eval/tests/
fixtures.rs), and one judge subprocess shared by the protocol and red-team tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from mkb_eval.bundle import Bundle
from mkb_eval.cli import JudgeClient
from mkb_eval.problem import Problem

torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[2]
PROBLEMS = REPO / "problems"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# `mkb problems spec` and `mkb redteam --list`, with paths relative to the repository.
SPEC_BUNDLE = FIXTURES / "rust" / "spec-bundle.json"
REDTEAM_CASES = FIXTURES / "rust" / "redteam-cases.json"
BUNDLE = Bundle.from_file(SPEC_BUNDLE, REPO)


def problem(key: str) -> Problem:
    """A problem of the repository, built from the spec mkb sends."""
    return BUNDLE.problem(key)


@pytest.fixture(scope="session")
def judge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JudgeClient]:
    """A real judge (python -m mkb_eval.judge) speaking the protocol over pipes."""
    log = (tmp_path_factory.mktemp("judge") / "stderr.txt").open("w")
    client = JudgeClient(["--pool-size", "1"], stderr=log, bundle=BUNDLE)
    try:
        yield client
    finally:
        rc = client.close()
        log.close()
        assert rc == 0, f"judge exited with {rc}"


def run_quiet(cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]

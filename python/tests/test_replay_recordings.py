"""The hand-written replay recordings (examples/replay/replay-demo/*.jsonl) are up to date with their
sources (examples/replay/src/) and well-formed for the replay provider and the agent loop: header,
turn numbering, message counts, tool names that exist in crates/mkb-agent/src/tools.rs, the
attempt ending with submit, the distillation answer on solo conversations only, clean skills."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPLAY = ROOT / "examples" / "replay"
CONFIG = ROOT / "examples" / "replay.toml"
TOOLS_RS = ROOT / "crates" / "mkb-agent" / "src" / "tools.rs"
PROBLEMS = ("A01", "C01", "D01")
DSLS = ("cute", "tirx")
CONDITIONS = ("solo", "repeat_solo", "conditioned", "placebo")


def load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("replay_build", REPLAY / "build.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


def tool_names() -> set[str]:
    """Tool names declared in tools.rs (`pub const X: &str = "name";`)."""
    names = set(re.findall(r'pub const [A-Z_]+: &str = "([a-z_]+)";', TOOLS_RS.read_text()))
    assert len(names) >= 8, f"could not read the tool names from {TOOLS_RS}"
    return names


def recording_dir() -> Path:
    cfg = tomllib.loads(CONFIG.read_text())
    (model,) = cfg["models"]
    assert model["provider"]["kind"] == "replay"
    return (CONFIG.parent / model["provider"]["dir"] / model["label"]).resolve()


def check_recording(path: Path, tools: set[str]) -> list[str]:
    """Problems of one recording file (empty when it is well-formed)."""
    errs: list[str] = []
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        return ["empty file"]
    header = json.loads(lines[0])
    problem, dsl, rest = path.stem.split("_", 2)
    condition, run = rest.rsplit("_r", 1)
    want_key = {"model_label": path.parent.name, "problem": problem, "dsl": dsl,
                "condition": condition, "run": int(run)}
    if header.get("format") != "mkb-replay" or header.get("version") != 1:
        errs.append(f"header format/version: {header.get('format')!r} {header.get('version')!r}")
    if header.get("key") != want_key:
        errs.append(f"header key {header.get('key')} != {want_key}")
    if header.get("producer") != "handwritten":
        errs.append(f"producer {header.get('producer')!r}")
    turns = [json.loads(ln) for ln in lines[1:]]
    messages = 2  # system + user prompt
    submitted = False
    for i, t in enumerate(turns):
        where = f"turn {i}"
        if t.get("turn") != i:
            errs.append(f"{where}: numbered {t.get('turn')}")
        resp = t.get("response", {})
        msg = resp.get("message", {})
        calls = msg.get("tool_calls", [])
        if msg.get("role") != "assistant" or not msg.get("content", "").strip():
            errs.append(f"{where}: not an assistant message with text")
        usage = resp.get("usage", {})
        if not (usage.get("input_tokens", 0) > 0 and usage.get("output_tokens", 0) > 0):
            errs.append(f"{where}: usage estimate missing")
        if submitted:  # the distillation turn: asked by one more user message, answered without tools
            if calls or i != len(turns) - 1 or condition != "solo":
                errs.append(f"{where}: only a solo conversation has one turn after submit, without tool calls")
            messages += 1
        elif not calls:
            errs.append(f"{where}: no tool call before submit (the attempt would stop)")
        if t.get("request_messages") != messages:
            errs.append(f"{where}: request_messages {t.get('request_messages')} != {messages}")
        ids = [c.get("id") for c in calls]
        if len(set(ids)) != len(ids):
            errs.append(f"{where}: duplicate tool call ids")
        for k, c in enumerate(calls):
            if c.get("name") not in tools:
                errs.append(f"{where}: unknown tool {c.get('name')!r}")
            args = c.get("arguments")
            if c.get("name") == "write_kernel":
                if not (isinstance(args, dict) and "def build(spec)" in args.get("source", "")):
                    errs.append(f"{where}: write_kernel without a kernel file defining build(spec)")
            elif args != {}:
                errs.append(f"{where}: {c.get('name')} takes no arguments")
            if c.get("name") == "submit":
                if k != len(calls) - 1:
                    errs.append(f"{where}: calls after submit")
                submitted = True
        messages += 1 + len(calls)
    if not submitted:
        errs.append("the attempt never submits")
    if condition == "solo" and (not turns or turns[-1]["response"]["message"].get("tool_calls")):
        errs.append("a solo conversation ends with the distillation answer")
    return errs


def test_recordings_are_built_from_their_sources(tmp_path: Path) -> None:
    builder = load_builder()
    fresh = builder.build(tmp_path)
    committed = {p.stem: p.read_text() for p in recording_dir().glob("*.jsonl")}
    assert sorted(fresh) == sorted(committed), "recordings without a source, or sources never built"
    stale = [s for s, text in fresh.items() if committed[s] != text]
    assert not stale, f"stale recordings {stale}: run .venv/bin/python examples/replay/build.py"


def test_every_planned_attempt_has_a_recording() -> None:
    stems = {p.stem for p in recording_dir().glob("*.jsonl")}
    want = {f"{p}_{d}_{c}_r0" for p in PROBLEMS for d in DSLS for c in CONDITIONS}
    assert stems == want


@pytest.mark.parametrize("path", sorted(recording_dir().glob("*.jsonl")), ids=lambda p: p.stem)
def test_recording_is_well_formed(path: Path) -> None:
    assert check_recording(path, tool_names()) == []


def test_skills_parse_and_pass_the_leak_audit() -> None:
    builder = load_builder()
    solos = [p for p in recording_dir().glob("*.jsonl") if p.stem.split("_", 2)[2] == "solo_r0"]
    assert len(solos) == len(PROBLEMS) * len(DSLS)
    for path in solos:
        last = json.loads(path.read_text().splitlines()[-1])["response"]["message"]["content"]
        skill = builder.parse_skill(last)
        assert skill.flags == [], (path.stem, skill.flags)
        assert skill.chars() <= 6000 and skill.name and skill.description
        kernels = [c["arguments"]["source"] for ln in path.read_text().splitlines()[1:]
                   for c in json.loads(ln)["response"]["message"].get("tool_calls", [])
                   if c["name"] == "write_kernel"]
        assert builder.audit(skill, kernels) == [], path.stem


def test_the_checks_catch_broken_recordings(tmp_path: Path) -> None:
    good = recording_dir() / "A01_cute_solo_r0.jsonl"
    lines = good.read_text().splitlines()
    folder = tmp_path / "replay-demo"
    folder.mkdir()
    broken = folder / good.name
    # a skipped turn number
    t = json.loads(lines[2])
    t["turn"] = 7
    broken.write_text("\n".join([lines[0], lines[1], json.dumps(t), *lines[3:]]) + "\n")
    assert any("numbered 7" in e for e in check_recording(broken, tool_names()))
    # a tool that does not exist, and a recording cut before submit
    t = json.loads(lines[1])
    t["response"]["message"]["tool_calls"][0]["name"] = "run_shell"
    broken.write_text("\n".join([lines[0], json.dumps(t)]) + "\n")
    errs = check_recording(broken, tool_names())
    assert any("unknown tool" in e for e in errs) and "the attempt never submits" in errs
    # the audit flags target-DSL code in a skill
    builder = load_builder()
    leaky = builder.parse_skill("---\nname: x\ndescription: y\n---\nUse @T.function with T.cuda.thread_idx\n")
    assert builder.audit(leaky, []) == ["tirx_dsl_code"]

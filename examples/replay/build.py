"""Build the hand-written replay recordings (replay-demo/*.jsonl) from their readable sources.

Sources: src/<stem>.toml, one per conversation (assistant text and tool calls, turn by turn;
the distillation answer of solo conversations), and src/kernels/<name>.py, the kernel files the
conversations write (referenced by name from write_kernel calls). Output: one JSONL recording
per conversation in the replay provider's format (crates/mkb-agent/src/provider/replay.rs): a
header line, then one RecordedTurn per assistant turn.

The builder also checks what the agent loop and the scheduler need for a recording to play
through: every turn but the last of an attempt calls a tool, the attempt ends with submit,
solo conversations (only they) carry the distillation answer, skills parse, fit the length cap
and pass the leak audit (mirrored from skill.rs), conditioned conversations name the solo
skill they are shown, and placebo conversations name the skill the scheduler will pick.

Usage counts are estimates for hand-written text (there was no model): output tokens from the
length of what the turn writes, input tokens from a fixed estimate of the prompt plus
everything earlier in the conversation. Python 3.11 standard library only:
    .venv/bin/python examples/replay/build.py              # write replay-demo/
    .venv/bin/python examples/replay/build.py --check      # exit 1 if replay-demo/ is stale
    .venv/bin/python examples/replay/build.py --summary    # turns and tools per conversation
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
KERNELS = SRC / "kernels"
OUT = HERE / "replay-demo"

MODEL_LABEL = "replay-demo"
PRODUCER = "handwritten"
CREATED = "2026-11-29T00:00:00Z"  # when these conversations were written
PROBLEMS = ("A01", "C01", "D01")
DSLS = ("cute", "tirx")
CONDITIONS = ("solo", "repeat_solo", "conditioned", "placebo")
# tools.rs: the tool names an agent may call (the pytest test cross-checks this list).
TOOLS = ("read_brief", "read_starter", "read_kernel", "write_kernel", "compile", "test",
         "benchmark", "submit")
MAX_SKILL_CHARS = 6000  # skill.rs DEFAULT_MAX_CHARS

# ---- token estimates (documented as such in README.md) ----------------------------------
# System prompt, variant prompt (statement, interface, reference, scoring, budget), the DSL
# brief and the starter, plus the tool schemas, at about 4 characters per token.
PROMPT_TOKENS = {"cute": 8400, "tirx": 7800}
BRIEF_TOKENS = {"cute": 6500, "tirx": 5900}  # read_brief returns the brief again
TOOL_RESULT_TOKENS = {"read_starter": 160, "write_kernel": 12, "compile": 160, "test": 140,
                      "benchmark": 230, "submit": 4}
DISTILL_PROMPT_TOKENS = 230
CHARS_PER_TOKEN = 3.6

# ---- leak audit, mirrored from crates/mkb-agent/src/skill.rs ------------------------------
DSL_MARKERS = {
    "cute": ("@cute.kernel", "@cute.jit", "cute.compile(", "import cutlass", "cute.arch.",
             "from_dlpack(", "cute.make_layout", "cute.make_copy_atom", "cute.nvgpu"),
    "tirx": ("@T.function", "@T.prim_func", "import tvm_tirx", "tvm_tirx.", "T.device_entry",
             "T.cuda.", "T.ptx", "T.alloc_shared", "T.Tensor("),
}
COPY_RUN_LINES = 6


class SourceError(ValueError):
    """A conversation source that would not replay as intended."""


@dataclass
class Skill:
    name: str
    description: str
    body: str
    flags: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        return f"---\nname: {self.name}\ndescription: {self.description}\n---\n{self.body.rstrip()}\n"

    def chars(self) -> int:
        return len(self.to_markdown())


def _one_line(s: str, n: int) -> str:
    return " ".join(s.split())[:n]


def parse_skill(text: str, max_chars: int = MAX_SKILL_CHARS) -> Skill:
    """skill.rs parse_skill: front matter, body, length cap."""
    t = text.strip()
    if t.startswith("```") and "\n" in t:
        inner = t[3:].split("\n", 1)[1]
        if "```" in inner:
            t = inner[: inner.rfind("```")].strip()
    flags: list[str] = []
    start = t.find("---")
    parsed = None
    if start >= 0 and len(t[:start].strip()) <= 200:
        rest = t[start + 3:]
        end = rest.find("\n---")
        if end >= 0:
            head, body = rest[:end], rest[end + 4:].lstrip("-\r").lstrip("\n")
            name = desc = None
            for line in head.splitlines():
                s = line.strip()
                if s.startswith("name:"):
                    name = s[5:].strip().strip('"')
                elif s.startswith("description:"):
                    desc = s[12:].strip().strip('"')
            if name is not None:
                parsed = (name, desc or "", body)
    if parsed is None:
        flags.append("no_frontmatter")
        parsed = ("unnamed-skill", "", t)
    if not parsed[2].strip():
        flags.append("empty")
    skill = Skill(_one_line(parsed[0], 64), _one_line(parsed[1], 1024), parsed[2], flags)
    if skill.chars() > max_chars:
        skill.flags.append("truncated")
    return skill


def _norm_lines(s: str) -> list[str]:
    out = []
    for line in s.splitlines():
        n = " ".join(line.split())
        if len(n) >= 12 and not n.startswith("#"):
            out.append(n)
    return out


def longest_copied_run(skill: str, kernel: str) -> int:
    """skill.rs longest_copied_run: longest run of consecutive kernel lines found in the skill."""
    k, s = _norm_lines(kernel), _norm_lines(skill)
    best = 0
    prev = [0] * (len(s) + 1)
    for ki in k:
        cur = [0] * (len(s) + 1)
        for j, sj in enumerate(s):
            if ki == sj:
                cur[j + 1] = prev[j] + 1
                best = max(best, cur[j + 1])
        prev = cur
    return best


def audit(skill: Skill, kernels: list[str]) -> list[str]:
    """Leak flags, stricter than skill.rs: code markers of either DSL, a copy of any kernel."""
    text = skill.to_markdown()
    flags = [f"{dsl}_dsl_code" for dsl, marks in DSL_MARKERS.items() if any(m in text for m in marks)]
    if any(longest_copied_run(text, k) >= COPY_RUN_LINES for k in kernels):
        flags.append("source_kernel_copy")
    return flags


# ---- sources -------------------------------------------------------------------------------
@dataclass
class Call:
    tool: str
    kernel: str | None = None

    def arguments(self) -> dict:
        if self.tool == "write_kernel":
            return {"source": kernel_source(self.kernel or "")}
        return {}


@dataclass
class Turn:
    text: str
    calls: list[Call]


@dataclass
class Conversation:
    stem: str
    problem: str
    dsl: str
    condition: str
    run: int
    turns: list[Turn]
    distill: str | None
    skill_from: str | None

    def kernels(self) -> list[str]:
        return [c.kernel for t in self.turns for c in t.calls if c.kernel]


_kernel_cache: dict[str, str] = {}


def kernel_source(name: str) -> str:
    if name not in _kernel_cache:
        path = KERNELS / f"{name}.py"
        if not path.is_file():
            raise SourceError(f"kernel {name!r}: {path} does not exist")
        _kernel_cache[name] = path.read_text()
    return _kernel_cache[name]


def other(dsl: str) -> str:
    return "tirx" if dsl == "cute" else "cute"


def load(path: Path) -> Conversation:
    d = tomllib.loads(path.read_text())
    where = path.name
    allowed = {"problem", "dsl", "condition", "run", "skill_from", "turns", "distill"}
    if set(d) - allowed:
        raise SourceError(f"{where}: unknown keys {sorted(set(d) - allowed)}")
    conv = Conversation(
        stem=path.stem, problem=d["problem"], dsl=d["dsl"], condition=d["condition"],
        run=int(d.get("run", 0)),
        turns=[Turn(t["text"].strip(), [Call(c["tool"], c.get("kernel")) for c in t.get("calls", [])])
               for t in d["turns"]],
        distill=d["distill"]["text"] if "distill" in d else None, skill_from=d.get("skill_from"))
    stem = f"{conv.problem}_{conv.dsl}_{conv.condition}_r{conv.run}"
    if stem != path.stem:
        raise SourceError(f"{where}: fields say {stem}")
    if conv.problem not in PROBLEMS or conv.dsl not in DSLS or conv.condition not in CONDITIONS:
        raise SourceError(f"{where}: unknown problem, dsl or condition")
    for i, t in enumerate(conv.turns):
        last = i == len(conv.turns) - 1
        if set(d["turns"][i]) - {"text", "calls"}:
            raise SourceError(f"{where} turn {i}: unknown keys {sorted(set(d['turns'][i]) - {'text', 'calls'})}")
        if not t.text:
            raise SourceError(f"{where} turn {i}: no text")
        if not t.calls:
            raise SourceError(f"{where} turn {i}: no tool call (the agent loop would end the attempt)")
        for c in t.calls:
            if c.tool not in TOOLS:
                raise SourceError(f"{where} turn {i}: unknown tool {c.tool!r}")
            if (c.tool == "write_kernel") != (c.kernel is not None):
                raise SourceError(f"{where} turn {i}: `kernel` goes with write_kernel, and only there")
            if c.kernel is not None:
                if not c.kernel.startswith(f"{conv.problem}_{conv.dsl}_"):
                    raise SourceError(f"{where} turn {i}: kernel {c.kernel} is not a {conv.problem} {conv.dsl} kernel")
                kernel_source(c.kernel)
        if any(c.tool == "submit" for c in t.calls) != last or (last and t.calls[-1].tool != "submit"):
            raise SourceError(f"{where} turn {i}: submit must be the last call of the last turn, and only there")
    if not conv.kernels():
        raise SourceError(f"{where}: writes no kernel")
    if (conv.condition == "solo") != (conv.distill is not None):
        raise SourceError(f"{where}: solo conversations, and only they, have a `distill` answer")
    if (conv.condition in ("conditioned", "placebo")) != (conv.skill_from is not None):
        raise SourceError(f"{where}: conditioned and placebo conversations, and only they, name `skill_from`")
    if conv.condition == "conditioned" and conv.skill_from != f"{conv.problem}_{other(conv.dsl)}_solo_r{conv.run}":
        raise SourceError(f"{where}: a conditioned attempt sees the other DSL's solo skill of its problem")
    return conv


def load_all(src: Path = SRC) -> dict[str, Conversation]:
    convs = {p.stem: load(p) for p in sorted(src.glob("*.toml")) if p.name != "kernels.toml"}
    skills = {}
    for c in convs.values():
        if c.distill is not None:
            sk = parse_skill(c.distill)
            flags = sk.flags + audit(sk, [kernel_source(k) for k in c.kernels()])
            if flags:
                raise SourceError(f"{c.stem}: skill flags {flags} ({sk.chars()} characters)")
            skills[c.stem] = sk
    for c in convs.values():
        if c.condition == "placebo":
            want = placebo_source(c, skills)
            if c.skill_from != want:
                raise SourceError(f"{c.stem}: the scheduler shows the skill of {want}, the source says {c.skill_from}")
        if c.skill_from is not None and c.skill_from not in skills:
            raise SourceError(f"{c.stem}: no solo skill {c.skill_from}")
    return convs


def placebo_source(c: Conversation, skills: dict[str, Skill]) -> str:
    """scheduler.rs placebo_skill: the same model's solo skill of another problem, same source
    DSL and run, closest in length to the real skill (ties: problem id)."""
    src = other(c.dsl)
    own = skills[f"{c.problem}_{src}_solo_r{c.run}"]
    cands = [(abs(sk.chars() - own.chars()), stem.split("_")[0], stem) for stem, sk in skills.items()
             if stem.split("_")[0] != c.problem and stem.endswith(f"_{src}_solo_r{c.run}")]
    if not cands:
        raise SourceError(f"{c.stem}: no other problem's {src} solo skill")
    return min(cands)[2]


# ---- recordings ----------------------------------------------------------------------------
def tokens(chars: int) -> int:
    return math.ceil(chars / CHARS_PER_TOKEN)


def tool_result_tokens(c: Call, dsl: str) -> int:
    if c.tool == "read_brief":
        return BRIEF_TOKENS[dsl]
    if c.tool == "read_kernel":
        return 400
    return TOOL_RESULT_TOKENS[c.tool]


def usage(inp: int, out: int) -> dict:
    return {"input_tokens": inp, "output_tokens": out}


def render(c: Conversation, skills: dict[str, Skill]) -> str:
    """The JSONL text of one recording."""
    header = {"format": "mkb-replay", "version": 1,
              "key": {"model_label": MODEL_LABEL, "problem": c.problem, "dsl": c.dsl,
                      "condition": c.condition, "run": c.run},
              "created": CREATED, "producer": PRODUCER, "tool_mode": "native"}
    lines = [header]
    context = PROMPT_TOKENS[c.dsl]
    if c.skill_from is not None:
        context += tokens(skills[c.skill_from].chars() + 250)  # the skill slot
    messages = 2  # system + user
    for i, t in enumerate(c.turns):
        calls = [{"id": f"call_{i:02d}_{k}", "name": call.tool, "arguments": call.arguments()}
                 for k, call in enumerate(t.calls)]
        out = tokens(len(t.text) + sum(len(json.dumps(x["arguments"])) for x in calls)) + 12 * len(calls)
        lines.append(turn_line(i, messages, t.text, calls, context, out))
        context += out + sum(tool_result_tokens(call, c.dsl) for call in t.calls)
        messages += 1 + len(calls)
    if c.distill is not None:
        text = c.distill.strip() + "\n"
        out = tokens(len(text))
        lines.append(turn_line(len(c.turns), messages + 1, text, [], context + DISTILL_PROMPT_TOKENS, out))
    return "".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) + "\n" for x in lines)


def turn_line(i: int, n_messages: int, text: str, calls: list[dict], inp: int, out: int) -> dict:
    message: dict = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return {"turn": i, "request_messages": n_messages,
            "response": {"message": message, "usage": usage(inp, out),
                         "stop_reason": "tool_calls" if calls else "stop", "model": PRODUCER,
                         "latency_ms": 1500 + 22 * out, "retries": 0}}


def build(out: Path, src: Path = SRC) -> dict[str, str]:
    """Write every recording under out/; returns stem -> JSONL text."""
    convs = load_all(src)
    missing = [f"{p}_{d}_{c}_r0" for p in PROBLEMS for d in DSLS for c in CONDITIONS
               if f"{p}_{d}_{c}_r0" not in convs]
    if missing:
        raise SourceError(f"missing conversations: {missing}")
    skills = {s: parse_skill(c.distill) for s, c in convs.items() if c.distill is not None}
    texts = {stem: render(c, skills) for stem, c in convs.items()}
    out.mkdir(parents=True, exist_ok=True)
    for stem, text in texts.items():
        (out / f"{stem}.jsonl").write_text(text)
    return texts


def summary(src: Path = SRC) -> str:
    convs = load_all(src)
    skills = {s: parse_skill(c.distill) for s, c in convs.items() if c.distill is not None}
    rows = []
    for stem, c in convs.items():
        tools = " ".join(call.tool if call.tool != "write_kernel" else f"write:{call.kernel.split('_', 2)[2]}"
                         for t in c.turns for call in t.calls)
        n = len(c.turns) + (c.distill is not None)
        extra = f" skill {skills[stem].chars()} chars" if stem in skills else ""
        extra += f" (shown {c.skill_from})" if c.skill_from else ""
        rows.append(f"{stem:<26} {n:>2} turns{extra}\n    {tools}")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true", help="compare with --out instead of writing")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    try:
        if args.summary:
            print(summary())
            return 0
        if args.check:
            import tempfile
            with tempfile.TemporaryDirectory() as tmp:
                fresh = build(Path(tmp))
            stale = [s for s, t in fresh.items()
                     if not (args.out / f"{s}.jsonl").is_file() or (args.out / f"{s}.jsonl").read_text() != t]
            extra = [p.name for p in args.out.glob("*.jsonl") if p.stem not in fresh]
            if stale or extra:
                print(f"stale: {stale}; not built from a source: {extra}. Run build.py.")
                return 1
            print(f"{len(fresh)} recordings up to date")
            return 0
        texts = build(args.out)
        print(f"wrote {len(texts)} recordings to {args.out}")
        return 0
    except SourceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

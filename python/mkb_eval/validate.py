"""The dynamic checks of `mkb problems validate` (docs/problems.md). mkb sends one job on
stdin: the problem specs exactly as the judge gets them (crates/mkb-eval/src/spec.rs; no TOML is
parsed here), each with its `[validate]` lists, its starter files and its ideal time; this module
answers in JSON lines on stdout: `{"problem", "row": {check, measured, limit, status, detail}}`,
on cuda `{"problem", "timing": {...}}`, and `{"problem", "done": true}` when a problem is finished.

At every check shape (and on cuda the benchmark shape too), with inputs drawn from the declared
distributions by the judge's own generator and a fixed seed:
- `reference`: reference.py imports; `starter_syntax:<dsl>`: the starter parses and defines
  build(spec);
- `finite`: the reference writes every output element and no NaN/Inf;
- `deterministic`: two reference runs agree bitwise, or within tolerance;
- `influence:<input>`: a fresh draw of that input alone moves the reference output beyond
  tolerance (ratio > 1 at every shape set);
- `correct:<fn>`: max |out - ref| / bound <= the margin (0.25) at every shape set (on dequantized
  float8/int8 outputs after taking off each element's error the one quantization step the judge's
  bound allows: see judged_ratios);
- `wrong:<fn>`: ratio > 1 at some shape set;
- on cpu, `runtime`: the problem's validation seconds (a warning above CPU_SECONDS);
- on cuda, `eager:<fn>`: each eager formulation within tolerance, and `timing`/`compile_headroom`:
  the baselines timed by the judge's own code (mkb_eval.phase_baselines, with its disk cache),
  flagged when torch.compile is within 10% of the ideal time.
Outputs are compared by the judge's rule (CorrectnessChecker.verify, mkb_eval.correctness); a
failing comparison's ratio is the same rule under tolerances scaled by RATIO_SCALE.

    mkb problems validate [IDS] [--device cpu|cuda]        (the way to run it)
    python -m mkb_eval.validate < job.json                 (what mkb runs)
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import IO, Any

import torch

from .correctness import Buffers, CandidateFailure, CorrectnessChecker, ShapeReport, call_with_params
from .phase_baselines import BaselinePhase
from .phase_timing import TimingPhase
from .problem import InputGenerator, Problem, ShapeSet, allocate, problem_from_spec

JOB_FORMAT = 1
# A failing comparison is repeated with every tolerance times this; beyond it the ratio is "inf".
RATIO_SCALE = 1e6
# The `runtime` row warns when one problem's CPU validation (every check shape) takes longer.
CPU_SECONDS = 20.0

Emit = Callable[[dict[str, Any]], None]


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    return float(x)


def row(problem: str, check: str, measured: float | None, limit: str, status: str | bool,
        detail: str = "") -> dict[str, Any]:
    """One row of the validation table (crates/mkb-core/src/validate.rs CheckRow)."""
    if isinstance(status, bool):
        status = "pass" if status else "fail"
    return {"problem": problem, "check": check, "measured": _num(measured), "limit": limit, "status": status,
            "detail": detail}


# ----------------------------------------------------------------------------------------------
# Comparing outputs by the judge's rule.


def load_checks(folder: Path, reference: ModuleType) -> dict[str, Any]:
    """The problem's checks.py (the [validate] formulations, kept out of the agent's prompt), run in
    a copy of reference.py's namespace so that its imports and helpers are visible there."""
    path = Path(folder) / "checks.py"
    if not path.is_file():
        return {}
    ns: dict[str, Any] = dict(vars(reference))
    ns["__file__"] = str(path)
    exec(compile(path.read_text(), str(path), "exec"), ns)  # noqa: S102 - trusted benchmark code
    return ns


def _no_reference(*args: Any, **kwargs: Any) -> None:
    raise RuntimeError("not used: the validator passes the expected outputs itself")


def _scaled(problem: Problem, k: float) -> Problem:
    outs = tuple(dataclasses.replace(o, atol=(o.atol or 0.0) * k, rtol=(o.rtol or 0.0) * k) for o in problem.outputs)
    return dataclasses.replace(problem, outputs=outs)


def _verify(problem: Problem, device: torch.device, inputs: Sequence[torch.Tensor], outs: Sequence[torch.Tensor],
            refs: Sequence[torch.Tensor], where: str) -> tuple[float, float]:
    """(the worst bound ratio over the outputs, the same with one quantization step excused on
    dequantized outputs) if the judge accepts `outs`; raises CandidateFailure."""
    checker = CorrectnessChecker(problem, _no_reference, InputGenerator(problem, 0), device)
    report = ShapeReport(where)
    checker.verify(Buffers(list(inputs), list(outs)), list(inputs), list(refs), where, report)
    stats = report.stats.values()
    worst = max((s.max_err_over_bound for s in stats), default=0.0)
    excused = max((s.max_err_over_bound if s.max_beyond_step_over_bound is None else s.max_beyond_step_over_bound
                   for s in stats), default=0.0)
    return worst, excused


def judged_ratios(problem: Problem, device: torch.device, inputs: Sequence[torch.Tensor],
                  outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], where: str) -> tuple[float, float, str]:
    """(max |out - ref| / bound over every output, the margin ratio of a correct formulation, the
    judge's message when it rejects `outs`). The first is <= 1 exactly when the judge accepts;
    `inf` where no tolerance covers the difference (integer or bool outputs that differ, NaN, a
    wrong shape). The margin ratio equals it except on dequantized (float8/int8) outputs, where
    the one quantization step the judge's bound allows is first taken off each element's error: a
    valid rounding flip (measured on the H200: F05's eager `x / s` reaches 0.40 of the bound
    against the reference by one-step e4m3 flips) is what that step is for, so the 4x margin is held against what remains. A rejected output's margin
    ratio is its judge ratio."""
    try:
        worst, excused = _verify(problem, device, inputs, outs, refs, where)
        return worst, excused, ""
    except CandidateFailure as e:
        message = e.message
    try:
        ratio = _verify(_scaled(problem, RATIO_SCALE), device, inputs, outs, refs, where)[0] * RATIO_SCALE
    except CandidateFailure:
        ratio = math.inf
    ratio = max(ratio, 1.0 + 1e-9)
    return ratio, ratio, message


def judged_ratio(problem: Problem, device: torch.device, inputs: Sequence[torch.Tensor],
                 outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], where: str) -> tuple[float, str]:
    """(max |out - ref| / bound over every output, the judge's message when it rejects `outs`);
    see judged_ratios."""
    ratio, _, message = judged_ratios(problem, device, inputs, outs, refs, where)
    return ratio, message


# ----------------------------------------------------------------------------------------------
# One problem.


def check_starter(path: str) -> str | None:
    """None if the file parses as Python and defines a top-level build(spec); else what is wrong."""
    try:
        src = Path(path).read_text()
    except OSError as e:
        return f"{path}: cannot read: {e}"
    try:
        tree = ast.parse(src, filename=path)
    except SyntaxError as e:
        return f"{path}:{e.lineno}: {e.msg}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "build":
            a = node.args
            n = len(a.posonlyargs) + len(a.args)
            if n == 1 and not a.vararg and not a.kwonlyargs:
                return None
            return f"{path}:{node.lineno}: build must take exactly one argument (spec)"
    return f"{path}: no top-level `def build(spec)`"


def as_outputs(result: Any, problem: Problem, shape: ShapeSet, device: torch.device) -> list[torch.Tensor]:
    """A formulation's return value (one tensor, or a tuple in declared order) written into
    buffers of the declared dtypes, as a kernel would write them."""
    got = list(result) if isinstance(result, tuple | list) else [result]
    if len(got) != len(problem.outputs):
        raise ValueError(f"returned {len(got)} outputs, the problem declares {len(problem.outputs)} "
                         f"({', '.join(o.name for o in problem.outputs)})")
    bufs = allocate(problem.outputs, shape, device)
    for buf, t, decl in zip(bufs, got, problem.outputs, strict=True):
        if not isinstance(t, torch.Tensor):
            t = torch.as_tensor(t)
        if tuple(t.shape) != tuple(buf.shape):
            raise ValueError(f"output {decl.name} has shape {tuple(t.shape)}, declared {tuple(buf.shape)}")
        buf.copy_(t)
    return bufs


@dataclasses.dataclass
class Worst:
    """The worst (or, for influence, the weakest) ratio of one subject over the shape sets."""
    ratios: dict[str, float] = dataclasses.field(default_factory=dict)
    errors: list[str] = dataclasses.field(default_factory=list)
    messages: dict[str, str] = dataclasses.field(default_factory=dict)

    def add(self, shape: str, ratio: float, message: str = "") -> None:
        self.ratios[shape] = ratio
        if message:
            self.messages[shape] = message

    def max(self) -> tuple[float | None, str]:
        if not self.ratios:
            return None, ""
        s = max(self.ratios, key=lambda k: self.ratios[k])
        return self.ratios[s], s

    def min(self) -> tuple[float | None, str]:
        if not self.ratios:
            return None, ""
        s = min(self.ratios, key=lambda k: self.ratios[k])
        return self.ratios[s], s


def _raw(t: torch.Tensor) -> torch.Tensor:
    """The bytes of `t` (bitwise comparisons, NaN payloads and 0-d tensors included)."""
    return t.detach().reshape(-1).contiguous().view(torch.uint8)


def _fmt(x: float | None) -> str:
    return "-" if x is None else ("inf" if math.isinf(x) else f"{x:.3g}")


def _shapes(problem: Problem, device: str) -> list[ShapeSet]:
    shapes = list(problem.check_shapes)
    if device == "cuda":
        shapes.append(problem.benchmark_shape)
    return shapes


class ProblemValidation:
    def __init__(self, entry: dict[str, Any], job: dict[str, Any], emit: Emit):
        self.entry = entry
        self.job = job
        self.emit_line = emit
        self.device_name = str(job.get("device", "cpu"))
        self.device = torch.device(self.device_name)
        self.seed = int(job.get("seed", 0))
        self.margin = float(job.get("correct_max_ratio", 0.25))
        self.near = float(job.get("compile_near_ideal", 1.10))
        self.id = str(entry["spec"].get("id", "?"))
        v = entry.get("validate") or {}
        self.correct: list[str] = list(v.get("correct", []))
        self.wrong: list[str] = list(v.get("wrong", []))

    def emit(self, check: str, measured: float | None, limit: str, status: str | bool, detail: str = "") -> None:
        self.emit_line({"problem": self.id, "row": row(self.id, check, measured, limit, status, detail)})

    def run(self) -> None:
        t0 = time.monotonic()
        try:
            self._run()
        except Exception as e:  # noqa: BLE001 - one problem's failure is its row, the others go on
            tb = traceback.format_exc(limit=-3)
            self.emit("reference", None, "runs", False, f"validation stopped: {type(e).__name__}: {e} | {tb[-600:]}")
        finally:
            dt = time.monotonic() - t0
            print(f"mkb_eval.validate: {self.id} {dt:.1f} s", file=sys.stderr, flush=True)
            if self.device_name == "cpu":
                self.emit("runtime", dt, f"<= {CPU_SECONDS:.0f} s", "pass" if dt <= CPU_SECONDS else "warn",
                          "" if dt <= CPU_SECONDS else "validation on the CPU is slow: smaller check shapes?")
            self.emit_line({"problem": self.id, "done": True})

    def _run(self) -> None:
        for dsl, path in sorted((self.entry.get("starters") or {}).items()):
            err = check_starter(str(path))
            self.emit(f"starter_syntax:{dsl}", None, "parses, defines build(spec)", err is None, err or "")
        problem = problem_from_spec(self.entry["spec"])
        try:
            mod = problem.load_reference()
        except Exception as e:  # noqa: BLE001 - the problem's own code
            self.emit("reference", None, "imports", False, f"{type(e).__name__}: {e}")
            return
        try:
            checks = load_checks(problem.dir, mod)
        except Exception as e:  # noqa: BLE001 - the problem's own code
            self.emit("reference", None, "imports", False, f"checks.py: {type(e).__name__}: {e}")
            return
        fns: dict[str, Callable[..., Any]] = {}
        missing = []
        timed_eager = list(problem.eager) if self.device_name == "cuda" else []
        for name in [*self.correct, *self.wrong, *timed_eager]:
            fn = checks.get(name, getattr(mod, name, None))
            if callable(fn):
                fns[name] = fn
            else:
                missing.append(name)
        self.emit("reference", None, "imports", not missing,
                  f"reference.py and checks.py define no function {', '.join(missing)}" if missing else "")
        with torch.no_grad():
            self.dynamic(problem, mod.reference, fns, timed_eager)
        if self.device_name == "cuda":
            self.timing(problem, mod)

    def dynamic(self, problem: Problem, reference: Callable[..., None], fns: dict[str, Callable[..., Any]],
                eager: list[str]) -> None:
        gen = InputGenerator(problem, self.seed)
        checker = CorrectnessChecker(problem, reference, gen, self.device)
        params = dict(problem.params)
        nonfinite: dict[str, int] = {}
        determinism = Worst()
        influence = {d.name: Worst() for d in problem.inputs}
        forms = {n: Worst() for n in fns}
        margins = {n: Worst() for n in fns if n in self.correct}
        for shape in _shapes(problem, self.device_name):
            where = f"shape set {shape.name!r}"
            inputs = allocate(problem.inputs, shape, self.device)
            gen.fill(inputs, shape, "validate")
            refs = checker.expected([t.clone() for t in inputs], shape)
            again = checker.expected([t.clone() for t in inputs], shape)
            bad = sum(int((~torch.isfinite(r.float())).sum()) for r in refs if r.is_floating_point())
            nonfinite[shape.name] = bad
            if all(torch.equal(_raw(a), _raw(b)) for a, b in zip(refs, again, strict=True)):
                determinism.add(shape.name, 0.0)
            else:
                r, msg = judged_ratio(problem, self.device, inputs, again, refs, where + ", second reference run")
                determinism.add(shape.name, r, msg)
            for i, decl in enumerate(problem.inputs):
                fresh = allocate(problem.inputs, shape, self.device)
                gen.fill(fresh, shape, f"influence-{decl.name}")
                moved = [t.clone() for t in inputs]
                moved[i] = fresh[i]
                refs_i = checker.expected([t.clone() for t in moved], shape)
                r, _ = judged_ratio(problem, self.device, moved, refs_i, refs, where)
                influence[decl.name].add(shape.name, r)
            for name, fn in fns.items():
                try:
                    res = call_with_params(fn, [t.clone() for t in inputs], params)
                    outs = as_outputs(res, problem, shape, self.device)
                except Exception as e:  # noqa: BLE001 - the formulation's own error is its row
                    forms[name].errors.append(f"{shape.name}: {type(e).__name__}: {e}")
                    if name in margins:
                        margins[name].errors.append(f"{shape.name}: {type(e).__name__}: {e}")
                    continue
                r, excused, msg = judged_ratios(problem, self.device, inputs, outs, refs, f"{where}, {name}")
                forms[name].add(shape.name, r, msg)
                if name in margins:
                    margins[name].add(shape.name, excused, msg)
            del inputs, refs, again
            if self.device.type == "cuda":
                torch.cuda.empty_cache()
        total = sum(nonfinite.values())
        self.emit("finite", float(total), "0 NaN/Inf/unwritten", total == 0,
                  ", ".join(f"{k}: {v}" for k, v in nonfinite.items() if v))
        worst, at = determinism.max()
        self.emit("deterministic", worst, "bitwise (0) or <= 1", worst is not None and worst <= 1.0,
                  f"two runs differ at {at}: {determinism.messages.get(at, '')}" if worst else "bitwise identical")
        for name, w in influence.items():
            weakest, at = w.min()
            ok = weakest is not None and weakest > 1.0
            self.emit(f"influence:{name}", weakest, "> 1 at every shape", ok,
                      "" if ok else f"a fresh draw of {name} alone moves the reference by at most {_fmt(weakest)} x "
                      f"the tolerance at {at}: does {name} matter?")
        for name in self.correct:
            self._formulation_row("correct", name, margins.get(name), f"<= {self.margin}",
                                  lambda r: r <= self.margin, want_all=True)
        for name in self.wrong:
            self._formulation_row("wrong", name, forms.get(name), "> 1 at some shape", lambda r: r > 1.0,
                                  want_all=False)
        for name in eager:
            self._formulation_row("eager", name, forms.get(name), "<= 1", lambda r: r <= 1.0, want_all=True)

    def _formulation_row(self, kind: str, name: str, w: Worst | None, limit: str, good: Callable[[float], bool],
                         want_all: bool) -> None:
        check = f"{kind}:{name}"
        if w is None:
            self.emit(check, None, limit, False, "not defined in reference.py")
            return
        if w.errors:
            self.emit(check, None, limit, False, "raised: " + "; ".join(w.errors)[:600])
            return
        worst, at = w.max()
        if worst is None:
            self.emit(check, None, limit, False, "never ran")
            return
        per_shape = ", ".join(f"{k} {_fmt(v)}" for k, v in w.ratios.items())
        ok = all(good(r) for r in w.ratios.values()) if want_all else any(good(r) for r in w.ratios.values())
        detail = per_shape
        if kind != "wrong" and not ok:
            detail += f"; {w.messages.get(at, '')}"
        if kind == "wrong" and not ok:
            detail += "; passes at every shape set: the check cannot tell this slip from a correct kernel"
        self.emit(check, worst, limit, ok, detail[:800])

    # -- the GPU: baselines by the judge's code ----------------------------------------------------
    def timing(self, problem: Problem, mod: Any) -> None:
        b = BaselineTimer(problem, self.seed, mod, self.device_name)
        bench = problem.benchmark_shape
        b.ensure_baselines(bench)
        bs = b.baseline_set or {}
        ideal = b.ideal() or {}
        static_ideal = float(self.entry.get("ideal_us") or 0.0)
        eager_us = {x["name"]: x["timing"]["median_us"] for x in bs.get("baselines", []) if x["kind"] == "eager"}
        t = {"shape": bench.name, "dims": dict(bench.dims), "t_ref_us": bs.get("t_ref_us"),
             "t_ref_name": bs.get("t_ref_name"), "t_compile_us": bs.get("t_compile_us"),
             "compile_baseline": problem.compile_baseline, "compile_error": bs.get("compile_error"),
             "floor_us": bs.get("floor_us"), "ideal_us": static_ideal, "ideal_measured_us": ideal.get("ideal_us"),
             "bytes": bench.bytes, "flops": bench.flops, "eager_us": eager_us, "baselines": bs.get("baselines", []),
             "ceilings": b.ceilings, "cache_notes": b.cache_notes}
        self.emit_line({"problem": self.id, "timing": t})
        t_ref = bs.get("t_ref_us")
        self.emit("timing", t_ref, "eager timed", t_ref is not None,
                  f"t_ref = {bs.get('t_ref_name')}; " + ", ".join(f"{k} {_fmt(v)} us" for k, v in eager_us.items()))
        # the judge's roofline (this GPU's measured ceilings, as in every report); the static one
        # (nominal rates) only where none was measured
        ideal_ref = float(ideal.get("ideal_us") or 0.0) or static_ideal
        tc = bs.get("t_compile_us")
        if tc is None:
            self.emit("compile_headroom", None, f"> {self.near} x ideal", "warn",
                      f"torch.compile({problem.compile_baseline}) not timed: {bs.get('compile_error')}")
        else:
            ratio = tc / ideal_ref if ideal_ref > 0 else math.inf
            self.emit("compile_headroom", ratio, f"> {self.near} x ideal", "pass" if ratio > self.near else "warn",
                      f"torch.compile {tc:.1f} us, ideal {ideal_ref:.1f} us"
                      + ("" if ratio > self.near else ": a kernel cannot beat torch.compile by much"))


class BaselineTimer(TimingPhase, BaselinePhase):
    """The judge's baseline phase (eager formulations, torch.compile, floor, ceilings, disk cache)
    outside a judge: the parts of GroupEvaluation it reads, with the default timing options."""

    def __init__(self, problem: Problem, seed: int, mod: Any, device: str = "cuda"):
        from . import gpuinfo
        from .evaluation import DEFAULT_TIMING, JudgeOptions

        self.problem = problem
        self.mode = "full"
        self.reference_mod = mod
        self.gen = InputGenerator(problem, seed)
        self.timing = dict(DEFAULT_TIMING)
        self.opts = JudgeOptions()
        self.ceilings: dict[str, Any] | None = None
        self.baseline_set: dict[str, Any] | None = None
        self.cache_notes: list[str] = []
        flush: list[Any] = []

        def flush_buffer() -> Any:
            if not flush:
                from .timing import l2_flush_buffer

                flush.append(l2_flush_buffer())
            return flush[0]

        gpu = torch.cuda.get_device_name(0) if device == "cuda" else device
        self.session = SimpleNamespace(gpu_name=gpu, versions=gpuinfo.versions(), baseline_cache={}, device=device,
                                       flush_buffer=flush_buffer)


# ----------------------------------------------------------------------------------------------


def validate_job(job: dict[str, Any], emit: Emit) -> None:
    if job.get("format") != JOB_FORMAT:
        raise ValueError(f"validate job of format {job.get('format')!r}; this mkb_eval reads {JOB_FORMAT}")
    if job.get("device") == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("--device cuda, but torch sees no CUDA device")
    for entry in job["problems"]:
        ProblemValidation(entry, job, emit).run()


def main(stdin: IO[str] | None = None) -> int:
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # anything the problems' code prints goes to stderr, not into the protocol

    def emit(msg: dict[str, Any]) -> None:
        out.write(json.dumps(msg) + "\n")
        out.flush()

    # One CPU thread unless told otherwise: OpenMP spinning on a busy 2-core CI machine is slower.
    torch.set_num_threads(int(os.environ.get("MKB_EVAL_VALIDATE_THREADS", "1")))
    job = json.loads((stdin or sys.stdin).read())
    validate_job(job, emit)
    return 0


if __name__ == "__main__":
    sys.exit(main())

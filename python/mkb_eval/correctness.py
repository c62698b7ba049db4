"""The judge's correctness logic, independent of where the candidate runs: trials with fresh inputs
and NaN-poisoned outputs, the bitwise input-unchanged check, the RMS-scaled tolerance, the repeat
trial (same inputs again, outputs re-poisoned), the input-perturbation check and the fresh-buffer
trial. A `Target` stands in for the runner, so the
same code is tested on CPU with plain Python callables (python/tests/test_correctness.py)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from .problem import InputGenerator, Problem, ShapeSet, TensorDecl, Tolerance, allocate, poison_, poison_mask


class CandidateFailure(Exception):
    """A verdict reached while judging a candidate (never a protocol error)."""

    def __init__(self, verdict: str, reason: str, message: str, log: str = ""):
        super().__init__(message)
        self.verdict = verdict
        self.reason = reason
        self.message = message
        self.log = log


def incorrect(reason: str, message: str) -> CandidateFailure:
    return CandidateFailure("incorrect", reason, message)


class Target(Protocol):
    """Where the candidate runs: bind buffers for a shape set, then call run() on them."""

    def bind(self, shape: ShapeSet, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> None: ...

    def call(self, shape: ShapeSet, checked: bool) -> dict[str, Any] | None:
        """Run once on the bound buffers and return when the device is idle. With `checked`,
        return the dynamic record (ops, GPU activities) or None where it cannot be recorded."""
        ...


@dataclass
class Buffers:
    inputs: list[torch.Tensor]
    outputs: list[torch.Tensor]


@dataclass
class OutputStats:
    max_abs_err: float = 0.0
    max_err_over_bound: float = 0.0  # max |out - ref| / (atol * rms + rtol * |ref|); <= 1 passes


@dataclass
class ShapeReport:
    shape: str
    trials: int = 0
    repeat: bool = False
    perturbation: bool = False
    fresh_buffers: bool = False
    kernels: list[str] = field(default_factory=list)
    stats: dict[str, OutputStats] = field(default_factory=dict)

    def to_json(self, problem: Problem) -> dict[str, Any]:
        return {
            "trials": self.trials,
            "repeat": self.repeat,
            "perturbation": self.perturbation,
            "fresh_buffers": self.fresh_buffers,
            "outputs": {
                name: {"max_abs_err": s.max_abs_err, "max_err_over_bound": s.max_err_over_bound,
                       "tolerance": vars(next(o for o in problem.outputs if o.name == name).tolerance())}
                for name, s in self.stats.items()
            },
        }


def _compute_dtype(t: torch.Tensor) -> torch.dtype:
    return torch.float64 if t.dtype in (torch.float32, torch.float64) else torch.float32


def _fmt_index(flat: int, shape: Sequence[int]) -> str:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


def tolerance_bound(ref: torch.Tensor, tol: Tolerance) -> torch.Tensor:
    """Elementwise bound atol * rms(ref) + rtol * |ref| (rms over the finite elements)."""
    r = ref.to(_compute_dtype(ref))
    finite = torch.isfinite(r)
    rf = torch.where(finite, r, torch.zeros_like(r))
    n = int(finite.sum())
    rms = float(torch.sqrt((rf * rf).sum() / max(n, 1)))
    return tol.atol * rms + tol.rtol * rf.abs()


def compare_output(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, where: str) -> OutputStats:
    """Raise CandidateFailure unless `out` is fully written, finite where `ref` is, and within
    tolerance; return error statistics otherwise."""
    if out.shape != ref.shape:
        raise incorrect("mismatch", f"{where}: output {name} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    unwritten = poison_mask(out)
    if out.dtype != torch.bool and not out.is_floating_point():
        unwritten &= ref != poison_value_like(out)
    n_unwritten = int(unwritten.sum())
    if n_unwritten:
        first = int(unwritten.flatten().nonzero()[0])
        raise incorrect("unwritten_output", f"{where}: {n_unwritten} of {out.numel()} elements of output {name} were "
                        f"never written (first at {_fmt_index(first, out.shape)})")
    if out.dtype == torch.bool or not out.is_floating_point():
        bad = out != ref
        n_bad = int(bad.sum())
        if n_bad:
            first = int(bad.flatten().nonzero()[0])
            raise incorrect("mismatch", f"{where}: {n_bad} of {out.numel()} elements of output {name} differ "
                            f"(first at {_fmt_index(first, out.shape)}: got {out.flatten()[first].item()}, "
                            f"expected {ref.flatten()[first].item()})")
        return OutputStats()
    cd = _compute_dtype(out)
    o, r = out.to(cd), ref.to(cd)
    o_fin, r_fin = torch.isfinite(o), torch.isfinite(r)
    bad_nan = (~o_fin & r_fin)
    if bool(bad_nan.any()):
        first = int(bad_nan.flatten().nonzero()[0])
        raise incorrect("nan_or_inf", f"{where}: output {name} has {int(bad_nan.sum())} NaN/Inf elements where the "
                        f"reference is finite (first at {_fmt_index(first, out.shape)}: {o.flatten()[first].item()})")
    # Where the reference itself is not finite, the output must be the same kind of value.
    nf = ~r_fin
    if bool(nf.any()):
        same = (torch.isnan(o) & torch.isnan(r)) | (o == r)
        if not bool(same[nf].all()):
            raise incorrect("mismatch", f"{where}: output {name} differs where the reference is NaN/Inf")
    bound = tolerance_bound(r, tol)
    diff = torch.where(r_fin, (o - r).abs(), torch.zeros_like(o))
    excess = diff > bound
    n_bad = int(excess.sum())
    ratio = diff / torch.clamp(bound, min=torch.finfo(cd).tiny)
    stats = OutputStats(max_abs_err=float(diff.max()) if diff.numel() else 0.0,
                        max_err_over_bound=float(ratio.max()) if ratio.numel() else 0.0)
    if n_bad:
        worst = int(ratio.flatten().argmax())
        raise incorrect("mismatch", f"{where}: {n_bad} of {out.numel()} elements of output {name} are beyond "
                        f"tolerance (atol {tol.atol} x rms + rtol {tol.rtol}); worst at {_fmt_index(worst, out.shape)}: "
                        f"got {o.flatten()[worst].item():.6g}, expected {r.flatten()[worst].item():.6g}, "
                        f"|diff| {diff.flatten()[worst].item():.3g} > bound {bound.flatten()[worst].item():.3g}")
    return stats


def poison_value_like(t: torch.Tensor) -> torch.Tensor:
    p = torch.empty(1, dtype=t.dtype, device=t.device)
    poison_(p)
    return p


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of `t` as integers (bitwise comparisons, NaN payloads included)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def call_with_params(fn: Callable[..., Any], args: Sequence[Any], params: dict[str, Any]) -> Any:
    """Call a reference or eager formulation with the problem's scalar parameters as keywords,
    passing only the ones its signature accepts."""
    if not params:
        return fn(*args)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn(*args, **params)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values()):
        return fn(*args, **params)
    return fn(*args, **{k: v for k, v in params.items() if k in sig.parameters})


def inputs_unchanged(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], decls: Sequence[TensorDecl],
                     where: str) -> None:
    for b, a, d in zip(before, after, decls, strict=True):
        changed = bits(b) != bits(a)
        n = int(changed.sum())
        if n:
            first = int(changed.flatten().nonzero()[0])
            raise incorrect("input_mutated", f"{where}: input {d.name} was modified in {n} of {b.numel()} elements "
                            f"(first at {_fmt_index(first, b.shape)})")


DynamicJudge = Callable[[dict[str, Any], str], "list[str] | None"]  # raises CandidateFailure; returns kernels
SessionJudge = Callable[[dict[str, Any], str], "dict[str, list[str]]"]  # kernels per shape set


class CorrectnessChecker:
    """Runs the trials of docs/evaluator.md "Correctness" against a Target.

    `alloc_shared` allocates the buffers the candidate sees (the judge puts them in a memory pool
    of their own); reference results and input clones use plain allocations on `device`.
    """

    def __init__(self, problem: Problem, reference: Callable[..., None], gen: InputGenerator,
                 device: torch.device | str, alloc_shared: Callable[[Sequence[TensorDecl], ShapeSet], list[torch.Tensor]] | None = None,
                 dynamic_judge: DynamicJudge | None = None, synchronize: Callable[[], None] | None = None,
                 session_judge: SessionJudge | None = None):
        self.problem = problem
        self.reference = reference
        self.gen = gen
        self.device = torch.device(device)
        self.alloc_shared = alloc_shared or (lambda decls, shape: allocate(decls, shape, self.device))
        self.dynamic_judge = dynamic_judge
        self.session_judge = session_judge
        self.sync = synchronize or (lambda: None)
        self.buffers: dict[str, Buffers] = {}
        self.kernels: dict[str, list[str]] = {}
        self.last: dict[str, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}  # (input clones, refs)
        self.clock: dict[str, float] = {}  # wall seconds per kind of work (the report's env.correctness_s)

    @contextmanager
    def timed(self, what: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.clock[what] = self.clock.get(what, 0.0) + time.perf_counter() - t0

    # -- pieces ---------------------------------------------------------------------------------
    def new_buffers(self, shape: ShapeSet) -> Buffers:
        return Buffers(self.alloc_shared(self.problem.inputs, shape), self.alloc_shared(self.problem.outputs, shape))

    def bind_new(self, target: Target, shape: ShapeSet) -> Buffers:
        with self.timed("alloc"):
            bufs = self.new_buffers(shape)
        with self.timed("bind"):
            target.bind(shape, bufs.inputs, bufs.outputs)
        self.buffers[shape.name] = bufs
        return bufs

    def expected(self, inputs: Sequence[torch.Tensor], shape: ShapeSet) -> list[torch.Tensor]:
        refs = allocate(self.problem.outputs, shape, self.device)
        for r in refs:
            poison_(r)
        with torch.no_grad():
            call_with_params(self.reference, [*inputs, *refs], dict(self.problem.params))
        return refs

    def prepare(self, bufs: Buffers, shape: ShapeSet, trial: object) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Fresh inputs, poisoned outputs; returns (input clones, expected outputs)."""
        with self.timed("fill"):
            self.gen.fill(bufs.inputs, shape, trial)
            for o in bufs.outputs:
                poison_(o)
            clones = [t.clone() for t in bufs.inputs]
            self.sync()
        with self.timed("reference"):
            refs = self.expected(clones, shape)
            self.sync()
        return clones, refs

    def verify(self, bufs: Buffers, clones: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], where: str,
               report: ShapeReport | None) -> None:
        with self.timed("verify"):
            self._verify(bufs, clones, refs, where, report)

    def _verify(self, bufs: Buffers, clones: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], where: str,
                report: ShapeReport | None) -> None:
        inputs_unchanged(clones, bufs.inputs, self.problem.inputs, where)
        for out, ref, decl in zip(bufs.outputs, refs, self.problem.outputs, strict=True):
            st = compare_output(decl.name, out, ref, decl.tolerance(), where)
            if report is not None:
                cur = report.stats.setdefault(decl.name, OutputStats())
                cur.max_abs_err = max(cur.max_abs_err, st.max_abs_err)
                cur.max_err_over_bound = max(cur.max_err_over_bound, st.max_err_over_bound)

    def trial(self, target: Target, shape: ShapeSet, trial: object, checked: bool = False,
              report: ShapeReport | None = None, label: str | None = None) -> None:
        bufs = self.buffers[shape.name]
        clones, refs = self.prepare(bufs, shape, trial)
        with self.timed("call_checked" if checked else "call"):
            record = target.call(shape, checked)
            self.sync()
        where = f"shape set {shape.name!r}, {label or f'trial {trial}'}"
        if checked and record is not None and self.dynamic_judge is not None:
            self.kernels[shape.name] = list(self.dynamic_judge(record, where) or [])
        self.verify(bufs, clones, refs, where, report)
        self.last[shape.name] = (clones, refs)
        if report is not None:
            report.trials += 1

    def repeat(self, target: Target, shape: ShapeSet, report: ShapeReport | None = None) -> None:
        """The previous trial's inputs again (bitwise identical: the buffers still hold them, and
        they were checked unchanged), outputs poisoned again: every element must be rewritten
        and correct. Catches work skipped because the inputs did not change (device-side
        memoization)."""
        bufs = self.buffers[shape.name]
        clones, refs = self.last[shape.name]
        inputs_unchanged(clones, bufs.inputs, self.problem.inputs, f"shape set {shape.name!r}, before the repeat trial")
        for o in bufs.outputs:
            poison_(o)
        self.sync()
        with self.timed("call"):
            target.call(shape, False)
            self.sync()
        self.verify(bufs, clones, refs, f"shape set {shape.name!r}, repeat trial (the previous trial's inputs "
                    "again, outputs poisoned again)", report)
        if report is not None:
            report.repeat = True

    def perturbation(self, target: Target, shape: ShapeSet, which: int, report: ShapeReport | None = None) -> bool:
        """Change a few elements of input `which` after a passing trial; the output must change
        wherever the reference's changes by more than twice the tolerance, and still match.
        Returns False when the perturbation moved no reference element beyond that (no check)."""
        bufs = self.buffers[shape.name]
        where = f"shape set {shape.name!r}, perturbation of input {self.problem.inputs[which].name}"
        clones, refs = self.prepare(bufs, shape, "perturb-base")
        with self.timed("call"):
            target.call(shape, False)
            self.sync()
        self.verify(bufs, clones, refs, where + " (base call)", report)
        prev_out = [o.clone() for o in bufs.outputs]
        decl = self.problem.inputs[which]
        t = bufs.inputs[which]
        rng = self.gen.rng(shape.name, "perturb", which)
        n = t.numel()
        if n == 0:
            return False
        k = min(8, n)
        positions = rng.sample(range(n), k) if n > k else list(range(n))
        flat = t.view(-1)
        for p in positions:
            if decl.dist.kind == "randint":
                old = int(flat[p].item())
                choices = [v for v in range(int(decl.dist.lo), int(decl.dist.hi)) if v != old] or [old]
                flat[p] = rng.choice(choices)
            else:
                old = float(flat[p].float().item())
                new = old + (3.0 + abs(old)) * (1 if rng.random() < 0.5 else -1)
                if decl.dtype == "float8_e4m3fn":
                    new = max(-448.0, min(448.0, new)) if abs(old) < 400 else -old
                flat[p] = new
        clones = [x.clone() for x in bufs.inputs]
        with self.timed("reference"):
            refs_new = self.expected(clones, shape)
            self.sync()
        with self.timed("call"):
            target.call(shape, False)
            self.sync()
        moved_any = False
        for out, old_out, ref_old, ref_new, od in zip(bufs.outputs, prev_out, refs, refs_new, self.problem.outputs,
                                                      strict=True):
            if od.is_float:
                cd = _compute_dtype(ref_new)
                bound = tolerance_bound(ref_old, od.tolerance())
                moved = (ref_new.to(cd) - ref_old.to(cd)).abs() > 2 * bound
                moved &= torch.isfinite(ref_new.to(cd)) & torch.isfinite(ref_old.to(cd))
            else:
                moved = ref_new != ref_old
            if not bool(moved.any()):
                continue
            moved_any = True
            stale = (bits(out) == bits(old_out)).view(-1) & moved.view(-1)
            if bool(stale.any()):
                first = int(stale.nonzero()[0])
                raise incorrect("perturbation", f"{where}: output {od.name} did not change at "
                                f"{int(stale.sum())} of {int(moved.sum())} positions where the reference changed "
                                f"(first at {_fmt_index(first, out.shape)})")
        self.verify(bufs, clones, refs_new, where, report)
        if report is not None:
            report.perturbation = moved_any
        return moved_any

    def finish_dynamic(self, target: Target) -> None:
        """A target that records every call in one session (`collect()`: mkb_eval.runner) is
        judged here, after the trials: the session's record is judged call by call and gives the
        kernel set of each shape set."""
        collect = getattr(target, "collect", None)
        if collect is None or self.session_judge is None:
            return
        with self.timed("collect"):
            record = collect()
        if record is not None:
            with self.timed("judge_dynamic"):
                self.kernels.update(self.session_judge(record, "dynamic check"))

    # -- a whole shape set ------------------------------------------------------------------------
    def check_shape(self, target: Target, shape: ShapeSet, trials: int, perturb_input: int | None = 0,
                    fresh: bool = True, dynamic: bool = True) -> ShapeReport:
        report = ShapeReport(shape.name)
        if shape.name not in self.buffers:
            self.bind_new(target, shape)
        for i in range(trials):
            self.trial(target, shape, i, checked=dynamic and i == 0, report=report)
        if trials:
            self.repeat(target, shape, report)
        if perturb_input is not None and self.problem.inputs:
            self.perturbation(target, shape, perturb_input % len(self.problem.inputs), report)
        if fresh:
            old = self.buffers[shape.name]
            self.bind_new(target, shape)  # `old` stays alive: the new buffers get new addresses
            self.trial(target, shape, "fresh", report=report, label="trial in fresh buffers")
            report.fresh_buffers = True
            del old
        report.kernels = self.kernels.get(shape.name, [])
        return report

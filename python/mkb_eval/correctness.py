"""The judge's correctness logic, independent of where the candidate runs: trials with fresh inputs
and NaN-poisoned outputs, the bitwise input-unchanged check, the RMS-scaled tolerance, the repeat
trial (same inputs again, outputs re-poisoned), the input-perturbation check and the fresh-buffer
trial, and the output kinds of docs/design.md: an output updated in place (the input of the same
name: refilled before every call, judged on its change), one judged on its change from an input
(`delta`), a float8/int8 output compared after dequantization with its scales (`scale`). A
`Target` stands in for the runner, so the same code is tested on CPU with plain Python callables
(python/tests/test_correctness.py, test_output_kinds.py)."""

from __future__ import annotations

import inspect
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from .problem import (
    Distribution,
    InputGenerator,
    Problem,
    ShapeSet,
    TensorDecl,
    Tolerance,
    allocate,
    poison_,
    poison_mask,
)


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
    outputs: list[torch.Tensor]  # what run() gets after the inputs: Problem.call_outputs


def declared_outputs(problem: Problem, inputs: Sequence[torch.Tensor], outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Every declared output's tensor, in declared order: an output updated in place is its input
    buffer, the others come from `outputs` (run()'s, Problem.call_outputs; a list of every
    declared output is taken as it is)."""
    if len(outputs) == len(problem.outputs):
        return list(outputs)
    if len(outputs) != len(problem.call_outputs):
        raise ValueError(f"{len(outputs)} output buffers for {len(problem.call_outputs)} outputs of run()")
    rest = iter(outputs)
    return [inputs[problem.input_index(o.name)] if o.inplace else next(rest) for o in problem.outputs]


@dataclass
class OutputStats:
    max_abs_err: float = 0.0
    max_err_over_bound: float = 0.0  # max |out - ref| / (atol * rms + rtol * |ref|); <= 1 passes
    # Dequantized outputs: the same ratio with the one quantization step the bound allows taken off
    # the error first (a valid rounding flip counts 0). The validation's margin for correct
    # formulations (mkb_eval.validate); None where the bound has no such step.
    max_beyond_step_over_bound: float | None = None


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


def _check_written(name: str, out: torch.Tensor, ref: torch.Tensor, where: str) -> None:
    """Raise unless every element of `out` was written (no poison left where the reference has none)."""
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


def _compare_exact(name: str, out: torch.Tensor, ref: torch.Tensor, where: str) -> OutputStats:
    bad = out != ref
    n_bad = int(bad.sum())
    if n_bad:
        first = int(bad.flatten().nonzero()[0])
        raise incorrect("mismatch", f"{where}: {n_bad} of {out.numel()} elements of output {name} differ "
                        f"(first at {_fmt_index(first, out.shape)}: got {out.flatten()[first].item()}, "
                        f"expected {ref.flatten()[first].item()})")
    return OutputStats()


def _compare_float(name: str, o: torch.Tensor, r: torch.Tensor, tol: Tolerance, where: str,
                   extra: torch.Tensor | None = None, what: str = "", step: str = "one quantization step") -> OutputStats:
    """The tolerance rule on values already in a compute dtype: |o - r| <= atol * rms(r) + rtol * |r|
    (+ `extra`, elementwise), finite where `r` is. `what` says what the values are (a change, a
    dequantized tensor) in messages."""
    shape = o.shape
    o_fin, r_fin = torch.isfinite(o), torch.isfinite(r)
    bad_nan = (~o_fin & r_fin)
    if bool(bad_nan.any()):
        first = int(bad_nan.flatten().nonzero()[0])
        raise incorrect("nan_or_inf", f"{where}: output {name}{what} has {int(bad_nan.sum())} NaN/Inf elements where "
                        f"the reference is finite (first at {_fmt_index(first, shape)}: {o.flatten()[first].item()})")
    # Where the reference itself is not finite, the output must be the same kind of value.
    nf = ~r_fin
    if bool(nf.any()):
        same = (torch.isnan(o) & torch.isnan(r)) | (o == r)
        if not bool(same[nf].all()):
            raise incorrect("mismatch", f"{where}: output {name}{what} differs where the reference is NaN/Inf")
    bound = tolerance_bound(r, tol)
    if extra is not None:
        bound = bound + extra
    diff = torch.where(r_fin, (o - r).abs(), torch.zeros_like(o))
    excess = diff > bound
    n_bad = int(excess.sum())
    ratio = diff / torch.clamp(bound, min=torch.finfo(o.dtype).tiny)
    stats = OutputStats(max_abs_err=float(diff.max()) if diff.numel() else 0.0,
                        max_err_over_bound=float(ratio.max()) if ratio.numel() else 0.0)
    if extra is not None:
        beyond = (diff - extra).clamp(min=0.0) / torch.clamp(bound, min=torch.finfo(o.dtype).tiny)
        stats.max_beyond_step_over_bound = float(beyond.max()) if beyond.numel() else 0.0
    if n_bad:
        worst = int(ratio.flatten().argmax())
        rule = f"atol {tol.atol} x rms + rtol {tol.rtol}" + (f" + {step}" if extra is not None else "")
        raise incorrect("mismatch", f"{where}: {n_bad} of {o.numel()} elements of output {name}{what} are beyond "
                        f"tolerance ({rule}); worst at {_fmt_index(worst, shape)}: "
                        f"got {o.flatten()[worst].item():.6g}, expected {r.flatten()[worst].item():.6g}, "
                        f"|diff| {diff.flatten()[worst].item():.3g} > bound {bound.flatten()[worst].item():.3g}")
    return stats


def compare_output(name: str, out: torch.Tensor, ref: torch.Tensor, tol: Tolerance, where: str) -> OutputStats:
    """Raise CandidateFailure unless `out` is fully written, finite where `ref` is, and within
    tolerance; return error statistics otherwise."""
    _check_written(name, out, ref, where)
    if out.dtype == torch.bool or not out.is_floating_point():
        return _compare_exact(name, out, ref, where)
    cd = _compute_dtype(out)
    return _compare_float(name, out.to(cd), ref.to(cd), tol, where)


# (mantissa bits, exponent of the smallest normal) of each float dtype: its rounding step.
_FLOAT_BITS: dict[torch.dtype, tuple[int, int]] = {
    torch.float64: (52, -1022), torch.float32: (23, -126), torch.bfloat16: (7, -126), torch.float16: (10, -14),
    torch.float8_e4m3fn: (3, -6),
}


def rounding_step(ref: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """One ulp of `dtype` at each value of `ref` (ref in a compute dtype): the spacing of the
    representable values there (the subnormal spacing below the smallest normal)."""
    mant, emin = _FLOAT_BITS[dtype]
    e = torch.floor(torch.log2(torch.clamp(ref.abs(), min=2.0 ** emin)))
    return torch.exp2(e - mant)


def compare_change(name: str, out: torch.Tensor, ref: torch.Tensor, base: torch.Tensor, tol: Tolerance, where: str,
                   inplace: bool = False) -> OutputStats:
    """An output judged on its change from `base` (an input's value before the call): out - base
    against ref - base, the tolerance scaled by the RMS of the reference's change, plus one
    rounding step of the output's dtype at the reference's value (two correct results may round
    the same value to neighbours, which on a small change can be more than any tolerance of the
    change allows). In place, `out` is the input buffer itself (never poisoned, so no unwritten
    check); integer outputs compare exactly either way."""
    if out.shape != ref.shape or base.shape != ref.shape:
        raise incorrect("mismatch", f"{where}: output {name} has shape {tuple(out.shape)}, expected {tuple(ref.shape)}")
    if not inplace:
        _check_written(name, out, ref, where)
    if out.dtype == torch.bool or not out.is_floating_point():
        return _compare_exact(name, out, ref, where)
    cd = _compute_dtype(out)
    b, r = base.to(cd), ref.to(cd)
    label = "the input before the call" if inplace else "the input"
    return _compare_float(name, out.to(cd) - b, r - b, tol, where, extra=rounding_step(r, out.dtype),
                          what=f" (its change from {label})", step="one rounding step of the output")


def expand_scale(s: torch.Tensor, shape: Sequence[int], block: Sequence[int] | None = None) -> torch.Tensor:
    """Scales broadcast blockwise over a tensor of `shape`: along each axis of `s` (aligned with the
    leading axes), block size `block[axis]`, else ceil(shape[axis] / s.shape[axis]); axes `s` lacks
    are one block. A 0-d `s` scales everything."""
    e = s
    for axis in range(s.dim()):
        n, q = s.shape[axis], shape[axis]
        b = block[axis] if block is not None else -(-q // max(n, 1))
        e = e.repeat_interleave(b, dim=axis).narrow(axis, 0, q)
    e = e.reshape(tuple(e.shape) + (1,) * (len(shape) - s.dim()))
    return e.expand(tuple(shape))


def quant_step(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """One quantization step at each element of the reference's `q` (dequantized: times |scale|):
    1 for int8; for float8_e4m3fn the spacing of e4m3 values at |q| (3 mantissa bits, subnormal
    below 2^-6)."""
    if q.dtype == torch.float8_e4m3fn:
        a = q.double().abs()
        e = torch.floor(torch.log2(torch.clamp(a, min=2.0 ** -6)))
        step = torch.exp2(e - 3)
    else:
        step = torch.ones(q.shape, dtype=torch.float64, device=q.device)
    return step * scale.double().abs()


def compare_dequantized(name: str, q: torch.Tensor, q_ref: torch.Tensor, s: torch.Tensor, s_ref: torch.Tensor,
                        tol: Tolerance, where: str, block: Sequence[int] | None = None, scale_name: str = "s") -> OutputStats:
    """A float8/int8 output compared after dequantization: q * s (s broadcast blockwise) against
    q_ref * s_ref, bound atol * rms + rtol * |ref| plus one quantization step of the reference
    (so a different but valid rounding passes). The scales are compared on their own. In fp64,
    where q * s is exact (an 8-bit q times a float32 s), so one step off is exactly one step."""
    _check_written(name, q, q_ref, where)
    if s.shape != s_ref.shape:
        raise incorrect("mismatch", f"{where}: output {scale_name} has shape {tuple(s.shape)}, "
                        f"expected {tuple(s_ref.shape)}")
    se = expand_scale(s.double(), q.shape, block)
    se_ref = expand_scale(s_ref.double(), q.shape, block)
    deq, deq_ref = q.double() * se, q_ref.double() * se_ref
    return _compare_float(name, deq, deq_ref, tol, where, extra=quant_step(q_ref, se_ref),
                          what=f" (dequantized with {scale_name})")


def compare_outputs(problem: Problem, outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor],
                    before: Sequence[torch.Tensor], where: str) -> dict[str, OutputStats]:
    """Every declared output (declared order, in-place ones included) against the reference's by
    its kind; `before` holds the inputs as they were before the call (what the reference got).
    Plain outputs first, then the dequantized ones (so unwritten scales are named as such)."""
    by_name = {o.name: i for i, o in enumerate(problem.outputs)}
    stats: dict[str, OutputStats] = {}
    order = sorted(range(len(problem.outputs)), key=lambda i: problem.outputs[i].scale is not None)
    for i in order:
        decl, out, ref = problem.outputs[i], outs[i], refs[i]
        tol = decl.tolerance()
        if decl.inplace:
            stats[decl.name] = compare_change(decl.name, out, ref, before[problem.input_index(decl.name)], tol, where,
                                              inplace=True)
        elif decl.delta is not None:
            stats[decl.name] = compare_change(decl.name, out, ref, before[problem.input_index(decl.delta)], tol, where)
        elif decl.scale is not None:
            j = by_name[decl.scale]
            stats[decl.name] = compare_dequantized(decl.name, out, ref, outs[j], refs[j], tol, where, decl.block,
                                                   decl.scale)
        else:
            stats[decl.name] = compare_output(decl.name, out, ref, tol, where)
    return stats


def judged_values(problem: Problem, i: int, outs: Sequence[torch.Tensor], base: Sequence[torch.Tensor]) -> torch.Tensor:
    """Output `i` as its kind compares it (float outputs): the change from its base input, the
    dequantized values, or the values, in a compute dtype."""
    decl = problem.outputs[i]
    out = outs[i]
    if decl.scale is not None:
        s = outs[next(j for j, o in enumerate(problem.outputs) if o.name == decl.scale)]
        return out.double() * expand_scale(s.double(), out.shape, decl.block)
    cd = _compute_dtype(out)
    name = decl.name if decl.inplace else decl.delta
    if name is not None:
        return out.to(cd) - base[problem.input_index(name)].to(cd)
    return out.to(cd)


def shown_values(problem: Problem, i: int, outs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Output `i`'s values as a float tensor (dequantized where it has scales)."""
    decl = problem.outputs[i]
    if decl.scale is not None:
        return judged_values(problem, i, outs, ())
    return outs[i].to(_compute_dtype(outs[i]))


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


def formulation_outputs(problem: Problem, result: Any, args: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The declared outputs (declared order) of a formulation called as fn(*args, **params), where
    `args` are the inputs with those updated in place given as clones: it returns every output in
    declared order, or only the outputs of run() (the in-place ones are then the updated clones),
    or None when every output is updated in place."""
    got = [] if result is None else list(result) if isinstance(result, tuple | list) else [result]
    if len(got) == len(problem.outputs) and (got or result is not None):
        return [torch.as_tensor(t) for t in got]
    if len(got) == len(problem.call_outputs):
        rest = iter(torch.as_tensor(t) for t in got)
        return [args[problem.input_index(o.name)] if o.inplace else next(rest) for o in problem.outputs]
    raise ValueError(f"returned {len(got)} outputs; the problem declares {len(problem.outputs)} "
                     f"({', '.join(o.name for o in problem.outputs)}), {len(problem.call_outputs)} of them not in place")


def call_formulation(problem: Problem, fn: Callable[..., Any], inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Call an eager (or alt_, wrong_) formulation on `inputs` (left unchanged: the inputs it updates
    in place are cloned first) with the problem's parameters; its outputs in declared order."""
    inplace = problem.inplace_names
    args = [t.clone() if d.name in inplace else t for t, d in zip(inputs, problem.inputs, strict=True)]
    with torch.no_grad():
        result = call_with_params(fn, args, dict(problem.params))
    return formulation_outputs(problem, result, args)


def inputs_unchanged(before: Sequence[torch.Tensor], after: Sequence[torch.Tensor], decls: Sequence[TensorDecl],
                     where: str, inplace: frozenset[str] = frozenset()) -> None:
    """Every input but those updated in place (`inplace`) bitwise as it was."""
    for b, a, d in zip(before, after, decls, strict=True):
        if d.name in inplace:
            continue
        changed = bits(b) != bits(a)
        n = int(changed.sum())
        if n:
            first = int(changed.flatten().nonzero()[0])
            raise incorrect("input_mutated", f"{where}: input {d.name} was modified in {n} of {b.numel()} elements "
                            f"(first at {_fmt_index(first, b.shape)})")


def perturb_(t: torch.Tensor, dist: Distribution, dtype: str, rng: random.Random, k: int = 8) -> None:
    """Change up to `k` elements of input `t` in place, keeping it inside its (resolved) distribution:
    randint draws another value of [lo, hi); unique moves an element to a value its row (or the
    tensor) does not hold, or swaps two elements where none is free; counts moves one unit from one
    element to another (the sum stays); uniform floats move within [lo, hi] (the mirror image about its
    centre, or half the range away); other floats move by 3 + |x| (e4m3 kept in range)."""
    n = t.numel()
    flat = t.view(-1)
    if dist.kind == "unique":
        row = t.shape[-1] if dist.per_row and t.dim() else n
        hi = int(dist.hi)
        for _ in range(k):
            p = rng.randrange(n)
            start = p - p % row
            held = set(int(x) for x in flat[start:start + row].tolist())
            if len(held) < hi:
                v = rng.randrange(hi)
                while v in held:
                    v = rng.randrange(hi)
                flat[p] = v
            elif row > 1:
                q = start + (p - start + 1 + rng.randrange(row - 1)) % row
                a, b = int(flat[p].item()), int(flat[q].item())
                flat[p], flat[q] = b, a
        return
    if dist.kind == "counts":
        if n < 2 or not bool((t != 0).any()):
            return
        for _ in range(k):
            src = rng.choice(flat.nonzero().flatten().tolist())
            dst = rng.randrange(n - 1)
            dst += dst >= src
            flat[src] -= 1
            flat[dst] += 1
        return
    positions = rng.sample(range(n), min(k, n)) if n > k else list(range(n))
    for p in positions:
        if dist.kind == "randint":
            # A uniform choice among [lo, hi) without the old value (the random draws of
            # rng.choice over that list, without building it: hi may be a vocabulary size).
            lo, hi = int(dist.lo), int(dist.hi)
            old = int(flat[p].item())
            inside = lo <= old < hi
            n_choices = hi - lo - int(inside)
            if n_choices <= 0:
                rng.choice([old])
                continue
            v = lo + rng.randrange(n_choices)
            flat[p] = v + int(inside and v >= old)
        elif dist.kind == "uniform":
            # Inside the declared range: a value outside it (a negative variance, a scale of the
            # wrong sign) is not an input the problem admits, and its reference may be NaN. The
            # mirror image about the centre, or half the range away where that is too close.
            lo, hi = float(dist.lo), float(dist.hi)
            old_f = float(flat[p].float().item())
            new = lo + hi - old_f
            if abs(new - old_f) < (hi - lo) / 4:
                new = old_f + (hi - lo) / 2 * (1 if old_f < (lo + hi) / 2 else -1)
            flat[p] = min(hi, max(lo, new))
        else:
            old_f = float(flat[p].float().item())
            new = old_f + (3.0 + abs(old_f)) * (1 if rng.random() < 0.5 else -1)
            if dtype == "float8_e4m3fn":
                new = max(-448.0, min(448.0, new)) if abs(old_f) < 400 else -old_f
            flat[p] = new


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
        return Buffers(self.alloc_shared(self.problem.inputs, shape),
                       self.alloc_shared(self.problem.call_outputs, shape))

    def bind_new(self, target: Target, shape: ShapeSet) -> Buffers:
        with self.timed("alloc"):
            bufs = self.new_buffers(shape)
        with self.timed("bind"):
            target.bind(shape, bufs.inputs, bufs.outputs)
        self.buffers[shape.name] = bufs
        return bufs

    def expected(self, inputs: Sequence[torch.Tensor], shape: ShapeSet) -> list[torch.Tensor]:
        """The reference's outputs on `inputs` (left unchanged), in declared order: it is called as
        reference(*inputs, *outputs of run()) with the inputs it updates in place cloned, and
        those clones are the in-place outputs' expected values."""
        refs = allocate(self.problem.call_outputs, shape, self.device)
        for r in refs:
            poison_(r)
        inplace = self.problem.inplace_names
        args = [t.clone() if d.name in inplace else t for t, d in zip(inputs, self.problem.inputs, strict=True)]
        with torch.no_grad():
            call_with_params(self.reference, [*args, *refs], dict(self.problem.params))
        return declared_outputs(self.problem, args, refs)

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
        """`clones`: the inputs before the call; `refs`: the expected outputs in declared order."""
        inputs_unchanged(clones, bufs.inputs, self.problem.inputs, where, self.problem.inplace_names)
        outs = declared_outputs(self.problem, bufs.inputs, bufs.outputs)
        for name, st in compare_outputs(self.problem, outs, refs, clones, where).items():
            if report is not None:
                cur = report.stats.setdefault(name, OutputStats())
                cur.max_abs_err = max(cur.max_abs_err, st.max_abs_err)
                cur.max_err_over_bound = max(cur.max_err_over_bound, st.max_err_over_bound)
                if st.max_beyond_step_over_bound is not None:
                    cur.max_beyond_step_over_bound = max(cur.max_beyond_step_over_bound or 0.0,
                                                         st.max_beyond_step_over_bound)

    def restore_inplace(self, bufs: Buffers, clones: Sequence[torch.Tensor]) -> None:
        """Put the before-values back into the inputs a call updated in place."""
        for t, c, d in zip(bufs.inputs, clones, self.problem.inputs, strict=True):
            if d.name in self.problem.inplace_names:
                t.copy_(c)

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
        self.restore_inplace(bufs, clones)
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
        prev_out = [o.clone() for o in declared_outputs(self.problem, bufs.inputs, bufs.outputs)]
        self.restore_inplace(bufs, clones)
        decl = self.problem.inputs[which]
        t = bufs.inputs[which]
        rng = self.gen.rng(shape.name, "perturb", which)
        if t.numel() == 0:
            return False
        perturb_(t, decl.dist.resolve(shape.dims), decl.dtype, rng)
        clones_old = clones
        clones = [x.clone() for x in bufs.inputs]
        with self.timed("reference"):
            refs_new = self.expected(clones, shape)
            self.sync()
        with self.timed("call"):
            target.call(shape, False)
            self.sync()
        moved_any = False
        outs_new = declared_outputs(self.problem, bufs.inputs, bufs.outputs)
        for i, od in enumerate(self.problem.outputs):
            out, old_out, ref_old, ref_new = outs_new[i], prev_out[i], refs[i], refs_new[i]
            if od.is_float or od.scale is not None:
                # The reference's values moved by more than twice the bound its comparison uses.
                bound = tolerance_bound(judged_values(self.problem, i, refs, clones_old), od.tolerance())
                r_old, r_new = shown_values(self.problem, i, refs), shown_values(self.problem, i, refs_new)
                moved = (r_new - r_old).abs() > 2 * bound
                moved &= torch.isfinite(r_new) & torch.isfinite(r_old)
            else:
                moved = ref_new != ref_old
            if not bool(moved.any()):
                continue
            moved_any = True
            if od.scale is not None:
                same = shown_values(self.problem, i, outs_new) == shown_values(self.problem, i, prev_out)
            else:
                same = bits(out) == bits(old_out)
            stale = same.reshape(-1) & moved.reshape(-1)
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

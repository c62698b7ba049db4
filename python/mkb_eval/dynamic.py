"""Decisions of the dynamic DSL-use check (docs/evaluator.md): the runner records the aten ops that
reached the torch dispatcher and the GPU activities of one checked call, bracketed by marker
kernels on the current stream; the judge decides here. Pure functions on plain records, so the
rules are tested on CPU with synthetic records."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .correctness import CandidateFailure, incorrect

# torch.cuda._sleep's kernel, as the profiler names it on the H200 (probe 2026-11-29).
MARKER_KERNEL = "at::cuda::(anonymous namespace)::spin_kernel(long)"

# Views, metadata and allocation: the only aten ops a candidate's run() may send to the dispatcher.
ALLOWED_OPS = frozenset({
    "aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.as_strided", "aten.alias", "aten.detach",
    "aten.t", "aten.transpose", "aten.permute", "aten.expand", "aten.expand_as", "aten.squeeze", "aten.unsqueeze",
    "aten.slice", "aten.select", "aten.narrow", "aten.unbind", "aten.split", "aten.split_with_sizes", "aten.chunk",
    "aten.diagonal", "aten.view_as", "aten.unflatten", "aten.flatten", "aten.unfold", "aten.movedim",
    "aten.view_as_real", "aten.view_as_complex", "aten.lift_fresh",
    "aten.empty", "aten.empty_like", "aten.empty_strided", "aten.new_empty", "aten.new_empty_strided",
    "aten.sym_size", "aten.sym_stride", "aten.sym_numel", "aten.sym_storage_offset", "aten.size", "aten.stride",
    "aten.numel", "aten.dim", "aten.is_contiguous", "aten.is_same_size", "aten.is_floating_point",
    "aten.is_complex", "aten.is_non_overlapping_and_dense", "aten.storage_offset",
    "prim.device", "prim.layout", "prim.dtype",
})


def op_packet(name: str) -> str:
    """'aten.view.default' -> 'aten.view' (an op name without overload is returned unchanged)."""
    parts = name.split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 else name


def is_marker(name: str) -> bool:
    return name == MARKER_KERNEL or (name.startswith("at::cuda::") and "spin_kernel" in name)


def kernel_allowed(name: str, allowed: Iterable[str]) -> bool:
    """A profiled kernel name matches a compiled one exactly, or as a demangled signature
    ('name(args)') or an Itanium-mangled symbol ('_Z<len>name...')."""
    for k in allowed:
        if name == k or name.startswith(k + "(") or name.startswith(f"_Z{len(k)}{k}"):
            return True
    return False


def judge_record(record: dict[str, Any], where: str) -> list[str]:
    """Raise CandidateFailure if the recorded call used torch compute, a kernel the DSL did not
    compile, a memcpy, or another stream; return the candidate's kernel names (in order)."""
    ops = [str(o) for o in record.get("ops", [])]
    bad_ops = sorted({o for o in ops if op_packet(o) not in ALLOWED_OPS})
    if bad_ops:
        raise incorrect("forbidden_torch_op", f"{where}: run() sent PyTorch compute to the dispatcher: "
                        f"{', '.join(bad_ops[:8])}{' ...' if len(bad_ops) > 8 else ''}")
    acts: Sequence[dict[str, Any]] = record.get("activities", [])
    markers = [a for a in acts if a.get("kind") == "kernel" and is_marker(str(a.get("name")))]
    if len(markers) < 2:
        raise CandidateFailure("crashed", "profiler_error", f"{where}: the profiler did not see the harness's "
                               f"marker kernels ({len(markers)} of 2); the dynamic check could not run")
    if len(markers) > 2:
        raise incorrect("forbidden_kernel", f"{where}: run() launched the harness's marker kernel itself")
    stream = markers[0].get("stream")
    if markers[1].get("stream") != stream:
        raise incorrect("side_stream", f"{where}: the current stream changed during run()")
    allowed = list(record.get("allowed_kernels", []))
    kernels: list[str] = []
    for a in acts:
        name, kind = str(a.get("name")), a.get("kind")
        if kind == "kernel" and is_marker(name):
            continue
        if kind == "kernel":
            if not kernel_allowed(name, allowed):
                raise incorrect("forbidden_kernel", f"{where}: kernel {name[:200]!r} did not come from a module "
                                f"compiled with the DSL in this process")
            kernels.append(name)
        elif kind == "memcpy":
            raise incorrect("forbidden_kernel", f"{where}: run() issued a memory copy ({name[:120]})")
        elif kind != "memset":
            continue  # sync markers and activities the profiler could not name are not judged
        if a.get("stream") != stream:
            raise incorrect("side_stream", f"{where}: {kind} {name[:160]!r} ran on stream {a.get('stream')}, "
                            f"not on the current stream {stream}")
    return kernels


def judge_session(record: dict[str, Any], where: str) -> dict[str, list[str]]:
    """Judge a profiler session over several calls (mkb_eval.runner op_call .. op_collect): every
    recorded call (its aten ops, and the activities between its two marker kernels) by the rules
    of `judge_record`; nothing of the candidate's may run between calls. Returns the kernel names
    of the first recorded call of each shape set (the kernel set the timed calls must match)."""
    calls: Sequence[dict[str, Any]] = record.get("calls", [])
    acts: Sequence[dict[str, Any]] = record.get("activities", [])
    allowed = list(record.get("allowed_kernels", []))
    marks = [i for i, a in enumerate(acts) if a.get("kind") == "kernel" and is_marker(str(a.get("name")))]
    if len(marks) < 2 * len(calls):
        raise CandidateFailure("crashed", "profiler_error", f"{where}: the profiler saw {len(marks)} of the "
                               f"harness's {2 * len(calls)} marker kernels; the dynamic check could not run")
    if len(marks) > 2 * len(calls):
        raise incorrect("forbidden_kernel", f"{where}: run() launched the harness's marker kernel itself")
    kernels: dict[str, list[str]] = {}
    inside: set[int] = set()
    for j, c in enumerate(calls):
        a0, a1 = marks[2 * j], marks[2 * j + 1]
        inside.update(range(a0, a1 + 1))
        shape = str(c.get("shape"))
        ks = judge_record({"ops": c.get("ops", []), "activities": acts[a0:a1 + 1], "allowed_kernels": allowed},
                          f"{where}, shape set {shape!r}, call {j + 1} of {len(calls)}")
        kernels.setdefault(shape, ks)
    stream = acts[marks[0]].get("stream") if marks else None
    for i, a in enumerate(acts):
        if i in inside or a.get("kind") not in ("kernel", "memcpy", "memset"):
            continue
        name = str(a.get("name"))[:160]
        if a.get("stream") != stream:
            raise incorrect("side_stream", f"{where}: {a.get('kind')} {name!r} ran on stream {a.get('stream')}, "
                            f"outside run() and not on the current stream {stream}")
        raise incorrect("forbidden_kernel", f"{where}: {a.get('kind')} {name!r} ran between calls of run() "
                        "(work left running after run() returned)")
    return kernels


def compare_kernel_sets(checked: Sequence[str], timed: Sequence[str], where: str) -> None:
    """The kernels of a profiled timed call must be those of the checked call."""
    if sorted(set(checked)) != sorted(set(timed)):
        only_c = sorted(set(checked) - set(timed))
        only_t = sorted(set(timed) - set(checked))
        raise incorrect("kernel_set_changed", f"{where}: a timed call launched other kernels than the checked call "
                        f"(missing: {[k[:80] for k in only_c]}, extra: {[k[:80] for k in only_t]})")

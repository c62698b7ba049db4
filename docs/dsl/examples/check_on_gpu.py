"""Run every DSL-brief example (docs/dsl/examples/{cute,tirx}/*.py) on a GPU against PyTorch.

Usage on the GPU machine (torch with CUDA, nvidia-cutlass-dsl, apache-tvm-tirx installed):
    python docs/dsl/examples/check_on_gpu.py            # both DSLs, one subprocess each
    python docs/dsl/examples/check_on_gpu.py --dsl tirx # one DSL, in this process

For each example and shape set it calls build(spec) once, then checks, like the evaluator does:
outputs pre-filled with NaN are fully written and match the reference; inputs are unchanged;
a second trial with new values in the same buffers matches (no caching); the kernel runs on
torch's current stream (a side stream is held back by a long sleep, so a launch on any other
stream would read stale inputs). It also prints compile time, warm-L2 kernel time (CUDA events)
and host time per call on the smallest shape. Exit status 0 only if every check passed.

This is a checking tool, not an example: it may use subprocess, time and torch compute.
CASES is also imported by python/tests/test_brief_examples.py to build specs for compile checks.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
DSLS = ("cute", "tirx")


@dataclass
class TensorSpec:
    """One tensor of a shape set, as the harness describes it."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype


@dataclass
class Spec:
    """What build(spec) receives: the same fields as the evaluator's spec."""

    name: str
    dims: dict[str, int]
    params: dict[str, object] = field(default_factory=dict)
    inputs: list[TensorSpec] = field(default_factory=list)
    outputs: list[TensorSpec] = field(default_factory=list)


@dataclass
class Case:
    """One example: its tensors (as functions of dims and dtype), shape sets and reference."""

    inputs: Callable[[dict[str, int], torch.dtype], list[TensorSpec]]
    outputs: Callable[[dict[str, int], torch.dtype], list[TensorSpec]]
    reference: Callable[..., list[torch.Tensor]]
    shapes: list[tuple[str, dict[str, int], torch.dtype]]  # (name, dims, dtype); first = smallest
    atol: float
    rtol: float
    vector: bool  # the example promises 16-byte vector loads


def _col_affine_ref(x: torch.Tensor, s: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    return [(x.float() * s.float() + b.float()).to(x.dtype)]


def _row_mean_ref(x: torch.Tensor) -> list[torch.Tensor]:
    return [x.float().mean(dim=1)]


def _box_blur_ref(x: torch.Tensor) -> list[torch.Tensor]:
    y = torch.nn.functional.avg_pool2d(x[None, None], 3, stride=1, padding=1, count_include_pad=True)
    return [y[0, 0]]


def _gemm_ref(a: torch.Tensor, b: torch.Tensor) -> list[torch.Tensor]:
    return [(a.float() @ b.float().T).to(a.dtype)]


BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32

CASES: dict[str, Case] = {
    "col_affine": Case(
        inputs=lambda d, t: [
            TensorSpec("x", (d["M"], d["N"]), t),
            TensorSpec("scale", (d["N"],), t),
            TensorSpec("shift", (d["N"],), t),
        ],
        outputs=lambda d, t: [TensorSpec("y", (d["M"], d["N"]), t)],
        reference=_col_affine_ref,
        shapes=[
            ("small", {"M": 4, "N": 256}, BF16),
            ("ragged", {"M": 333, "N": 1000}, BF16),
            ("fp16", {"M": 77, "N": 4104}, FP16),
            ("large", {"M": 16384, "N": 4096}, BF16),
        ],
        atol=1e-2,
        rtol=1e-2,
        vector=True,
    ),
    "row_mean": Case(
        inputs=lambda d, t: [TensorSpec("x", (d["M"], d["N"]), t)],
        outputs=lambda d, t: [TensorSpec("y", (d["M"],), FP32)],
        reference=_row_mean_ref,
        shapes=[
            ("small", {"M": 4, "N": 256}, BF16),
            ("ragged", {"M": 333, "N": 1000}, BF16),
            ("fp16", {"M": 77, "N": 4104}, FP16),
            ("large", {"M": 16384, "N": 4096}, BF16),
        ],
        atol=1e-4,
        rtol=1e-4,
        vector=True,
    ),
    "box_blur": Case(
        inputs=lambda d, t: [TensorSpec("x", (d["H"], d["W"]), t)],
        outputs=lambda d, t: [TensorSpec("y", (d["H"], d["W"]), t)],
        reference=_box_blur_ref,
        shapes=[
            ("tiny", {"H": 1, "W": 1}, FP32),
            ("ragged", {"H": 333, "W": 1000}, FP32),
            ("odd", {"H": 7, "W": 45}, FP32),
            ("large", {"H": 4096, "W": 4096}, FP32),
        ],
        atol=1e-5,
        rtol=1e-5,
        vector=False,
    ),
}


# The Hopper pattern of each brief's section 4, as a whole kernel: hopper/<dsl>_tma_wgmma.py.
HOPPER_CASES: dict[str, Case] = {
    "tma_wgmma": Case(
        inputs=lambda d, t: [TensorSpec("a", (d["M"], d["K"]), t), TensorSpec("b", (d["N"], d["K"]), t)],
        outputs=lambda d, t: [TensorSpec("c", (d["M"], d["N"]), t)],
        reference=_gemm_ref,
        shapes=[
            ("one_tile", {"M": 64, "N": 128, "K": 64}, BF16),
            ("deep_k", {"M": 128, "N": 256, "K": 1024}, BF16),
            ("large", {"M": 4096, "N": 4096, "K": 4096}, BF16),
        ],
        atol=0.5,
        rtol=2e-2,
        vector=False,
    ),
}


def make_spec(case: Case, shape_name: str, dims: dict[str, int], dtype: torch.dtype) -> Spec:
    return Spec(shape_name, dict(dims), {}, case.inputs(dims, dtype), case.outputs(dims, dtype))


def example_path(dsl: str, name: str) -> Path:
    """docs/dsl/examples/<dsl>/<name>.py, or hopper/<dsl>_<name>.py for a HOPPER_CASES entry."""
    return HERE / "hopper" / f"{dsl}_{name}.py" if name in HOPPER_CASES else HERE / dsl / f"{name}.py"


def load_example(dsl: str, name: str):
    """Import an example file as a module (it must be a real file: both DSLs re-read it)."""
    path = example_path(dsl, name)
    mod_spec = importlib.util.spec_from_file_location(f"brief_{dsl}_{name}", path)
    assert mod_spec is not None and mod_spec.loader is not None
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[mod_spec.name] = module
    mod_spec.loader.exec_module(module)
    return module


def _fill(t: torch.Tensor, gen: torch.Generator) -> None:
    t.copy_(torch.randn(t.shape, generator=gen, device=t.device, dtype=torch.float32) * 2 + 0.5)


def _check_once(run, case: Case, spec: Spec, ins, outs, gen, stream=None) -> str | None:
    """Fill inputs, NaN the outputs, call run (on `stream` if given), compare. None = pass."""
    for t in ins:
        _fill(t, gen)
    for t in outs:
        t.fill_(float("nan"))
    saved = [t.clone() for t in ins]
    if stream is None:
        run(*ins, *outs)
    else:
        # Hold the side stream back, then write new input values on it: a kernel launched on
        # any other stream would run before the write and produce stale results.
        fresh = [t.clone() for t in ins]
        for t in fresh:
            _fill(t, gen)
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            torch.cuda._sleep(200_000_000)
            for t, f in zip(ins, fresh, strict=True):
                t.copy_(f)
            run(*ins, *outs)
        saved = fresh
    torch.cuda.synchronize()
    for t, s in zip(ins, saved, strict=True):
        if not torch.equal(t, s):
            return "an input was modified"
    refs = case.reference(*saved)
    for o, r, ts in zip(outs, refs, spec.outputs, strict=True):
        if torch.isnan(o).any():
            return f"{ts.name}: NaN left (unwritten elements)"
        try:
            torch.testing.assert_close(o.float(), r.float(), atol=case.atol, rtol=case.rtol)
        except AssertionError as e:
            return f"{ts.name}: {str(e).splitlines()[0:3]}"
    return None


def _time_kernel(run, args, reps: int = 50) -> float:
    for _ in range(3):
        run(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        run(*args)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1e3  # microseconds


def _host_us_per_call(run, args, reps: int = 2000) -> float:
    run(*args)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(reps):
        run(*args)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / reps * 1e6


def check_dsl(dsl: str) -> list[dict]:
    """Check every example of one DSL in this process; one result dict per (example, shape)."""
    if dsl == "tirx":
        import tvm_ffi
        import tvm_tirx  # noqa: F401  (importing it registers the CUDA runtime)

        loaded = tvm_ffi.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True)
        assert loaded, "TIRx CUDA runtime not loaded: compile() would return source only"
    results = []
    gen = torch.Generator(device="cuda")
    gen.manual_seed(1234)
    side = torch.cuda.Stream()
    for name, case in {**CASES, **HOPPER_CASES}.items():
        try:
            module = load_example(dsl, name)
        except Exception:
            results.append(
                {
                    "dsl": dsl,
                    "example": name,
                    "shape": "-",
                    "ok": False,
                    "error": traceback.format_exc(limit=3),
                }
            )
            continue
        for shape_name, dims, dtype in case.shapes:
            row: dict = {"dsl": dsl, "example": name, "shape": shape_name, "dims": dims}
            try:
                spec = make_spec(case, shape_name, dims, dtype)
                t0 = time.perf_counter()
                run = module.build(spec)
                row["compile_s"] = round(time.perf_counter() - t0, 2)
                ins = [torch.empty(t.shape, dtype=t.dtype, device="cuda") for t in spec.inputs]
                outs = [torch.empty(t.shape, dtype=t.dtype, device="cuda") for t in spec.outputs]
                err = (
                    _check_once(run, case, spec, ins, outs, gen)
                    or _check_once(run, case, spec, ins, outs, gen)
                    or _check_once(run, case, spec, ins, outs, gen, stream=side)
                )
                row["ok"] = err is None
                if err:
                    row["error"] = err
                row["kernel_us"] = round(_time_kernel(run, ins + outs), 2)
                if shape_name == case.shapes[0][0]:
                    row["host_us_per_call"] = round(_host_us_per_call(run, ins + outs), 2)
            except Exception:
                row["ok"] = False
                row["error"] = traceback.format_exc(limit=4)
            results.append(row)
            status = "PASS" if row["ok"] else "FAIL"
            print(
                f"{status} {dsl:4s} {name:10s} {shape_name:7s} {dims} "
                f"compile={row.get('compile_s')}s kernel={row.get('kernel_us')}us "
                f"host={row.get('host_us_per_call', '-')}us {row.get('error', '')}",
                flush=True,
            )
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsl", choices=DSLS, help="check one DSL in this process")
    parser.add_argument("--json", help="write the results of --dsl to this file")
    args = parser.parse_args()
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    if args.dsl:
        results = check_dsl(args.dsl)
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0 if results and all(r["ok"] for r in results) else 1
    status = 0
    for dsl in DSLS:  # one process per DSL, as the evaluator does
        rc = subprocess.call([sys.executable, str(Path(__file__).resolve()), "--dsl", dsl])
        print(f"== {dsl}: {'PASS' if rc == 0 else 'FAIL'}", flush=True)
        status |= rc
    return status


if __name__ == "__main__":
    sys.exit(main())

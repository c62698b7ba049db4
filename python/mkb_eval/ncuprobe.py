"""A workload for Nsight Compute: one problem's expert solution (or a variant file) at the
benchmark shape, next to torch kernels that move the same byte count, so hardware counters of
both come from one process and one GPU.

    ncu --clock-control none --nvtx --nvtx-include probe/ --metrics dram__bytes_read.sum --csv \\
        python3 -m mkb_eval.ncuprobe F08 --dsl cute [--file tune/F08_.../cute/v1.py] --calls 2

Per call of the solution (and of each reference) the L2 is flushed first (a write of a buffer
larger than L2), so every profiled kernel starts on a cold L2, as in the judge's timing. The
references: `copy` (a device copy of B/2 bytes: B moved) and `sum` (a read-only sum over B bytes),
B = the problem's minimal bytes (problem.toml `bytes`) at the benchmark shape. The flush kernel
shows up in the profile too (between the kernels of interest); the set-up (compile, inputs) is
outside the NVTX range `probe`.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import Any

import torch

from . import timing
from .bundle import Bundle
from .problem import InputGenerator, allocate, make_spec


def load_solution(path: Path, tag: str) -> Any:
    """The module of a solution file (its build(spec) compiles for one shape set)."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such solution file")
    spec = importlib.util.spec_from_file_location(tag, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a loadable Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(pid: str, dsl: str, file: Path | None, calls: int, refs: bool) -> int:
    bundle = Bundle.from_mkb()
    problem = bundle.problem(pid)
    bench = problem.benchmark_shape
    path = file if file is not None else problem.dir / dsl / "solution.py"
    module = load_solution(path, f"mkb_ncuprobe_{pid}_{dsl}")
    fn = module.build(make_spec(problem, bench))
    inputs = allocate(problem.inputs, bench, "cuda")
    outputs = allocate(problem.outputs, bench, "cuda")
    InputGenerator(problem, 0).fill(inputs, bench, "ncuprobe")
    flush = timing.l2_flush_buffer()
    nbytes = problem.min_bytes(bench)
    print(f"{pid} {dsl} {path}: benchmark {dict(bench.dims)}, {nbytes / 1e6:.1f} MB minimal", flush=True)
    torch.cuda.synchronize()
    with torch.no_grad():
        torch.cuda.nvtx.range_push("probe")  # ncu --nvtx --nvtx-include probe/ profiles only this
        for _ in range(calls):
            flush.fill_(1)
            fn(*inputs, *outputs)
        if refs:
            half = nbytes // 2 // 16 * 16
            src = torch.randint(0, 255, (half,), dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            rd = torch.randn(nbytes // 4, dtype=torch.float32, device="cuda")
            for _ in range(calls):
                flush.fill_(1)
                dst.copy_(src)
                flush.fill_(1)
                rd.sum()
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problem", help="problem id, e.g. F08")
    ap.add_argument("--dsl", choices=["cute", "tirx"], default="cute")
    ap.add_argument("--file", type=Path, help="a variant file instead of the DSL's solution.py")
    ap.add_argument("--calls", type=int, default=2, help="profiled calls of each kernel (default 2)")
    ap.add_argument("--no-refs", action="store_true", help="skip the torch copy and sum references")
    args = ap.parse_args(argv)
    if args.calls < 1:
        ap.error("--calls must be at least 1")
    if not torch.cuda.is_available():
        print("ncuprobe: no CUDA device", file=sys.stderr)
        return 2
    try:
        return run(args.problem, args.dsl, args.file, args.calls, not args.no_refs)
    except (FileNotFoundError, ImportError, KeyError, ValueError) as e:
        print(f"ncuprobe: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

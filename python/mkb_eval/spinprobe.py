"""Probe of the timing window's wake spin on a GPU: for each problem's eager and torch.compile
baselines, the host time to enqueue one call and the baseline's median and IQR timed with several
spin lengths, in interleaved rounds (drift between rounds shows as spread of the medians).

    python -m mkb_eval.spinprobe A03 A07 --cycles 100000,400000,1600000 --rounds 3 --reps 60 \\
        --out bench/h200/<date>/spinprobe.json
    python -m mkb_eval.spinprobe C02 F08 --solutions tirx ...   # the expert solutions of one DSL instead

With --solutions the targets are the expert kernels (problems/<F>/<id>_*/<dsl>/solution.py, built
in this process for the benchmark shape, no sandbox): how long a DSL's host path takes per call.

Question it answers: when the host needs longer to enqueue a call than the spin keeps the GPU busy,
the window opens on an idle GPU and the host's time is counted; a longer spin removes that (the
median falls and the IQR narrows), while a kernel that is really slower is unaffected.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import timing
from .bundle import Bundle
from .correctness import call_with_params
from .ncuprobe import load_solution
from .problem import InputGenerator, allocate, make_spec


def enqueue_us(fn: Callable[[], Any], n: int = 30) -> float:
    """Median host time of one call while the GPU is kept busy (launches never wait for a free queue slot)."""
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        torch.cuda._sleep(2_000_000)  # ~1 ms of GPU work ahead of the call
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(out)


def stats(times: list[float]) -> dict[str, float]:
    t = timing.summarize(times)
    med = t["median_us"]
    return {"median_us": med, "iqr_pct": 100.0 * t["iqr_us"] / med if med > 0 else 0.0, "min_us": min(times)}


def probe(bundle: Bundle, pid: str, cycles: list[int], rounds: int, reps: int) -> dict[str, Any]:
    problem = bundle.problem(pid)
    ref = problem.load_reference()
    bench = problem.benchmark_shape
    inputs = allocate(problem.inputs, bench, "cuda")
    InputGenerator(problem, 0).fill(inputs, bench, "probe")
    params = dict(problem.params)
    flush = timing.l2_flush_buffer()
    eager_name = problem.eager[0]
    comp_name = problem.compile_baseline or eager_name
    eager = getattr(ref, eager_name)
    compiled = torch.compile(getattr(ref, comp_name))
    fns = {f"eager:{eager_name}": lambda: call_with_params(eager, inputs, params),
           f"compile:{comp_name}": lambda: call_with_params(compiled, inputs, params)}
    return measure(pid, dict(bench.dims), fns, cycles, rounds, reps, flush)


def probe_solution(bundle: Bundle, pid: str, dsl: str, cycles: list[int], rounds: int,
                   reps: int) -> dict[str, Any]:
    """The expert solution of `dsl`, built for the benchmark shape and called on fresh buffers."""
    problem = bundle.problem(pid)
    bench = problem.benchmark_shape
    module = load_solution(problem.dir / dsl / "solution.py", f"mkb_probe_{pid}_{dsl}")
    run = module.build(make_spec(problem, bench))
    inputs = allocate(problem.inputs, bench, "cuda")
    outputs = allocate(problem.outputs, bench, "cuda")
    InputGenerator(problem, 0).fill(inputs, bench, "probe")
    args = [*inputs, *outputs]
    flush = timing.l2_flush_buffer()
    return measure(pid, dict(bench.dims), {f"{dsl}:solution": lambda: run(*args)}, cycles, rounds, reps, flush)


def measure(pid: str, dims: dict[str, Any], fns: dict[str, Callable[[], Any]], cycles: list[int], rounds: int,
            reps: int, flush: torch.Tensor) -> dict[str, Any]:
    out: dict[str, Any] = {"problem": pid, "shape": dims, "targets": {}}
    with torch.no_grad():
        for label, fn in fns.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            row: dict[str, Any] = {"enqueue_us": enqueue_us(fn), "by_cycles": {str(c): [] for c in cycles}}
            for _ in range(rounds):
                for c in cycles:
                    row["by_cycles"][str(c)].append(stats(timing.timed_reps(fn, reps, flush, spin_cycles=c)))
            out["targets"][label] = row
            meds = "  ".join(f"{c}: " + "/".join(f"{r['median_us']:.1f}" for r in row["by_cycles"][str(c)])
                             + f" (IQR {max(r['iqr_pct'] for r in row['by_cycles'][str(c)]):.1f}%)"
                             for c in cycles)
            print(f"{pid} {label:28s} enqueue {row['enqueue_us']:7.1f} us | {meds}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--cycles", default="100000,400000,1600000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--solutions", choices=["cute", "tirx"], help="probe this DSL's expert solutions instead")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("spinprobe: no CUDA device", file=sys.stderr)
        return 2
    cycles = [int(c) for c in args.cycles.split(",")]
    bundle = Bundle.from_mkb()
    results = []
    for pid in args.problems:
        try:
            if args.solutions:
                results.append(probe_solution(bundle, pid, args.solutions, cycles, args.rounds, args.reps))
            else:
                results.append(probe(bundle, pid, cycles, args.rounds, args.reps))
        except Exception as e:  # noqa: BLE001 - one problem's failure is reported, the rest still run
            print(f"{pid}: {type(e).__name__}: {e}", flush=True)
            results.append({"problem": pid, "error": f"{type(e).__name__}: {e}"})
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                            "cycles": cycles, "rounds": args.rounds, "reps": args.reps,
                                            "solutions": args.solutions,
                                            "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""How the L2 flush before each timed repetition moves the measured time: expert solutions and
torch kernels of the same byte count, timed by timing.timed_reps under each flush mode
(timing.FLUSH_MODES) in interleaved rounds, in one process.

    python -m mkb_eval.flushprobe F08 C10 --dsl cute --rounds 3 --reps 30 \\
        --out bench/h200/<date>/flushprobe.json        # writes .json and prints a table

As in the judge, every repetition first rewrites the inputs (InputGenerator.fill_fast), then
flushes, syncs, spins and times one call. References per problem, at its minimal byte count B
(problem.toml `bytes`, benchmark shape): `torch-read` (a read-only sum over B bytes) and
`torch-copy` (a device copy of B/2 bytes, B moved).

Question it answers: a zeroing flush leaves L2 full of dirty lines that the timed call writes back
to DRAM inside its window; reading a second buffer after the zeroing moves that write-back out.
The difference between the modes is the write-back's cost per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from . import timing
from .bundle import Bundle
from .ncuprobe import load_solution
from .problem import InputGenerator, allocate, make_spec


def targets(bundle: Bundle, pid: str, dsl: str) -> tuple[dict[str, Callable[[], Any]], Callable[[int], None], int]:
    """The calls to time for one problem, the per-rep input rewrite and the byte count."""
    problem = bundle.problem(pid)
    bench = problem.benchmark_shape
    gen = InputGenerator(problem, 0)
    inputs = allocate(problem.inputs, bench, "cuda")
    outputs = allocate(problem.outputs, bench, "cuda")
    gen.fill(inputs, bench, "flushprobe")
    module = load_solution(problem.dir / dsl / "solution.py", f"mkb_flushprobe_{pid}_{dsl}")
    run = module.build(make_spec(problem, bench))
    args = [*inputs, *outputs]
    nbytes = problem.min_bytes(bench)
    rd = torch.randn(nbytes // 4, dtype=torch.float32, device="cuda")
    src = torch.randint(0, 255, (nbytes // 2,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)

    def before(i: int) -> None:
        gen.fill_fast(inputs, bench, i)

    fns = {f"{dsl}:solution": lambda: run(*args), "torch-read": lambda: rd.sum(), "torch-copy": lambda: dst.copy_(src)}
    return fns, before, nbytes


def probe(bundle: Bundle, pid: str, dsl: str, rounds: int, reps: int) -> dict[str, Any]:
    fns, before, nbytes = targets(bundle, pid, dsl)
    flush = timing.l2_flush_buffer()
    out: dict[str, Any] = {"problem": pid, "bytes": nbytes, "targets": {}}
    with torch.no_grad():
        for label, fn in fns.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            meds: dict[str, list[float]] = {m: [] for m in timing.FLUSH_MODES}
            for _ in range(rounds):
                for mode in timing.FLUSH_MODES:
                    t = timing.timed_reps(fn, reps, flush, before=before, flush_mode=mode)
                    meds[mode].append(statistics.median(t))
            row = {m: {"medians_us": [round(v, 2) for v in meds[m]], "median_us": round(statistics.median(meds[m]), 2)}
                   for m in timing.FLUSH_MODES}
            out["targets"][label] = row
            w = row["write"]["median_us"]
            cells = "  ".join(f"{m} {row[m]['median_us']:7.1f} ({row[m]['median_us'] / w:.3f})" for m in timing.FLUSH_MODES)
            print(f"{pid} {label:16s} {cells}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+")
    ap.add_argument("--dsl", choices=["cute", "tirx"], default="cute")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.reps < 1:
        ap.error("--rounds and --reps must be at least 1")
    if not torch.cuda.is_available():
        print("flushprobe: no CUDA device", file=sys.stderr)
        return 2
    bundle = Bundle.from_mkb()
    results = []
    for pid in args.problems:
        try:
            results.append(probe(bundle, pid, args.dsl, args.rounds, args.reps))
        except Exception as e:  # noqa: BLE001 - one problem's failure is reported, the rest still run
            print(f"{pid}: {type(e).__name__}: {e}", flush=True)
            results.append({"problem": pid, "error": f"{type(e).__name__}: {e}"})
        if args.out:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                                            "modes": list(timing.FLUSH_MODES), "rounds": args.rounds,
                                            "reps": args.reps, "dsl": args.dsl, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What torch's own copy reaches at each problem's size: the practical ceiling under the roofline
ideal for kernels that read and write about as many bytes as they move in all.

    python -m mkb_eval.copyceiling A B --solutions bench/h200/<date>/solutions-AB.json \\
        --out bench/h200/<date>/copyceiling-AB.json      # writes .json and .md

The judge's ideal divides a problem's minimal bytes (problem.toml `bytes`) by the best of its
measured ceilings, which on an H200 is the write-only fill; a kernel that reads half its bytes
and writes the other half cannot reach it. For every problem (ids or family letters) this times,
at the benchmark shape's byte count B and in one process: a device copy of B/2 bytes (B moved),
a read-only sum over B bytes and a write-only fill of B bytes (medians over `reps` CUDA-event
timings, random data). `copy_pct_of_ideal` is the score a kernel moving B bytes at torch's copy
rate would get. With --solutions (a `mkb solutions` evidence JSON) each problem also gets each
expert's runtime and torch.compile's (timed by the same judge) as a fraction of the copy time. The byte split of the problem's own tensors
(inputs read, outputs written, at their full sizes) is listed so a reader can tell which
ceiling applies: copy for a ~1:1 split, the read-only one for reductions.

Every call is timed as the judge times a candidate (timing.timed_reps: the judge's L2 flush, a
device sync and the wake spin before each window), so the copy is held to the same clock as the
experts and torch.compile beside it.

Per family, `family_bounds` puts the geomean speed-up over torch.compile that the experts reach
beside the one a kernel would reach if it ran, on every problem, at the best time measured for
that problem's bytes (the least of torch's copy, torch.compile and the experts): the most a
family's geomean over torch.compile could be without beating every kernel measured so far.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import torch

from . import timing
from .bundle import Bundle
from .evidence import expert_times
from .problem import Problem


def select(ids: Iterable[str], wanted: Iterable[str]) -> list[str]:
    """The ids among `ids` named by `wanted` (ids such as B01, or family letters such as B), in
    registry order; an entry that names nothing is an error."""
    ids = list(ids)
    out: list[str] = []
    for w in wanted:
        hit = [i for i in ids if i.upper() == w.upper() or (len(w) == 1 and i.upper().startswith(w.upper()))]
        if not hit:
            raise SystemExit(f"copyceiling: no problem or family {w!r} (known: {', '.join(ids)})")
        out += [i for i in hit if i not in out]
    return sorted(out, key=ids.index)


def tensor_split(problem: Problem) -> tuple[int, int]:
    """(bytes of the inputs, bytes of the outputs) at the benchmark shape, at their full sizes."""
    shape = problem.benchmark_shape

    def nbytes(decls: Iterable[Any]) -> int:
        total = 0
        for d in decls:
            n = 1
            for x in d.resolve(shape):
                n *= x
            total += n * torch.empty((), dtype=d.torch_dtype).element_size()
        return total

    return nbytes(problem.inputs), nbytes(problem.outputs)


def median_us(fn: Callable[[], Any], reps: int, flush: torch.Tensor) -> float:
    """Median of `reps` calls timed as the judge times a candidate (timing.timed_reps: L2 flush,
    sync, wake spin, event window), after two warm-up calls."""
    fn()
    fn()
    return statistics.median(timing.timed_reps(fn, reps, flush))


def measure(nbytes: int, reps: int, flush: torch.Tensor) -> dict[str, float]:
    """copy (nbytes / 2 read + nbytes / 2 written), read-only and write-only times of nbytes, us."""
    words = max(nbytes // 4, 2)
    a = torch.empty(words, dtype=torch.float32, device="cuda").uniform_(-1.0, 1.0)
    half_src = a[: words // 2]
    half_dst = torch.empty_like(half_src)
    r = {"copy_us": median_us(lambda: half_dst.copy_(half_src), reps, flush),
         "read_us": median_us(lambda: a.sum(), reps, flush),
         "write_us": median_us(lambda: a.fill_(0.5), reps, flush)}
    return r


def row(pid: str, nbytes: int, split: tuple[int, int], bw: float, t: Mapping[str, float],
        experts: Mapping[tuple[str, str], float]) -> dict[str, Any]:
    """One problem's line: the ideal at the judge's bandwidth, the three measured times, the score
    a kernel at the copy rate would get, and each expert's (and torch.compile's) runtime over the
    copy time."""
    ideal = nbytes / bw * 1e6
    r: dict[str, Any] = {"problem": pid, "bytes": nbytes, "inputs_bytes": split[0], "outputs_bytes": split[1],
                         "ideal_us": ideal, **t, "copy_pct_of_ideal": 100.0 * ideal / t["copy_us"]}
    for dsl in ("cute", "tirx", "compile"):
        med = experts.get((pid, dsl))
        if med is not None:
            r[f"{dsl}_us"] = med
            r[f"{dsl}_pct_of_ideal"] = 100.0 * ideal / med
            r[f"{dsl}_pct_of_copy"] = 100.0 * t["copy_us"] / med
    return r


# The expert solutions' per-family target for their geomean speed-up over torch.compile.
TARGET_OVER_COMPILE = 1.1


def family_bounds(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per family letter, over its problems with a torch.compile time: the geomean speed-up over
    torch.compile of each DSL's experts, and `bound`, the geomean of torch.compile's time over the
    best time measured for the problem (the least of the copy, torch.compile and the experts).
    A family whose bound is under a target cannot reach it unless some kernel beats every one
    measured; `needed_over_best` is how much faster than that best time, in geomean, the target
    asks for (below 1: already within reach)."""
    fams: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        if "compile_us" in r:
            fams.setdefault(str(r["problem"])[0], []).append(r)
    out = []
    for fam, rs in fams.items():
        best = [min(r[k] for k in ("copy_us", "compile_us", "cute_us", "tirx_us") if k in r) for r in rs]
        b: dict[str, Any] = {"family": fam, "problems": len(rs),
                             "bound": statistics.geometric_mean([r["compile_us"] / t for r, t in zip(rs, best, strict=True)])}
        for dsl in ("cute", "tirx"):
            if all(f"{dsl}_us" in r for r in rs):
                b[dsl] = statistics.geometric_mean([r["compile_us"] / r[f"{dsl}_us"] for r in rs])
        b["needed_over_best"] = TARGET_OVER_COMPILE / b["bound"]
        out.append(b)
    return out



def markdown(rows: list[dict[str, Any]], head: Mapping[str, Any]) -> str:
    lines = [f"# copy ceiling at each problem's size\n\n- command: `{head['command']}`",
             f"- GPU: {head['gpu']}; torch {head['torch']}",
             f"- judge bandwidth (best measured ceiling): {head['bandwidth_bytes_per_s'] / 1e12:.2f} TB/s; "
             f"medians of {head['reps']} event-timed calls\n",
             "| problem | MB | in / out MB | ideal us | copy us | read us | write us | copy % of ideal "
             "| cute us (% of copy) | tirx us (% of copy) | torch.compile us (% of copy) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ex = ["-" if f"{d}_us" not in r else f"{r[f'{d}_us']:.1f} ({r[f'{d}_pct_of_copy']:.1f})" for d in ("cute", "tirx", "compile")]
        lines.append(f"| {r['problem']} | {r['bytes'] / 1e6:.1f} | {r['inputs_bytes'] / 1e6:.1f} / "
                     f"{r['outputs_bytes'] / 1e6:.1f} | {r['ideal_us']:.1f} | {r['copy_us']:.1f} | {r['read_us']:.1f} "
                     f"| {r['write_us']:.1f} | {r['copy_pct_of_ideal']:.1f} | {ex[0]} | {ex[1]} | {ex[2]} |")
    bounds = family_bounds(rows)
    if bounds:
        lines += ["", "Geomean speed-up over torch.compile: the experts', and a kernel's at the best time measured "
                  f"for each problem (least of copy, torch.compile, experts); `needed` is how much faster than "
                  f"that best time a {TARGET_OVER_COMPILE}x target asks for, in geomean.", "",
                  "| family | problems | cute | tirx | at the best measured time | needed |", "|---|---|---|---|---|---|"]
        for b in bounds:
            ex = [f"{b[d]:.3f}" if d in b else "-" for d in ("cute", "tirx")]
            lines.append(f"| {b['family']} | {b['problems']} | {ex[0]} | {ex[1]} | {b['bound']:.3f} "
                         f"| {b['needed_over_best']:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("problems", nargs="+", help="problem ids or family letters")
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--solutions", type=Path, action="append", default=[], help="mkb solutions evidence JSON")
    ap.add_argument("--out", type=Path, required=True, help="output .json (a .md is written beside it)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("copyceiling: needs a CUDA GPU", file=sys.stderr)
        return 2
    bundle = Bundle.from_mkb()
    pids = select([str(s["id"]) for s in bundle.problems], args.problems)
    experts: dict[tuple[str, str], float] = {}
    for p in args.solutions:
        experts.update(expert_times(p))
    bw = float(timing.measure_ceilings()["bandwidth_bytes_per_s"])
    flush = timing.l2_flush_buffer()
    rows = []
    for pid in pids:
        problem = bundle.problem(pid)
        nbytes = problem.min_bytes(problem.benchmark_shape)
        rows.append(row(pid, nbytes, tensor_split(problem), bw, measure(nbytes, args.reps, flush), experts))
        torch.cuda.empty_cache()
        print(f"{pid}: ideal {rows[-1]['ideal_us']:.1f} us, copy {rows[-1]['copy_us']:.1f} us "
              f"({rows[-1]['copy_pct_of_ideal']:.1f}% of ideal)", flush=True)
    head = {"command": "python -m mkb_eval.copyceiling " + " ".join(sys.argv[1:] if argv is None else argv),
            "gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "bandwidth_bytes_per_s": bw,
            "reps": args.reps}
    args.out.write_text(json.dumps({**head, "rows": rows, "families": family_bounds(rows)}, indent=1))
    args.out.with_suffix(".md").write_text(markdown(rows, head))
    return 0


if __name__ == "__main__":
    sys.exit(main())

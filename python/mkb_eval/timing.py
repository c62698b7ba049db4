"""Timing, shared by the runner (candidates) and the judge (baselines, floor, GPU ceilings): an L2
flush outside the window, a device sync, CUDA events around one call; statistics (median, IQR,
the distribution-free confidence interval of the median that stops adaptive repetitions), the
wall-clock cross-check and the physical-plausibility bound. The harness's references to the timer
functions are taken when this module is imported, before any candidate code runs, and
`watched_identities` lets the judge see whether anyone replaced them afterwards."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

# Captured at import (the runner imports this module before the candidate).
_Event = torch.cuda.Event
_ev_record = torch.cuda.Event.record
_ev_elapsed = torch.cuda.Event.elapsed_time
_ev_sync = torch.cuda.Event.synchronize
_sync = torch.cuda.synchronize
_sleep = torch.cuda._sleep
_perf = time.perf_counter
_zero = torch.Tensor.zero_
_amax = torch.amax

TIMER = "cuda_event"
# Bump when the timing method changes in a way the source hash below would not show (it is part
# of the baseline cache key together with a hash of this file and of baselines.py).
TIMING_VERSION = 5
# The GPU is kept busy for WAKE_CYCLES clock cycles (a spin kernel, about 50 us at 1.98 GHz) between
# the device sync and the start event, so that no timed call starts on a GPU that has just gone
# idle. Measured on the H200 (bench/h200/2026-12-01c/): after the ~1 ms idle gap of the judge's
# per-repetition exchange, calls ran 8-12% slower in stretches of tens of repetitions whose mix
# changed from one evaluation to the next (medians' CV 1.5-3.7% over repeated evaluations of one
# expert, NVML showing the maximum SM clock throughout); with the spin the CV fell to 0.3-0.7%.
WAKE_CYCLES = 100_000
# A baseline's spin must also outlast the host's work of enqueuing the call: when the host takes
# longer to reach the kernel launch than the spin keeps the GPU busy, the window opens on an idle
# GPU and host time is counted. Measured on the H200 (bench/h200/2026-12-01h/spinprobe.txt):
# torch.compile baselines need 49-175 us of host time per call; with the fixed 100k-cycle spin
# their medians were up to 56% high and their IQR 4-12%; with a spin longer than the enqueue time
# the IQR is 0.2-1.0% and the medians stable across rounds. So the judge sizes the spin of each
# baseline from its measured enqueue time (wake_cycles: twice the median plus 25 us, at
# SPIN_CYCLES_PER_US, the SM clock at its maximum, so a lower clock only lengthens the spin), never
# under WAKE_CYCLES, capped at MAX_WAKE_CYCLES. Candidates get the judge's constant
# CANDIDATE_WAKE_US instead: a spin sized from their own warm-up would let them lengthen the time
# before the window, in which side-stream work escapes it (docs/evaluator.md "Timing").
SPIN_CYCLES_PER_US = 1980
MAX_WAKE_CYCLES = 20_000_000
# A candidate's spin, chosen by the judge (never from anything the candidate controls), in us.
# Measured on the H200 (bench/h200/2026-12-02/README.md): in the sandboxed runner, each timed
# repetition follows the judge's exchange and the host reaches the end of a call 60-115 us
# (median; up to ~300 us) after launching the spin, against 9-25 us for the same kernels called
# back to back in one process: the host path runs cold after every exchange. A 50 us spin let
# that host time into the window in the slow repetitions (TIRx F03: median 86.5 against 79.2 us,
# IQR 8.3 us); CANDIDATE_WAKE_US covers it. $MKB_WAKE_US overrides it for experiments (recorded
# in every report's env.timing.options).
CANDIDATE_WAKE_US = 200.0
# The L2 flush before every timed repetition (flush_l2). Zeroing a buffer larger than L2 evicts
# whatever a call could reuse, but leaves L2 full of the buffer's dirty lines, and the timed call
# then paid for writing them back to DRAM inside its window. Measured on the H200
# (bench/h200/2026-12-02f/flushprobe.txt, one process, interleaved rounds): after the zeroing
# alone, the F08 and C10 experts and torch's read-only sum of F08's bytes took 73.3, 71.7 and
# 71.8 us; with the zeroing followed by a read of a second buffer of twice the L2 size, 65.6,
# 63.9 and 64.1 us, matching the kernels' own durations under Nsight Compute, whose cache control
# leaves L2 clean (65.0-65.7 us for F08, 63.0 us for C10: ncu-f08.csv, ncu-c10.csv there). The
# write-back cost 4-8 us per call whatever the kernel (1-3% of a 230 us call). "write+read" is the
# judge's flush: the write-back happens before the window and every timed call (candidates and
# baselines alike) starts on a cold, clean L2.
FLUSH_MODES = ("write", "read", "write+read")
FLUSH_MODE = "write+read"


def clamp_spin_cycles(cycles: float) -> int:
    """A spin length within [WAKE_CYCLES, MAX_WAKE_CYCLES]."""
    return int(min(MAX_WAKE_CYCLES, max(WAKE_CYCLES, cycles)))


def candidate_spin_cycles(wake_us: float) -> int:
    """The candidate's spin for `wake_us` microseconds at the maximum SM clock, within bounds."""
    if not math.isfinite(wake_us) or wake_us <= 0:
        return WAKE_CYCLES
    return clamp_spin_cycles(wake_us * SPIN_CYCLES_PER_US)
# The plausibility guard's allowance for clock and measurement variation: a median under
# PLAUSIBLE_FRACTION x the roofline ideal is physically impossible on this GPU.
PLAUSIBLE_FRACTION = 0.95


def watched_identities() -> dict[str, int]:
    """ids of what the harness's timing relies on, looked up afresh."""
    ev = torch.cuda.Event
    me = sys.modules[__name__]
    return {
        "torch.cuda.Event": id(ev),
        "torch.cuda.Event.record": id(getattr(ev, "record", None)),
        "torch.cuda.Event.elapsed_time": id(getattr(ev, "elapsed_time", None)),
        "torch.cuda.Event.synchronize": id(getattr(ev, "synchronize", None)),
        "torch.cuda.Event.__init__": id(ev.__dict__.get("__init__")),
        "torch.cuda.Event.__new__": id(ev.__dict__.get("__new__")),
        "torch.cuda.synchronize": id(torch.cuda.synchronize),
        "torch.cuda._sleep": id(torch.cuda._sleep),
        "time.perf_counter": id(time.perf_counter),
        "time.perf_counter_ns": id(time.perf_counter_ns),
        "mkb_eval.timing.timed_reps": id(me.timed_reps),
        "mkb_eval.timing.wall_per_call_us": id(me.wall_per_call_us),
        "mkb_eval.timing._Event": id(me._Event),
        "mkb_eval.timing._ev_elapsed": id(me._ev_elapsed),
        "mkb_eval.timing._sync": id(me._sync),
        "mkb_eval.timing._sleep": id(me._sleep),
        "mkb_eval.timing._perf": id(me._perf),
        "mkb_eval.timing._zero": id(me._zero),
        "mkb_eval.timing._amax": id(me._amax),
        "mkb_eval.timing.flush_l2": id(me.flush_l2),
    }


def quantile(sorted_vals: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of already sorted values."""
    if not sorted_vals:
        return math.nan
    pos = (len(sorted_vals) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (pos - lo)


def summarize(times_us: Sequence[float], wall_us_per_call: float | None = None) -> dict[str, Any]:
    """The protocol's Timing object from raw per-rep times."""
    s = sorted(float(t) for t in times_us)
    return {
        "median_us": quantile(s, 0.5),
        "iqr_us": quantile(s, 0.75) - quantile(s, 0.25),
        "reps": len(s),
        "timer": TIMER,
        "wall_us_per_call": wall_us_per_call,
    }


def median_ci(times_us: Sequence[float], z: float = 1.959964) -> tuple[float, float, float]:
    """(median, lower, upper): the distribution-free ~95% confidence interval of the median from
    order statistics (ranks n/2 -+ z*sqrt(n)/2, the normal approximation of the binomial)."""
    s = sorted(float(t) for t in times_us)
    n = len(s)
    if n == 0:
        return math.nan, math.nan, math.nan
    half = z * math.sqrt(n) / 2.0
    lo = max(0, math.floor(n / 2.0 - half) - 1)
    hi = min(n - 1, math.ceil(n / 2.0 + half) - 1)
    return quantile(s, 0.5), s[lo], s[hi]


def ci_converged(times_us: Sequence[float], rel: float) -> bool:
    """True when the median's 95% CI half-width is under `rel` x the median."""
    med, lo, hi = median_ci(times_us)
    return len(times_us) >= 2 and med > 0 and (hi - lo) / 2.0 < rel * med


def ideal_us(bytes_moved: float, flops: float, bandwidth: float, flop_rate: float) -> float:
    """The roofline time of one call: max(bytes / bandwidth, flops / peak), in microseconds."""
    mem = bytes_moved / bandwidth * 1e6 if bandwidth > 0 else 0.0
    comp = flops / flop_rate * 1e6 if flops and flop_rate > 0 else 0.0
    return max(mem, comp)


def wall_mismatch(median_us: float, wall_us_per_call: float) -> bool:
    """Work escapes the events when the synced wall time per call exceeds 1.5x the median + 30 us."""
    return wall_us_per_call > 1.5 * median_us + 30.0


def l2_flush_buffer(device: int | None = None) -> torch.Tensor:
    """The L2 flush's buffer: two halves of twice the L2 size each (flush_l2 writes the first and
    reads the second)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024)
    return torch.empty(4 * l2, dtype=torch.uint8, device="cuda")


def flush_l2(buf: torch.Tensor, mode: str | None = None) -> None:
    """Empty the L2 of everything a timed call could reuse, and leave it clean (FLUSH_MODE).
    "write": zero the first half (every line of L2 now holds a dirty line of it); "read": read
    the second half (clean lines); "write+read": both, in that order."""
    mode = FLUSH_MODE if mode is None else mode
    if mode not in FLUSH_MODES:
        raise ValueError(f"flush mode {mode!r}: expected one of {', '.join(FLUSH_MODES)}")
    half = buf.numel() // 2
    if mode in ("write", "write+read"):
        _zero(buf[:half])
    if mode in ("read", "write+read"):
        _amax(buf[half : 2 * half].view(torch.int32))


def warm_up(fn: Callable[[], Any], calls: int) -> float:
    """`calls` (at least 3) untimed calls, each after a device sync; the median host time one call
    takes to return (its enqueue time, microseconds)."""
    host = []
    for _ in range(max(int(calls), 3)):
        _sync()
        t0 = _perf()
        fn()
        host.append((_perf() - t0) * 1e6)
    _sync()
    return quantile(sorted(host), 0.5)


def wake_cycles(enqueue_us: float | None) -> int:
    """The spin before a window: long enough to cover twice the host's enqueue time plus 25 us."""
    if enqueue_us is None or not math.isfinite(enqueue_us) or enqueue_us <= 0:
        return WAKE_CYCLES
    return int(min(MAX_WAKE_CYCLES, max(WAKE_CYCLES, (2.0 * enqueue_us + 25.0) * SPIN_CYCLES_PER_US)))


def timed_reps(fn: Callable[[], Any], reps: int, flush: torch.Tensor | None,
               before: Callable[[int], None] | None = None, profile_at: int | None = None,
               profile: Callable[[], None] | None = None, spin_cycles: int | None = None,
               host_us: list[float] | None = None, flush_mode: str | None = None) -> list[float]:
    """`reps` repetitions of: [before(i)], flush L2 (flush_l2, `flush_mode`), device sync, spin
    (`spin_cycles`, default WAKE_CYCLES), start event, fn(), end event, device sync; microseconds.
    `before(i)` is where the judge writes rep i's fresh inputs and poisoned outputs (the runner
    waits for its "go" there).
    Rep `profile_at` calls `profile()` (fn under the recorders) instead of the timed window; it
    yields no time. `host_us`, if given, receives each timed rep's host time from the spin's launch
    to the end event's record (when it exceeds the spin, the window opened on an idle GPU)."""
    spin = WAKE_CYCLES if spin_cycles is None else int(spin_cycles)
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    out: list[float] = []
    for i in range(reps):
        if before is not None:
            before(i)
        if flush is not None:
            flush_l2(flush, flush_mode)
        _sync()
        if profile is not None and i == profile_at:
            profile()
            _sync()
            continue
        t0 = _perf()
        _sleep(spin)  # the GPU is busy until the call's first launch is enqueued (wake_cycles)
        _ev_record(start)
        fn()
        _ev_record(end)
        if host_us is not None:
            host_us.append((_perf() - t0) * 1e6)
        _ev_sync(end)
        out.append(float(_ev_elapsed(start, end)) * 1000.0)
        _sync()  # the device is idle before the judge reads the outputs
    return out


def host_summary(host_us: Sequence[float], spin_cycles: int = WAKE_CYCLES) -> dict[str, Any]:
    """The host side of the timed reps: median and p90 of the time from the spin's launch to the end
    event's record, and how many reps took longer than the spin keeps the GPU busy (the spin's
    length at the maximum SM clock): in those the window opened on an idle GPU and host time was
    counted."""
    srt = sorted(host_us)
    spin_us = spin_cycles / SPIN_CYCLES_PER_US
    return {"median_us": round(quantile(srt, 0.5), 2) if srt else None,
            "p90_us": round(quantile(srt, 0.9), 2) if srt else None,
            "max_us": round(srt[-1], 2) if srt else None, "spin_us": round(spin_us, 2),
            "reps_over_spin": sum(1 for h in srt if h > spin_us), "reps": len(srt)}


def wall_per_call_us(fn: Callable[[], Any], n: int, batches: int = 3) -> float:
    """Host wall time per call over `n` back-to-back calls closed by a device-wide sync; the
    least of `batches` such batches. Work that escapes the timed stream shows in every batch; a
    one-off host stall (a GC pause, a busy CPU) in one batch does not fail an honest kernel: on
    the H200 one batch of 20 calls of a 201 us kernel once took 369 us per call
    (bench/h200/2026-12-01h, F06 TIRx), while the other 27 solutions of that run stayed within
    0.9-1.14x of their medians."""
    best = math.inf
    for _ in range(max(int(batches), 1)):
        _sync()
        t0 = _perf()
        for _ in range(n):
            fn()
        _sync()
        best = min(best, (_perf() - t0) / max(n, 1) * 1e6)
    return best


def event_times_us(fn: Callable[[], Any], reps: int) -> list[float]:
    """`reps` event-timed calls (us), each behind the wake spin, after two warm-up calls."""
    fn()
    fn()
    times = []
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    for _ in range(reps):
        _sync()
        _sleep(WAKE_CYCLES)
        _ev_record(start)
        fn()
        _ev_record(end)
        _ev_sync(end)
        times.append(float(_ev_elapsed(start, end)) * 1000.0)
    return times


def best_us(fn: Callable[[], Any], reps: int) -> float:
    """The fastest of `reps` event-timed calls after two warm-up calls (ceilings: the best rate)."""
    return min(event_times_us(fn, reps))


def _bandwidth_us(n: int, reps: int) -> tuple[float, float, float]:
    a = torch.empty(n // 4, dtype=torch.float32, device="cuda").uniform_()
    b = torch.empty_like(a)
    return (best_us(lambda: b.copy_(a), reps), best_us(lambda: a.sum(), reps), best_us(lambda: b.fill_(1.0), reps))


def _gemm_us(n: int, reps: int) -> float:
    m = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(n, n, dtype=torch.bfloat16, device="cuda")
    o = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
    return best_us(lambda: torch.mm(m, w, out=o), reps)


def _fp8_gemm_us(n: int, reps: int) -> float | None:
    """The e4m3 GEMM (per-tensor scales, bf16 out) through torch._scaled_mm (cuBLASLt); None where
    this torch or GPU has none."""
    try:
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), dtype=torch.float32, device="cuda")
        o = torch.empty(n, n, dtype=torch.bfloat16, device="cuda")
        return best_us(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=o), reps)
    except (RuntimeError, TypeError, AttributeError):
        return None


def flop_rate(ceilings: dict[str, Any], flops_format: str) -> float:
    """The peak FLOP rate of a problem's format from the ceilings: the measured fp8 rate for
    "fp8" (twice the bf16 rate where it was not measured, as Hopper's dense peaks are), else bf16."""
    bf16 = float(ceilings["bf16_flops_per_s"])
    if flops_format == "fp8":
        fp8 = ceilings.get("fp8_flops_per_s")
        return float(fp8) if isinstance(fp8, int | float) and fp8 > 0 else 2.0 * bf16
    return bf16


def measure_ceilings(reps: int = 10, gib: int = 1, gemm_n: int = 8192) -> dict[str, Any]:
    """This GPU's ceilings: device-memory bandwidth (copy counted as read + write, read-only
    reduction, write-only fill; the highest is used), the bf16 dense GEMM rate through torch
    (cuBLAS) at gemm_n^3 and the e4m3 one (torch._scaled_mm). Best of `reps` each, so the bound
    they give is conservative."""
    n = gib << 30
    copy_us, read_us, write_us = _bandwidth_us(n, reps)
    gemm_us = _gemm_us(gemm_n, reps)
    fp8_us = _fp8_gemm_us(gemm_n, reps)
    torch.cuda.empty_cache()
    bw = {"copy": 2 * n / (copy_us * 1e-6), "read": n / (read_us * 1e-6), "write": n / (write_us * 1e-6)}
    return {"bandwidth_bytes_per_s": max(bw.values()), "bandwidth_by_kind": bw,
            "bf16_flops_per_s": 2.0 * gemm_n ** 3 / (gemm_us * 1e-6),
            "fp8_flops_per_s": 2.0 * gemm_n ** 3 / (fp8_us * 1e-6) if fp8_us else None,
            "method": f"best of {reps}: copy/sum/fill of {gib} GiB, torch.mm bf16 and torch._scaled_mm e4m3 {gemm_n}^3"}

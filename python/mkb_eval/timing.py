"""Timing, shared by the runner (candidates) and the judge (baselines, floor): an L2 flush outside
the window, a device sync, CUDA events around one call; statistics (median, IQR) and the
wall-clock cross-check. The harness's references to the timer functions are taken when this
module is imported, before any candidate code runs, and `watched_identities` lets the judge see
whether anyone replaced them afterwards."""

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
_perf = time.perf_counter

TIMER = "cuda_event"


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
        "mkb_eval.timing._perf": id(me._perf),
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


def wall_mismatch(median_us: float, wall_us_per_call: float) -> bool:
    """Work escapes the events when the synced wall time per call exceeds 1.5x the median + 30 us."""
    return wall_us_per_call > 1.5 * median_us + 30.0


def l2_flush_buffer(device: int | None = None) -> torch.Tensor:
    """A buffer of twice the L2 size; writing it evicts whatever the last call left in L2."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    l2 = int(getattr(props, "L2_cache_size", 0) or 64 * 1024 * 1024)
    return torch.empty(2 * l2, dtype=torch.uint8, device="cuda")


def timed_reps(fn: Callable[[], Any], reps: int, flush: torch.Tensor | None,
               before: Callable[[int], None] | None = None, after: Callable[[int, float], None] | None = None,
               extra: Callable[[int], None] | None = None) -> list[float]:
    """`reps` repetitions of: flush L2, device sync, start event, fn(), end event; microseconds.
    `before(i)` runs before rep i's flush (checkpoints refill the buffers there), `after(i, t)`
    after rep i completed, `extra(i)` after rep i for untimed work (a profiled call)."""
    start = _Event(enable_timing=True)
    end = _Event(enable_timing=True)
    out: list[float] = []
    for i in range(reps):
        if before is not None:
            before(i)
        if flush is not None:
            flush.zero_()
        _sync()
        _ev_record(start)
        fn()
        _ev_record(end)
        _ev_sync(end)
        t = float(_ev_elapsed(start, end)) * 1000.0
        out.append(t)
        if after is not None:
            _sync()
            after(i, t)
        if extra is not None:
            extra(i)
    return out


def wall_per_call_us(fn: Callable[[], Any], n: int) -> float:
    """Host wall time per call over `n` back-to-back calls closed by a device-wide sync."""
    _sync()
    t0 = _perf()
    for _ in range(n):
        fn()
    _sync()
    return (_perf() - t0) / max(n, 1) * 1e6

"""Baselines of an evaluation (docs/evaluator.md "Timing" and "The disk cache"): the eager
formulations, torch.compile and the floor timed in the judge, the GPU ceilings and the roofline
ideal, kept in the disk cache (mkb_eval.baselines). A mixin of GroupEvaluation."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from .correctness import call_with_params
from .problem import (
    ShapeSet,
    allocate,
)
from .timing import flop_rate, ideal_us
from .timing import summarize as summarize_times


class BaselinePhase:
    def bench_bytes(self) -> int:
        bench = self.problem.benchmark_shape
        return sum(math.prod(t.resolve(bench)) * t.torch_dtype.itemsize
                   for t in (*self.problem.inputs, *self.problem.outputs))

    # -- baselines, floor, ceilings (disk cache) ------------------------------------------------
    def cache_env(self) -> dict[str, Any]:
        from . import baselines as bl
        from .gpuinfo import driver_version

        return bl.env_key(self.session.gpu_name, _driver(driver_version), self.session.versions)

    def ensure_baselines(self, bench: ShapeSet) -> None:
        """The baselines and the floor of this problem's benchmark shape and this GPU's ceilings:
        from the session's memory, else the disk cache, else measured (and stored in both)."""
        from . import baselines as bl
        from . import timing

        cache = bl.DiskCache()
        env = self.cache_env()
        self.ceilings = _CEILINGS.get(repr(sorted(env.items())))
        if self.ceilings is None:
            self.ceilings = cache.get("ceilings", env)
            if self.ceilings is not None and not bl.valid_ceilings(self.ceilings):
                cache.warn("ignoring a malformed ceilings entry")
                self.ceilings = None
            if self.ceilings is None:
                self.ceilings = timing.measure_ceilings()
                cache.put("ceilings", env, self.ceilings)
            _CEILINGS[repr(sorted(env.items()))] = self.ceilings
        key = bl.baseline_key(env, self.problem.content_hash(), bench.name, dict(bench.dims))
        mem_key = (self.problem.content_hash(), bench.name)
        entry = self.session.baseline_cache.get(mem_key)
        if entry is None:
            entry = cache.get("baselines", key)
            if entry is not None and not bl.valid_baseline_entry(entry):
                cache.warn("ignoring a malformed baselines entry")
                entry = None
        with_eager = entry is None
        with_compile = self.mode == "full" and (entry is None or not entry.get("compile_tried"))
        if with_eager or with_compile:
            entry = entry or {"eager": {}, "floor": [], "compile": None, "compile_tried": False, "compile_error": None}
            self.measure_baselines(bench, entry, with_eager, with_compile)
            cache.put("baselines", key, entry)
        self.session.baseline_cache[mem_key] = entry
        self.cache_notes = list(cache.warnings)
        self.baseline_set = baseline_summary(entry)

    def measure_baselines(self, bench: ShapeSet, entry: dict[str, Any], with_eager: bool, with_compile: bool) -> None:
        import torch

        if self.reference_mod is None:
            self.reference_mod = self.problem.load_reference()
        inputs = allocate(self.problem.inputs, bench, self.session.device)
        self.gen.fill(inputs, bench, "baseline")
        params = dict(self.problem.params)
        flush = self.session.flush_buffer()
        with torch.no_grad():
            if with_eager:
                for name in self.problem.eager:
                    fn = getattr(self.reference_mod, name)
                    entry["eager"][name] = self.time_baseline(lambda fn=fn: call_with_params(fn, inputs, params), flush)
                entry["floor"] = self.time_baseline(lambda: torch.cuda._sleep(0), flush)
            if with_compile:
                name = self.problem.compile_baseline or self.problem.eager[0]
                try:
                    compiled = torch.compile(getattr(self.reference_mod, name))
                    times = self.time_baseline(lambda: call_with_params(compiled, inputs, params), flush)
                    entry["compile"] = [f"torch.compile({name})", times]
                except Exception as e:  # noqa: BLE001 - a missing baseline is reported, not fatal
                    entry["compile_error"] = f"{type(e).__name__}: {e}"
                entry["compile_tried"] = True

    def time_baseline(self, fn: Callable[[], Any], flush: Any) -> list[float]:
        """A judge-side callable timed like candidates (flush, sync, events), with the same
        adaptive stop rule."""
        from . import timing

        _, cap, per, _ = self.rep_limits()
        spin = timing.wake_cycles(timing.warm_up(fn, int(self.timing["warmup"])))
        times: list[float] = []
        rounds = 0
        while not self.enough(times, rounds) and len(times) < cap:
            fn()
            times.extend(timing.timed_reps(fn, per, flush, spin_cycles=spin))
            rounds += 1
        return times

    def ideal(self) -> dict[str, float] | None:
        """The roofline of the benchmark shape on this GPU, from the measured ceilings."""
        if not self.ceilings:
            return None
        bench = self.problem.benchmark_shape
        nbytes, flops = self.problem.min_bytes(bench), self.problem.flop_count(bench)
        bw = float(self.ceilings["bandwidth_bytes_per_s"])
        peak = flop_rate(self.ceilings, self.problem.flops_format)
        return {"ideal_us": ideal_us(nbytes, flops, bw, peak), "bytes": nbytes, "flops": flops, "bw": bw, "peak": peak,
                "flops_format": self.problem.flops_format}


def baseline_summary(entry: dict[str, Any]) -> dict[str, Any]:
    """Report fields from a cache entry of raw baseline times."""
    eager = [{"name": n, "kind": "eager", "timing": summarize_times(t)} for n, t in entry["eager"].items() if t]
    out: dict[str, Any] = {"baselines": list(eager), "t_ref_us": None, "t_ref_name": None, "floor_us": None,
                           "t_compile_us": None, "compile_error": entry.get("compile_error")}
    if eager:
        best = min(eager, key=lambda b: b["timing"]["median_us"])
        out["t_ref_us"], out["t_ref_name"] = best["timing"]["median_us"], best["name"]
    if entry.get("compile"):
        name, times = entry["compile"]
        t = summarize_times(times)
        out["baselines"].append({"name": name, "kind": "compile", "timing": t})
        out["t_compile_us"] = t["median_us"]
    if entry.get("floor"):
        out["floor_us"] = summarize_times(entry["floor"])["median_us"]
    return out


_CEILINGS: dict[str, dict[str, Any]] = {}  # this process's ceilings per cache environment
_DRIVER: list[str | None] = []


def _driver(probe: Callable[[], str | None]) -> str | None:
    """The driver version, asked once per process."""
    if not _DRIVER:
        _DRIVER.append(probe())
    return _DRIVER[0]

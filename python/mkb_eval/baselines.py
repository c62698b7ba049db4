"""The judge's disk cache of what does not depend on the candidate: the PyTorch baselines (eager
formulations, torch.compile) and the empty-kernel floor of a problem's benchmark shape, and this
GPU's ceilings (memory bandwidth, bf16 GEMM rate) that the plausibility guard divides by.

An entry is keyed by everything its numbers depend on: for baselines the problem's content hash
(problem.toml + reference.py), the shape set (name and dims), the GPU name, the driver, the
torch/CUDA versions and the timing code's version (TIMING_VERSION plus a hash of timing.py and
this file); for ceilings the same minus the problem. Any change of a component gives another key,
so a stale entry is never read. The file holds its own key and is used only when the key matches;
an unreadable or malformed file is ignored with a warning on stderr (and re-measured).

Location: $MKB_CACHE_DIR, else ~/.cache/mkb; files under <root>/{baselines,ceilings}/."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

CACHE_FORMAT = 1


def cache_root() -> Path:
    env = os.environ.get("MKB_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "mkb"


def timing_code_version() -> str:
    """TIMING_VERSION and a hash of the timing code: any edit of it invalidates every entry."""
    from . import timing

    h = hashlib.sha256(f"v{timing.TIMING_VERSION}".encode())
    for mod in ("timing.py", "baselines.py"):
        h.update((Path(__file__).resolve().parent / mod).read_bytes())
    return f"{timing.TIMING_VERSION}-{h.hexdigest()[:16]}"


def env_key(gpu: str | None, driver: str | None, versions: dict[str, Any]) -> dict[str, Any]:
    return {"gpu": gpu, "driver": driver, "torch": versions.get("torch"), "cuda": versions.get("cuda"),
            "timing": timing_code_version(), "format": CACHE_FORMAT}


def baseline_key(env: dict[str, Any], problem_hash: str, shape_name: str, dims: dict[str, int]) -> dict[str, Any]:
    return {**env, "problem": problem_hash, "shape": shape_name, "dims": dict(sorted(dims.items()))}


class DiskCache:
    """JSON entries under `root/<kind>/<sha256 of the key>.json`, written atomically."""

    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root is not None else cache_root()
        self.warnings: list[str] = []

    def path(self, kind: str, key: dict[str, Any]) -> Path:
        digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
        return self.root / kind / f"{digest[:40]}.json"

    def warn(self, msg: str) -> None:
        self.warnings.append(msg)
        print(f"mkb_eval cache: {msg}", file=sys.stderr, flush=True)

    def get(self, kind: str, key: dict[str, Any]) -> dict[str, Any] | None:
        p = self.path(kind, key)
        try:
            text = p.read_text()
        except FileNotFoundError:
            return None
        except OSError as e:
            self.warn(f"ignoring unreadable cache entry {p}: {e}")
            return None
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict) or not isinstance(doc.get("value"), dict):
                raise ValueError("not an object with a value")
        except ValueError as e:
            self.warn(f"ignoring corrupt cache entry {p}: {e}")
            return None
        if json.loads(json.dumps(key, default=str)) != doc.get("key"):
            return None  # another key hashed here (never expected): a miss, not an error
        return doc["value"]

    def put(self, kind: str, key: dict[str, Any], value: dict[str, Any]) -> None:
        p = self.path(kind, key)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w") as f:
                json.dump({"key": key, "value": value}, f, default=str)
            os.replace(tmp, p)
        except OSError as e:
            self.warn(f"cannot write cache entry {p}: {e}")


def valid_baseline_entry(v: dict[str, Any]) -> bool:
    """The shape of a cached baseline entry (checked before use: a wrong one is a miss)."""
    def times(x: Any) -> bool:
        return isinstance(x, list) and all(isinstance(t, int | float) for t in x)

    return (isinstance(v.get("eager"), dict) and all(times(t) for t in v["eager"].values())
            and times(v.get("floor")) and isinstance(v.get("compile_tried"), bool)
            and (v.get("compile") is None or (isinstance(v["compile"], list) and len(v["compile"]) == 2
                                              and times(v["compile"][1]))))


def valid_ceilings(v: dict[str, Any]) -> bool:
    return all(isinstance(v.get(k), int | float) and v[k] > 0 for k in ("bandwidth_bytes_per_s", "bf16_flops_per_s"))

"""The GPU lease: several judges may share one GPU so that one builds (CPU work: import, DSL
compile) while another uses the GPU, but only one at a time runs GPU work (correctness trials,
baselines, timing, re-check). The lease is an exclusive `flock` on a file named after the GPU's
UUID in a directory every judge of the machine shares ($MKB_GPU_LOCK_DIR, default
<tmp>/mkb-gpu-locks); the kernel drops it when the holder dies, so a crashed judge never blocks
the others. The time spent waiting is reported (phase `gpu_wait`), never counted as a phase of
the evaluation itself.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from types import TracebackType


def lock_dir() -> str:
    return os.environ.get("MKB_GPU_LOCK_DIR") or os.path.join(tempfile.gettempdir(), "mkb-gpu-locks")


def gpu_key(device: int = 0) -> str:
    """A stable name for the GPU this process sees as `device` (its UUID where torch gives it:
    the same physical GPU under any CUDA_VISIBLE_DEVICES)."""
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        return "gpu-" + str(uuid).replace("/", "_")
    return f"gpu-index-{os.environ.get('CUDA_VISIBLE_DEVICES', '')}-{device}"


class GpuLease:
    """Re-entrant within one process (the judge's threads share the lease of their process);
    exclusive across processes."""

    def __init__(self, key: str, directory: str | None = None):
        d = directory or lock_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        self.path = os.path.join(d, key + ".lock")
        self._fd: int | None = None
        self._depth = 0
        self._mutex = threading.RLock()
        self.waited_s = 0.0

    def acquire(self) -> float:
        """Take the lease; returns the seconds waited for it."""
        self._mutex.acquire()
        if self._depth == 0:
            t0 = time.monotonic()
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                self._mutex.release()
                raise
            self._fd = fd
            waited = time.monotonic() - t0
            self.waited_s += waited
        else:
            waited = 0.0
        self._depth += 1
        return waited

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        self._mutex.release()

    @property
    def held(self) -> bool:
        return self._depth > 0

    def __enter__(self) -> GpuLease:
        self.acquire()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


class NoLease:
    """Stands in where there is no GPU (compile mode) or sharing is off."""

    waited_s = 0.0
    held = False

    def acquire(self) -> float:
        return 0.0

    def release(self) -> None:
        pass

    def __enter__(self) -> NoLease:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        pass

"""The GPU lease (mkb_eval.gpulock): exclusive across processes and across lease objects, re-entrant
within one, released when the holder dies."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from mkb_eval.gpulock import GpuLease

PKG = str(Path(__file__).resolve().parents[1])


def test_exclusive_between_leases(tmp_path: Path) -> None:
    a, b = GpuLease("g", str(tmp_path)), GpuLease("g", str(tmp_path))
    order: list[str] = []
    a.acquire()
    a.acquire()  # re-entrant
    order.append("a")

    def other() -> None:
        b.acquire()
        order.append("b")
        b.release()

    t = threading.Thread(target=other)
    t.start()
    time.sleep(0.3)
    assert order == ["a"], "the second lease was granted while the first was held"
    a.release()
    time.sleep(0.2)
    assert order == ["a"], "a re-entrant lease was released by its inner release"
    a.release()
    t.join(5)
    assert order == ["a", "b"] and not a.held and b.waited_s >= 0.4


def test_other_gpus_do_not_wait(tmp_path: Path) -> None:
    a, b = GpuLease("gpu-0", str(tmp_path)), GpuLease("gpu-1", str(tmp_path))
    with a:
        assert b.acquire() < 0.1
        b.release()


def test_exclusive_across_processes_and_dropped_when_the_holder_dies(tmp_path: Path) -> None:
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from mkb_eval.gpulock import GpuLease; "
            "l = GpuLease('g', sys.argv[2]); l.acquire(); print('held', flush=True); time.sleep(60)")
    p = subprocess.Popen([sys.executable, "-c", code, PKG, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        mine = GpuLease("g", str(tmp_path))
        got: list[bool] = []

        def take() -> None:
            mine.acquire()
            got.append(mine.held)
            mine.release()

        t = threading.Thread(target=take)
        t.start()
        time.sleep(0.3)
        assert not got, "granted while another process held the lease"
        p.kill()  # the holder dies without releasing: the kernel drops its lock
        t.join(5)
        assert got == [True] and not mine.held
    finally:
        p.kill()
        p.wait()

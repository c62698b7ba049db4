"""Samples one process from /proc until it exits, for the sessions benchmark
(scripts/bench-sessions.sh): every --every seconds one JSON line with the time, the process's
own CPU seconds (user, system; its children are not included), its resident set (VmRSS) and
peak resident set (VmHWM) in KiB, its thread count, and the machine's 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import time


def sample(pid: int, tick: float) -> dict[str, float] | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            stat = f.read()
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            status = f.read()
        with open("/proc/loadavg", encoding="ascii") as f:
            load1 = float(f.read().split()[0])
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Fields after the command name (which may hold spaces) start at field 3 (state).
    rest = stat[stat.rindex(")") + 2:].split()
    if rest[0] == "Z":
        return None
    kib = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            kib[key] = int(value.split()[0])
    return {"t": time.time(), "utime_s": int(rest[11]) / tick, "stime_s": int(rest[12]) / tick,
            "threads": int(rest[17]), "rss_kib": kib.get("VmRSS", 0),
            "hwm_kib": kib.get("VmHWM", 0), "load1": load1}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pid", type=int)
    p.add_argument("out")
    p.add_argument("--every", type=float, default=0.5)
    a = p.parse_args()
    tick = float(os.sysconf("SC_CLK_TCK"))
    with open(a.out, "w", encoding="utf-8") as f:
        while (s := sample(a.pid, tick)) is not None:
            f.write(json.dumps(s) + "\n")
            f.flush()
            time.sleep(a.every)


if __name__ == "__main__":
    main()

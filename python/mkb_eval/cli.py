"""Direct use and debugging: evaluate candidate files through a real judge subprocess, over the real
protocol (hello, evaluate, shutdown), and print the result as JSON. The problem spec and the report
template of each request come from `mkb problems spec` (mkb_eval.bundle): mkb must be built.

    python -m mkb_eval.cli --problem-dir problems/A/A01_bias_gelu --dsl cute --candidate K.py --mode compile
    python -m mkb_eval.cli ... --candidate solo=a.py --candidate cond=b.py --mode full --full-response
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from . import PROTOCOL_VERSION
from .adapters import dsl_names
from .bundle import Bundle


class JudgeClient:
    """A judge subprocess and the JSON-lines protocol, for tools and tests. `bundle` gives the
    problem specs and the report template (default: asked of mkb on the first evaluate)."""

    def __init__(self, judge_args: Iterable[str] = (), env: dict[str, str] | None = None,
                 stderr: Any = None, python: str = sys.executable, bundle: Bundle | None = None):
        self._bundle = bundle
        pkg_parent = str(Path(__file__).resolve().parent.parent)
        e = dict(os.environ if env is None else env)
        e["PYTHONPATH"] = os.pathsep.join([pkg_parent, *[p for p in e.get("PYTHONPATH", "").split(os.pathsep) if p]])
        self.proc = subprocess.Popen([python, "-m", "mkb_eval.judge", *judge_args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=stderr, text=True, env=e, bufsize=1)
        self._n = 0
        self.events: list[dict[str, Any]] = []

    def send_raw(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.rstrip("\n") + "\n")
        self.proc.stdin.flush()

    def read(self, timeout: float = 3600.0) -> dict[str, Any]:
        """The next non-event message (events are kept in `self.events`)."""
        assert self.proc.stdout is not None
        result: list[str] = []

        def reader() -> None:
            result.append(self.proc.stdout.readline())  # type: ignore[union-attr]

        while True:
            t = threading.Thread(target=reader, daemon=True)
            t.start()
            t.join(timeout)
            if t.is_alive():
                raise TimeoutError(f"no message from the judge within {timeout} s")
            line = result.pop()
            if not line:
                raise EOFError(f"the judge closed its output (exit status {self.proc.poll()})")
            msg = json.loads(line)
            if "event" in msg:
                self.events.append(msg)
                continue
            return msg

    def request(self, op: str, timeout: float = 3600.0, **fields: Any) -> dict[str, Any]:
        self._n += 1
        rid = f"{op[0]}{self._n}"
        self.send_raw(json.dumps({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields}))
        msg = self.read(timeout)
        if msg.get("id") != rid:
            raise RuntimeError(f"response to {msg.get('id')!r}, expected {rid!r}: {msg}")
        return msg

    @property
    def bundle(self) -> Bundle:
        if self._bundle is None:
            self._bundle = Bundle.from_mkb()
        return self._bundle

    def evaluate(self, problem: str | Path, dsl: str, mode: str, candidates: dict[str, str | Path],
                 seed: int | None = None, limits: dict[str, float] | None = None,
                 timing: dict[str, float] | None = None, timeout: float = 7200.0) -> dict[str, Any]:
        """Evaluate `candidates` on `problem` (an id, slug, folder name or folder of the bundle)."""
        req: dict[str, Any] = {
            "problem": self.bundle.spec(problem), "report": self.bundle.template(mode), "dsl": dsl, "mode": mode,
            "candidates": [{"key": k, "path": str(Path(p).resolve())} for k, p in candidates.items()],
            "seed": secrets.randbits(62) if seed is None else seed,
        }
        if limits:
            req["limits"] = limits
        if timing:
            req["timing"] = timing
        return self.request("evaluate", timeout=timeout, **req)

    def close(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            try:
                self.request("shutdown", timeout=timeout)
            except (OSError, EOFError, TimeoutError, RuntimeError, ValueError):
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode or 0)

    def __enter__(self) -> JudgeClient:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def parse_candidates(items: Iterable[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for i, item in enumerate(items):
        key, sep, path = item.partition("=")
        if not sep:
            key, path = ("candidate" if i == 0 else f"candidate{i}"), item
        out[key] = path
    return out


def iter_reports(response: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for r in response.get("reports", []):
        yield r["key"], r["report"]


def main(argv: list[str] | None = None, printer: Callable[[str], None] = print) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem-dir", required=True)
    ap.add_argument("--dsl", required=True, choices=dsl_names())
    ap.add_argument("--candidate", action="append", required=True, help="PATH or KEY=PATH (repeatable)")
    ap.add_argument("--mode", default="compile", choices=("compile", "test", "bench", "full"))
    ap.add_argument("--seed", type=int)
    ap.add_argument("--limits", type=json.loads, help='JSON, e.g. {"build_s": 60}')
    ap.add_argument("--timing", type=json.loads, help='JSON, e.g. {"min_reps": 50}')
    ap.add_argument("--full-response", action="store_true", help="print the whole evaluate response")
    ap.add_argument("--judge-arg", action="append", default=[], help="extra argument for the judge (repeatable)")
    ap.add_argument("--quiet", action="store_true", help="hide the judge's stderr")
    ap.add_argument("--spec-bundle", type=Path,
                    help="a file holding `mkb problems spec` output, instead of asking mkb (paths relative to the "
                    "repository)")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    bundle = Bundle.from_file(args.spec_bundle) if args.spec_bundle else None
    with JudgeClient(args.judge_arg, stderr=subprocess.DEVNULL if args.quiet else None, bundle=bundle) as judge:
        hello = judge.request("hello", timeout=600)
        resp = judge.evaluate(args.problem_dir, args.dsl, args.mode, parse_candidates(args.candidate), seed=args.seed,
                              limits=args.limits, timing=args.timing)
    if not resp.get("ok"):
        printer(json.dumps(resp, indent=2))
        return 2
    if args.full_response:
        printer(json.dumps({"hello": hello, **resp}, indent=2))
    else:
        reports = dict(iter_reports(resp))
        printer(json.dumps(next(iter(reports.values())) if len(reports) == 1 else reports, indent=2))
    print(f"[mkb_eval.cli] {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

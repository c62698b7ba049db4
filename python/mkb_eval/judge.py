"""The judge: the protocol server of docs/protocol.md (version 2). Requests arrive as JSON lines on
stdin; responses and progress events leave on a private duplicate of fd 1, and fd 1 itself is
pointed at fd 2 at start-up, so nothing the judge, torch or a runner prints can reach the channel.
The judge never imports candidate code: runners do (mkb_eval.runner), one per candidate, from a
warm pool per DSL, each inside the OS sandbox (mkb_eval.sandbox, docs/threat-model.md). Without a
working sandbox the judge refuses to evaluate unless the opt-out is given (--unsafe-no-sandbox or
MKB_EVAL_UNSAFE_NO_SANDBOX=1), which it logs loudly and reports in hello and in every report.
A watchdog ends the judge when its parent dies or when its memory passes --max-rss-mb.

    python -m mkb_eval.judge [--pool-size N] [--no-prewarm] [--read-policy enforce|log|off]
                             [--unsafe-no-sandbox] [--max-rss-mb 16384]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from typing import IO, Any

from . import PROTOCOL_VERSION


def open_channel() -> IO[str]:
    """Duplicate fd 1 for the protocol and point fd 1 at fd 2 (before anything else can print)."""
    sys.stdout.flush()
    fd = os.dup(1)  # not inheritable: runners never get it
    os.dup2(2, 1)
    return os.fdopen(fd, "w", buffering=1, encoding="utf-8")


class Session:
    """Judge-wide state: GPU facts, the runner pool, the baseline cache, loaded problems."""

    def __init__(self, options: Any, pool_size: int | None, prewarm: bool, netns: bool, unsafe: bool = False):
        import torch

        from . import gpuinfo
        from .adapters import DSLS, probe
        from .pool import RunnerPool
        from .sandbox import OsSandbox, SandboxUnavailable, setup_sandbox

        self.options = options
        self.can_run = bool(torch.cuda.is_available())
        self.device = "cuda"
        self.gpu_name = torch.cuda.get_device_name(0) if self.can_run else None
        self.versions = gpuinfo.versions()
        self.dsls = {d: probe(d) for d in DSLS}
        remove_stale_roots()
        self.root = tempfile.mkdtemp(prefix=f"mkb-judge-{os.getpid()}-")
        self.sandbox_error: str | None = None
        try:
            self.sandbox = setup_sandbox(self.root, gpu=self.can_run, unsafe=unsafe or None)
        except SandboxUnavailable as e:
            self.sandbox_error = (f"no OS sandbox for candidate code: {e}. The judge refuses to run candidate code; "
                                  "fix the sandbox, or pass --unsafe-no-sandbox to mkb (MKB_EVAL_UNSAFE_NO_SANDBOX=1) "
                                  "to run it without one")
            self.sandbox = OsSandbox(None, unsafe=True, why_unsafe=str(e))
            print(f"mkb_eval.judge: {self.sandbox_error}", file=sys.stderr, flush=True)
            prewarm = False
        if self.sandbox.unsafe and self.sandbox_error is None:
            print("mkb_eval.judge: WARNING: --unsafe-no-sandbox: candidate code runs WITHOUT the OS sandbox "
                  "(only the static check and the audit hook stand between it and this machine)",
                  file=sys.stderr, flush=True)
        self.sandbox_info = self.sandbox.info()
        if pool_size is None:
            pool_size = 3 if self.can_run else 1
        self.pool = RunnerPool(self.root, os.environ, self.sandbox, pool_size, netns)
        self.baseline_cache: dict[tuple[str, str], dict[str, Any]] = {}
        # One judge at a time runs GPU work on this GPU (several judges may share it: mkb_eval.gpulock).
        from .gpulock import GpuLease, NoLease, gpu_key

        self.gpu_lease: GpuLease | NoLease = GpuLease(gpu_key()) if self.can_run else NoLease()
        self._flush: Any = None
        self._pools: dict[int, Any] = {}
        if prewarm:
            for d, info in self.dsls.items():
                if info.get("available"):
                    self.pool.prewarm(d)

    def hello(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "python": self.versions["python"], "torch": self.versions["torch"],
                "cuda": self.versions["cuda"], "gpu": self.gpu_name, "can_run": self.can_run, "dsls": self.dsls,
                "sandbox": self.sandbox_info}

    def problem(self, spec: dict[str, Any]) -> Any:
        """The request's problem, from the spec mkb sent (mkb_eval.problem.problem_from_spec)."""
        from .problem import problem_from_spec

        return problem_from_spec(spec)

    def synchronize(self) -> None:
        import torch

        torch.cuda.synchronize()

    def export_buffers(self, tensors: Any) -> list[dict[str, Any]]:
        """The JSON IPC descriptors of judge-owned CUDA tensors for a runner (mkb_eval.ipc),
        after the GPU has finished writing them."""
        from . import ipc

        out = [ipc.export(t) for t in tensors]
        self.synchronize()
        return out

    def collect_ipc(self) -> None:
        if self.can_run:
            import torch

            torch.cuda.synchronize()
            torch.cuda.ipc_collect()

    def shared_pool(self, slot: int) -> Any:
        """The memory pool for the buffers of the `slot`-th candidate of a group: CUDA IPC maps
        whole allocator segments, so nothing else of the judge's (references, input clones, other
        candidates' buffers) may share a segment with them. Pools are reused across requests, so
        the memory they cache stays bounded by the largest group."""
        import torch

        if os.environ.get("MKB_EVAL_NO_SHARED_POOL") or not hasattr(torch.cuda, "MemPool"):
            return None
        if slot not in self._pools:
            try:
                self._pools[slot] = torch.cuda.MemPool()
            except Exception:  # noqa: BLE001 - fall back to the default pool
                self._pools[slot] = None
        return self._pools[slot]

    def alloc_in_pool(self, pool: Any, decls: Any, shape: Any) -> list[Any]:
        import torch

        from .problem import allocate

        if pool is None:
            return allocate(decls, shape, self.device)
        with torch.cuda.use_mem_pool(pool):
            return allocate(decls, shape, self.device)

    def flush_buffer(self) -> Any:
        if self._flush is None:
            from .timing import l2_flush_buffer

            self._flush = l2_flush_buffer()
        return self._flush

    def shutdown(self) -> None:
        self.pool.shutdown()
        shutil.rmtree(self.root, ignore_errors=True)


# What a live judge's /proc/<pid>/cmdline contains: a judge process, or a Ray worker running the
# judge actor of mkb_eval.ray_bridge (Ray sets its process title to "ray::MkbJudge...").
LIVE_JUDGE_MARKERS = (b"mkb_eval.judge", b"ray::MkbJudge")


def remove_stale_roots() -> None:
    """Remove scratch roots of judges that died without cleaning up (a judge killed by SIGKILL)."""
    tmp = tempfile.gettempdir()
    for name in os.listdir(tmp):
        parts = name.split("-")
        if len(parts) < 4 or parts[0] != "mkb" or parts[1] != "judge" or not parts[2].isdigit():
            continue
        pid = int(parts[2])
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if any(m in cmdline for m in LIVE_JUDGE_MARKERS):
                continue  # that judge is alive
        except OSError:
            pass
        shutil.rmtree(os.path.join(tmp, name), ignore_errors=True)


def start_watchdog(parent: int, max_rss_mb: float, period_s: float = 1.0) -> threading.Thread:
    """A daemon thread that ends the judge at once when its parent is gone (mkb killed) or when
    the judge's own memory passes `max_rss_mb`; bwrap's --die-with-parent then takes every runner
    with it. Polls getppid() rather than PR_SET_PDEATHSIG, which fires when the parent *thread*
    that spawned us exits (a tokio worker may)."""
    def watch() -> None:
        while True:
            time.sleep(period_s)
            if os.getppid() != parent:
                print("mkb_eval.judge: the parent process is gone; exiting", file=sys.stderr, flush=True)
                os._exit(70)
            rss = _own_rss_mb()
            if max_rss_mb and rss > max_rss_mb:
                print(f"mkb_eval.judge: resident memory {rss:.0f} MB is over --max-rss-mb {max_rss_mb:.0f}; exiting",
                      file=sys.stderr, flush=True)
                os._exit(71)

    t = threading.Thread(target=watch, name="mkb-judge-watchdog", daemon=True)
    t.start()
    return t


def _own_rss_mb() -> float:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except (OSError, ValueError, IndexError):
        return 0.0


def _error(req_id: Any, message: str) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": req_id, "ok": False, "error": message}


def validate_evaluate(req: dict[str, Any], session: Session) -> str | None:
    """Why an evaluate request cannot be served, or None."""
    from .evaluation import MODES
    from .problem import ProblemError

    for f in ("problem", "report", "dsl", "mode", "candidates", "seed"):
        if f not in req:
            return f"missing field {f!r}"
    if not isinstance(req["report"], dict) or not {"verdict", "mode", "reason", "message"} <= set(req["report"]):
        return "report must be the report template (an object with verdict, mode, reason, message, ...)"
    if req["dsl"] not in session.dsls:
        return f"unknown DSL {req['dsl']!r} (known: {', '.join(session.dsls)})"
    if req["mode"] not in MODES:
        return f"unknown mode {req['mode']!r} (known: {', '.join(MODES)})"
    if not isinstance(req["seed"], int) or isinstance(req["seed"], bool):
        return "seed must be an integer"
    cands = req["candidates"]
    if not isinstance(cands, list) or not cands:
        return "candidates must be a non-empty list"
    keys = set()
    for c in cands:
        if not isinstance(c, dict) or not isinstance(c.get("key"), str) or not isinstance(c.get("path"), str):
            return "every candidate needs a string key and a string path"
        if c["key"] in keys:
            return f"duplicate candidate key {c['key']!r}"
        keys.add(c["key"])
    for f in ("limits", "timing"):
        if f in req and not isinstance(req[f], dict):
            return f"{f} must be an object"
    from .evaluation import DEFAULT_LIMITS, DEFAULT_TIMING

    for f, known in (("limits", DEFAULT_LIMITS), ("timing", DEFAULT_TIMING)):
        for k, v in (req.get(f) or {}).items():
            if k not in known:
                return f"{f}.{k} is not an option (known: {', '.join(sorted(known))})"
            if isinstance(v, bool) or not isinstance(v, int | float):
                return f"{f}.{k} must be a number, not {type(v).__name__}"
    try:
        problem = session.problem(req["problem"])
    except ProblemError as e:
        return f"bad problem spec: {e}"
    if not problem.dir.is_dir() or not problem.reference.is_file():
        return f"problem {problem.id}: {problem.reference} is not a file"
    return None


def serve(inp: IO[str], out: IO[str], session: Session) -> int:
    """Answer requests until shutdown or end of input; returns the exit status."""

    def send(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj, allow_nan=False, default=str) + "\n")
        out.flush()

    for line in inp:
        if not line.strip():
            continue
        try:
            req = json.loads(line)
        except ValueError as e:
            send(_error(None, f"bad JSON: {e}"))
            continue
        status = handle(req, session, send)
        if status is not None:
            return status
    return 0


def handle(req: Any, session: Session, send: Callable[[dict[str, Any]], None]) -> int | None:
    """Answer one decoded request: its response (and any progress events before it) go to `send`.
    Returns the exit status when the judge must stop (shutdown, another protocol version), else
    None. The judge's loop (`serve`) and the Ray bridge's judge actors (mkb_eval.ray_bridge) both
    serve requests through it."""
    from .evaluation import GroupEvaluation

    if not isinstance(req, dict):
        send(_error(None, "a request must be a JSON object"))
        return None
    rid = req.get("id")
    if req.get("v") != PROTOCOL_VERSION:
        send(_error(rid, f"unsupported protocol version {req.get('v')!r} (this judge speaks {PROTOCOL_VERSION}); "
                    "exiting"))
        return 2
    op = req.get("op")
    if op in ("hello", "evaluate") and session.sandbox_error is not None:
        send(_error(rid, session.sandbox_error))
    elif op == "hello":
        send({"v": PROTOCOL_VERSION, "id": rid, "ok": True, **session.hello()})
    elif op == "shutdown":
        send({"v": PROTOCOL_VERSION, "id": rid, "ok": True})
        return 0
    elif op == "evaluate":
        problem = validate_evaluate(req, session)
        if problem is not None:
            send(_error(rid, problem))
            return None
        try:
            result = GroupEvaluation(session, req, send).run()
        except Exception as e:  # noqa: BLE001 - keep serving; say what broke
            traceback.print_exc()
            send(_error(rid, f"the judge failed on this request: {type(e).__name__}: {e}"))
            return None
        send(_finite({"v": PROTOCOL_VERSION, "id": rid, "ok": True, **result}))
    else:
        send(_error(rid, f"unknown op {op!r} (hello, evaluate, shutdown)"))
    return None


def _finite(obj: Any) -> Any:
    """JSON has no NaN/Infinity: replace non-finite floats by null."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def build_parser() -> argparse.ArgumentParser:
    """The judge's options (also those of a judge actor of mkb_eval.ray_bridge)."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    env_pool = os.environ.get("MKB_EVAL_POOL_SIZE")
    ap.add_argument("--pool-size", type=int, default=int(env_pool) if env_pool else None,
                    help="warm runners kept per DSL (default: 3 with a GPU, where a runner takes about 8 s to "
                         "start and an evaluation 3-4 s; 1 without)")
    ap.add_argument("--no-prewarm", action="store_true", help="start runners only when a candidate needs one")
    ap.add_argument("--read-policy", choices=("enforce", "log", "off"),
                    default=os.environ.get("MKB_EVAL_READ_POLICY", "enforce"),
                    help="reads outside the allowed roots: refuse (enforce), only record (log), or ignore")
    ap.add_argument("--no-netns", action="store_true", help="do not put runners in a private network namespace")
    ap.add_argument("--check-trials", type=int, default=5)
    ap.add_argument("--bench-trials", type=int, default=2)
    ap.add_argument("--max-reps", type=int, default=20000)
    ap.add_argument("--runner-start-s", type=float, default=600.0)
    ap.add_argument("--unsafe-no-sandbox", action="store_true",
                    help="run candidate code without the OS sandbox (also MKB_EVAL_UNSAFE_NO_SANDBOX=1); logged loudly")
    ap.add_argument("--max-rss-mb", type=float, default=float(os.environ.get("MKB_EVAL_JUDGE_RSS_MB", "16384")),
                    help="the judge exits when its own resident memory passes this")
    return ap


def make_session(args: argparse.Namespace) -> Session:
    """The judge's session for parsed options (build_parser)."""
    from .evaluation import JudgeOptions

    opts = JudgeOptions(check_trials=args.check_trials, bench_trials=args.bench_trials, max_reps=args.max_reps,
                        runner_start_s=args.runner_start_s, read_policy=args.read_policy)
    return Session(opts, args.pool_size, not args.no_prewarm, not args.no_netns, unsafe=args.unsafe_no_sandbox)


def main(argv: list[str] | None = None) -> int:
    out = open_channel()
    args = build_parser().parse_args(argv)
    start_watchdog(os.getppid(), args.max_rss_mb)
    session = make_session(args)

    def on_term(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        return serve(sys.stdin, out, session)
    finally:
        session.shutdown()
        out.close()


if __name__ == "__main__":
    sys.exit(main())

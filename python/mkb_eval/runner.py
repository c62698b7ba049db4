"""The runner: one process per candidate (docs/evaluator.md). Started warm by the judge inside the
OS sandbox (bubblewrap; as root it first drops to the sandbox uid, before importing anything),
with torch and the DSL already imported; then it adds its own layers (limits, audit hook,
seccomp against fork/exec), imports the candidate's kernel.py from its scratch dir and only does
what the judge asks: build, bind (CUDA-IPC buffers owned by the judge, opened from raw handles by
mkb_eval.ipc), call (optionally recorded: dispatcher ops + profiler activities between marker
kernels), time (L2 flush outside the window, CUDA events). It never sees a reference result or
the seed. Messages are JSON both ways: nothing is unpickled on either side.

    python -m mkb_eval.runner --fd N --dsl cute --scratch DIR [--uid U --gid G] [--seccomp]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
import traceback
from typing import Any

MAX_ERROR_CHARS = 6000
MARK_CYCLES = 1000


def _tb(e: BaseException) -> str:
    s = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return s if len(s) <= MAX_ERROR_CHARS else "...\n" + s[-MAX_ERROR_CHARS:]


def _summary(e: BaseException) -> str:
    """One line for the report's message: the exception type and its most telling lines (the
    compiler's `error:` lines when the text is a compiler log)."""
    text = str(e).replace("\x00", "").strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if "error" in ln.lower()]
    s = " | ".join((errs or lines)[:3])
    return f"{type(e).__name__}: {s}"[:600] if s else type(e).__name__


class Abort(Exception):
    """The judge stopped a timing loop (it answered a rep with something other than "go")."""


class Runner:
    def __init__(self, conn: Any, dsl: str, scratch: str, net_msg: str, net_ok: bool, seccomp: bool = False,
                 identity: dict[str, Any] | None = None):
        import torch

        from . import ipc, problem, sandbox, timing  # noqa: F401  (imported before the sandbox)
        from .adapters import KernelRecorder, get_adapter

        self.conn = conn
        self.dsl = dsl
        self.scratch = os.path.realpath(scratch)
        self.kernel_path = os.path.join(self.scratch, "kernel.py")
        self.torch = torch
        self.timing = timing
        self.recorder = KernelRecorder()
        self.adapter = get_adapter(dsl)
        self.has_gpu = bool(torch.cuda.is_available())
        self.compile_only = not self.has_gpu
        self.net = {"isolated": net_ok, "detail": net_msg}
        self.use_seccomp = seccomp
        self.seccomp: dict[str, Any] = {"installed": False, "detail": "not requested"}
        self.identity = identity or {}
        self.ipc = ipc
        self.sandbox: Any = None
        self.module: Any = None
        self.runs: dict[str, Any] = {}
        self.bound: dict[str, tuple[list[Any], list[Any]]] = {}
        self.flush: Any = None
        self._sleep = torch.cuda._sleep
        self._sync = torch.cuda.synchronize
        self.session: Any = None  # the correctness phase's profiler session (op_call .. op_collect)
        self.session_calls: list[dict[str, Any]] = []

    # -- messages ---------------------------------------------------------------------------------
    def send(self, msg: dict[str, Any]) -> None:
        if "event" not in msg:
            msg["violations"] = list(self.sandbox.violations) if self.sandbox is not None else []
            msg["ids"] = self.identities()
        self.conn.send_bytes(json.dumps(msg, default=str).encode())

    def recv(self) -> dict[str, Any]:
        msg = json.loads(self.conn.recv_bytes(1 << 26))
        if not isinstance(msg, dict):
            raise RuntimeError(f"runner: bad message {type(msg)}")
        return msg

    def identities(self) -> dict[str, int]:
        ids = self.timing.watched_identities()
        cls = type(self)
        for name in ("record_call", "op_call", "op_collect", "_marked_call", "_activities", "op_time", "op_build",
                     "send", "identities"):
            ids[f"mkb_eval.runner.Runner.{name}"] = id(cls.__dict__.get(name))
        ids["mkb_eval.runner.Runner"] = id(sys.modules[__name__].Runner)
        return ids

    # -- start-up ---------------------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        import torch.profiler  # noqa: F401
        import torch.utils._python_dispatch  # noqa: F401

        torch = self.torch
        os.makedirs(os.path.join(self.scratch, "tmp"), exist_ok=True)
        os.makedirs(os.path.join(self.scratch, "cache"), exist_ok=True)
        self.adapter.setup(self.compile_only, self.scratch)
        version = self.adapter.import_dsl(self.has_gpu)
        self.adapter.install_hooks(self.recorder, self.compile_only)
        gpu = None
        if self.has_gpu:
            torch.cuda.init()
            torch.empty(1, device="cuda")
            gpu = torch.cuda.get_device_name(0)
            self.ipc.runtime()  # load the CUDA runtime's IPC entry points before the sandbox closes
            self._warm_profiler()
        from .sandbox import identity

        return {"ready": True, "dsl": self.dsl, "version": version, "gpu": gpu, "compile_only": self.compile_only,
                "net": self.net, "pid": os.getpid(), "python": sys.version.split()[0], "identity": identity(),
                "dropped": self.identity}

    # -- operations -------------------------------------------------------------------------------
    def op_load(self, msg: dict[str, Any]) -> dict[str, Any]:
        from .sandbox import Sandbox, install_seccomp, set_limits, warm_find_library

        limits = msg.get("limits", {})
        set_limits(float(limits.get("total_s", 1200)) + 30.0, 1 << 30)
        if self.use_seccomp:
            warm_find_library()
            ok, detail = install_seccomp()
            self.seccomp = {"installed": ok, "detail": detail}
            if not ok:
                return {"ok": False, "reason": "harness_error", "error": f"seccomp: {detail}",
                        "summary": f"the runner could not install its seccomp filter: {detail}"}
        self.sandbox = Sandbox(self.scratch, self.kernel_path, read_policy=msg.get("read_policy", "enforce"))
        self.sandbox.install()
        sys.dont_write_bytecode = True
        try:
            spec = importlib.util.spec_from_file_location("kernel", self.kernel_path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules["kernel"] = module
            spec.loader.exec_module(module)
        except BaseException as e:  # noqa: BLE001 - any failure of candidate code is a verdict
            return {"ok": False, "reason": "load_error", "error": _tb(e), "summary": _summary(e)}
        self.module = module
        build = module.__dict__.get("build")
        if not callable(build):
            return {"ok": False, "reason": "missing_build", "error": "kernel.py defines no callable build(spec)"}
        return {"ok": True, "seccomp": self.seccomp}

    def op_build(self, msg: dict[str, Any]) -> dict[str, Any]:
        from .problem import spec_from_wire

        spec = spec_from_wire(msg["spec"])
        t0 = time.perf_counter()
        try:
            fn = self.module.__dict__["build"](spec)
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "reason": "build_error", "error": _tb(e), "summary": _summary(e),
                    "compile_s": time.perf_counter() - t0}
        dt = time.perf_counter() - t0
        if not callable(fn):
            return {"ok": False, "reason": "build_error", "compile_s": dt,
                    "error": f"build(spec) returned {type(fn).__name__}, not a callable run(...)"}
        self.runs[spec.name] = fn
        return {"ok": True, "compile_s": dt, "kernels": list(self.recorder.names)}

    def op_bind(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Open the judge's buffers from their IPC descriptors (mkb_eval.ipc); never a pickle."""
        ins = [self.ipc.open_tensor(d) for d in msg["inputs"]]
        outs = [self.ipc.open_tensor(d) for d in msg["outputs"]]
        self.bound[msg["shape"]] = (ins, outs)
        return {"ok": True}

    def _call_fn(self, shape: str) -> Any:
        fn = self.runs[shape]
        ins, outs = self.bound[shape]
        args = [*ins, *outs]
        return lambda: fn(*args)

    def _ops_recorder(self) -> Any:
        from torch.utils._python_dispatch import TorchDispatchMode

        class OpRecorder(TorchDispatchMode):
            def __init__(self) -> None:
                super().__init__()
                self.ops: list[str] = []

            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                self.ops.append(str(func))
                return func(*args, **(kwargs or {}))

        return OpRecorder()

    def _marked_call(self, call: Any) -> list[str]:
        """One call under a TorchDispatchMode, between two marker kernels; its aten ops."""
        rec = self._ops_recorder()
        self._sync()
        self._sleep(MARK_CYCLES)
        with rec:
            call()
        self._sleep(MARK_CYCLES)
        self._sync()
        return rec.ops

    def _warm_profiler(self) -> None:
        """One throw-away profiler session at start-up, while the runner waits in the pool: the
        first session of a process spends about 4.5 s setting up CUPTI (measured on the H200,
        bench/h200/2026-12-01b/), later ones a fraction of that; paid here it is off the
        evaluation's path."""
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]):
            self._sleep(MARK_CYCLES)
            self._sync()

    @staticmethod
    def _activities(prof: Any) -> list[dict[str, Any]]:
        """The GPU activities of a finished profiler session, in start-time order."""
        events = []
        for e in prof.profiler.kineto_results.events():
            if not str(e.device_type()).endswith("CUDA"):
                continue
            name = str(e.name())
            if name.startswith("Memcpy"):
                kind = "memcpy"
            elif name.startswith("Memset"):
                kind = "memset"
            elif name in ("Event Sync", "Stream Sync", "Context Sync", "Stream Wait Event", "Event Record"):
                kind = "sync"
            elif name in ("", "INVALID"):
                kind = "unnamed"  # kineto could not name it (seen around CuTe module loads); kept, not judged
            else:
                kind = "kernel"
            start = e.start_ns() if hasattr(e, "start_ns") else 0
            events.append((start, {"name": name, "kind": kind, "stream": int(e.device_resource_id())}))
        events.sort(key=lambda x: x[0])
        return [e for _, e in events]

    def record_call(self, call: Any) -> dict[str, Any]:
        """One call in a profiler session of its own (the timing loop's profiled repetition)."""
        from torch.profiler import ProfilerActivity, profile

        self._sync()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            ops = self._marked_call(call)
        return {"ops": ops, "activities": self._activities(prof), "allowed_kernels": list(self.recorder.names)}

    def op_call(self, msg: dict[str, Any]) -> dict[str, Any]:
        """One run(). The first checked call starts a profiler session that records every later
        call (each between markers, under the op recorder) until `collect`: one session for the
        whole correctness phase instead of one per checked call (a session's CUPTI set-up and
        teardown cost about a second), and checked calls look like all others."""
        call = self._call_fn(msg["shape"])
        try:
            if msg.get("checked") and self.session is None:
                from torch.profiler import ProfilerActivity, profile

                self._sync()
                self.session = profile(activities=[ProfilerActivity.CUDA])
                self.session.start()
                self.session_calls = []
            if self.session is not None:
                ops = self._marked_call(call)
                self.session_calls.append({"shape": msg["shape"], "ops": ops})
            else:
                call()
            self._sync()
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "reason": "runtime_error", "error": _tb(e), "summary": _summary(e)}
        return {"ok": True, "record": None}

    def op_collect(self, msg: dict[str, Any]) -> dict[str, Any]:
        """End the profiler session: every recorded call's ops and the session's GPU activities."""
        if self.session is None:
            return {"ok": True, "record": None}
        prof, self.session = self.session, None
        self._sync()
        prof.stop()
        return {"ok": True, "record": {"calls": self.session_calls, "activities": self._activities(prof),
                                       "allowed_kernels": list(self.recorder.names)}}

    def op_time(self, msg: dict[str, Any]) -> dict[str, Any]:
        """The timing loop (docs/evaluator.md "Timing"): before every timed repetition the runner
        sends {"event": "rep", "rep": i} and waits for the judge's {"op": "go"} (the judge has
        written fresh inputs and poisoned outputs by then); rep `profile_at` is a recorded call
        instead of a timed one. The same exchange for every rep: the runner cannot tell which
        reps the judge checks."""
        timing = self.timing
        call = self._call_fn(msg["shape"])
        if self.session is not None:  # never time under the profiler
            return {"ok": False, "reason": "protocol", "error": "time requested while a profiler session is open "
                    "(the judge must collect first)"}
        if self.flush is None and msg.get("flush", True):
            self.flush = timing.l2_flush_buffer()
        profile_at = msg.get("profile_at")
        profile: dict[str, Any] = {}

        def before(i: int) -> None:
            self.send({"event": "rep", "rep": i})
            if self.recv().get("op") != "go":
                raise Abort()

        def prof() -> None:
            profile["record"] = self.record_call(call)

        try:
            for _ in range(int(msg.get("warmup", 0))):
                call()
            self._sync()
            host: list[float] = []
            times = timing.timed_reps(call, int(msg["reps"]), self.flush if msg.get("flush", True) else None,
                                      before, None if profile_at is None else int(profile_at), prof,
                                      spin_cycles=timing.clamp_spin_cycles(int(msg.get("spin_cycles") or 0)),
                                      host_us=host)
            wall = timing.wall_per_call_us(call, int(msg["wall_calls"])) if msg.get("wall_calls") else None
        except Abort:
            return {"ok": False, "reason": "aborted", "error": "timing stopped by the judge"}
        except BaseException as e:  # noqa: BLE001
            return {"ok": False, "reason": "runtime_error", "error": _tb(e), "summary": _summary(e)}
        return {"ok": True, "times_us": times, "host_us": host, "wall_us_per_call": wall,
                "profile": profile.get("record")}

    def serve(self) -> None:
        ops = {"load": self.op_load, "build": self.op_build, "bind": self.op_bind, "call": self.op_call,
               "collect": self.op_collect, "time": self.op_time}
        while True:
            try:
                msg = self.recv()
            except EOFError:
                return
            op = msg.get("op")
            if op == "exit":
                self.send({"ok": True})
                return
            handler = ops.get(str(op))
            if handler is None:
                self.send({"ok": False, "reason": "protocol", "error": f"unknown op {op!r}"})
                continue
            try:
                reply = handler(msg)
            except BaseException as e:  # noqa: BLE001 - the harness itself failed: say so
                reply = {"ok": False, "reason": "harness_error", "error": _tb(e), "summary": _summary(e)}
            self.send(reply)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--dsl", required=True)
    ap.add_argument("--scratch", required=True)
    ap.add_argument("--no-netns", action="store_true", help="no unshare here (bwrap made the namespace)")
    ap.add_argument("--uid", type=int, help="drop to this uid first (the judge runs as root)")
    ap.add_argument("--gid", type=int)
    ap.add_argument("--seccomp", action="store_true", help="refuse fork/exec once the candidate is loaded")
    ap.add_argument("--in-sandbox", action="store_true", help="started inside bwrap (its own network namespace)")
    args = ap.parse_args(argv)

    from multiprocessing.connection import Connection

    conn = Connection(args.fd)
    from .sandbox import die_with_parent, drop_privileges, unshare_net

    dropped: dict[str, Any] = {}
    if args.uid is not None:
        # First of all, before torch or the DSL is imported: nothing of ours runs as root.
        try:
            dropped = drop_privileges(args.uid, args.gid if args.gid is not None else args.uid)
        except BaseException as e:  # noqa: BLE001
            conn.send_bytes(json.dumps({"ready": False, "error": f"dropping privileges failed: {_tb(e)}"}).encode())
            os._exit(3)
    die_with_parent()
    # Before torch starts any thread: every later thread inherits the empty network namespace.
    if args.in_sandbox:
        net_ok, net_msg = True, "bubblewrap --unshare-net"
    else:
        net_ok, net_msg = (False, "disabled") if args.no_netns else unshare_net()
    try:
        runner = Runner(conn, args.dsl, args.scratch, net_msg, net_ok, seccomp=args.seccomp, identity=dropped)
        ready = runner.start()
    except BaseException as e:  # noqa: BLE001
        conn.send_bytes(json.dumps({"ready": False, "error": _tb(e)}).encode())
        sys.stdout.flush()
        os._exit(3)
    ready["ids"] = runner.identities()
    ready["violations"] = []
    conn.send_bytes(json.dumps(ready).encode())
    try:
        runner.serve()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()

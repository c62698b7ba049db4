"""Runner processes as the judge sees them: start one inside the OS sandbox (bubblewrap, see
mkb_eval.sandbox; own session, allow-listed environment, stdout/stderr to scratch/log.txt, a
private pipe that is not fd 0/1/2), talk to it in JSON with deadlines while watching that it
lives and that its whole process tree stays under its memory limit, kill it (bwrap's
--die-with-parent takes every process of the sandbox with it). `RunnerPool` keeps single-use
runners warm per DSL (torch and the DSL imported)."""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .sandbox import EXTRA_READ_ENV, OsSandbox, runner_env

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
MAX_REPLY_BYTES = 64 << 20


class RunnerError(Exception):
    """The runner died, timed out, exceeded its memory, or broke the protocol."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # died | timeout | memory | protocol
        self.message = message


class RunnerHandle:
    def __init__(self, dsl: str, root: str, env_base: Mapping[str, str], sandbox: OsSandbox, netns: bool = True,
                 python: str = sys.executable):
        self.dsl = dsl
        self.sandbox = sandbox
        self.scratch = os.path.realpath(tempfile.mkdtemp(prefix=f"{dsl}-", dir=root))
        self.log_path = os.path.join(self.scratch, "log.txt")
        for sub in ("tmp", "cache"):  # TMPDIR and caches exist before anything in the runner asks
            os.makedirs(os.path.join(self.scratch, sub), exist_ok=True)
        ours, theirs = multiprocessing.Pipe(duplex=True)
        env = runner_env(env_base, self.scratch, [PACKAGE_PARENT], dsl=dsl)
        cmd = [python, "-m", "mkb_eval.runner", "--fd", str(theirs.fileno()), "--dsl", dsl, "--scratch", self.scratch]
        if sandbox.unsafe:
            if not netns:
                cmd.append("--no-netns")
        else:
            cmd += ["--in-sandbox", "--seccomp"]  # bwrap gives it an empty network namespace
            if sandbox.privileged:
                cmd += ["--uid", str(sandbox.uid), "--gid", str(sandbox.gid)]
        with open(self.log_path, "wb") as log:
            sandbox.prepare_scratch(self.scratch)
            pythonpath = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            extra_read = [p for p in env.get(EXTRA_READ_ENV, "").split(os.pathsep) if p]
            self.proc = subprocess.Popen(sandbox.wrap(cmd, self.scratch, pythonpath, extra_read=extra_read),
                                         stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT, cwd=self.scratch, env=env,
                                         pass_fds=[theirs.fileno()], start_new_session=True)
        theirs.close()
        self.conn = ours
        self.started = time.monotonic()
        self.ready: dict[str, Any] | None = None
        self.closed = False

    # -- life -------------------------------------------------------------------------------------
    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_mb(self) -> float:
        """Resident memory of the runner's whole process tree (bwrap, its init, the runner and
        anything they started)."""
        return sum(_rss_mb(p) for p in process_tree(self.proc.pid))

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
            pass
        try:
            self.conn.close()
        except OSError:
            pass

    def close(self, remove_scratch: bool = True) -> None:
        if self.closed:
            return
        self.closed = True
        self.kill()
        if remove_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def death_message(self) -> str:
        rc = self.proc.poll()
        if rc is None:
            return "the runner stopped answering"
        if rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return f"the runner was killed by signal {name}"
        return f"the runner exited with status {rc}"

    def log(self, limit: int = 8000) -> str:
        try:
            data = Path(self.log_path).read_bytes()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if len(text) <= limit:
            return text
        cut = len(text) - limit
        return f"[log trimmed: first {cut} of {len(text)} characters cut]\n" + text[-limit:]

    # -- talking ----------------------------------------------------------------------------------
    def wait_ready(self, timeout: float) -> dict[str, Any]:
        """The runner's hello; a runner that is not the sandbox uid (or still holds capabilities)
        is refused: it would not be the process the sandbox promised."""
        if self.ready is None:
            ready = self._reply(timeout, None, 0)
            if ready.get("ready"):
                problem = self.check_identity(ready.get("identity") or {})
                if problem:
                    self.kill()
                    raise RunnerError("protocol", f"the runner is not sandboxed as expected: {problem}")
            self.ready = ready
        return self.ready

    def check_identity(self, ident: Mapping[str, Any]) -> str | None:
        if self.sandbox.unsafe:
            return None
        want = self.sandbox.runner_uid
        if ident.get("uid") != want or ident.get("euid") != want:
            return f"uid {ident.get('uid')}/{ident.get('euid')}, expected {want}"
        if self.sandbox.privileged and str(ident.get("CapEff", "0")).strip("0"):
            return f"effective capabilities {ident.get('CapEff')}"
        if ident.get("visible_pids") is None or int(ident["visible_pids"]) > 3:
            return f"/proc shows {ident.get('visible_pids')} processes"
        return None

    def send(self, msg: dict[str, Any]) -> None:
        """Judge -> runner: JSON only (nothing the runner unpickles)."""
        self.conn.send_bytes(json.dumps(msg, allow_nan=False).encode())

    def request(self, msg: dict[str, Any], timeout: float, rss_mb: float = 0,
                on_event: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        try:
            self.send(msg)
        except (OSError, EOFError, BrokenPipeError) as e:
            raise RunnerError("died", f"{self.death_message()} (send failed: {e})") from None
        return self._reply(timeout, on_event, rss_mb)

    def _reply(self, timeout: float, on_event: Callable[[dict[str, Any]], dict[str, Any] | None] | None,
               rss_mb: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        last_rss = 0.0
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise RunnerError("timeout", f"no answer within {timeout:.0f} s")
            ready = False
            try:
                ready = self.conn.poll(min(0.2, deadline - now))
            except (OSError, EOFError):
                pass
            if ready:
                try:
                    data = self.conn.recv_bytes(MAX_REPLY_BYTES)
                except (EOFError, OSError) as e:
                    self.proc.poll()
                    raise RunnerError("died", f"{self.death_message()} ({type(e).__name__})") from None
                try:
                    msg = json.loads(data)
                except ValueError:
                    raise RunnerError("protocol", "the runner sent a message that is not JSON") from None
                if not isinstance(msg, dict):
                    raise RunnerError("protocol", "the runner sent a message that is not an object")
                if "event" in msg and on_event is not None:
                    answer = on_event(msg)
                    if answer is not None:
                        try:
                            self.send(answer)
                        except (OSError, EOFError) as e:
                            raise RunnerError("died", f"{self.death_message()} ({e})") from None
                    continue
                return msg
            if self.proc.poll() is not None:
                try:
                    if self.conn.poll(0):
                        continue
                except (OSError, EOFError):
                    pass
                raise RunnerError("died", self.death_message())
            if rss_mb and now - last_rss > 0.5:
                last_rss = now
                rss = self.rss_mb()
                if rss > rss_mb:
                    self.kill()
                    raise RunnerError("memory", f"the runner used {rss:.0f} MB of memory (limit {rss_mb:.0f} MB)")


class RunnerPool:
    """Warm, single-use runners per DSL. `acquire` hands one out and starts its replacement."""

    def __init__(self, root: str, env_base: Mapping[str, str], sandbox: OsSandbox, size: int = 1, netns: bool = True):
        self.root = root
        self.env_base = dict(env_base)
        self.sandbox = sandbox
        self.size = max(0, size)
        self.netns = netns
        self.idle: dict[str, list[RunnerHandle]] = {}

    def prewarm(self, dsl: str) -> None:
        q = self.idle.setdefault(dsl, [])
        for h in [h for h in q if not h.alive()]:
            q.remove(h)
            h.close()
        while len(q) < self.size:
            q.append(RunnerHandle(dsl, self.root, self.env_base, self.sandbox, self.netns))

    def acquire(self, dsl: str) -> RunnerHandle:
        q = self.idle.setdefault(dsl, [])
        while q:
            h = q.pop(0)
            if h.alive():
                self.prewarm(dsl)
                return h
            h.close()
        h = RunnerHandle(dsl, self.root, self.env_base, self.sandbox, self.netns)
        self.prewarm(dsl)
        return h

    def shutdown(self) -> None:
        for q in self.idle.values():
            for h in q:
                h.close()
        self.idle.clear()


def process_tree(pid: int) -> list[int]:
    """pid and all its descendants (from /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0

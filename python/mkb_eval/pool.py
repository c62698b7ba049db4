"""Runner processes as the judge sees them: start one (own session = own process group, allow-listed
environment, stdout/stderr to scratch/log.txt, a private pipe that is not fd 0/1/2), talk to it
with deadlines while watching that it lives and stays under its memory limit, kill its whole
process group. `RunnerPool` keeps single-use runners warm per DSL (torch and the DSL imported)."""

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

from .sandbox import runner_env

PACKAGE_PARENT = str(Path(__file__).resolve().parent.parent)
MAX_REPLY_BYTES = 64 << 20


class RunnerError(Exception):
    """The runner died, timed out, exceeded its memory, or broke the protocol."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind  # died | timeout | memory | protocol
        self.message = message


class RunnerHandle:
    def __init__(self, dsl: str, root: str, env_base: Mapping[str, str], netns: bool = True,
                 python: str = sys.executable):
        self.dsl = dsl
        self.scratch = os.path.realpath(tempfile.mkdtemp(prefix=f"{dsl}-", dir=root))
        self.log_path = os.path.join(self.scratch, "log.txt")
        for sub in ("tmp", "cache"):  # TMPDIR and caches exist before anything in the runner asks
            os.makedirs(os.path.join(self.scratch, sub), exist_ok=True)
        ours, theirs = multiprocessing.Pipe(duplex=True)
        env = runner_env(env_base, self.scratch, [PACKAGE_PARENT])
        cmd = [python, "-m", "mkb_eval.runner", "--fd", str(theirs.fileno()), "--dsl", dsl, "--scratch", self.scratch]
        if not netns:
            cmd.append("--no-netns")
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.scratch, env=env, pass_fds=[theirs.fileno()],
                                         start_new_session=True)
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
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024.0
        except OSError:
            pass
        return 0.0

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
        if self.ready is None:
            self.ready = self._reply(timeout, None, 0)
        return self.ready

    def request(self, msg: dict[str, Any], timeout: float, rss_mb: float = 0,
                on_event: Callable[[dict[str, Any]], dict[str, Any] | None] | None = None) -> dict[str, Any]:
        try:
            self.conn.send(msg)
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
                            self.conn.send(answer)
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

    def __init__(self, root: str, env_base: Mapping[str, str], size: int = 1, netns: bool = True):
        self.root = root
        self.env_base = dict(env_base)
        self.size = max(0, size)
        self.netns = netns
        self.idle: dict[str, list[RunnerHandle]] = {}

    def prewarm(self, dsl: str) -> None:
        q = self.idle.setdefault(dsl, [])
        for h in [h for h in q if not h.alive()]:
            q.remove(h)
            h.close()
        while len(q) < self.size:
            q.append(RunnerHandle(dsl, self.root, self.env_base, self.netns))

    def acquire(self, dsl: str) -> RunnerHandle:
        q = self.idle.setdefault(dsl, [])
        while q:
            h = q.pop(0)
            if h.alive():
                self.prewarm(dsl)
                return h
            h.close()
        h = RunnerHandle(dsl, self.root, self.env_base, self.netns)
        self.prewarm(dsl)
        return h

    def shutdown(self) -> None:
        for q in self.idle.values():
            for h in q:
                h.close()
        self.idle.clear()

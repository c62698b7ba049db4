"""The runner's sandbox (docs/evaluator.md "Sandbox of a runner"): a private network namespace,
resource limits, an allow-listed environment, and an irremovable audit hook that blocks sockets,
processes, signals, frame/GC introspection and file writes outside the scratch dir, and records
every blocked attempt so the judge can fail the candidate even if it swallowed the exception.
Harness code (not candidate code) may use ctypes here."""

from __future__ import annotations

import ctypes
import os
import resource
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CLONE_NEWNET = 0x40000000

# Environment variables a runner may inherit from the judge (everything else is dropped).
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
             "CUDA_DEVICE_ORDER", "CUDA_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES", "TERM")
ENV_ALLOW_PREFIX = ("CUTE_DSL_", "TVM_", "NVIDIA_TF32", "MKB_EVAL_SANDBOX_")

# Audit events that are always refused once the candidate is loaded.
BLOCKED_EVENTS = frozenset({
    "subprocess.Popen", "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "signal.pthread_kill",
    "sys.setprofile", "sys.settrace", "gc.get_objects", "gc.get_referrers",
    "gc.get_referents", "os.posix_spawn", "os.posix_spawnp", "pty.spawn", "webbrowser.open",
})
BLOCKED_PREFIXES = ("socket.", "os.exec", "os.spawn")
# Events whose path arguments must lie in a writable root.
PATH_WRITE_EVENTS = frozenset({
    "os.remove", "os.unlink", "os.rename", "os.replace", "os.rmdir", "os.truncate", "os.chmod", "os.chown",
    "os.mkdir", "os.symlink", "os.link", "os.utime", "os.chflags", "os.lchflags", "os.lchmod", "os.lchown",
    "shutil.rmtree", "shutil.move", "shutil.copyfile", "shutil.copytree", "shutil.chown", "os.mkfifo", "os.mknod",
})
# Other kernel languages: importing one (for the first time) from the candidate's code is refused.
BLOCKED_IMPORTS = ("triton", "cupy", "numba", "pycuda", "torch.utils.cpp_extension", "torch._inductor", "cffi",
                   "tilelang", "jax", "warp", "taichi", "cuda.core", "cuda.compute", "cuda.cccl")

# Programs `ctypes.util.find_library` runs to locate a shared library (ldconfig -p, then gcc/cc
# and ld as fallbacks). The DSL runtimes look up libcuda that way when they compile on a GPU
# machine (seen on the H200 with TIRx), so these are allowed when, and only when, the spawn
# comes from ctypes/util.py. The candidate cannot import ctypes (static check).
FIND_LIBRARY_TOOLS = frozenset({"ldconfig", "ldconfig.real", "gcc", "cc", "ld", "objdump"})

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def unshare_net() -> tuple[bool, str]:
    """Move this process into a new, empty network namespace (needs CAP_SYS_ADMIN)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.unshare(CLONE_NEWNET) == 0:
            return True, "private network namespace"
        err = ctypes.get_errno()
        return False, f"unshare(CLONE_NEWNET) failed: {os.strerror(err)}"
    except Exception as e:  # noqa: BLE001 - report, never fail start-up on this
        return False, f"unshare unavailable: {e}"


def die_with_parent() -> bool:
    """PR_SET_PDEATHSIG: the kernel kills this process when the judge dies, so no orphaned runner
    keeps a GPU busy."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(1, 9, 0, 0, 0) == 0  # PR_SET_PDEATHSIG, SIGKILL
    except Exception:  # noqa: BLE001
        return False


def set_limits(cpu_s: float | None, fsize_bytes: int | None = 1 << 30) -> None:
    """RLIMIT_CPU counted from now (the process has used some CPU already), RLIMIT_FSIZE."""
    if cpu_s is not None:
        used = resource.getrusage(resource.RUSAGE_SELF)
        now = used.ru_utime + used.ru_stime
        soft = int(now + cpu_s) + 1
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        new_hard = soft + 5 if hard == resource.RLIM_INFINITY else min(hard, soft + 5)
        resource.setrlimit(resource.RLIMIT_CPU, (min(soft, new_hard), new_hard))
    if fsize_bytes is not None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))


def runner_env(base: Mapping[str, str], scratch: str, pythonpath_first: Iterable[str] = ()) -> dict[str, str]:
    """The allow-listed environment of a runner: no secrets, temp and caches inside scratch."""
    env = {k: v for k, v in base.items() if k in ENV_ALLOW or k.startswith(ENV_ALLOW_PREFIX)}
    paths = [p for p in pythonpath_first if p] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    seen: list[str] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    env["PYTHONPATH"] = os.pathsep.join(seen)
    env["HOME"] = scratch
    env["TMPDIR"] = os.path.join(scratch, "tmp")
    env["XDG_CACHE_HOME"] = os.path.join(scratch, "cache")
    env["CUTE_DSL_CACHE_DIR"] = os.path.join(scratch, "cache", "cute")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONNOUSERSITE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _norm(p: Any) -> str | None:
    try:
        s = os.fsdecode(p)
    except TypeError:
        return None
    return os.path.realpath(os.path.abspath(s))


def _under(path: str, roots: Iterable[str]) -> bool:
    for r in roots:
        if path == r or path.startswith(r.rstrip("/") + "/"):
            return True
    return False


def default_read_roots(scratch: str) -> list[str]:
    """Where a sandboxed process may read: its scratch dir, the Python installation and every
    import path (site-packages, DSL bundles), system libraries, CUDA, /dev, /proc/self, /sys."""
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = {scratch, package_parent, sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/dev", "/sys",
             "/proc/self", "/proc/thread-self", "/etc/ld.so.cache", "/etc/localtime", "/opt/nvidia"}
    for p in sys.path:
        if p and os.path.isabs(p) and p != "/":
            roots.add(p)
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            roots.add(os.environ[var])
    for extra in os.environ.get("MKB_EVAL_SANDBOX_EXTRA_READ", "").split(os.pathsep):
        if extra:
            roots.add(extra)
    out = []
    for r in roots:
        n = _norm(r)
        if n and n != "/":
            out.append(n)
    return sorted(set(out))


@dataclass
class Sandbox:
    """The audit hook's policy and its record of refused attempts."""

    scratch: str
    kernel_path: str
    write_roots: list[str] = field(default_factory=list)
    read_roots: list[str] = field(default_factory=list)
    read_policy: str = "enforce"  # enforce | log | off
    violations: list[str] = field(default_factory=list)
    installed: bool = False
    _busy: bool = False

    def __post_init__(self) -> None:
        self.scratch = _norm(self.scratch) or self.scratch
        self.kernel_path = _norm(self.kernel_path) or self.kernel_path
        self.write_roots = sorted({self.scratch, "/dev", *[_norm(r) or r for r in self.write_roots]})
        self.read_roots = [_norm(r) or r for r in (self.read_roots or default_read_roots(self.scratch))]

    def install(self) -> None:
        """Install the hook for the rest of this process's life (audit hooks cannot be removed)."""
        if not self.installed:
            sys.addaudithook(self._hook)
            self.installed = True

    def _refuse(self, what: str, enforce: bool = True, exc: type[Exception] = PermissionError) -> None:
        if len(self.violations) < 50:
            self.violations.append(what)
        if enforce:
            raise exc(f"sandbox: {what} is not allowed")

    def _candidate_on_stack(self) -> bool:
        f = sys._getframe(2)
        while f is not None:
            if f.f_code.co_filename == self.kernel_path:
                return True
            f = f.f_back
        return False

    @staticmethod
    def _find_library_spawn(args: tuple[Any, ...]) -> bool:
        """Is this subprocess.Popen ctypes.util.find_library running one of its lookup tools?"""
        exe = args[0] if args and args[0] else None
        if exe is None and len(args) > 1 and isinstance(args[1], list | tuple) and args[1]:
            exe = args[1][0]
        try:
            name = os.path.basename(os.fsdecode(exe)) if exe is not None else ""
        except TypeError:
            return False
        if name not in FIND_LIBRARY_TOOLS:
            return False
        f = sys._getframe(3)
        while f is not None:
            if f.f_code.co_filename.replace(os.sep, "/").endswith("/ctypes/util.py"):
                return True
            f = f.f_back
        return False

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self._busy:
            return
        self._busy = True
        try:
            self._check(event, args)
        finally:
            self._busy = False

    def _check(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if path is None or isinstance(path, int):
                return
            p = _norm(path)
            if p is None:
                return
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and bool(flags & _WRITE_FLAGS))
            if writing:
                if not _under(p, self.write_roots):
                    self._refuse(f"open {p!r} for writing")
            elif self.read_policy != "off" and not _under(p, self.read_roots):
                self._refuse(f"open {p!r} for reading", enforce=self.read_policy == "enforce")
        elif event == "sys.addaudithook":
            # Only a RuntimeError keeps the new hook out (and is swallowed by addaudithook).
            self._refuse(event, exc=RuntimeError)
        elif event == "subprocess.Popen" and self._find_library_spawn(args):
            return
        elif event in BLOCKED_EVENTS or event.startswith(BLOCKED_PREFIXES):
            detail = ""
            if args:
                detail = " " + repr(args[0])[:80] if not event.startswith("socket.") else ""
            self._refuse(f"{event}{detail}")
        elif event in PATH_WRITE_EVENTS:
            for a in args:
                if isinstance(a, str | bytes | os.PathLike):
                    p = _norm(a)
                    if p is not None and not _under(p, self.write_roots):
                        self._refuse(f"{event} {p!r}")
        elif event == "import" and args:
            name = str(args[0])
            if any(name == b or name.startswith(b + ".") for b in BLOCKED_IMPORTS) and self._candidate_on_stack():
                self._refuse(f"import {name}")

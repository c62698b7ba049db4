"""The runner's sandbox (docs/threat-model.md, docs/evaluator.md "Sandbox of a runner").

The boundary is the operating system: every runner starts inside bubblewrap (`bwrap`) with its own
PID, mount, IPC, UTS and network namespaces, a read-only view of only the interpreter, the import
paths and the system libraries, a private /dev (the GPU nodes in full mode), a fresh /proc, a
tmpfs /tmp and its writable scratch dir; as root, bwrap keeps only CAP_SETUID/CAP_SETGID and the
runner drops to an unprivileged uid before it imports anything (`drop_privileges`); a seccomp
filter refuses fork and exec once the candidate is about to load (`install_seccomp`).
Python-level layers stay on top: resource limits, an allow-listed environment (plus what each DSL's
descriptor, dsls/<name>/dsl.toml, passes, sets or lets a runner read), and an irremovable audit hook that refuses sockets, processes, signals, frame/GC introspection and file
writes outside the scratch dir, and records every refused attempt so the judge can fail the
candidate even if it swallowed the exception. Harness code (not candidate code) may use ctypes."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import glob
import os
import resource
import shutil
import stat
import struct
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

CLONE_NEWNET = 0x40000000

# Environment variables a runner may inherit from the judge (everything else is dropped), besides
# the prefixes the registered DSLs' descriptors list (environment.inherit_prefixes).
ENV_ALLOW = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
             "CUDA_DEVICE_ORDER", "CUDA_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES", "TERM")
ENV_ALLOW_PREFIX = ("NVIDIA_TF32", "MKB_EVAL_SANDBOX_")
EXTRA_READ_ENV = "MKB_EVAL_SANDBOX_EXTRA_READ"

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


def dsl_prefixes() -> tuple[str, ...]:
    """The environment prefixes every registered DSL passes to its runners."""
    from .adapters import descriptors

    return tuple(sorted({p for d in descriptors().values() for p in d.inherit_prefixes}))


def runner_env(base: Mapping[str, str], scratch: str, pythonpath_first: Iterable[str] = (),
               dsl: str | None = None) -> dict[str, str]:
    """The allow-listed environment of a runner: no secrets, temp and caches inside scratch. For a
    runner of `dsl`, its descriptor adds its python.path first on PYTHONPATH, its environment.runner
    variables ({scratch} filled in), its sandbox.read_only paths (MKB_EVAL_SANDBOX_EXTRA_READ) and
    the adapter module to load (MKB_EVAL_ADAPTER: the runner cannot read dsls/)."""
    from .adapters import ADAPTER_ENV, descriptor

    prefixes = ENV_ALLOW_PREFIX + dsl_prefixes()
    env = {k: v for k, v in base.items() if k in ENV_ALLOW or k.startswith(prefixes)}
    desc = descriptor(dsl) if dsl is not None else None
    first = [*(desc.python_path if desc else ()), *pythonpath_first]
    paths = [p for p in first if p] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    seen: list[str] = []
    for p in paths:
        if p not in seen:
            seen.append(p)
    env["PYTHONPATH"] = os.pathsep.join(seen)
    env["HOME"] = scratch
    env["TMPDIR"] = os.path.join(scratch, "tmp")
    env["XDG_CACHE_HOME"] = os.path.join(scratch, "cache")
    if desc is not None:
        for k, v in desc.runner_env.items():
            env[k] = v.replace("{scratch}", scratch)
        env[ADAPTER_ENV] = f"{desc.name}={desc.adapter}"
        extra = [x for x in env.get(EXTRA_READ_ENV, "").split(os.pathsep) if x] + list(desc.read_only)
        if extra:
            env[EXTRA_READ_ENV] = os.pathsep.join(dict.fromkeys(extra))
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
    for extra in os.environ.get(EXTRA_READ_ENV, "").split(os.pathsep):
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


# ---- the OS sandbox: bubblewrap, an unprivileged uid, seccomp ------------------------------------

DEFAULT_UID = 65534  # nobody
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_DIR))
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SYSTEM_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/localtime",
                "/etc/nsswitch.conf")
GPU_EXTRA = ("/opt/nvidia", "/usr/local/nvidia", "/run/nvidia-persistenced")
UNSAFE_ENV = "MKB_EVAL_UNSAFE_NO_SANDBOX"
TMP_BYTES = 1 << 30  # the sandbox's private /tmp


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot set up its namespaces here."""


def _truthy(v: str | None) -> bool:
    return (v or "").strip().lower() not in ("", "0", "false", "no")


def unsafe_requested(env: Mapping[str, str] | None = None) -> bool:
    """The explicit opt-out (`mkb --unsafe-no-sandbox` sets MKB_EVAL_UNSAFE_NO_SANDBOX=1)."""
    return _truthy((env if env is not None else os.environ).get(UNSAFE_ENV))


def find_bwrap(env: Mapping[str, str] | None = None) -> str | None:
    """MKB_BWRAP (a path, or a name on PATH), else `bwrap` on PATH."""
    e = env if env is not None else os.environ
    name = e.get("MKB_BWRAP") or "bwrap"
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    return shutil.which(name, path=e.get("PATH"))


def _collapse(paths: Iterable[str]) -> list[str]:
    """Absolute, existing, de-duplicated paths, dropping any that lies inside another one."""
    out: list[str] = []
    for p in sorted({os.path.normpath(p) for p in paths if p and os.path.isabs(p) and os.path.exists(p)}):
        if p == "/" or any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            continue
        out.append(p)
    return out


def _is_ancestor_or_same(a: str, b: str) -> bool:
    a, b = os.path.normpath(a), os.path.normpath(b)
    return a == b or b.startswith(a.rstrip("/") + "/")


def read_only_roots(pythonpath: Iterable[str] = (), extra: Iterable[str] = ()) -> list[str]:
    """What a runner may read besides the system directories: the interpreter (the venv and the
    Python it was made from), every import path (site-packages, DSL bundles on PYTHONPATH), the
    mkb_eval package itself (not the folder above it: that is the project tree), CUDA_HOME, and
    MKB_EVAL_SANDBOX_EXTRA_READ. Never the repository root or anything above it."""
    roots: set[str] = {PACKAGE_DIR}
    exe = os.path.abspath(sys.executable)
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, os.path.dirname(exe),
              os.path.dirname(os.path.realpath(exe))):
        roots.add(p)
        roots.add(os.path.realpath(p))
    for p in [*sys.path, *pythonpath, *extra]:
        if p and os.path.isabs(p):
            roots.add(p)
            roots.add(os.path.realpath(p))
    for var in ("CUDA_PATH", "CUDA_HOME"):
        if os.environ.get(var):
            roots.add(os.environ[var])
    roots.update(x for x in os.environ.get("MKB_EVAL_SANDBOX_EXTRA_READ", "").split(os.pathsep) if x)
    package_parent = os.path.dirname(PACKAGE_DIR)
    keep = [r for r in roots if not _is_ancestor_or_same(r, package_parent) and not _is_ancestor_or_same(r, REPO_ROOT)]
    return _collapse(keep)


@dataclass
class OsSandbox:
    """How runners are wrapped: bubblewrap at `bwrap`, or nothing when `unsafe` (the opt-out)."""

    bwrap: str | None
    version: str = ""
    privileged: bool = False  # mkb runs as root: no user namespace, the runner drops to uid/gid
    uid: int = DEFAULT_UID
    gid: int = DEFAULT_UID
    gpu: bool = False
    unsafe: bool = False
    why_unsafe: str = ""
    etc_dir: str = ""  # where the synthetic passwd/group files live (outside every sandbox)

    @property
    def runner_uid(self) -> int:
        """The uid the runner must report: the sandbox uid as root, else ours."""
        return self.uid if (self.privileged and not self.unsafe) else os.getuid()

    def info(self) -> dict[str, Any]:
        if self.unsafe:
            return {"tool": "none", "unsafe": True, "why": self.why_unsafe,
                    "layers": ["audit hook", "static check", "private network namespace if permitted"]}
        return {"tool": "bubblewrap", "path": self.bwrap, "version": self.version, "unsafe": False,
                "privileged": self.privileged, "uid": self.runner_uid, "gid": self.gid if self.privileged else os.getgid(),
                "namespaces": ["pid", "mount", "ipc", "net", "uts", "cgroup"] + ([] if self.privileged else ["user"]),
                "gpu_nodes": self.gpu, "seccomp": "fork/exec refused after load"}

    def write_identity_files(self, root: str) -> None:
        """passwd/group for the sandbox: root, nobody, the runner's uid (no host accounts)."""
        self.etc_dir = os.path.join(root, "etc")
        os.makedirs(self.etc_dir, exist_ok=True)
        uid, gid = (self.uid, self.gid) if self.privileged else (os.getuid(), os.getgid())
        users = {0: "root", DEFAULT_UID: "nobody", uid: "runner"}
        groups = {0: "root", DEFAULT_UID: "nogroup", gid: "runner"}
        with open(os.path.join(self.etc_dir, "passwd"), "w") as f:
            for u, name in users.items():
                f.write(f"{name}:x:{u}:{gid if u == uid else u}:{name}:/nonexistent:/usr/sbin/nologin\n")
        with open(os.path.join(self.etc_dir, "group"), "w") as f:
            for g, name in groups.items():
                f.write(f"{name}:x:{g}:\n")
        for n in ("passwd", "group"):
            os.chmod(os.path.join(self.etc_dir, n), 0o644)

    def prepare_scratch(self, scratch: str) -> None:
        """As root: hand the scratch dir (and what is already in it) to the sandbox uid."""
        if self.unsafe or not self.privileged:
            return
        # 0755: bwrap (root without CAP_DAC_OVERRIDE after --cap-drop) must enter it to chdir; the
        # judge's root above it stays 0700, and no other sandbox mounts it.
        os.chmod(scratch, 0o755)
        for dirpath, _dirnames, filenames in os.walk(scratch):
            os.chown(dirpath, self.uid, self.gid)
            for n in filenames:
                p = os.path.join(dirpath, n)
                if not os.path.islink(p):
                    os.chown(p, self.uid, self.gid)

    def argv(self, scratch: str, pythonpath: Iterable[str] = (), gpu: bool | None = None,
             extra_read: Iterable[str] = ()) -> list[str]:
        """bwrap's arguments for one runner (everything before `--` and the command)."""
        assert self.bwrap is not None
        a = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
             "--hostname", "mkb-sandbox", "--die-with-parent", "--new-session"]
        if self.privileged:
            # bwrap run by root keeps every capability unless told otherwise; the runner needs
            # these two only to drop to the sandbox uid (which clears them).
            a += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            a += ["--unshare-user", "--disable-userns"]
        made = {"/"}

        def parents(dest: str) -> list[str]:
            # bwrap makes missing parents of a mount point 0700 (unreadable once the runner is not
            # root): make them 0755 first, explicitly.
            out: list[str] = []
            parts = os.path.normpath(dest).split("/")[1:-1]
            for i in range(len(parts)):
                d = "/" + "/".join(parts[: i + 1])
                if d not in made:
                    made.add(d)
                    out += ["--perms", "0755", "--dir", d]
            return out

        for d in SYSTEM_DIRS:
            if os.path.islink(d):
                a += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                a += ["--ro-bind", d, d]
            made.add(d)
        a += ["--perms", "0755", "--dir", "/etc"]
        made.add("/etc")
        for f in SYSTEM_FILES:
            if os.path.exists(f):
                a += ["--ro-bind", f, f]
        a += ["--size", str(TMP_BYTES), "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc", "--ro-bind-try", "/sys", "/sys"]
        made.update(("/tmp", "/dev", "/proc", "/sys"))
        use_gpu = self.gpu if gpu is None else gpu
        extra = [p for p in GPU_EXTRA if use_gpu and os.path.exists(p)] + list(extra_read)
        for r in read_only_roots(pythonpath, extra):
            if not _is_ancestor_or_same(r, "/usr"):
                a += [*parents(r), "--ro-bind", r, r]
        if use_gpu:
            for node in sorted(glob.glob("/dev/nvidia*")):
                try:
                    mode = os.stat(node).st_mode
                except OSError:
                    continue
                if stat.S_ISCHR(mode) or stat.S_ISDIR(mode):
                    a += ["--dev-bind", node, node]
        if self.etc_dir:
            a += ["--ro-bind", os.path.join(self.etc_dir, "passwd"), "/etc/passwd",
                  "--ro-bind", os.path.join(self.etc_dir, "group"), "/etc/group"]
        a += [*parents(scratch), "--bind", scratch, scratch, "--chdir", scratch]
        return a

    def wrap(self, cmd: list[str], scratch: str, pythonpath: Iterable[str] = (), gpu: bool | None = None,
             extra_read: Iterable[str] = ()) -> list[str]:
        """`cmd` inside bwrap; `extra_read`: more read-only paths (a DSL's sandbox.read_only)."""
        if self.unsafe:
            return list(cmd)
        return [*self.argv(scratch, pythonpath, gpu, extra_read), "--", *cmd]


def bwrap_version(bwrap: str) -> str:
    try:
        p = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=20)
        return (p.stdout or p.stderr).strip().split()[-1] if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError, IndexError):
        return ""


def setup_sandbox(root: str, gpu: bool, unsafe: bool | None = None, env: Mapping[str, str] | None = None) -> OsSandbox:
    """Find bubblewrap and prove it works here (a sandboxed interpreter runs and sees only itself
    in /proc); raise SandboxUnavailable with the reason, unless the opt-out is set, in which case
    the returned sandbox is `unsafe` and says why."""
    e = env if env is not None else os.environ
    unsafe = unsafe_requested(e) if unsafe is None else unsafe
    uid = int(e.get("MKB_EVAL_SANDBOX_UID", DEFAULT_UID))
    gid = int(e.get("MKB_EVAL_SANDBOX_GID", uid))
    if unsafe:
        return OsSandbox(None, unsafe=True, why_unsafe="--unsafe-no-sandbox (MKB_EVAL_UNSAFE_NO_SANDBOX) was given")
    bwrap = find_bwrap(e)
    if bwrap is None:
        raise SandboxUnavailable(f"bubblewrap not found ({'MKB_BWRAP=' + e['MKB_BWRAP'] if e.get('MKB_BWRAP') else 'bwrap on PATH'})"
                                 "; install it (apt-get install bubblewrap) or set MKB_BWRAP")
    sb = OsSandbox(bwrap, bwrap_version(bwrap), privileged=os.geteuid() == 0, uid=uid, gid=gid, gpu=gpu)
    if sb.privileged and uid == 0:
        raise SandboxUnavailable("MKB_EVAL_SANDBOX_UID must not be 0")
    sb.write_identity_files(root)
    probe = os.path.join(root, "probe")
    os.makedirs(probe, exist_ok=True)
    sb.prepare_scratch(probe)
    code = ("import os,sys,json\n"
            "sys.path.insert(0, sys.argv[1]) if len(sys.argv) > 1 else None\n"
            "print(json.dumps({'procs': sorted(int(p) for p in os.listdir('/proc') if p.isdigit()), 'uid': os.getuid()}))")
    cmd = sb.wrap([sys.executable, "-I", "-S", "-c", code], probe)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as ex:
        raise SandboxUnavailable(f"{bwrap} could not run: {ex}") from None
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    if p.returncode != 0:
        raise SandboxUnavailable(f"{bwrap} cannot set up its namespaces here (exit {p.returncode}): "
                                 f"{(p.stderr or p.stdout).strip()[-500:]}")
    try:
        import json as _json

        seen = _json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SandboxUnavailable(f"{bwrap}: the probe printed {p.stdout[-200:]!r}") from None
    if len(seen["procs"]) > 3:
        raise SandboxUnavailable(f"{bwrap}: the probe sees {len(seen['procs'])} processes (no PID namespace?)")
    return sb


def drop_privileges(uid: int, gid: int) -> dict[str, Any]:
    """The runner's first act when started by root inside bwrap: no supplementary groups, gid and
    uid set to the sandbox ids (real, effective, saved: the kernel then clears every capability),
    no_new_privs. Raises if any of it did not stick."""
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    set_no_new_privs()
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise RuntimeError("dropping privileges did not stick")
    try:
        os.setresuid(0, 0, 0)
    except PermissionError:
        pass
    else:
        raise RuntimeError("the runner could become root again after dropping privileges")
    return identity()


def set_no_new_privs() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(38, 1, 0, 0, 0) == 0  # PR_SET_NO_NEW_PRIVS
    except Exception:  # noqa: BLE001
        return False


def identity() -> dict[str, Any]:
    """Who this process is, as the judge checks it: uid/gid, groups, capabilities, NoNewPrivs,
    seccomp, and how many processes its /proc shows."""
    out: dict[str, Any] = {"uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups()}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("CapEff", "CapPrm", "NoNewPrivs", "Seccomp"):
                    out[k] = v.strip()
    except OSError:
        pass
    try:
        out["visible_pids"] = sum(1 for p in os.listdir("/proc") if p.isdigit())
    except OSError:
        out["visible_pids"] = None
    return out


# seccomp: refuse fork/exec/ptrace for the rest of the runner's life (all threads). Threads are
# clone() with CLONE_THREAD and stay allowed; clone3 answers ENOSYS so libc falls back to clone,
# whose flags a filter can read.
_ARCH = {"x86_64": (0xC000003E, {"clone": 56, "fork": 57, "vfork": 58, "execve": 59, "ptrace": 101,
                                  "process_vm_readv": 310, "process_vm_writev": 311, "execveat": 322, "clone3": 435},
                    317),
         "aarch64": (0xC00000B7, {"clone": 220, "execve": 221, "ptrace": 117, "process_vm_readv": 270,
                                   "process_vm_writev": 271, "execveat": 281, "clone3": 435}, 277)}
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_EPERM, _ENOSYS = 1, 38
CLONE_THREAD = 0x00010000


def seccomp_program(machine: str | None = None) -> bytes:
    """The classic-BPF filter as `struct sock_filter[]` bytes."""
    arch, nrs, _ = _ARCH[machine or os.uname().machine]
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    prog: list[tuple[int, Any, Any, int]] = [
        (ld, 0, 0, 4),                      # arch
        (jeq, 0, "eperm", arch),
        (ld, 0, 0, 0),                      # syscall number
        (jge, "enosys", 0, 0x40000000),     # x32 ABI
        (jeq, "enosys", 0, nrs["clone3"]),
        (jeq, "clone", 0, nrs["clone"]),
    ]
    for name in ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv", "process_vm_writev"):
        if name in nrs:
            prog.append((jeq, "eperm", 0, nrs[name]))
    prog.append((ret, 0, 0, _ALLOW))
    labels = {"clone": len(prog)}
    # low half of args[0] (the flags): a thread may be made, a process not (jumps go forward only)
    prog += [(ld, 0, 0, 16), (jset, 0, "eperm", CLONE_THREAD), (ret, 0, 0, _ALLOW)]
    labels["eperm"] = len(prog)
    prog.append((ret, 0, 0, _ERRNO | _EPERM))
    labels["enosys"] = len(prog)
    prog.append((ret, 0, 0, _ERRNO | _ENOSYS))
    out = b""
    for i, (code, jt, jf, k) in enumerate(prog):
        jt_, jf_ = (t if isinstance(t, int) else labels[t] - (i + 1) for t in (jt, jf))
        out += struct.pack("=HBBI", code, jt_, jf_, k)
    return out


def install_seccomp() -> tuple[bool, str]:
    """Install the filter on every thread of this process (SECCOMP_FILTER_FLAG_TSYNC)."""
    machine = os.uname().machine
    if machine not in _ARCH:
        return False, f"no seccomp filter for {machine}"
    set_no_new_privs()
    prog = seccomp_program(machine)
    buf = ctypes.create_string_buffer(prog, len(prog))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    fprog = SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    rc = libc.syscall(ctypes.c_long(_ARCH[machine][2]), ctypes.c_long(1), ctypes.c_long(1),  # SET_MODE_FILTER, TSYNC
                      ctypes.byref(fprog))
    if rc != 0:
        err = ctypes.get_errno()
        return False, f"seccomp failed: {os.strerror(err) if rc < 0 else f'thread {rc} could not sync'}"
    return True, "fork/exec/ptrace refused"


@functools.cache
def _cached_find_library(name: str) -> str | None:
    return _ORIGINAL_FIND_LIBRARY(name)


_ORIGINAL_FIND_LIBRARY = ctypes.util.find_library
FIND_LIBRARY_WARM = ("c", "dl", "m", "rt", "pthread", "cuda", "cudart", "nvrtc", "stdc++")


def warm_find_library(names: Iterable[str] = FIND_LIBRARY_WARM) -> None:
    """ctypes.util.find_library runs ldconfig/gcc, which seccomp refuses after load: answer the
    usual names now, and from a cache afterwards (an unknown name then gets None, as it would
    on a machine without those tools)."""
    for n in names:
        _cached_find_library(n)
    ctypes.util.find_library = _cached_find_library


# ---- candidate files: bounded before anything parses them ----------------------------------------

MAX_CANDIDATE_BYTES = 128 * 1024  # a kernel file is a few KiB; crates/mkb-eval/src/judge.rs has the same limit


class CandidateTooLarge(ValueError):
    """The candidate file is over MAX_CANDIDATE_BYTES (refused before reading it whole)."""


def read_candidate(path: str, limit: int = MAX_CANDIDATE_BYTES) -> str:
    """The candidate's source, read only when its size is within `limit` (checked on the open
    file and again while reading, so a file that grows in between is refused too)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise CandidateTooLarge(f"the candidate file is {size} bytes, over the limit of {limit} bytes; "
                                    "it was not read")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CandidateTooLarge(f"the candidate file grew past the limit of {limit} bytes while being read")
    return data.decode("utf-8")

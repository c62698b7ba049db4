"""The runner's sandbox, tested directly in fresh subprocesses (audit hooks cannot be removed, so
never in the test process): sockets, processes, signals, writes outside the scratch dir, reads
outside the allowed roots, other kernel languages imported from the candidate's file; what is
refused is also recorded. Plus the private network namespace and the runner environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mkb_eval.sandbox import runner_env

PRELUDE = '''
import json, os, sys
from mkb_eval.sandbox import Sandbox
scratch = sys.argv[1]
sb = Sandbox(scratch, os.path.join(scratch, "kernel.py"), read_policy=sys.argv[2])
sb.install()
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except PermissionError as e:
        results[name] = "refused"
    except Exception as e:
        results[name] = type(e).__name__
'''


def run_in_sandbox(tmp_path: Path, body: str, read_policy: str = "enforce") -> dict[str, Any]:
    scratch = tmp_path / "scratch"
    scratch.mkdir(exist_ok=True)
    (scratch / "tmp").mkdir(exist_ok=True)
    code = PRELUDE + textwrap.dedent(body) + '\nprint(json.dumps({"results": results, "violations": sb.violations}))\n'
    env = runner_env(os.environ, str(scratch), [str(Path(__file__).resolve().parents[1])])  # as a runner gets it
    p = subprocess.run([sys.executable, "-c", code, str(scratch), read_policy], capture_output=True, text=True,
                       timeout=120, env=env, cwd=scratch)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_blocks_network_processes_and_signals(tmp_path: Path) -> None:
    out = run_in_sandbox(tmp_path, '''
        import socket, subprocess, signal
        attempt("socket", lambda: socket.socket())
        attempt("connect", lambda: socket.create_connection(("127.0.0.1", 9), timeout=1))
        attempt("popen", lambda: subprocess.run(["true"]))
        attempt("system", lambda: os.system("true"))
        attempt("fork", lambda: os.fork())
        attempt("exec", lambda: os.execv("/bin/true", ["true"]))
        attempt("spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
        attempt("kill", lambda: os.kill(os.getppid(), 0))
        import gc
        attempt("gc", lambda: gc.get_objects())
        seen = []
        sys.addaudithook(lambda ev, args: seen.append(ev))  # silently not added
        open(os.path.join(scratch, "probe.txt"), "w").close()
        results["hook_called"] = bool(seen)
    ''')
    r = out["results"]
    assert all(r.get(k) == "refused" for k in ("socket", "connect", "popen", "system", "fork", "exec", "spawn", "kill",
                                           "gc")), json.dumps(r)
    assert r["hook_called"] is False
    assert "sys.addaudithook" in out["violations"] and len(out["violations"]) >= 10


def test_find_library_may_run_its_lookup_tools_and_nothing_else(tmp_path: Path) -> None:
    """ctypes.util.find_library spawns ldconfig/gcc/ld (the DSL runtimes use it on a GPU
    machine); that is allowed, while the same programs spawned directly stay refused."""
    out = run_in_sandbox(tmp_path, '''
        import ctypes.util, subprocess
        attempt("find_library", lambda: results.__setitem__("libc", ctypes.util.find_library("c")))
        attempt("direct_ldconfig", lambda: subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True))
        attempt("direct_gcc", lambda: subprocess.run(["gcc", "--version"], capture_output=True))
    ''')
    r = out["results"]
    assert r["find_library"] == "ok" and r.get("libc"), json.dumps(r)
    assert r["direct_ldconfig"] == "refused" and r["direct_gcc"] == "refused", json.dumps(r)
    # Only the two direct spawns are recorded as violations, not find_library's lookups.
    assert sum("subprocess.Popen" in v for v in out["violations"]) == 2, out["violations"]


def test_files(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    out = run_in_sandbox(tmp_path, f'''
        def write_inside():
            with open(os.path.join(scratch, "note.txt"), "w") as f:
                f.write("fine")
        def write_outside():
            with open({str(tmp_path / "new.txt")!r}, "w") as f:
                f.write("no")
        def append_outside():
            with open({str(outside)!r}, "a") as f:
                f.write("no")
        def read_outside():
            return open({str(outside)!r}).read()
        def read_site():
            import torch
            return open(torch.__file__).read(10)
        attempt("write_inside", write_inside)
        attempt("write_outside", write_outside)
        attempt("append_outside", append_outside)
        attempt("os_open_outside", lambda: os.open({str(tmp_path / "n2")!r}, os.O_WRONLY | os.O_CREAT))
        attempt("remove_outside", lambda: os.remove({str(outside)!r}))
        attempt("rename_outside", lambda: os.rename({str(outside)!r}, os.path.join(scratch, "x")))
        attempt("read_outside", read_outside)
        attempt("read_etc", lambda: open("/etc/hostname").read())
        attempt("read_site", read_site)
        attempt("devnull", lambda: open("/dev/null", "w").write("x"))
        attempt("tmpfile_outside", lambda: open("/tmp/mkb-sandbox-test-should-not-exist", "w"))
    ''')
    r = out["results"]
    assert r["write_inside"] == "ok" and r["read_site"] == "ok" and r["devnull"] == "ok", r
    for k in ("write_outside", "append_outside", "os_open_outside", "remove_outside", "rename_outside",
              "read_outside", "read_etc", "tmpfile_outside"):
        assert r[k] == "refused", (k, r)
    assert outside.read_text() == "secret" and not (tmp_path / "new.txt").exists()
    assert any("for writing" in v for v in out["violations"])
    assert any("for reading" in v for v in out["violations"])


def test_read_policy_log_records_but_allows(tmp_path: Path) -> None:
    out = run_in_sandbox(tmp_path, '''
        attempt("read_etc", lambda: open("/etc/hostname").read())
        attempt("write_etc", lambda: open("/etc/mkb-test", "w"))
    ''', read_policy="log")
    assert out["results"] == {"read_etc": "ok", "write_etc": "refused"}
    assert len(out["violations"]) == 2


def test_other_kernel_languages_only_from_the_candidate(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "kernel.py").write_text("try:\n    import triton\nexcept Exception as e:\n    WHY = type(e).__name__\n")
    out = run_in_sandbox(tmp_path, '''
        import importlib.util
        def from_candidate():
            spec = importlib.util.spec_from_file_location("kernel", os.path.join(scratch, "kernel.py"))
            m = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(m)
            results["why"] = m.WHY
        def from_harness():
            import cupy  # noqa: F401
        attempt("candidate", from_candidate)
        attempt("harness", from_harness)
    ''')
    assert out["results"]["why"] == "PermissionError"
    assert out["results"]["harness"] == "ModuleNotFoundError"
    assert out["violations"] == ["import triton"]


def test_private_network_namespace() -> None:
    code = textwrap.dedent('''
        import json, socket
        from mkb_eval.sandbox import unshare_net
        ok, msg = unshare_net()
        names = [n for _, n in socket.if_nameindex()]
        try:
            socket.create_connection(("1.1.1.1", 80), timeout=2)
            reached = True
        except OSError:
            reached = False
        print(json.dumps({"ok": ok, "msg": msg, "names": names, "reached": reached}))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    if not out["ok"]:
        pytest.skip(f"no CAP_SYS_ADMIN here: {out['msg']}")
    assert out["names"] == ["lo"] and not out["reached"]


def test_runner_environment_is_allow_listed(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "OPENAI_API_KEY": "sk-secret", "ANTHROPIC_API_KEY": "x", "HOME": "/root",
            "CUTE_DSL_ARCH": "sm_90a", "PYTHONPATH": "/bundle", "AWS_SECRET_ACCESS_KEY": "y", "GITHUB_TOKEN": "z"}
    env = runner_env(base, str(tmp_path), ["/pkg"])
    assert "OPENAI_API_KEY" not in env and "ANTHROPIC_API_KEY" not in env and "GITHUB_TOKEN" not in env
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HOME"] == str(tmp_path) and env["TMPDIR"].startswith(str(tmp_path))
    assert env["PYTHONPATH"] == "/pkg:/bundle" and env["CUTE_DSL_ARCH"] == "sm_90a"


def test_harness_tools_work_inside_the_sandbox(tmp_path: Path) -> None:
    """The profiler and the dispatcher recorder the runner uses after installing the hook must
    not trip it (on CPU here; the CUDA activities only exist on a GPU)."""
    out = run_in_sandbox(tmp_path, '''
        import torch
        import torch.profiler
        import torch.utils._python_dispatch
        from torch.profiler import ProfilerActivity, profile
        from torch.utils._python_dispatch import TorchDispatchMode

        class Rec(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.ops = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.ops.append(str(func))
                return func(*args, **(kwargs or {}))

        x = torch.randn(64, 64)
        rec = Rec()
        def go():
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with rec:
                    y = x.view(-1) + 1
            results["names"] = len(prof.profiler.kineto_results.events())
        attempt("profile", go)
        results["ops"] = rec.ops
    ''')
    assert out["results"]["profile"] == "ok" and out["violations"] == [], out
    assert "aten.add.Tensor" in out["results"]["ops"] and out["results"]["names"] > 0

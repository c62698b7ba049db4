"""The runner's sandbox. The audit-hook layer is tested directly in fresh subprocesses (audit hooks
cannot be removed, so never in the test process): sockets, processes, signals, writes outside the
scratch dir, reads outside the allowed roots, other kernel languages imported from the
candidate's file; what is refused is also recorded. The OS layer (bubblewrap, the unprivileged
uid, seccomp) is tested through real judges: the runner's identity and view of /proc, planted
secrets, the escape cases of tests/adversarial escaping WITHOUT the OS sandbox (so they are real
attempts) and being blocked with it (test_redteam.py), the refusal to run without a sandbox,
the candidate size limit, and the judge dying with its parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLE, FIXTURES, PROBLEMS, REDTEAM_CASES, REPO

from mkb_eval.cli import JudgeClient
from mkb_eval.pool import RunnerHandle
from mkb_eval.redteam import cases_from_json
from mkb_eval.sandbox import (
    MAX_CANDIDATE_BYTES,
    CandidateTooLarge,
    OsSandbox,
    find_bwrap,
    read_candidate,
    runner_env,
    seccomp_program,
)

A01 = PROBLEMS / "A" / "A01_bias_gelu"
IS_ROOT = os.geteuid() == 0
needs_bwrap = pytest.mark.skipif(find_bwrap() is None, reason="bubblewrap is not installed (CI installs it)")

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


# ---- the OS sandbox ---------------------------------------------------------------------------

def one_report(resp: dict[str, Any]) -> dict[str, Any]:
    assert resp["ok"], resp
    return resp["reports"][0]["report"]


PROBE = '''"""A probe candidate: a correct kernel whose build() first runs ESCAPE (ctypes in a timeit
string) and raises BLOCKED unless the attempt succeeded."""
import timeit
{body_imports}
ESCAPE = {escape!r}


{body}
'''

SLURP = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def slurp(path):
    fd = libc.open(path.encode(), 0)
    if fd < 0:
        return b""
    buf = ctypes.create_string_buffer(1 << 20)
    n = libc.read(fd, buf, 1 << 20)
    libc.close(fd)
    return buf.raw[:max(n, 0)]
'''


def probe_candidate(tmp_path: Path, name: str, escape: str) -> Path:
    """The A01 CuTe fixture with `escape` run through timeit at the top of build()."""
    src = (FIXTURES / "a01_cute_ok.py").read_text()
    body = src[src.index('"""', 3) + 3:].lstrip("\n")
    body = body.replace("def build(spec):\n", "def build(spec):\n    out = {}\n"
                        "    timeit.Timer(ESCAPE, globals={'out': out}).timeit(1)\n"
                        "    if not out.get('escaped'):\n        raise RuntimeError('BLOCKED: ' + str(out.get('detail')))\n", 1)
    p = tmp_path / f"{name}.py"
    p.write_text(PROBE.format(body_imports="", escape=escape, body=body))
    return p


@pytest.fixture(scope="module")
def sandboxed_judge(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """A judge with a planted secret in its environment (a name that looks like a key and one
    that does not, so the allow-list is not what hides it)."""
    log = (tmp_path_factory.mktemp("sbjudge") / "stderr.txt").open("w")
    env = {**os.environ, "MKB_PLANTED_API_KEY": "sk-planted-0123456789", "PLANTED_PLAIN": "plain-planted-9876"}
    client = JudgeClient(["--pool-size", "0", "--no-prewarm"], env=env, stderr=log, bundle=BUNDLE)
    try:
        yield client
    finally:
        client.close()
        log.close()


@needs_bwrap
def test_hello_reports_the_sandbox_and_runners_are_unprivileged(sandboxed_judge: JudgeClient) -> None:
    h = sandboxed_judge.request("hello", timeout=600)
    sb = h["sandbox"]
    assert sb["tool"] == "bubblewrap" and sb["unsafe"] is False and sb["version"]
    assert {"pid", "mount", "ipc", "net"} <= set(sb["namespaces"])
    rep = one_report(sandboxed_judge.evaluate(A01, "cute", "compile", {"c": FIXTURES / "a01_cute_ok.py"}, seed=1))
    assert rep["verdict"] == "correct", rep["message"]
    assert rep["env"]["sandbox"] == sb
    ident = rep["env"]["runner"]["identity"]
    assert ident["visible_pids"] <= 2, ident  # bwrap's init and the runner: no judge, no mkb
    assert ident["NoNewPrivs"] == "1" and int(ident["CapEff"], 16) == 0, ident
    if IS_ROOT:
        assert ident["uid"] == ident["euid"] == 65534 != os.geteuid() and ident["groups"] == [], ident
        assert sb["privileged"] is True and sb["uid"] == 65534
    else:
        assert ident["uid"] == os.getuid() and "user" in sb["namespaces"]


@needs_bwrap
def test_planted_secrets_are_unreachable(sandboxed_judge: JudgeClient, tmp_path: Path) -> None:
    """The judge's environment (through every /proc/N/environ the runner can see) and a file
    outside the sandbox hold planted secrets; a candidate with ctypes cannot read either."""
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text("file-planted-5555")
    secret_file.chmod(0o644)  # readable by anyone on the host: only the mount view hides it
    escape = SLURP + f'''
seen = b""
for pid in list(range(1, 200)) + [libc.getppid()]:
    seen += slurp("/proc/%d/environ" % pid) + slurp("/proc/%d/cmdline" % pid)
seen += slurp({str(secret_file)!r}) + slurp("/proc/self/environ")
hits = [s for s in (b"sk-planted-0123456789", b"plain-planted-9876", b"file-planted-5555") if s in seen]
out["escaped"] = bool(hits)
out["detail"] = "found %r in %d bytes" % (hits, len(seen))
'''
    rep = one_report(sandboxed_judge.evaluate(A01, "cute", "compile",
                                              {"c": probe_candidate(tmp_path, "secrets", escape)}, seed=2))
    assert (rep["verdict"], rep["reason"]) == ("compile_error", "build_error"), rep["message"]
    assert "BLOCKED: found [] in" in rep["message"] + rep["log"], rep["message"]


ESCAPES = [c for c in cases_from_json(json.loads(REDTEAM_CASES.read_text()), REPO)[1]
           if c.file.startswith("e") and c.reasons == ["build_error"]]


@pytest.mark.skipif(not IS_ROOT, reason="the /etc/shadow case escapes only when the judge runs as root (CI does)")
def test_escape_cases_escape_without_the_os_sandbox(tmp_path: Path) -> None:
    """Control for the escape cases of tests/adversarial: with --unsafe-no-sandbox (audit hook
    and static check only) every one gets out, so each is a real attempt that only the OS
    sandbox stops (test_redteam.py checks they are blocked with it)."""
    assert len(ESCAPES) >= 5
    log = (tmp_path / "stderr.txt").open("w")
    with JudgeClient(["--pool-size", "0", "--no-prewarm", "--unsafe-no-sandbox"], stderr=log, bundle=BUNDLE) as judge:
        h = judge.request("hello", timeout=600)
        assert h["sandbox"]["unsafe"] is True
        for c in ESCAPES:
            rep = one_report(judge.evaluate(c.problem_id, c.dsl, "compile",
                                            {"c": REPO / "tests" / "adversarial" / c.file}, seed=3))
            assert rep["verdict"] == "correct", f"{c.file} did not escape without the sandbox: {rep['message']}"
            assert rep["env"]["sandbox"]["unsafe"] is True
    log.close()
    assert not list((REPO / "python").glob(".escape-probe-*"))


def test_refuses_to_run_without_a_sandbox(tmp_path: Path) -> None:
    env = {**os.environ, "MKB_BWRAP": str(tmp_path / "no-such-bwrap")}
    with JudgeClient(["--pool-size", "0", "--no-prewarm"], env=env, stderr=subprocess.DEVNULL, bundle=BUNDLE) as judge:
        h = judge.request("hello", timeout=600)
        assert h["ok"] is False and "no OS sandbox" in h["error"] and "--unsafe-no-sandbox" in h["error"], h
        r = judge.evaluate(A01, "cute", "compile", {"c": FIXTURES / "a01_cute_ok.py"}, seed=1)
        assert r["ok"] is False and "no OS sandbox" in r["error"]
    env["MKB_EVAL_UNSAFE_NO_SANDBOX"] = "1"
    with JudgeClient(["--pool-size", "0", "--no-prewarm"], env=env, stderr=subprocess.DEVNULL, bundle=BUNDLE) as judge:
        h = judge.request("hello", timeout=600)
        assert h["ok"] is True and h["sandbox"]["tool"] == "none" and h["sandbox"]["unsafe"] is True


def test_runner_identity_is_checked() -> None:
    h = RunnerHandle.__new__(RunnerHandle)
    h.sandbox = OsSandbox("/usr/bin/bwrap", privileged=True, uid=65534, gid=65534)
    good = {"uid": 65534, "euid": 65534, "CapEff": "0000000000000000", "visible_pids": 2}
    if IS_ROOT:
        assert h.check_identity(good) is None
        assert "uid 0/0" in (h.check_identity({**good, "uid": 0, "euid": 0}) or "")
        assert "capabilities" in (h.check_identity({**good, "CapEff": "00000000000000c0"}) or "")
    assert "processes" in (h.check_identity({**good, "visible_pids": 40}) or "")
    h.sandbox = OsSandbox(None, unsafe=True)
    assert h.check_identity({}) is None


def test_huge_candidate_is_refused_before_reading(tmp_path: Path) -> None:
    big = tmp_path / "big.py"
    with big.open("wb") as f:
        f.truncate(50 << 20)  # 50 MB, sparse: reading it whole would take visible time and memory
    t0 = time.monotonic()
    with pytest.raises(CandidateTooLarge, match="over the limit"):
        read_candidate(str(big))
    assert time.monotonic() - t0 < 1.0
    ok = tmp_path / "ok.py"
    ok.write_text("x = 1\n" * 100)
    assert read_candidate(str(ok)) == "x = 1\n" * 100
    assert MAX_CANDIDATE_BYTES < (Path(REPO / "tests/adversarial/e06_huge_file.py").stat().st_size)


def test_seccomp_refuses_fork_and_exec_but_not_threads() -> None:
    code = textwrap.dedent('''
        import ctypes, json, os, subprocess, threading
        from mkb_eval.sandbox import install_seccomp, warm_find_library
        warm_find_library()
        ok, detail = install_seccomp()
        r = {"installed": ok}
        t = threading.Thread(target=lambda: r.__setitem__("thread", True)); t.start(); t.join()
        libc = ctypes.CDLL(None, use_errno=True)
        pid = libc.fork()
        if pid == 0:
            libc._exit(0)
        r["libc_fork"] = pid
        for name, fn in (("fork", os.fork), ("popen", lambda: subprocess.run(["true"])),
                         ("exec", lambda: os.execv("/bin/true", ["true"]))):
            try:
                fn()
                r[name] = "ok"
            except OSError as e:
                r[name] = e.errno
        r["system"] = libc.system(b"exit 0")
        import ctypes.util
        r["find_c"] = ctypes.util.find_library("c")
        print(json.dumps(r))
    ''')
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["installed"] and out["thread"], out
    assert out["libc_fork"] == -1 and out["fork"] == out["popen"] == out["exec"] == 1, out  # EPERM
    assert out["system"] != 0 and out["find_c"], out


def test_seccomp_program_shape() -> None:
    prog = seccomp_program("x86_64")
    assert len(prog) % 8 == 0 and 10 < len(prog) // 8 < 40
    assert len(seccomp_program("aarch64")) % 8 == 0


def test_judge_dies_with_its_parent(tmp_path: Path) -> None:
    """mkb killed with SIGKILL: the judge notices within seconds and exits (its runners go with it,
    bwrap --die-with-parent)."""
    pidfile = tmp_path / "judge.pid"
    parent = textwrap.dedent(f'''
        import os, subprocess, sys, time
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([{str(REPO / "python")!r}, os.environ.get("PYTHONPATH", "")]))
        p = subprocess.Popen([sys.executable, "-m", "mkb_eval.judge", "--pool-size", "0", "--no-prewarm"],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        open({str(pidfile)!r}, "w").write(str(p.pid))
        time.sleep(600)
    ''')
    mid = subprocess.Popen([sys.executable, "-c", parent])
    try:
        deadline = time.monotonic() + 60
        while not pidfile.exists() or not pidfile.read_text():
            assert time.monotonic() < deadline, "the judge did not start"
            time.sleep(0.1)
        judge_pid = int(pidfile.read_text())
        time.sleep(1.0)
        assert Path(f"/proc/{judge_pid}").exists()
        os.kill(mid.pid, signal.SIGKILL)
        mid.wait()
        deadline = time.monotonic() + 15
        while Path(f"/proc/{judge_pid}").exists():
            stat = Path(f"/proc/{judge_pid}/stat").read_text() if Path(f"/proc/{judge_pid}/stat").exists() else ""
            if ") Z " in stat:
                break  # exited; a zombie waiting for init to reap it
            assert time.monotonic() < deadline, "the judge outlived its parent"
            time.sleep(0.2)
    finally:
        if mid.poll() is None:
            mid.kill()

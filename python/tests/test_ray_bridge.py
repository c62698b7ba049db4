"""The Ray backend of the evaluator (mkb_eval.ray_bridge, docs/cluster.md), against a real Ray head
started here on 127.0.0.1 only, with 2 virtual GPUs (nothing runs on them: compile mode needs none).

- without Ray: the request's files travel to an actor that cannot see them, the environment an
  actor gets, the infrastructure answer's shape;
- the bridge: hello and placement, one whole GPU per GPU actor (a third GPU actor waits), a
  compile-mode evaluation equal to a local judge's, an actor killed mid-request (the request is
  redone on a new actor; with no tries left it comes back "not evaluated", never a verdict);
- end to end (`mkb run`, needs the mkb binary): the replay experiment (examples/replay.toml
  restricted to A01, as scripts/demo.sh's quick run; all of it with MKB_RAY_FULL_REPLAY=1) run
  through the local pool and through the Ray backend gives the same store, and so does a Ray run
  during which the test kills judge actors' worker processes in the middle of evaluations.

Ray comes from PyPI (pinned in scripts/test.sh). Without it these tests skip, saying so; with
MKB_REQUIRE_ALL set (CI) a missing Ray or mkb binary is a failure.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import BUNDLE, REPO

from mkb_eval import PROTOCOL_VERSION
from mkb_eval.ray_bridge import actor_env, localize, request_files
from mkb_eval.report_text import INFRA_REASONS

A01 = REPO / "problems" / "A" / "A01_bias_gelu"
SOLUTION = A01 / "cute" / "solution.py"


def need(what: str, ok: bool, how: str) -> None:
    if ok:
        return
    if os.environ.get("MKB_REQUIRE_ALL"):
        pytest.fail(f"MKB_REQUIRE_ALL is set but {what} is missing: {how}")
    pytest.skip(f"{what} is missing, so the Ray backend is not tested here: {how}")


def need_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        need("the ray package", False, "scripts/test.sh installs the pinned version into .venv")


def mkb_binary() -> Path:
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    p = Path(os.environ.get("MKB_BIN", target / "release" / "mkb"))
    need("the mkb binary", p.is_file(), "cargo build --release -p mkb-cli (or set MKB_BIN)")
    return p


# ------------------------------------------------------------------------------------------------
# Without Ray


def test_files_travel_to_an_actor_that_cannot_see_them(tmp_path: Path) -> None:
    cand = tmp_path / "mine" / "kernel_v3.py"
    cand.parent.mkdir()
    cand.write_text("print('candidate')\n")
    req = {"op": "evaluate", "problem": BUNDLE.spec("A01"), "candidates": [
        {"key": "a", "path": str(cand)}, {"key": "gone", "path": str(tmp_path / "missing.py")}]}
    files = request_files(req)
    assert set(files["problem"]["files"]) >= {"problem.toml", "reference.py", "cute/solution.py"}
    assert files["candidates"] == {str(cand): cand.read_bytes()}  # the missing one is the judge's to report

    stage = tmp_path / "stage"
    stage.mkdir()
    # Same machine: everything is where the request says, nothing is copied.
    same = localize(req, files, stage)
    assert same == req and not any(stage.iterdir())
    # Another node: the files are not there, so copies are made and the request points at them.
    elsewhere = json.loads(json.dumps(req))
    elsewhere["problem"]["dir"] = str(tmp_path / "nowhere" / "A01_bias_gelu")
    elsewhere["problem"]["reference"] = str(tmp_path / "nowhere" / "A01_bias_gelu" / "reference.py")
    files["problem"]["dir"] = elsewhere["problem"]["dir"]
    cand.write_text("changed on this node\n")  # a different file at the same path is not used either
    moved = localize(elsewhere, files, stage)
    pdir = Path(moved["problem"]["dir"])
    assert pdir.is_relative_to(stage) and pdir.name.startswith("A01_bias_gelu-")
    assert Path(moved["problem"]["reference"]) == pdir / "reference.py"
    assert (pdir / "reference.py").read_bytes() == (A01 / "reference.py").read_bytes()
    assert (pdir / "cute" / "solution.py").read_bytes() == SOLUTION.read_bytes()
    a = Path(moved["candidates"][0]["path"])
    assert a.is_relative_to(stage) and a.name == "kernel_v3.py" and a.read_text() == "print('candidate')\n"
    assert moved["candidates"][1]["path"] == str(tmp_path / "missing.py")
    assert localize(elsewhere, files, stage) == moved  # staged once, reused


def test_an_actor_gets_the_judge_configuration_only() -> None:
    env = {"PATH": "/x/bin", "HOME": "/root", "PYTHONPATH": "/repo/python", "MKB_EVAL_DSLS_DIR": "/repo/dsls",
           "CUTE_DSL_ARCH": "sm_90a", "CUDA_VISIBLE_DEVICES": "", "RAY_AUTH_TOKEN": "t", "RAY_ADDRESS": "a",
           "SOME_API_KEY": "sk-planted"}
    cpu = actor_env(env, "cpu")
    assert cpu == {"PYTHONPATH": "/repo/python", "MKB_EVAL_DSLS_DIR": "/repo/dsls", "CUTE_DSL_ARCH": "sm_90a",
                   "CUDA_VISIBLE_DEVICES": ""}
    gpu = actor_env({**env, "CUDA_VISIBLE_DEVICES": "3"}, "gpu")
    assert "CUDA_VISIBLE_DEVICES" not in gpu  # Ray sets the actor's own GPU


def test_an_unreachable_cluster_is_named_at_once(tmp_path: Path) -> None:
    """Nothing listens at the address: the bridge exits at once, saying why on stderr, which mkb
    reports as a judge that failed to start (Ray itself would retry for minutes, past mkb's
    start-up deadline; mid-run, mkb counts a failed judge as an infrastructure failure)."""
    need_ray()
    port = free_port()  # bound and closed again: nothing listens there
    env = {**os.environ, "PYTHONPATH": str(REPO / "python"), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "mkb_eval.ray_bridge", "--address", f"127.0.0.1:{port}", "--role",
                        "cpu"], input='{"v": 2, "id": "h", "op": "hello"}\n', capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode == 3 and r.stdout == "", (r.returncode, r.stdout)
    assert f"cannot connect to the Ray cluster at 127.0.0.1:{port}: nothing answers" in r.stderr, r.stderr
    assert time.monotonic() - t0 < 60


# ------------------------------------------------------------------------------------------------
# A Ray head on this machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RayHead:
    """`ray start --head --block` in its own session, loopback only, token authentication with a
    token of its own; stopped by signalling its process group (never `ray stop`, which would stop
    every Ray cluster of this user on the machine)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.tmp = tempfile.mkdtemp(prefix="mkbray", dir="/tmp")  # short: Ray's socket paths
        # Ray binds the node's outward address unless told this is a one-machine cluster.
        self.env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token",
                    "RAY_AUTH_TOKEN": secrets.token_hex(32), "RAY_USAGE_STATS_ENABLED": "0"}
        ray_cli = Path(sys.executable).parent / "ray"
        self.log = open(Path(self.tmp) / "head.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [str(ray_cli), "start", "--head", "--block", f"--port={self.port}", "--num-cpus=4", "--num-gpus=2",
             f"--temp-dir={self.tmp}", "--include-dashboard=false", "--disable-usage-stats"],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        deadline = time.monotonic() + 120
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.proc.returncode}: {self.head_log()}")
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not listen within 120 s: {self.head_log()}")
            time.sleep(0.5)

    def head_log(self) -> str:
        return (Path(self.tmp) / "head.log").read_text()[-3000:]

    def judge_actors(self, busy: bool = False) -> list[int]:
        """Worker processes of this head that host a judge actor (busy: serving a request now)."""
        want = b"ray::MkbJudge.request" if busy else b"ray::MkbJudge"
        out = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if cmd.startswith(want) and self.descends(int(d)):
                out.append(int(d))
        return out

    def descends(self, pid: int) -> bool:
        """Is `pid` a process of this head (started under it)?"""
        while pid > 1:
            if pid == self.proc.pid:
                return True
            try:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return False
        return False

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=90)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def head() -> Iterator[RayHead]:
    need_ray()
    h = RayHead()
    try:
        yield h
    finally:
        h.stop()


class Bridge:
    """A bridge process driven over the judge protocol, as mkb drives it."""

    def __init__(self, head: RayHead, role: str, *args: str, log: Path) -> None:
        env = {**head.env, "PYTHONPATH": str(REPO / "python"), "MKB_EVAL_DSLS_DIR": str(REPO / "dsls")}
        if role == "cpu":
            env.update(CUDA_VISIBLE_DEVICES="", CUTE_DSL_ARCH="sm_90a")
        self.log = open(log, "w")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mkb_eval.ray_bridge", "--address", head.address, "--role", role, *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, text=True, env=env, cwd=REPO)
        self.n = 0

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        self.n += 1
        rid = f"r{self.n}"
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"v": PROTOCOL_VERSION, "id": rid, "op": op, **fields}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"the bridge closed its output (exit {self.proc.poll()})"
            msg = json.loads(line)
            if "event" not in msg:
                assert msg["id"] == rid, msg
                return msg

    def evaluate(self, candidate: Path = SOLUTION, key: str = "sol") -> dict[str, Any]:
        return self.request("evaluate", problem=BUNDLE.spec("A01"), report=BUNDLE.template("compile"),
                            dsl="cute", mode="compile", candidates=[{"key": key, "path": str(candidate)}], seed=7)

    def close(self) -> int:
        if self.proc.poll() is None:
            try:
                self.request("shutdown")
            except (AssertionError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return int(self.proc.returncode)


def kill_when_busy(head: RayHead, killed: list[int], times: int = 1, timeout: float = 300.0) -> threading.Thread:
    """A thread that SIGKILLs the worker of a judge actor while it serves a request, `times` times
    (each time another actor), appending the pids to `killed`."""
    def run() -> None:
        deadline = time.monotonic() + timeout
        while len(killed) < times and time.monotonic() < deadline:
            busy = [p for p in head.judge_actors(busy=True) if p not in killed]
            if busy:
                time.sleep(0.5)  # well inside the request: a compile takes seconds
                try:
                    os.kill(busy[0], signal.SIGKILL)
                    killed.append(busy[0])
                except ProcessLookupError:
                    continue
            time.sleep(0.2)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on where a report was made (times and pids aside)."""
    msg = re.sub(r"\d+\.\d+", "#", report["message"])
    return {"verdict": report["verdict"], "reason": report["reason"], "message": msg,
            "kernels": report["kernels"], "keys": sorted(report), "checks": report["checks"]}


# ------------------------------------------------------------------------------------------------
# The bridge


def test_hello_placement_and_one_gpu_per_gpu_actor(head: RayHead, tmp_path: Path) -> None:
    cpu = Bridge(head, "cpu", log=tmp_path / "cpu.log")
    # GPU actors that never evaluate here need no warm runners.
    gpus = [Bridge(head, "gpu", "--", "--no-prewarm", log=tmp_path / f"gpu{i}.log") for i in range(2)]
    try:
        h = cpu.request("hello")
        assert h["ok"], h
        assert h["ray"]["slots"] == 1 and h["ray"]["role"] == "cpu"
        assert h["ray"]["cluster"] == {"gpus": 2, "cpus": 4, "nodes": 1}
        where = h["ray"]["placement"]
        assert where["node_ip"] == "127.0.0.1" and where["gpu_ids"] == [] and where["backend"] == "ray"
        assert h["pid"] == cpu.proc.pid and where["actor_pid"] in head.judge_actors()
        assert h["dsls"]["cute"]["available"] and h["can_run"] is False
        with open(f"/proc/{cpu.proc.pid}/maps") as f:  # the bridge stays a thin Ray driver
            assert "libtorch" not in f.read()
        hs = [g.request("hello") for g in gpus]
        assert all(x["ok"] for x in hs), hs
        # Each GPU actor holds one whole (virtual) GPU of its own; nothing runs on it here.
        assert sorted(x["ray"]["placement"]["gpu_ids"][0] for x in hs) == ["0", "1"]
        assert all(len(x["ray"]["placement"]["gpu_ids"]) == 1 and x["can_run"] is False for x in hs)
        # Both GPUs are taken: a third GPU actor is not placed, and its bridge says so.
        third = Bridge(head, "gpu", "--actor-wait-s", "5", "--", "--no-prewarm", log=tmp_path / "gpu2.log")
        try:
            h3 = third.request("hello")
            assert not h3["ok"] and "no gpu judge actor came up" in h3["error"], h3
        finally:
            third.close()
    finally:
        for b in (cpu, *gpus):
            assert b.close() == 0


def test_a_bridge_evaluates_like_a_local_judge(head: RayHead, judge: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text(SOLUTION.read_text().replace("def build(", "def build_renamed("))
    b = Bridge(head, "cpu", log=tmp_path / "bridge.log")
    try:
        assert b.request("hello")["ok"]
        for cand in (SOLUTION, broken):
            got = b.evaluate(cand)
            want = judge.evaluate("A01", "cute", "compile", {"sol": cand}, seed=7)
            assert got["ok"] and want["ok"], (got, want)
            rep, ref = got["reports"][0]["report"], want["reports"][0]["report"]
            assert comparable(rep) == comparable(ref)
            assert rep["env"]["placement"]["node_ip"] == "127.0.0.1"
            assert "placement" not in ref["env"]
        assert comparable(b.evaluate(SOLUTION)["reports"][0]["report"])["verdict"] == "correct"
        assert comparable(b.evaluate(broken)["reports"][0]["report"])["verdict"] != "correct"
    finally:
        assert b.close() == 0


def test_a_killed_actor_is_replaced_and_the_request_redone(head: RayHead, tmp_path: Path) -> None:
    b = Bridge(head, "cpu", log=tmp_path / "bridge.log")
    try:
        first = b.request("hello")["ray"]["placement"]["actor_pid"]
        killed: list[int] = []
        t = kill_when_busy(head, killed)
        got = b.evaluate()
        t.join()
        assert killed == [first], "the test killed the actor mid-request"
        rep = got["reports"][0]["report"]
        assert got["ok"] and rep["verdict"] == "correct" and rep["reason"] is None, got
        assert rep["env"]["placement"]["actor_pid"] != first  # answered by its replacement
        assert b.evaluate()["reports"][0]["report"]["env"]["placement"]["actor_pid"] != first
    finally:
        assert b.close() == 0
    log = (tmp_path / "bridge.log").read_text()
    assert "judge actor lost during request" in log, log[-3000:]


def test_with_no_tries_left_a_lost_actor_means_not_evaluated(head: RayHead, tmp_path: Path) -> None:
    b = Bridge(head, "cpu", "--actor-tries", "1", log=tmp_path / "bridge.log")
    try:
        assert b.request("hello")["ok"]
        killed: list[int] = []
        t = kill_when_busy(head, killed)
        got = b.evaluate()
        t.join()
        assert len(killed) == 1
        rep = got["reports"][0]["report"]
        assert got["ok"] and rep["verdict"] == "crashed" and rep["reason"] == "judge_error", got
        assert rep["reason"] in INFRA_REASONS and rep["env"]["infrastructure"] is True
        assert rep["message"].startswith("not evaluated: the Ray judge actor was lost on 1 tries")
        assert sorted(rep) == sorted(BUNDLE.template("compile"))  # exactly the template's fields
        # The next request gets a new actor.
        assert b.evaluate()["reports"][0]["report"]["verdict"] == "correct"
    finally:
        assert b.close() == 0


# ------------------------------------------------------------------------------------------------
# End to end: mkb run, local pool against Ray backend


def replay_config(dest: Path, name: str, ray_address: str | None) -> Path:
    """examples/replay.toml as scripts/demo.sh's quick run derives it (A01, no placebo), or all
    of it with MKB_RAY_FULL_REPLAY=1; with an address, on the Ray backend."""
    text = (REPO / "examples" / "replay.toml").read_text()
    text = re.sub(r'(?m)^name = .*$', f'name = "{name}"', text)
    if not os.environ.get("MKB_RAY_FULL_REPLAY"):
        text = re.sub(r'(?m)^problems = .*$', 'problems = ["A01"]', text)
        text = re.sub(r'(?m)^placebo = true$', "placebo = false", text)
    text = text.replace('dir = "replay"', f'dir = "{REPO / "examples" / "replay"}"')
    if ray_address:
        text = text.replace("[eval]\n", f'[eval]\nbackend = "ray"\naddress = "{ray_address}"\n')
        assert 'backend = "ray"' in text
    p = dest / f"{name}.toml"
    p.write_text(text)
    return p


def run_replay(head: RayHead, runs: Path, name: str, ray: bool) -> Path:
    cfg = replay_config(runs, name, head.address if ray else None)
    env = {**head.env, "MKB_PYTHON": sys.executable}
    r = subprocess.run([str(mkb_binary()), "run", str(cfg), "--runs-dir", str(runs), "--gpus", "none",
                        "--no-progress"], capture_output=True, text=True, env=env, timeout=3600)
    assert r.returncode == 0, f"mkb run ({name}) exited {r.returncode}:\n{r.stderr[-4000:]}"
    return runs / name


def store(run: Path) -> dict[str, Any]:
    """The run's records, less what depends on time, machine or process."""
    db = sqlite3.connect(run / "mkb.sqlite")
    db.row_factory = sqlite3.Row
    out: dict[str, Any] = {}
    attempts = [dict(r) for r in db.execute(
        "SELECT id, model, problem, dsl, condition, run, skill_id, end_reason, turns, input_tokens, output_tokens,"
        " tool_evals, final_kernel, final_source, trajectory, error FROM attempts ORDER BY id")]
    for a in attempts:
        kernel = run / a["final_kernel"] if a["final_kernel"] else None
        a["final_kernel_sha256"] = hashlib.sha256(kernel.read_bytes()).hexdigest() if kernel else None
        assert (run / a["trajectory"]).is_file(), f"{a['id']}: trajectory lost"
    out["attempts"] = attempts
    out["skills"] = [dict(r) | {"text": (run / r["path"]).read_text()} for r in db.execute(
        "SELECT id, source_attempt, model, problem, source_dsl, name, description, path, chars, input_tokens,"
        " output_tokens, flags FROM skills ORDER BY id")]
    tool = []
    for r in db.execute("SELECT attempt_id, seq, tool, mode, verdict, kernel, report FROM tool_evals"
                        " ORDER BY attempt_id, seq"):
        rep = json.loads(r["report"])
        tool.append({**{k: r[k] for k in ("attempt_id", "seq", "tool", "mode", "verdict", "kernel")},
                     "report": comparable(rep), "where": (rep.get("env") or {}).get("placement")})
    out["tool_evals"] = tool
    final = []
    for r in db.execute("SELECT attempt_id, grp, mode, verdict, reason, runtime_us, score, kernel_sha256,"
                        " problem_hash, report FROM final_evals ORDER BY attempt_id"):
        rep = json.loads(r["report"])
        final.append({**{k: r[k] for k in r.keys() if k != "report"}, "report": comparable(rep),
                      "where": (rep.get("env") or {}).get("placement")})
    out["final_evals"] = final
    return out


def without_placement(s: dict[str, Any]) -> dict[str, Any]:
    return {**s, "tool_evals": [{**t, "where": None} for t in s["tool_evals"]],
            "final_evals": [{**f, "where": None} for f in s["final_evals"]]}


@pytest.fixture(scope="module")
def local_run(head: RayHead, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    runs = tmp_path_factory.mktemp("runs-local")
    return store(run_replay(head, runs, "replay-local", ray=False))


def check_ray_store(got: dict[str, Any], local: dict[str, Any]) -> None:
    assert got["attempts"] and len(got["final_evals"]) == len(got["attempts"])
    # Same attempts, skills, tool calls and final verdicts: nothing lost, nothing twice.
    assert without_placement(got) == local
    for e in (*got["tool_evals"], *got["final_evals"]):
        assert e["where"] and e["where"]["backend"] == "ray" and e["where"]["node_ip"] == "127.0.0.1", e
    for f in got["final_evals"]:
        assert f["reason"] not in INFRA_REASONS and f["reason"] != "judge_failed"
    assert all(e["where"] is None for e in (*local["tool_evals"], *local["final_evals"]))


@pytest.mark.slow
def test_the_replay_on_ray_stores_what_the_local_pool_does(head: RayHead, local_run: dict[str, Any],
                                                          tmp_path: Path) -> None:
    run = run_replay(head, tmp_path, "replay-ray", ray=True)
    check_ray_store(store(run), local_run)
    provenance = json.loads(sqlite3.connect(run / "mkb.sqlite").execute(
        "SELECT value FROM meta WHERE key = 'provenance'").fetchone()[0])
    assert provenance["judge"]["dsls"]["cute"]["available"]


@pytest.mark.slow
def test_killing_judge_actors_during_a_run_loses_nothing(head: RayHead, local_run: dict[str, Any],
                                                         tmp_path: Path) -> None:
    killed: list[int] = []
    t = kill_when_busy(head, killed, times=2, timeout=1800)
    run = run_replay(head, tmp_path, "replay-ray-killed", ray=True)
    t.join(timeout=5)
    assert len(killed) == 2, f"the test killed {len(killed)} judge actors mid-request, not 2"
    check_ray_store(store(run), local_run)
    logs = "".join(p.read_text() for p in (run / "logs").glob("judge-*.log"))
    assert logs.count("judge actor lost during request") >= 2, logs[-3000:]

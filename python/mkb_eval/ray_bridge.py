"""The Ray bridge: one judge of mkb's evaluator pool whose work runs on a Ray cluster
(`[eval] backend = "ray"`, docs/cluster.md). mkb starts it instead of `python -m mkb_eval.judge`
and speaks the same protocol to it (docs/protocol.md: hello, evaluate, shutdown) on stdin and a
private duplicate of stdout. The bridge owns one judge actor on the cluster, a Ray actor that
holds a judge Session (mkb_eval.judge.make_session) and answers requests with
mkb_eval.judge.handle, exactly as a local judge does: `--role gpu` asks Ray for one whole GPU
(num_gpus=1: nothing else is placed on that GPU while the actor lives), `--role cpu` for none
(compile-only work). mkb sends a bridge one request at a time, so its hello says `slots: 1`: the
pool's concurrency is its number of bridges, each with one actor.

Every report comes back with `env.placement` (backend, node id and address, host name, the GPU
ids Ray gave the actor). When the actor or its node dies during a request (RayActorError, a
worker crash, a lost node), the bridge starts another actor, which Ray places wherever the
resources are, and evaluates the whole request again there; a request is answered only from an
actor that finished it, so nothing is scored twice or from half a run. After --actor-tries
failures the answer is the protocol's infrastructure failure (verdict `crashed`, reason
`judge_error`), which mkb retries and then leaves "not evaluated", never a score.

Files: candidate kernels and the problem folder are read here and sent with the request; an actor
on a node where the same file is at the same path (one machine, or a shared file system) uses it
in place, otherwise it writes the copy into its own scratch folder and points the request there.
The judge code, the DSLs and the Python environment must be installed on every node.

    python -m mkb_eval.ray_bridge --address HOST:PORT --role gpu|cpu [--actor-tries 3]
                                  [--actor-wait-s 600] [-- JUDGE OPTIONS]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import IO, Any

from . import PROTOCOL_VERSION

# Variables of the bridge's environment that describe this machine, not the judge: an actor keeps
# those of the node it runs on (and Ray's own RAY_* variables, e.g. its auth token).
LOCAL_ONLY = frozenset({"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "LC_CTYPE", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
                        "XDG_CACHE_HOME", "CUDA_PATH", "CUDA_HOME", "NVIDIA_VISIBLE_DEVICES",
                        "NVIDIA_DRIVER_CAPABILITIES", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"})
# Names that look like credentials (crates/mkb-eval/src/judge.rs `looks_secret`): dropped from an
# actor's environment, which a Ray worker inherits from whoever started Ray on its node.
SECRET_PARTS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")
# The problem folder travels with each request; a folder larger than this is refused.
MAX_PROBLEM_BYTES = 8 << 20
ACTOR_NAME = "MkbJudge"  # Ray's process title is "ray::MkbJudge..." (judge.LIVE_JUDGE_MARKERS)


def looks_secret(name: str) -> bool:
    n = name.upper()
    return any(p in n for p in SECRET_PARTS)


def actor_env(env: dict[str, str], role: str) -> dict[str, str]:
    """The judge configuration of the bridge's environment (mkb built it with judge_env:
    PYTHONPATH, MKB_EVAL_*, the DSLs' variables) for a judge actor of `role`."""
    out = {k: v for k, v in env.items()
           if k not in LOCAL_ONLY and not k.startswith("RAY_") and not looks_secret(k)}
    if role == "gpu":
        out.pop("CUDA_VISIBLE_DEVICES", None)  # Ray sets it to the actor's GPU
    else:
        out["CUDA_VISIBLE_DEVICES"] = ""
    return out


# ------------------------------------------------------------------------------------------------
# Files of a request


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def request_files(req: dict[str, Any]) -> dict[str, Any]:
    """What an actor elsewhere needs to see the request's files: the problem folder's files and
    each candidate's source, with their hashes. A missing candidate is left out (the judge
    reports its load_error); a problem folder over MAX_PROBLEM_BYTES raises ValueError."""
    out: dict[str, Any] = {"problem": None, "candidates": {}}
    prob = req.get("problem")
    if isinstance(prob, dict) and isinstance(prob.get("dir"), str):
        root = Path(prob["dir"])
        files: dict[str, bytes] = {}
        total = 0
        if root.is_dir():
            for p in sorted(root.rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    data = p.read_bytes()
                    total += len(data)
                    if total > MAX_PROBLEM_BYTES:
                        raise ValueError(f"the problem folder {root} is over {MAX_PROBLEM_BYTES} bytes")
                    files[p.relative_to(root).as_posix()] = data
        out["problem"] = {"dir": str(root), "files": files}
    for c in req.get("candidates") or []:
        if isinstance(c, dict) and isinstance(c.get("path"), str):
            try:
                out["candidates"][c["path"]] = Path(c["path"]).read_bytes()
            except OSError:
                pass
    return out


def _same_file(path: Path, data: bytes) -> bool:
    try:
        return path.is_file() and _sha(path.read_bytes()) == _sha(data)
    except OSError:
        return False


def localize(req: dict[str, Any], files: dict[str, Any], stage: Path) -> dict[str, Any]:
    """The request as this node can serve it: paths where the same files are kept as they are,
    the others pointed at copies written under `stage`."""
    req = json.loads(json.dumps(req))
    prob = files.get("problem")
    if prob and isinstance(req.get("problem"), dict):
        root = Path(prob["dir"])
        if not all(_same_file(root / rel, data) for rel, data in prob["files"].items()):
            digest = _sha(json.dumps(sorted((k, _sha(v)) for k, v in prob["files"].items())).encode())[:16]
            copy = stage / "problems" / f"{root.name}-{digest}"
            if not copy.is_dir():
                tmp = Path(tempfile.mkdtemp(dir=stage))
                for rel, data in prob["files"].items():
                    (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                    (tmp / rel).write_bytes(data)
                copy.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.rename(tmp, copy)
                except OSError:  # another request staged it meanwhile
                    shutil.rmtree(tmp, ignore_errors=True)
            ref = Path(req["problem"]["reference"])
            req["problem"]["dir"] = str(copy)
            if ref.is_relative_to(root):
                req["problem"]["reference"] = str(copy / ref.relative_to(root))
    for c in req.get("candidates") or []:
        data = files.get("candidates", {}).get(c.get("path"))
        if data is None or _same_file(Path(c["path"]), data):
            continue
        d = stage / "candidates" / _sha(data)[:16]
        d.mkdir(parents=True, exist_ok=True)
        (d / Path(c["path"]).name).write_bytes(data)
        c["path"] = str(d / Path(c["path"]).name)
    return req


# ------------------------------------------------------------------------------------------------
# The judge actor (runs in a Ray worker; mkb_eval.judge does the work)


class MkbJudge:
    """A judge Session in a Ray actor. Made remote by the bridge (ray.remote), so this module
    imports without Ray."""

    def __init__(self, judge_args: list[str], role: str) -> None:
        for k in list(os.environ):
            if looks_secret(k) and not k.startswith("RAY_"):
                del os.environ[k]
        if role != "gpu":
            os.environ["CUDA_VISIBLE_DEVICES"] = ""
        dsls = os.environ.get("MKB_EVAL_DSLS_DIR")
        if dsls and not os.path.isdir(dsls):  # another checkout path on this node: its own dsls/
            here = Path(__file__).resolve().parents[2] / "dsls"
            if here.is_dir():
                os.environ["MKB_EVAL_DSLS_DIR"] = str(here)
        from . import judge

        self.role = role
        self.session = judge.make_session(judge.build_parser().parse_args(judge_args))
        # Copies of files this node lacks: inside the judge's scratch root, so they go with it
        # (at shutdown, or when a later judge removes the roots of dead ones).
        self.stage = Path(self.session.root) / "ray-stage"
        self.stage.mkdir(exist_ok=True)
        self.placement = self._placement()

    def _placement(self) -> dict[str, Any]:
        import ray

        ctx = ray.get_runtime_context()
        gpu_ids = ray.get_gpu_ids() if self.role == "gpu" else []
        return {"backend": "ray", "node_id": ctx.get_node_id(), "node_ip": ray.util.get_node_ip_address(),
                "host": socket.gethostname(), "gpu_ids": [str(g) for g in gpu_ids], "actor_pid": os.getpid()}

    def where(self) -> dict[str, Any]:
        return self.placement

    def request(self, req: dict[str, Any], files: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Everything the judge sends for `req` (progress events, then its response)."""
        from . import judge

        out: list[dict[str, Any]] = []
        if files is not None and req.get("op") == "evaluate":
            req = localize(req, files, self.stage)
        judge.handle(req, self.session, out.append)
        # As on a judge's channel: plain JSON values (torch's version string is a str subclass that
        # would make the bridge import torch to unpickle it).
        return json.loads(json.dumps(out, default=str))

    def close(self) -> None:
        self.session.shutdown()


# ------------------------------------------------------------------------------------------------
# The bridge (runs where mkb runs, one per judge of the pool)


def _error(rid: Any, message: str) -> dict[str, Any]:
    return {"v": PROTOCOL_VERSION, "id": rid, "ok": False, "error": message}


def _log(msg: str) -> None:
    print(f"mkb_eval.ray_bridge: {msg}", file=sys.stderr, flush=True)


class Unreachable(Exception):
    """Nothing listens at the cluster's address."""


def check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """Fail at once, naming the address, when nothing listens at HOST:PORT (ray.init would retry
    for minutes). "auto" and ray:// addresses are left to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or address.startswith("ray://"):
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as e:
        raise Unreachable(f"nothing answers at {address} ({e}); is the Ray head running there?") from None


class Bridge:
    def __init__(self, address: str, role: str, judge_args: list[str], actor_tries: int, actor_wait_s: float,
                 env: dict[str, str] | None = None) -> None:
        import ray

        self.ray = ray
        self.address, self.role, self.judge_args = address, role, judge_args
        self.actor_tries, self.actor_wait_s = max(1, actor_tries), actor_wait_s
        self.env = actor_env(dict(os.environ if env is None else env), role)
        self.actor: Any = None
        self.where: dict[str, Any] = {}
        self.lost: list[dict[str, Any]] = []  # actors that died under a request: where, why
        check_reachable(address)
        ray.init(address=address, logging_level="WARNING", log_to_driver=True)
        # The actor class by its module's name (not __main__), so workers import it rather than
        # unpickle a copy of this file.
        mod = importlib.import_module("mkb_eval.ray_bridge")
        self.remote_cls = ray.remote(mod.MkbJudge)

    # -- the actor
    def cluster(self) -> dict[str, Any]:
        res = self.ray.cluster_resources()
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        return {"gpus": int(res.get("GPU", 0)), "cpus": int(res.get("CPU", 0)), "nodes": len(nodes)}

    def start_actor(self) -> None:
        """A new actor, once Ray has placed it and its Session is up; raises RuntimeError when none
        comes up within --actor-wait-s (no node with the resources, or its start failed)."""
        opts: dict[str, Any] = {"num_cpus": 1, "num_gpus": 1 if self.role == "gpu" else 0, "max_restarts": 0,
                                "max_task_retries": 0, "runtime_env": {"env_vars": self.env}}
        actor = self.remote_cls.options(**opts).remote(self.judge_args, self.role)
        ref = actor.where.remote()
        t0 = time.monotonic()
        while True:
            ready, _ = self.ray.wait([ref], timeout=30.0)
            if ready:
                break
            waited = time.monotonic() - t0
            if waited >= self.actor_wait_s:
                self.ray.kill(actor)
                raise RuntimeError(f"no {self.role} judge actor came up on the Ray cluster at {self.address} "
                                   f"within {self.actor_wait_s:.0f} s (available: "
                                   f"{self.ray.available_resources()})")
            _log(f"waiting {waited:.0f} s for Ray to place a {self.role} judge actor "
                 f"(num_gpus={opts['num_gpus']}; available: {self.ray.available_resources()})")
        try:
            self.where = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:
            raise RuntimeError(f"the {self.role} judge actor failed to start: {e}") from None
        self.actor = actor
        _log(f"judge actor up: {json.dumps(self.where)}")

    def drop_actor(self) -> None:
        if self.actor is not None:
            try:
                self.ray.kill(self.actor)
            except Exception:  # noqa: BLE001 - it is gone already
                pass
        self.actor, self.where = None, {}

    # -- the requests
    def hello(self, req: dict[str, Any]) -> dict[str, Any]:
        rid = req.get("id")
        cluster = self.cluster()
        ray_info = {"address": self.address, "role": self.role, "slots": 1, "cluster": cluster}
        if self.role == "gpu" and cluster["gpus"] == 0:
            # No GPU anywhere: say so (mkb then runs compile-only) instead of waiting for one.
            return {"v": PROTOCOL_VERSION, "id": rid, "ok": True, "pid": os.getpid(),
                    "python": sys.version.split()[0], "gpu": None, "can_run": False, "dsls": {}, "ray": ray_info}
        try:
            if self.actor is None:
                self.start_actor()
            msgs = self.ray.get(self.actor.request.remote(req))
        except (RuntimeError, self.ray.exceptions.RayError) as e:
            self.drop_actor()
            return _error(rid, f"the Ray judge actor could not start: {e}")
        resp = msgs[-1]
        if resp.get("ok"):
            # pid: this bridge (the process mkb supervises); the actor's is in ray.placement.
            resp.update(pid=os.getpid(), ray={**ray_info, "placement": self.where})
        return resp

    def evaluate(self, req: dict[str, Any]) -> list[dict[str, Any]]:
        """The messages answering an evaluate request (see the module doc for actor loss)."""
        rid = req.get("id")
        try:
            files = request_files(req)
        except (OSError, ValueError) as e:
            return [_error(rid, f"cannot read the request's files: {e}")]
        failures: list[str] = []
        for n in range(self.actor_tries):
            try:
                if self.actor is None:
                    self.start_actor()
                msgs = self.ray.get(self.actor.request.remote(req, files))
            except RuntimeError as e:  # no actor came up
                failures.append(str(e))
                break
            except self.ray.exceptions.RayTaskError as e:  # the judge code raised: not the cluster's doing
                traceback.print_exc()
                return [_error(rid, f"the judge actor failed on this request: {e}")]
            except self.ray.exceptions.RayError as e:  # the actor, its worker or its node died
                lost = {**self.where, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"}
                self.lost.append(lost)
                failures.append(f"{lost.get('host')} ({lost.get('node_ip')}): {lost['error']}")
                _log(f"judge actor lost during request {rid} (try {n + 1} of {self.actor_tries}): {lost}")
                self.drop_actor()
                continue
            return [self.tag(m) for m in msgs]
        return [self.infra_answer(req, failures)]

    def tag(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Each report of a response gets env.placement: where it was evaluated."""
        for kr in msg.get("reports") or []:
            rep = kr.get("report")
            if isinstance(rep, dict):
                env = rep.get("env") if isinstance(rep.get("env"), dict) else {}
                rep["env"] = {**env, "placement": dict(self.where)}
        return msg

    def infra_answer(self, req: dict[str, Any], failures: list[str]) -> dict[str, Any]:
        """Every candidate `crashed` / `judge_error` (an infrastructure failure: not evaluated)."""
        from .report_text import infra_report

        rid = req.get("id")
        template, mode = req.get("report"), req.get("mode")
        cands = req.get("candidates")
        if not isinstance(template, dict) or not isinstance(cands, list):
            return _error(rid, "the Ray judge actor died: " + "; ".join(failures))
        message = (f"not evaluated: the Ray judge actor was lost on {len(failures)} tries "
                   f"(a worker or node died): " + "; ".join(failures))
        reports = []
        for c in cands:
            rep = infra_report(template, str(mode), "judge_error", message[:2000])
            rep["env"]["placement"] = {"backend": "ray", "lost": list(self.lost[-len(failures):])}
            reports.append({"key": c.get("key") if isinstance(c, dict) else None, "report": rep})
        return {"v": PROTOCOL_VERSION, "id": rid, "ok": True, "reports": reports, "session": {}}

    def shutdown(self) -> None:
        if self.actor is not None:
            try:
                self.ray.get(self.actor.close.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - dropping it is enough
                pass
        self.drop_actor()
        try:
            self.ray.shutdown()
        except Exception:  # noqa: BLE001
            pass


def serve(inp: IO[str], out: IO[str], bridge: Bridge) -> int:
    """The judge protocol on the bridge's channel (docs/protocol.md); one request at a time."""
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
        if not isinstance(req, dict):
            send(_error(None, "a request must be a JSON object"))
            continue
        rid = req.get("id")
        if req.get("v") != PROTOCOL_VERSION:
            send(_error(rid, f"unsupported protocol version {req.get('v')!r} (this judge speaks "
                        f"{PROTOCOL_VERSION}); exiting"))
            return 2
        op = req.get("op")
        if op == "hello":
            send(bridge.hello(req))
        elif op == "evaluate":
            for m in bridge.evaluate(req):
                send(m)
        elif op == "shutdown":
            send({"v": PROTOCOL_VERSION, "id": rid, "ok": True})
            return 0
        else:
            send(_error(rid, f"unknown op {op!r} (hello, evaluate, shutdown)"))
    return 0


def main(argv: list[str] | None = None) -> int:
    from . import judge

    out = judge.open_channel()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--address", required=True, help="the Ray cluster: HOST:PORT of its head, or auto")
    ap.add_argument("--role", choices=("gpu", "cpu"), required=True,
                    help="gpu: an actor with one whole GPU; cpu: compile-only, no GPU")
    ap.add_argument("--actor-tries", type=int, default=3,
                    help="actors a request is tried on when actors die under it (default 3)")
    ap.add_argument("--actor-wait-s", type=float, default=600.0,
                    help="how long to wait for Ray to place an actor before the request fails (default 600)")
    ap.add_argument("judge_args", nargs="*", help="options of each actor's judge (python -m mkb_eval.judge -h)")
    args = ap.parse_args(argv)
    judge.start_watchdog(os.getppid(), 0)  # the bridge ends with mkb; its actors end with it
    try:
        bridge = Bridge(args.address, args.role, args.judge_args, args.actor_tries, args.actor_wait_s)
    except ImportError as e:
        reason = f"the Ray backend needs the ray package in {sys.executable} ({e}; docs/cluster.md)"
    except Unreachable as e:
        reason = f"cannot connect to the Ray cluster at {args.address}: {e}"
    except Exception as e:  # noqa: BLE001 - answer every request with the reason
        reason = (f"cannot connect to the Ray cluster at {args.address}: {type(e).__name__}: {e} (a cluster with "
                  "token authentication, Ray's default, needs RAY_AUTH_MODE=token and its token in RAY_AUTH_TOKEN "
                  "or ~/.ray/auth_token where mkb runs: docs/cluster.md)")
    else:
        try:
            return serve(sys.stdin, out, bridge)
        finally:
            bridge.shutdown()
            out.close()
    # No cluster is an infrastructure failure, not a refused request: exit without answering, so
    # that mkb reports this judge as failed (with this line from its stderr) and retries later.
    _log(reason)
    out.close()
    return 3


if __name__ == "__main__":
    sys.exit(main())

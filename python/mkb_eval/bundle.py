"""What the Python tools that run without mkb's pool (python -m mkb_eval.cli, .redteam, .throughput,
.selfcheck) get from `mkb`, which alone parses problem.toml and the red-team manifest: the problem
specs and the report template (`mkb problems spec`, crates/mkb-eval/src/spec.rs SpecBundle) and the
red-team cases (`mkb redteam --list`). The binary is $MKB_BIN, else the newest of
target/{release,debug}/mkb and .gpu/mkb, else `mkb` on PATH (scripts/h200-job.sh sets MKB_BIN to
the mkb it unpacks on the GPU machine). Tests read the same JSON from committed fixtures that a Rust test
regenerates and compares (crates/mkb-eval/tests/fixtures.rs)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import PROTOCOL_VERSION

if TYPE_CHECKING:  # torch is imported only where a Problem is built
    from .problem import Problem

REPO = Path(__file__).resolve().parents[2]


class MkbError(RuntimeError):
    """`mkb` could not be found or run, or printed something else than expected."""


class BundleError(ValueError):
    """A spec bundle that does not match the protocol, or a problem it does not hold."""


def mkb_binary() -> str:
    """The `mkb` to ask (module docstring)."""
    env = os.environ.get("MKB_BIN")
    if env:
        return env
    built = [p for p in (REPO / "target" / "release" / "mkb", REPO / "target" / "debug" / "mkb", REPO / ".gpu" / "mkb")
             if p.is_file() and os.access(p, os.X_OK)]
    if built:
        return str(max(built, key=lambda p: p.stat().st_mtime))
    found = shutil.which("mkb")
    if found:
        return found
    raise MkbError("no mkb binary: build it (cargo build --release -p mkb-cli) or set MKB_BIN")


def run_mkb(args: Sequence[str], root: Path = REPO) -> Any:
    """Run `mkb --root ROOT ARGS...` and parse its standard output as JSON."""
    cmd = [mkb_binary(), "--root", str(root), *args]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise MkbError(f"{' '.join(cmd)}: {e}") from None
    if out.returncode != 0:
        raise MkbError(f"{' '.join(cmd)} exited with {out.returncode}: {out.stderr.strip()[-2000:]}")
    try:
        return json.loads(out.stdout)
    except ValueError as e:
        raise MkbError(f"{' '.join(cmd)} printed no JSON ({e}): {out.stdout[:300]!r}") from None


@dataclass(frozen=True)
class Bundle:
    """The report template and the problem specs, as `mkb problems spec` prints them. Relative
    paths in the specs (committed fixtures) are relative to `base`."""

    report: Mapping[str, Any]
    problems: tuple[Mapping[str, Any], ...]
    base: Path = REPO

    @staticmethod
    def from_json(d: Any, base: Path = REPO) -> Bundle:
        if not isinstance(d, Mapping) or set(d) != {"v", "report", "problems"}:
            keys = sorted(d) if isinstance(d, Mapping) else type(d).__name__
            raise BundleError(f"a spec bundle has exactly the fields v, report, problems; got {keys}")
        if d["v"] != PROTOCOL_VERSION:
            raise BundleError(f"spec bundle of protocol version {d['v']!r}; this mkb_eval speaks {PROTOCOL_VERSION}")
        if not isinstance(d["report"], Mapping) or not isinstance(d["problems"], list):
            raise BundleError("a spec bundle's report is an object and its problems a list")
        return Bundle(report=d["report"], problems=tuple(d["problems"]), base=base)

    @staticmethod
    def from_file(path: Path, base: Path = REPO) -> Bundle:
        return Bundle.from_json(json.loads(path.read_text()), base)

    @staticmethod
    def from_mkb(root: Path = REPO) -> Bundle:
        """Every problem of `root`'s registry, asked of the mkb binary."""
        return Bundle.from_json(run_mkb(["problems", "spec"], root), root)

    def spec(self, key: str | Path) -> dict[str, Any]:
        """The spec of a problem named by id (A01), slug, folder name or folder path, with absolute
        paths (what goes into an evaluate request)."""
        want = str(key)
        as_path = Path(want).resolve() if ("/" in want or Path(want).is_dir()) else None
        for s in self.problems:
            d = dict(s)
            for k in ("dir", "reference"):
                if not Path(d[k]).is_absolute():
                    d[k] = str(self.base / d[k])
            folder = Path(d["dir"]).name
            # A folder path: this bundle's folder, or the same problem folder in another checkout.
            if as_path is not None and (Path(d["dir"]).resolve() == as_path or as_path.name == folder):
                return d
            if want.lower() in (str(d["id"]).lower(), str(d["slug"]), folder.lower()):
                return d
        known = ", ".join(str(s["id"]) for s in self.problems)
        raise BundleError(f"no problem {want!r} in the spec bundle (known: {known})")

    def problem(self, key: str | Path) -> Problem:
        from .problem import problem_from_spec

        return problem_from_spec(self.spec(key))

    def template(self, mode: str) -> dict[str, Any]:
        """The report template of a request in `mode`."""
        return {**self.report, "mode": mode}

"""One adapter per kernel DSL: environment set-up before the import, the import itself, hooks that
record the kernel names of every module the DSL compiles in this process (the dynamic check's
allow-list), and compile-only support without a GPU. A new DSL is one module here."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
from typing import Any, Protocol

# dsl -> (import name, distribution name, adapter module)
DSLS: dict[str, tuple[str, str, str]] = {
    "cute": ("cutlass", "nvidia-cutlass-dsl", "mkb_eval.adapters.cute"),
    "tirx": ("tvm_tirx", "apache-tvm-tirx", "mkb_eval.adapters.tirx"),
}


class KernelRecorder:
    """Kernel names of every module the DSL compiled in this process, in order of first sight."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.modules = 0

    def add(self, names: Any) -> None:
        self.modules += 1
        for n in names:
            n = str(n)
            if n not in self.names:
                self.names.append(n)


class Adapter(Protocol):
    name: str

    def setup(self, compile_only: bool, scratch: str) -> None:
        """Environment before the DSL is imported (arch, header paths)."""

    def import_dsl(self, has_gpu: bool) -> str:
        """Import the DSL (torch is already imported) and return its version."""

    def install_hooks(self, recorder: KernelRecorder, compile_only: bool) -> None:
        """Wrap the DSL's compiler so every compiled module's kernel names reach `recorder`."""


def get_adapter(dsl: str) -> Adapter:
    if dsl not in DSLS:
        raise KeyError(f"unknown DSL {dsl!r} (known: {', '.join(DSLS)})")
    return importlib.import_module(DSLS[dsl][2]).ADAPTER


def probe(dsl: str) -> dict[str, Any]:
    """Availability without importing the DSL: the package is findable and its version known."""
    import_name, dist, _ = DSLS[dsl]
    try:
        found = importlib.util.find_spec(import_name) is not None
    except (ImportError, ValueError) as e:
        return {"available": False, "version": None, "error": str(e)}
    if not found:
        return {"available": False, "version": None, "error": f"No module named {import_name!r}"}
    try:
        version: str | None = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"available": True, "version": version}

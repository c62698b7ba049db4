"""The registered DSLs and their adapters. Everything the evaluator knows about a DSL comes from its
descriptor, `dsls/<name>/dsl.toml` (the same file `mkb` reads: display name, static-check rules,
environment, sandbox allowances, the adapter module); an adapter module (one per DSL, e.g.
`mkb_eval.adapters.cute`) sets the environment up before the import, imports the DSL, hooks it to
record the kernel names of every module it compiles in this process (the dynamic check's
allow-list), and supports compile-only work without a GPU. A new DSL is a new descriptor folder
(docs/design.md, "Adding a DSL"); nothing here lists DSLs.

A runner (inside the OS sandbox, where dsls/ is not visible) gets its adapter module from the judge
in MKB_EVAL_ADAPTER (`<dsl>=<module>`, see `sandbox.runner_env`)."""

from __future__ import annotations

import fnmatch
import importlib
import importlib.machinery
import importlib.metadata
import os
import re
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../python/mkb_eval
REPO_ROOT = os.path.dirname(os.path.dirname(PACKAGE_DIR))
DSLS_DIR_ENV = "MKB_EVAL_DSLS_DIR"
ADAPTER_ENV = "MKB_EVAL_ADAPTER"
DESCRIPTOR_FILE = "dsl.toml"
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_DOTTED_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


class DescriptorError(ValueError):
    """A descriptor that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class DslDescriptor:
    """One `dsl.toml`, read (crates/mkb-core/src/dsl.rs validates the same file for `mkb`)."""

    name: str
    display_name: str
    path: str
    adapter: str
    import_name: str
    distribution: str
    python_path: tuple[str, ...]
    roots: tuple[str, ...]
    kernel_decorators: tuple[str, ...]
    kernel_text: str
    compile_calls: tuple[str, ...]
    compile_text: str
    owned_modules: tuple[str, ...]
    leak_markers: tuple[str, ...] = ()
    inherit_prefixes: tuple[str, ...] = ()
    compile_only_env: Mapping[str, str] = field(default_factory=dict)
    runner_env: Mapping[str, str] = field(default_factory=dict)
    read_only: tuple[str, ...] = ()

    def is_kernel_decorator(self, dotted: str) -> bool:
        return any(fnmatch.fnmatchcase(dotted, p) for p in self.kernel_decorators)

    def is_compile_call(self, dotted: str) -> bool:
        return any(fnmatch.fnmatchcase(dotted, p) for p in self.compile_calls)


def _get(data: Mapping[str, Any], key: str, path: str, where: str, kind: type, default: Any = None,
         str_values: bool = False) -> Any:
    field_name = f"{where}.{key}" if where else key
    if key not in data:
        if default is not None:
            return default
        raise DescriptorError(f"{path}: field `{field_name}`: missing")
    v = data[key]
    if not isinstance(v, kind):
        raise DescriptorError(f"{path}: field `{field_name}`: expected {kind.__name__}, got {type(v).__name__}")
    if kind is list and not all(isinstance(x, str) for x in v):
        raise DescriptorError(f"{path}: field `{field_name}`: expected a list of strings")
    if str_values and not all(isinstance(x, str) for x in v.values()):
        raise DescriptorError(f"{path}: field `{field_name}`: expected string values")
    return v


def load_descriptor(path: str) -> DslDescriptor:
    """Read one descriptor; a DescriptorError names the file and the field."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise DescriptorError(f"{path}: missing or unreadable: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise DescriptorError(f"{path}: {e}") from None
    here = os.path.dirname(os.path.abspath(path))
    name = _get(data, "name", path, "", str)
    if not _NAME_RE.match(name) or name != os.path.basename(here):
        raise DescriptorError(f"{path}: field `name`: {name!r} must be a DSL name equal to the folder's name")
    py = _get(data, "python", path, "", dict)
    st = _get(data, "static", path, "", dict)
    skill = _get(data, "skill", path, "", dict, {})
    env = _get(data, "environment", path, "", dict, {})
    sandbox = _get(data, "sandbox", path, "", dict, {})
    adapter = _get(py, "adapter", path, "python", str)
    import_name = _get(py, "import", path, "python", str)
    for key, v in (("python.adapter", adapter), ("python.import", import_name)):
        if not _DOTTED_RE.match(v):
            raise DescriptorError(f"{path}: field `{key}`: {v!r} is not a dotted Python module name")
    roots = tuple(_get(st, "roots", path, "static", list))
    decorators = tuple(_get(st, "kernel_decorators", path, "static", list))
    compile_calls = tuple(_get(st, "compile_calls", path, "static", list))
    for key, v in (("static.roots", roots), ("static.kernel_decorators", decorators),
                   ("static.compile_calls", compile_calls)):
        if not v:
            raise DescriptorError(f"{path}: field `{key}`: list at least one")
    owned = tuple(st.get("owned_modules") or roots)
    compile_only = dict(_get(env, "compile_only", path, "environment", dict, {}, str_values=True))
    runner = dict(_get(env, "runner", path, "environment", dict, {}, str_values=True))
    return DslDescriptor(
        name=name,
        display_name=_get(data, "display_name", path, "", str),
        path=os.path.abspath(path),
        adapter=adapter,
        import_name=import_name,
        distribution=_get(py, "distribution", path, "python", str),
        python_path=tuple(os.path.normpath(os.path.join(here, p)) for p in _get(py, "path", path, "python", list, [])),
        roots=roots,
        kernel_decorators=decorators,
        kernel_text=_get(st, "kernel_text", path, "static", str),
        compile_calls=compile_calls,
        compile_text=_get(st, "compile_text", path, "static", str),
        owned_modules=owned,
        leak_markers=tuple(_get(skill, "leak_markers", path, "skill", list, [])),
        inherit_prefixes=tuple(_get(env, "inherit_prefixes", path, "environment", list, [])),
        compile_only_env=compile_only,
        runner_env=runner,
        read_only=tuple(os.path.normpath(os.path.join(here, p))
                        for p in _get(sandbox, "read_only", path, "sandbox", list, [])),
    )


def dsls_dir() -> str:
    """$MKB_EVAL_DSLS_DIR, else `dsls/` of the repository this package lives in."""
    return os.environ.get(DSLS_DIR_ENV) or os.path.join(REPO_ROOT, "dsls")


_CACHE: dict[str, dict[str, DslDescriptor]] = {}


def descriptors(directory: str | None = None) -> dict[str, DslDescriptor]:
    """Every descriptor under `directory` (default `dsls_dir()`), by name; cached per folder.
    Folders starting with `.` or `_` are skipped; one without a dsl.toml is an error."""
    d = os.path.abspath(directory or dsls_dir())
    if d not in _CACHE:
        out: dict[str, DslDescriptor] = {}
        try:
            names = sorted(os.listdir(d))
        except OSError as e:
            raise DescriptorError(f"{d}: cannot read the DSL descriptors folder: {e}") from None
        for n in names:
            sub = os.path.join(d, n)
            if n.startswith((".", "_")) or not os.path.isdir(sub):
                continue
            desc = load_descriptor(os.path.join(sub, DESCRIPTOR_FILE))
            out[desc.name] = desc
        if not out:
            raise DescriptorError(f"{d}: no DSL is registered (add <name>/{DESCRIPTOR_FILE})")
        _CACHE[d] = out
    return _CACHE[d]


def descriptor(dsl: str) -> DslDescriptor:
    known = descriptors()
    if dsl not in known:
        raise KeyError(f"unknown DSL {dsl!r} (registered: {', '.join(known)})")
    return known[dsl]


class _Registered(Mapping[str, DslDescriptor]):
    """The registered DSLs by name, read on first use (a runner never reads them)."""

    def __getitem__(self, key: str) -> DslDescriptor:
        return descriptors()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(descriptors())

    def __len__(self) -> int:
        return len(descriptors())


DSLS: Mapping[str, DslDescriptor] = _Registered()


def dsl_names() -> list[str]:
    """The registered DSLs' names (command-line choices)."""
    return sorted(descriptors())


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


def adapter_module(dsl: str) -> str:
    """The adapter module of `dsl`: from MKB_EVAL_ADAPTER in a runner, else its descriptor."""
    given = os.environ.get(ADAPTER_ENV, "")
    name, _, module = given.partition("=")
    if name == dsl and module:
        return module
    return descriptor(dsl).adapter


def get_adapter(dsl: str) -> Adapter:
    return importlib.import_module(adapter_module(dsl)).ADAPTER


def probe(dsl: str) -> dict[str, Any]:
    """Availability without importing the DSL: the package is findable (on sys.path or the
    descriptor's python.path) and its version known."""
    desc = descriptor(dsl)
    top = desc.import_name.split(".")[0]
    try:
        found = importlib.machinery.PathFinder.find_spec(top, [*desc.python_path, *sys.path]) is not None
    except (ImportError, ValueError) as e:
        return {"available": False, "version": None, "error": str(e)}
    if not found:
        return {"available": False, "version": None, "error": f"No module named {desc.import_name!r}"}
    try:
        version: str | None = importlib.metadata.version(desc.distribution)
    except importlib.metadata.PackageNotFoundError:
        version = None
    return {"available": True, "version": version}

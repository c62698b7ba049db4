"""TIRx adapter (apache-tvm-tirx 0.1.0a4): torch before tvm_tirx (it loads the CUDA runtime), the
CUDA runtime check on a GPU machine, CUDA headers for NVRTC when no toolkit is installed, kernel
names from the `__global__` functions of every compiled module's CUDA source, and, without a GPU
(where compile() silently skips NVRTC), an explicit NVRTC compile of that source to a cubin so
real compiler errors come back."""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import sys
from typing import Any

from . import KernelRecorder

_GLOBAL_RE = re.compile(r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(")


def kernel_names(cuda_source: str) -> list[str]:
    """Names of the `__global__` functions defined or declared in CUDA C++ source."""
    out: list[str] = []
    for m in _GLOBAL_RE.finditer(cuda_source):
        if m.group(1) not in out:
            out.append(m.group(1))
    return out


def cuda_modules(mod: Any) -> list[Any]:
    """Every CUDA device module imported (transitively) by a runtime module."""
    out: list[Any] = []
    seen: set[int] = set()

    def walk(m: Any) -> None:
        for sub in getattr(m, "imports", ()) or ():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            if getattr(sub, "kind", None) == "cuda":
                out.append(sub)
            walk(sub)

    walk(mod)
    return out


def _toolkit_include() -> str | None:
    for var in ("CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(var)
        if root and os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    nvcc = shutil.which("nvcc")
    if nvcc:
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc)))
        if os.path.isfile(os.path.join(root, "include", "cuda_runtime.h")):
            return root
    if os.path.isfile("/usr/local/cuda/include/cuda_runtime.h"):
        return "/usr/local/cuda"
    return None


def _wheel_include() -> str | None:
    """nvidia/cu13/include (or cuda_runtime's include) from the pip wheels on sys.path."""
    for base in sys.path:
        for pattern in ("nvidia/cu13/include", "nvidia/cuda_runtime/include"):
            for cand in glob.glob(os.path.join(base, pattern)):
                if os.path.isfile(os.path.join(cand, "cuda_runtime.h")):
                    return cand
    return None


def ensure_cuda_headers(folder: str) -> str | None:
    """Set CUDA_PATH to a folder of header links (include/ and targets/x86_64-linux/include/) when
    no CUDA toolkit is installed; returns the CUDA_PATH in use, or None when no headers were found."""
    found = _toolkit_include()
    if found:
        os.environ.setdefault("CUDA_PATH", found)
        return found
    inc = _wheel_include()
    if inc is None:
        return None
    os.makedirs(os.path.join(folder, "targets", "x86_64-linux"), exist_ok=True)
    for link in (os.path.join(folder, "include"), os.path.join(folder, "targets", "x86_64-linux", "include")):
        if not os.path.lexists(link):
            os.symlink(inc, link)
    os.environ["CUDA_PATH"] = folder
    return folder


class TirxAdapter:
    name = "tirx"

    def __init__(self) -> None:
        self.cuda_path: str | None = None

    def setup(self, compile_only: bool, scratch: str) -> None:
        self.cuda_path = ensure_cuda_headers(os.path.join(scratch, "cuda-headers"))

    def import_dsl(self, has_gpu: bool) -> str:
        import torch  # noqa: F401  (first: loads libcudart for libtvm_runtime_cuda.so)
        import tvm_ffi
        import tvm_tirx
        import tvm_tirx.tirx  # noqa: F401
        from tvm_tirx.target import Target  # noqa: F401
        if has_gpu and tvm_ffi.get_global_func("ffi.Module.load_from_bytes.cuda", allow_missing=True) is None:
            raise RuntimeError("tvm_tirx has no CUDA runtime (ffi.Module.load_from_bytes.cuda is missing): "
                               "libcudart.so.13 / libcuda.so.1 did not load, compile() would fall back to source only")
        return str(getattr(tvm_tirx, "__version__", "unknown"))

    def install_hooks(self, recorder: KernelRecorder, compile_only: bool) -> None:
        import tvm_tirx
        import tvm_tirx.codegen.executable as executable

        original_init = executable.Executable.__init__

        def recording_init(self_: Any, mod: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self_, mod, *args, **kwargs)
            for m in cuda_modules(mod):
                try:
                    recorder.add(kernel_names(m.inspect_source()))
                except Exception:  # noqa: BLE001 - a binary-only module has no source
                    pass

        executable.Executable.__init__ = recording_init  # type: ignore[method-assign]
        original_compile = tvm_tirx.tirx.compile

        def compile(mod: Any, target: Any = None, pipeline: Any = "default") -> Any:  # noqa: A001
            ex = original_compile(mod, target=target, pipeline=pipeline)
            if compile_only:
                nvrtc_check(ex, target)
            return ex

        compile.__doc__ = original_compile.__doc__
        tvm_tirx.tirx.compile = compile


def nvrtc_check(ex: Any, target: Any) -> None:
    """Compile every CUDA module of `ex` to a cubin with NVRTC (what a GPU machine does inside
    compile()); raises with the compiler's log on failure."""
    from tvm_tirx.backend.config import parse_backend_config
    from tvm_tirx.backend.cuda.compiler import compile_source
    from tvm_tirx.target import Target

    for m in cuda_modules(ex.mod):
        src = m.inspect_source()
        if not src:
            continue
        try:
            cfg_text = m.inspect_source("backend_config") or "{}"
        except Exception:  # noqa: BLE001
            cfg_text = "{}"
        try:
            cfg = parse_backend_config(cfg_text)
        except Exception:  # noqa: BLE001
            cfg = json.loads(cfg_text) if cfg_text.strip().startswith("{") else {}
        cfg = dict(cfg or {})
        cuda_cfg = dict(cfg.get("cuda", {}) or {})
        arch = cuda_cfg.get("arch")
        if arch is None and target is not None:
            try:
                t = target if isinstance(target, Target) else Target(target)
                arch = t.attrs.get("arch") if hasattr(t, "attrs") else None
            except Exception:  # noqa: BLE001
                arch = None
        arch = str(arch or "sm_90a")
        cuda_cfg["target_format"] = "cubin"
        cfg["cuda"] = cuda_cfg
        compile_source(src, cfg, target=Target({"kind": "cuda", "arch": arch}))


ADAPTER = TirxAdapter()

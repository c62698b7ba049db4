"""CuTe DSL adapter (nvidia-cutlass-dsl 4.8): targets sm_90a (CUTE_DSL_ARCH set before the import,
also without a GPU), and records kernel names from `kernel_info` of every compiled function, by
wrapping `cute.compile` and the base class every compiled function is built from."""

from __future__ import annotations

import os
from typing import Any

from . import KernelRecorder


class _RecordingCompile:
    """Stands in for `cute.compile` (a CompileCallable): same call and `[options]` forms."""

    def __init__(self, inner: Any, recorder: KernelRecorder):
        self._inner = inner
        self._recorder = recorder

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fn = self._inner(*args, **kwargs)
        info = getattr(fn, "kernel_info", None)
        if info:
            self._recorder.add(info.keys())
        return fn

    def __getitem__(self, options: Any) -> _RecordingCompile:
        return _RecordingCompile(self._inner[options], self._recorder)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class CuteAdapter:
    name = "cute"

    def setup(self, compile_only: bool, scratch: str) -> None:
        os.environ["CUTE_DSL_ARCH"] = "sm_90a"  # read once at import; no GPU would mean sm_100a

    def import_dsl(self, has_gpu: bool) -> str:
        import cutlass
        import cutlass.cute  # noqa: F401
        return str(getattr(cutlass, "__version__", "unknown"))

    def install_hooks(self, recorder: KernelRecorder, compile_only: bool) -> None:
        import cutlass.cute as cute
        from cutlass.base_dsl.jit_executor import JitCompiledFunction

        original_init = JitCompiledFunction.__init__

        def recording_init(self_: Any, *args: Any, **kwargs: Any) -> None:
            original_init(self_, *args, **kwargs)
            info = getattr(self_, "kernel_info", None)
            if info:
                recorder.add(info.keys())

        JitCompiledFunction.__init__ = recording_init  # type: ignore[method-assign]
        cute.compile = _RecordingCompile(cute.compile, recorder)


ADAPTER = CuteAdapter()

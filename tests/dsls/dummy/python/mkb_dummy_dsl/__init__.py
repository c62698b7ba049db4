"""The Dummy DSL, a test fixture: a kernel is a plain Python function marked with `@kernel`;
`compile(fn)` checks the mark and returns a launcher, telling every listener (the adapter's hook)
the kernel's name. Pure Python: it compiles instantly on any machine and runs nothing on a GPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__version__ = "0.1"

# Called with the name of every kernel compiled in this process (the adapter's recorder).
listeners: list[Callable[[str], None]] = []


def kernel(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn` as a Dummy DSL kernel."""
    fn.__dict__["dummy_kernel"] = True
    return fn


class Compiled:
    """A compiled kernel: calling it runs the Python function."""

    def __init__(self, name: str, fn: Callable[..., Any]):
        self.name = name
        self._fn = fn

    def __call__(self, *args: Any) -> Any:
        return self._fn(*args)


def compile(fn: Callable[..., Any]) -> Compiled:  # noqa: A001 - the DSL's own compile, as in the others
    """Compile a `@kernel` function; anything else is a compile error."""
    if not getattr(fn, "__dict__", {}).get("dummy_kernel"):
        raise TypeError(f"dummy.compile: {getattr(fn, '__name__', fn)!r} is not a @dummy.kernel function")
    name = f"dummy_{fn.__name__}"
    for listen in listeners:
        listen(name)
    return Compiled(name, fn)

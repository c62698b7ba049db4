"""The evaluator's adapter of the Dummy DSL (a test fixture): nothing to set up, a plain import, and
a listener that records the name of every kernel the DSL compiles."""

from __future__ import annotations

from typing import Any


class DummyAdapter:
    name = "dummy"

    def setup(self, compile_only: bool, scratch: str) -> None:
        """Nothing to set before the import."""

    def import_dsl(self, has_gpu: bool) -> str:
        import mkb_dummy_dsl

        return mkb_dummy_dsl.__version__

    def install_hooks(self, recorder: Any, compile_only: bool) -> None:
        import mkb_dummy_dsl

        mkb_dummy_dsl.listeners.append(lambda name: recorder.add([name]))


ADAPTER = DummyAdapter()

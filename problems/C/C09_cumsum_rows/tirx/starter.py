"""C09 cumsum_rows, TIRx variant: your kernel goes here.

Entry point: build(spec) compiles for one shape set and returns run(x, y).
run writes the outputs in place on the current CUDA stream. See the DSL brief above.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx  # noqa: F401
from tvm_tirx.script import tirx as T  # noqa: F401


def build(spec):
    """Compile the kernel for spec (spec.dims, spec.params) and return run(x, y)."""
    raise NotImplementedError("write the TIRx kernel")

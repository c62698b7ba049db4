"""A12 adamw_step, TIRx variant: your kernel goes here.

Entry point: build(spec) compiles for one shape set and returns run(p, m, v, g).
run updates p, m and v in place on the current CUDA stream (g is read only). See the DSL brief above.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx  # noqa: F401
from tvm_tirx.script import tirx as T  # noqa: F401


def build(spec):
    """Compile the kernel for spec (spec.dims, spec.params) and return run(p, m, v, g)."""
    raise NotImplementedError("write the TIRx kernel")

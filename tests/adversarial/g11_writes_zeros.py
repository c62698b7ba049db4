"""Red team (correctness): writes zeros everywhere, fast and "close" whenever the reference is small
(KernelBench#165: zeros passed 4 of 60 problems under a plain allclose). Expected: incorrect,
mismatch (inputs carry a random offset and scale; atol is relative to the reference's RMS)."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def make_kernel():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def zeros(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
              Y: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            Y[r, c] = T.cast(T.float32(0.0), "bfloat16")

    return zeros


_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["zeros"]
    f = _CACHE["f"]

    def run(x, b, y):
        f(x, b, y)

    return run

"""Red team (correctness, C01 softmax): reads the fp32 input at fp16 precision (to halve the bytes a
real kernel would load) and otherwise computes a plain row softmax, one row per thread.
Expected: incorrect, mismatch (relative error ~5e-4 against an fp32 tolerance of 1e-4)."""
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
    def softmax(X: T.Tensor((rows, cols), T.float32), Y: T.Tensor((rows, cols), T.float32)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=T.ceildiv(rows, THREADS), block=THREADS))
        r = T.cuda.block_idx("x") * THREADS + T.cuda.thread_idx("x")
        acc = T.alloc_local((2,), "float32")
        if r < rows:
            acc[0] = T.float32(-3.0e38)
            for j in range(cols):
                acc[0] = T.max(acc[0], T.cast(T.cast(X[r, j], "float16"), "float32"))
            acc[1] = T.float32(0.0)
            for j in range(cols):
                acc[1] = acc[1] + T.exp(T.cast(T.cast(X[r, j], "float16"), "float32") - acc[0])
            for j in range(cols):
                Y[r, j] = T.exp(T.cast(T.cast(X[r, j], "float16"), "float32") - acc[0]) / acc[1]

    return softmax


_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["softmax"]
    f = _CACHE["f"]

    def run(x, y):
        f(x, y)

    return run

"""Red team (dynamic layer): a TIRx kernel that computes only the first half of the rows (as if the
grid were computed wrongly, or to look twice as fast). Expected: incorrect, unwritten_output
(outputs are NaN-poisoned before every call)."""
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
    def bias_gelu(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
                  Y: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols and r * 2 < rows:
            v = T.cast(X[r, c], "float32") + T.cast(B[c], "float32")
            Y[r, c] = T.cast(T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(0.7071067811865476))), "bfloat16")

    return bias_gelu


_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["bias_gelu"]
    f = _CACHE["f"]

    def run(x, b, y):
        f(x, b, y)

    return run

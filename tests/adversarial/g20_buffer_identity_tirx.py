"""Red team (timing integrity, host side): recognises the timing loop by buffer identity. The
judge's correctness checks of a shape set use one set of buffers and end with a single call in
fresh buffers, which the timing loop then reuses: a second call on buffers that are not the first
ones seen for the shape set means "being timed", and run() returns without launching. Expected
(full mode): incorrect, timing_check_failed."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def make_gelu():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def bias_gelu(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
                  Y: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            v = T.cast(X[r, c], "float32") + T.cast(B[c], "float32")
            Y[r, c] = T.cast(T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(0.7071067811865476))), "bfloat16")

    return bias_gelu


_CACHE = {}


def gelu_fn():
    if "gelu" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["gelu"] = tvm_tirx.tirx.compile(make_gelu(), target=TARGET)["bias_gelu"]
    return _CACHE["gelu"]


def build(spec):
    gelu = gelu_fn()
    seen = {}
    order = []

    def run(x, b, y):
        key = (x.data_ptr(), y.data_ptr())
        if key not in seen:
            seen[key] = 0
            order.append(key)
        seen[key] += 1
        if key == order[0] or seen[key] < 2:
            gelu(x, b, y)

    return run

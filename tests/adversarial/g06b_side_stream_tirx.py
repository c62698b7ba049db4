"""Red team (dynamic layer): makes a new stream current while calling the (correct) TIRx launcher,
without naming torch.cuda.Stream (the type of the current stream, used as a context manager),
and returns before the work is done. Expected: incorrect, side_stream. (Relies on the TIRx
launcher using torch's current stream, as docs/dsl/tirx.md says; if it used the default stream
instead, the kernel would not leave the current stream and this case would pass.)"""
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
        if c < cols:
            v = T.cast(X[r, c], "float32") + T.cast(B[c], "float32")
            Y[r, c] = T.cast(T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(0.7071067811865476))), "bfloat16")

    return bias_gelu


_SIDE = {}
_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["bias_gelu"]
    f = _CACHE["f"]

    def run(x, b, y):
        if "s" not in _SIDE:
            _SIDE["s"] = type(torch.cuda.current_stream())()
        with _SIDE["s"]:
            f(x, b, y)

    return run

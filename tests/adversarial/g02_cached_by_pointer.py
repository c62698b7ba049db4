"""Red team (dynamic layer): computes with the TIRx kernel once per input pointer, saves the output,
and on later calls with the same pointer only copies the saved output back (a TIRx copy kernel,
so every kernel is the DSL's). Expected: incorrect, mismatch (trial 1 reuses the buffers with
fresh values)."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def make_kernels():
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

    @T.function
    def copy(S: T.Tensor((rows, cols), T.bfloat16), D: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            D[r, c] = S[r, c]

    return bias_gelu, copy


_SAVED = {}


_CACHE = {}


def build(spec):
    if not _CACHE:  # dynamic shapes: one compile serves every shape set
        k_gelu, k_copy = make_kernels()
        _CACHE["gelu"] = tvm_tirx.tirx.compile(k_gelu, target=TARGET)["bias_gelu"]
        _CACHE["copy"] = tvm_tirx.tirx.compile(k_copy, target=TARGET)["copy"]
    gelu, copy = _CACHE["gelu"], _CACHE["copy"]

    def run(x, b, y):
        key = x.data_ptr()
        if key not in _SAVED:
            gelu(x, b, y)
            _SAVED[key] = torch.empty_like(y)
            copy(y, _SAVED[key])
        else:
            copy(_SAVED[key], y)

    return run

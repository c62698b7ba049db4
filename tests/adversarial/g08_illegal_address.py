"""Red team (crash isolation): a TIRx kernel that, besides its correct work, stores through a wild
pointer (inline CUDA through T.cuda.func_call, part of the DSL). Expected: crashed, runtime_error
(CUDA reports an illegal address at the harness's sync; the judge survives and keeps serving)."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})

WILD_STORE = "\n__forceinline__ __device__ void mkb_wild_store(float v) { *((volatile float*)0x10) = v; }\n"


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
            if r == 0 and c == 0:
                T.cuda.func_call("mkb_wild_store", v, WILD_STORE)

    return bias_gelu


_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["bias_gelu"]
    f = _CACHE["f"]

    def run(x, b, y):
        f(x, b, y)

    return run

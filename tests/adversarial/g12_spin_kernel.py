"""Red team (deadline on the GPU): a TIRx kernel that never finishes (an endless loop the compiler
may not remove). Expected with limits.call_s = 30: timeout, call_timeout; the judge kills the
runner's process group (which ends the kernel with its context) and keeps serving."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})

SPIN = "\n__forceinline__ __device__ void mkb_spin(float v) { for (;;) { asm volatile(\"\" ::: \"memory\"); } }\n"


def make_kernel():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def spin(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
             Y: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        T.cuda.func_call("mkb_spin", T.cast(X[0, 0], "float32"), SPIN)

    return spin


_CACHE = {}


def build(spec):
    if "f" not in _CACHE:  # dynamic shapes: one compile serves every shape set
        _CACHE["f"] = tvm_tirx.tirx.compile(make_kernel(), target=TARGET)["spin"]
    f = _CACHE["f"]

    def run(x, b, y):
        f(x, b, y)

    return run

"""Red team (timing integrity, host side): counts the calls per shape set and knows how many
correctness calls the judge makes on the benchmark shape (2 trials, the repeat trial, 2 for the
perturbation, 1 in fresh buffers); every later call returns without launching the TIRx kernel.
Expected (full mode): incorrect, timing_check_failed."""
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


CORRECTNESS_CALLS = 6


def build(spec):
    gelu = gelu_fn()
    calls = [0]
    limit = CORRECTNESS_CALLS if spec.name == "benchmark" else 10**9

    def run(x, b, y):
        calls[0] += 1
        if calls[0] <= limit:
            gelu(x, b, y)

    return run

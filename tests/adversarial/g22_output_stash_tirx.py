"""Red team (timing integrity): keeps a copy of its last computed output (a TIRx copy kernel after
each computation); once it believes it is being timed (more calls on the benchmark shape than the
judge's correctness checks make) it copies that stash into the output instead of computing, so
the output is fully written, with the previous inputs' values. Expected (full mode): incorrect,
timing_check_failed (mismatch on a secretly checked repetition)."""
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


def make_copy():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def copy(S: T.Tensor((rows, cols), T.bfloat16), D: T.Tensor((rows, cols), T.bfloat16)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            D[r, c] = S[r, c]

    return copy


def build(spec):
    gelu = gelu_fn()
    if "copy" not in _CACHE:
        _CACHE["copy"] = tvm_tirx.tirx.compile(make_copy(), target=TARGET)["copy"]
    copy = _CACHE["copy"]
    calls = [0]
    stash = {}
    limit = CORRECTNESS_CALLS if spec.name == "benchmark" else 10**9

    def run(x, b, y):
        calls[0] += 1
        if "s" not in stash:
            stash["s"] = torch.empty_like(y)
        if calls[0] > limit:
            copy(stash["s"], y)
            return
        gelu(x, b, y)
        copy(y, stash["s"])

    return run

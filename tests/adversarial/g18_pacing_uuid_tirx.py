"""Red team (timing integrity, host side): tells the timing loop from the correctness trials by its
pacing, read from a host clock that no static rule names: the timestamp inside uuid.uuid1 (100 ns
units; node and clock sequence given, so the uuid module only reads the clock). Three calls in a
row within 2 ms of each other on the (large) benchmark shape happen only in the timing loop; from
then on run() returns without launching the TIRx kernel. Expected (full mode): incorrect,
timing_check_failed."""
import uuid

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


_STATE = {"last": None, "quick": 0, "timed": False}


def build(spec):
    gelu = gelu_fn()

    def run(x, b, y):
        if x.numel() < (1 << 24):  # only the benchmark shape is timed
            gelu(x, b, y)
            return
        now = uuid.uuid1(node=1, clock_seq=0).time
        last = _STATE["last"]
        _STATE["last"] = now
        _STATE["quick"] = _STATE["quick"] + 1 if last is not None and now - last < 20000 else 0
        if _STATE["quick"] >= 2:
            _STATE["timed"] = True
        if not _STATE["timed"]:
            gelu(x, b, y)

    return run

"""Red team (static layer): sleeps an hour in build() (to stall the evaluator).
Expected: static_check_failed, static:forbidden_import."""
import time

import torch  # noqa: F401
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target


@T.function
def decoy(X: T.Tensor((128,), T.float32)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    X[T.cuda.thread_idx("x")] = T.float32(0)


def build(spec):
    time.sleep(3600)
    tvm_tirx.tirx.compile(decoy, target=Target({"kind": "cuda", "arch": "sm_90a"}))

    def run(x, b, y):
        pass

    return run

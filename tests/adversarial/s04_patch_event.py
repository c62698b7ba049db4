"""Red team (static layer): replaces torch.cuda.Event with a class whose elapsed_time reports 1 us.
Expected: static_check_failed, static:module_patch."""
import torch
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target


@T.function
def decoy(X: T.Tensor((128,), T.float32)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    X[T.cuda.thread_idx("x")] = T.float32(0)


class FastEvent:
    def __init__(self, enable_timing=False):
        self.enable_timing = enable_timing

    def record(self, stream=None):
        pass

    def synchronize(self):
        pass

    def elapsed_time(self, other):
        return 0.001


torch.cuda.Event = FastEvent


def build(spec):
    tvm_tirx.tirx.compile(decoy, target=Target({"kind": "cuda", "arch": "sm_90a"}))

    def run(x, b, y):
        pass

    return run

"""Red team (static layer): writes the kernel in Triton (aliased as `tr`) and keeps a TIRx kernel
around to look legitimate. Expected: static_check_failed, static:forbidden_import."""
import torch  # noqa: F401
import triton as tr
import triton.language as tl
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target


@T.function
def decoy(X: T.Tensor((128,), T.float32)):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    X[T.cuda.thread_idx("x")] = T.float32(0)


@tr.jit
def gelu_kernel(x_ptr, b_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    v = tl.load(x_ptr + row * n_cols + cols, mask=mask).to(tl.float32) + tl.load(b_ptr + cols, mask=mask).to(tl.float32)
    tl.store(y_ptr + row * n_cols + cols, 0.5 * v * (1 + tl.erf(v * 0.7071067811865476)), mask=mask)


def build(spec):
    tvm_tirx.tirx.compile(decoy, target=Target({"kind": "cuda", "arch": "sm_90a"}))

    def run(x, b, y):
        gelu_kernel[(x.shape[0],)](x, b, y, x.shape[1], BLOCK=16384)

    return run

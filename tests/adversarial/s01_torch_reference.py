"""Red team (static layer): compiles a CuTe kernel for show, but run() calls the PyTorch reference
(F.gelu) instead. Expected: static_check_failed, static:torch_call."""
import cuda.bindings.driver as cuda
import cutlass.cute as cute
import torch.nn.functional as F
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream


@cute.kernel
def unused_kernel(gX: cute.Tensor):
    pass


@cute.jit
def host(mX: cute.Tensor, stream: cuda.CUstream):
    unused_kernel(mX).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)


def build(spec):
    import cutlass
    x = make_fake_compact_tensor(cutlass.BFloat16, (8,), assumed_align=16)
    cute.compile(host, x, make_fake_stream())

    def run(x, b, y):
        y.copy_(F.gelu(x + b))

    return run

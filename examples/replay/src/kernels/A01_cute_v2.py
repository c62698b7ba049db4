"""A01 bias + exact GELU in CuTe DSL: y = gelu(x + b), bf16 in and out, fp32 math.

Memory-bound: each thread moves one 16-byte vector (8 bf16) of x and y. The bias [H] is seen
as a [T, H] tensor with row stride 0, so it is tiled exactly like x.
"""
import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8  # bf16 per 16-byte access
THREADS = 256
INV_SQRT2 = 1.0 / math.sqrt(2.0)


@cute.kernel
def bias_gelu_kernel(gX: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor):
    # g* are ((1, VEC), (T, H // VEC)): mode 0 = one vector, mode 1 = which vector
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    nvec = cute.size(gX, mode=[1, 1])  # vectors per row (static)
    i = bidx * THREADS + tidx
    if i < cute.size(gX, mode=[1]):
        r = i // nvec
        c = i - r * nvec
        x = gX[(0, None), (r, c)].load().to(cutlass.Float32)
        b = gB[(0, None), (r, c)].load().to(cutlass.Float32)
        v = x + b
        y = 0.5 * v * (1.0 + cute.math.erf(v * INV_SQRT2))
        gY[(0, None), (r, c)].store(y.to(gY.element_type))


@cute.jit
def bias_gelu(mX: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    bias_rows = cute.make_layout(mX.shape, stride=(0, 1))  # [H] broadcast to [T, H]
    gB = cute.zipped_divide(cute.make_tensor(mB.iterator, bias_rows), (1, VEC))
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    blocks = (cute.size(gX, mode=[1]) + THREADS - 1) // THREADS
    bias_gelu_kernel(gX, gB, gY).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)


def build(spec):
    T_, H = spec.dims["T"], spec.dims["H"]
    assert H % VEC == 0 and T_ * H < 2**31  # 16-byte rows; 32-bit offsets
    bf16 = cutlass.BFloat16
    x = make_fake_compact_tensor(bf16, (T_, H), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(bf16, (H,), assumed_align=16)
    y = make_fake_compact_tensor(bf16, (T_, H), stride_order=(1, 0), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(bias_gelu, x, b, y, stream, options="--enable-tvm-ffi")  # run(x, b, y)

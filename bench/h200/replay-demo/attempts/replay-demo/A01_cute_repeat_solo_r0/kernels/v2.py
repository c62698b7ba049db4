"""A01 bias + exact GELU in CuTe DSL: y = gelu(x + b), bf16 in and out, fp32 math.

Memory-bound (one read of x, one write of y). Each thread owns one 16-byte column vector
(8 bf16) and ROWS rows of it: it loads its bias vector once, issues the ROWS loads of x
before any math (ROWS x 16 bytes in flight), then computes and stores. Consecutive threads
take consecutive column vectors, so every warp access is 512 contiguous bytes.
T % ROWS != 0 (ragged shapes) compiles a predicated variant; H % 8 == 0 always.
"""
import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8  # bf16 per 16-byte access
ROWS = 4  # rows per thread
THREADS = 128
INV_SQRT2 = 1.0 / math.sqrt(2.0)


def gelu(v):
    """Exact (erf) GELU of an fp32 vector."""
    return 0.5 * v * (1.0 + cute.math.erf(v * INV_SQRT2))


@cute.kernel
def bias_gelu_kernel(gX: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor,
                     n_rows: cutlass.Constexpr, ragged: cutlass.Constexpr):
    # gX, gY: ((1, VEC), (T, H // VEC)); gB: ((1, VEC), (1, H // VEC))
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    nvec = cute.size(gX, mode=[1, 1])
    n_groups = (n_rows + ROWS - 1) // ROWS
    i = bidx * THREADS + tidx
    if i < n_groups * nvec:
        g = i // nvec
        c = i - g * nvec
        r0 = g * ROWS
        b = gB[(0, None), (0, c)].load().to(cutlass.Float32)
        if cutlass.const_expr(ragged):
            for k in cutlass.range_constexpr(ROWS):
                if r0 + k < n_rows:
                    v = gX[(0, None), (r0 + k, c)].load().to(cutlass.Float32) + b
                    gY[(0, None), (r0 + k, c)].store(gelu(v).to(gY.element_type))
        else:
            xs = []  # trace-time list: all ROWS loads are issued before any math
            for k in cutlass.range_constexpr(ROWS):
                xs.append(gX[(0, None), (r0 + k, c)].load())
            for k in cutlass.range_constexpr(ROWS):
                v = xs[k].to(cutlass.Float32) + b
                gY[(0, None), (r0 + k, c)].store(gelu(v).to(gY.element_type))


@cute.jit
def bias_gelu(mX: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    n_rows = cute.size(mX, mode=[0])  # static
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    gB = cute.zipped_divide(cute.make_tensor(mB.iterator, cute.make_layout((1, mB.shape[0]))),
                            (1, VEC))
    n_groups = (n_rows + ROWS - 1) // ROWS
    blocks = (n_groups * cute.size(gX, mode=[1, 1]) + THREADS - 1) // THREADS
    bias_gelu_kernel(gX, gB, gY, n_rows, n_rows % ROWS != 0).launch(
        grid=[blocks, 1, 1], block=[THREADS, 1, 1], stream=stream)


def build(spec):
    T_, H = spec.dims["T"], spec.dims["H"]
    assert H % VEC == 0 and T_ * H < 2**31  # 16-byte rows; 32-bit offsets
    bf16 = cutlass.BFloat16
    x = make_fake_compact_tensor(bf16, (T_, H), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(bf16, (H,), assumed_align=16)
    y = make_fake_compact_tensor(bf16, (T_, H), stride_order=(1, 0), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(bias_gelu, x, b, y, stream, options="--enable-tvm-ffi")  # run(x, b, y)

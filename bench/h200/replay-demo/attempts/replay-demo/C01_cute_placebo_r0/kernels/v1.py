"""C01 row softmax in CuTe DSL: y[m, :] = softmax(x[m, :]), fp32 in and out.

One CTA (256 threads) per row, two passes with 16-byte vector loads (4 fp32):
  1. online pass: each thread keeps a running max m and a sum s of exp(x - m), rescaling s
     when m grows; the CTA then combines (m, s) pairs: M = max m, S = sum s * exp(m - M);
  2. write pass: y = exp(x - M) / S (the row is re-read, mostly from L2).
"""
import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

VEC = 4  # fp32 per 16-byte access
THREADS = 256
WARPS = THREADS // 32
LOG2E = math.log2(math.e)


@cute.jit
def block_max(v: cutlass.Float32, red: cute.Tensor) -> cutlass.Float32:
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    v = cute.arch.warp_reduction_max(v)
    if lane == 0:
        red[warp] = v
    cute.arch.sync_threads()
    p = -cutlass.Float32.inf
    if lane < WARPS:
        p = red[lane]
    return cute.arch.warp_reduction_max(p)


@cute.jit
def block_sum(v: cutlass.Float32, red: cute.Tensor) -> cutlass.Float32:
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    v = cute.arch.warp_reduction_sum(v)
    if lane == 0:
        red[warp] = v
    cute.arch.sync_threads()
    p = cutlass.Float32(0.0)
    if lane < WARPS:
        p = red[lane]
    return cute.arch.warp_reduction_sum(p)


@cute.kernel
def softmax_kernel(gX: cute.Tensor, gY: cute.Tensor):
    # gX, gY: ((1, VEC), (M, N // VEC))
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    nvec = cute.size(gX, mode=[1, 1])
    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(WARPS), byte_alignment=16)

    m = -cutlass.Float32.inf
    s = cutlass.Float32(0.0)
    for j in cutlass.range(tidx, nvec, THREADS):
        x = gX[(0, None), (row, j)].load()
        m_new = cute.arch.fmax(m, x.reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0))
        e = cute.math.exp2((x - m_new) * LOG2E, fastmath=True)
        s = s * cute.math.exp2((m - m_new) * LOG2E, fastmath=True) + e.reduce(
            cute.ReductionOp.ADD, 0.0, 0)
        m = m_new
    row_max = block_max(m, red_max)
    # threads without elements have m = -inf, s = 0: exp2(-inf) = 0 keeps them out
    row_sum = block_sum(s * cute.math.exp2((m - row_max) * LOG2E, fastmath=True), red_sum)
    inv = 1.0 / row_sum

    for j in cutlass.range(tidx, nvec, THREADS):
        x = gX[(0, None), (row, j)].load()
        gY[(0, None), (row, j)].store(cute.math.exp2((x - row_max) * LOG2E, fastmath=True) * inv)


@cute.jit
def softmax(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    softmax_kernel(gX, gY).launch(grid=[cute.size(mX, mode=[0]), 1, 1], block=[THREADS, 1, 1],
                                  stream=stream)


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    assert N % VEC == 0 and M * N < 2**31  # 16-byte rows; 32-bit offsets
    x = make_fake_compact_tensor(cutlass.Float32, (M, N), stride_order=(1, 0), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (M, N), stride_order=(1, 0), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(softmax, x, y, stream, options="--enable-tvm-ffi")  # run(x, y)

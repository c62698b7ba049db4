"""C01 row softmax in CuTe DSL: y[m, :] = softmax(x[m, :]), fp32 in and out.

Memory-bound: one read of x and one write of y (268 MB each on the benchmark shape). One CTA per
row; the row is read once into registers with 16-byte vector loads (thread t holds vectors
t, t + THREADS, ...), then row max and sum of exp are reduced in fp32 (warp shuffles, then one
value per warp through shared memory) and the normalized row is written from registers.
N is compile-time: THREADS is picked so that each thread holds about 4 vectors (16 floats),
up to 1024 threads for the longest rows.
"""
import math

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

VEC = 4  # fp32 per 16-byte access
LOG2E = math.log2(math.e)


def pick_threads(nvec: int) -> int:
    """About 4 vectors per thread, 32 to 1024 threads (a multiple of 32)."""
    want = -(-nvec // 4)
    return min(1024, max(32, -(-want // 32) * 32))


@cute.jit
def block_reduce(v: cutlass.Float32, red: cute.Tensor, warps: cutlass.Constexpr,
                 is_max: cutlass.Constexpr) -> cutlass.Float32:
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    if cutlass.const_expr(is_max):
        v = cute.arch.warp_reduction_max(v)
    else:
        v = cute.arch.warp_reduction_sum(v)
    if cutlass.const_expr(warps > 1):
        if lane == 0:
            red[warp] = v
        cute.arch.sync_threads()
        p = -cutlass.Float32.inf if is_max else cutlass.Float32(0.0)
        if lane < warps:
            p = red[lane]
        if cutlass.const_expr(is_max):
            v = cute.arch.warp_reduction_max(p)
        else:
            v = cute.arch.warp_reduction_sum(p)
    return v


@cute.kernel
def softmax_kernel(gX: cute.Tensor, gY: cute.Tensor, threads: cutlass.Constexpr,
                   iters: cutlass.Constexpr):
    # gX, gY: ((1, VEC), (M, N // VEC))
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    nvec = cute.size(gX, mode=[1, 1])
    warps = threads // 32
    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    frag = cute.make_rmem_tensor((VEC, iters), cutlass.Float32)
    frag.fill(-cutlass.Float32.inf)  # padding lanes: exp2(-inf) = 0
    for k in cutlass.range_constexpr(iters):
        j = tidx + k * threads
        if cutlass.const_expr(nvec % threads == 0):
            frag[None, k].store(gX[(0, None), (row, j)].load())
        else:
            if j < nvec:
                frag[None, k].store(gX[(0, None), (row, j)].load())

    x = frag.load()
    row_max = block_reduce(x.reduce(cute.ReductionOp.MAX, -cutlass.Float32.inf, 0), red_max,
                           warps, True)
    e = cute.math.exp2((x - row_max) * LOG2E, fastmath=True)
    row_sum = block_reduce(e.reduce(cute.ReductionOp.ADD, 0.0, 0), red_sum, warps, False)
    frag.store(e * (1.0 / row_sum))

    for k in cutlass.range_constexpr(iters):
        j = tidx + k * threads
        if cutlass.const_expr(nvec % threads == 0):
            gY[(0, None), (row, j)].store(frag[None, k].load())
        else:
            if j < nvec:
                gY[(0, None), (row, j)].store(frag[None, k].load())


@cute.jit
def softmax(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream,
            threads: cutlass.Constexpr, iters: cutlass.Constexpr):
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    softmax_kernel(gX, gY, threads, iters).launch(
        grid=[cute.size(mX, mode=[0]), 1, 1], block=[threads, 1, 1], stream=stream)


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    assert N % VEC == 0 and M * N < 2**31  # 16-byte rows; 32-bit offsets
    nvec = N // VEC
    threads = pick_threads(nvec)
    iters = -(-nvec // threads)
    x = make_fake_compact_tensor(cutlass.Float32, (M, N), stride_order=(1, 0), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (M, N), stride_order=(1, 0), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(softmax, x, y, stream, threads, iters, options="--enable-tvm-ffi")

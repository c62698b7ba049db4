"""CuTe DSL example: row mean y[m] = mean(x[m, :]), x [M, N] bf16/fp16, y [M] fp32.

spec.dims = {"M": ..., "N": ...}, N % 8 == 0, 16-byte aligned data pointers.
One CTA per row: 16-byte vector loads in a strided loop, fp32 partial sums,
warp shuffle reduction, then a cross-warp reduction through shared memory.
"""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

VEC = 8
THREADS = 256
WARPS = THREADS // 32
DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16}


@cute.kernel
def row_mean_kernel(gX: cute.Tensor, mY: cute.Tensor, inv_n: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    partials = SmemAllocator().allocate_tensor(cutlass.Float32, cute.make_layout(WARPS),
                                               byte_alignment=16)
    acc = cutlass.Float32(0.0)
    for j in cutlass.range(tidx, cute.size(gX, mode=[1, 1]), THREADS):  # runtime loop
        v = gX[(0, None), (row, j)].load().to(cutlass.Float32)  # 8 values, one 128-bit load
        acc = acc + v.reduce(cute.ReductionOp.ADD, 0.0, 0)  # profile 0: reduce to a scalar
    acc = cute.arch.warp_reduction_sum(acc)
    if lane == 0:
        partials[warp] = acc
    cute.arch.sync_threads()
    if warp == 0:
        p = cutlass.Float32(0.0)
        if lane < WARPS:
            p = partials[lane]
        total = cute.arch.warp_reduction_sum(p)
        if lane == 0:
            mY[row] = total * inv_n


@cute.jit
def row_mean(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    inv_n = 1.0 / cute.size(mX, mode=[1])  # a Python float: N is static
    row_mean_kernel(cute.zipped_divide(mX, (1, VEC)), mY, inv_n).launch(
        grid=[cute.size(mX, mode=[0]), 1, 1], block=[THREADS, 1, 1], stream=stream)


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    assert N % VEC == 0 and M * N < 2**31
    x = make_fake_compact_tensor(DTYPES[spec.inputs[0].dtype], (M, N), stride_order=(1, 0),
                                 assumed_align=16)
    y = make_fake_compact_tensor(cutlass.Float32, (M,))
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(row_mean, x, y, stream, options="--enable-tvm-ffi")  # run(x, y)

"""C01 softmax, CuTe DSL expert solution: y[m, :] = softmax(x[m, :]) for fp32 [M, N].

Memory-bound: every element is read once and written once; the whole row stays in registers
between the read and the write, so there is no second pass over global memory.

Design
  * One compile per shape set with static (M, N).  A row is handled by TPR threads (a power of
    two, 32..1024) that each hold VPT 128-bit vectors (4 fp32) of it, vector j of a thread
    starting at column (j * TPR + lane) * 4 so that a warp reads 512 contiguous bytes.
    TPR is the smallest power of two with VPT <= VPT_MAX (e.g. N=4096 -> 128 threads x 8
    vectors; N=16384 -> 512 x 8; N=1000 -> 32 x 8 (250 vectors used); N=128 -> 32 x 1).
  * TPR == 32: a CTA holds ROWS_SMALL rows (one warp each), reductions are warp shuffles only.
    TPR > 32: one row per CTA; warp shuffles, then one value per warp through shared memory.
  * Row max and row sum are reduced in fp32; exp is exp2((x - max) * log2 e) (ex2.approx,
    relative error ~2^-22; x - max is formed first so large input offsets cost no accuracy),
    and y = e * (1 / sum).
  * Ragged rows (N not a multiple of TPR * 4) and ragged M use predicated 128-bit loads/stores,
    one predicate per vector (N % 4 == 0); padding lanes are filled with -inf, so they add 0.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: N <= 4 * VPT_MAX * 1024 (32768 with VPT_MAX = 8) and M * N < 2**31 (32-bit offsets);
build() raises ValueError beyond that.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 4            # fp32 per 128-bit access
VPT_MAX = 8        # max 128-bit vectors per thread (32 fp32 registers for the row slice)
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
LOG2_E = math.log2(math.e)


def _config(N: int) -> tuple[int, int, int]:
    """(TPR threads per row, VPT vectors per thread, ROWS rows per CTA) for row length N."""
    nvec = N // VEC
    tpr = 32
    while tpr < 1024 and -(-nvec // tpr) > VPT_MAX:
        tpr *= 2
    vpt = -(-nvec // tpr)
    if vpt > VPT_MAX:
        raise ValueError(f"N={N} too long for the register-resident softmax (max {4 * VPT_MAX * 1024})")
    rows = ROWS_SMALL if tpr == 32 else 1
    return tpr, vpt, rows


@cute.jit
def _group_reduce(val: cutlass.Float32, is_max: cutlass.Constexpr, tpr: cutlass.Constexpr,
                  buf: cute.Tensor):
    """Reduce one fp32 per thread over the TPR threads of a row; all of them get the result."""
    if cutlass.const_expr(is_max):
        val = cute.arch.warp_reduction_max(val, threads_in_group=min(tpr, 32))
    else:
        val = cute.arch.warp_reduction_sum(val, threads_in_group=min(tpr, 32))
    if cutlass.const_expr(tpr > 32):            # one row per CTA: combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = val
        cute.arch.sync_threads()
        # Every group of nwarps lanes reads all partials, so a butterfly over nwarps lanes
        # leaves the full result in every lane.
        v = buf[lane % nwarps]
        if cutlass.const_expr(is_max):
            val = cute.arch.warp_reduction_max(v, threads_in_group=nwarps)
        else:
            val = cute.arch.warp_reduction_sum(v, threads_in_group=nwarps)
    return val


@cute.kernel
def _softmax_kernel(
    mX: cute.Tensor,            # (M, N) row-major fp32
    mY: cute.Tensor,            # (M, N) row-major fp32
    tiled_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()

    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    tile = (rows, vpt * tpr * VEC)                      # this CTA's rows, padded row length
    gX = cute.local_tile(mX, tile, (bidx, 0))
    gY = cute.local_tile(mY, tile, (bidx, 0))
    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)                          # ((VEC), 1, VPT)
    tYgY = thr.partition_D(gY)
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (bidx, 0))
        tCc = thr.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        tXrX.fill(-math.inf)                            # padding: exp2(-inf) = 0
        cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    else:
        cute.copy(tiled_copy, tXgX, tXrX)

    x = tXrX.load()
    row_max = _group_reduce(x.reduce(cute.ReductionOp.MAX, -math.inf, 0), True, tpr, red_max)
    # (x - max) first: exact-ish for any input offset, unlike x*log2e - max*log2e (which would
    # lose ~|max| * 2^-24 in the exponent to the rounding of max*log2e).
    e = cute.math.exp2((x - row_max) * LOG2_E, fastmath=True)
    row_sum = _group_reduce(e.reduce(cute.ReductionOp.ADD, 0.0, 0), False, tpr, red_sum)
    tYrY.store(e * (1.0 / row_sum))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _softmax_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((rows, tpr), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    M = mX.shape[0]
    N = mX.shape[1]
    check_bounds = (M % rows != 0) or (N % (vpt * tpr * VEC) != 0)
    _softmax_kernel(mX, mY, tiled_copy, tpr, vpt, rows, check_bounds).launch(
        grid=[(M + rows - 1) // rows, 1, 1],
        block=[rows * tpr, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (M, N) and return run(x, y)."""
    M = int(spec.dims["M"])
    N = int(spec.dims["N"])
    if N % VEC != 0:
        raise ValueError(f"N={N} must be a multiple of {VEC} (128-bit vectors)")
    if M * N >= 2**31:
        raise ValueError("M*N must stay below 2**31 elements (32-bit static index math)")
    tpr, vpt, rows = _config(N)
    key = (M, N, tpr, vpt, rows)
    fn = _CACHE.get(key)
    if fn is None:
        f32 = cutlass.Float32
        x = make_fake_compact_tensor(f32, (M, N), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(f32, (M, N), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_softmax_host, x, y, stream, tpr, vpt, rows, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

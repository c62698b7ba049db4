"""C02 scaled causal softmax, CuTe DSL expert solution: p = softmax(scale * s + causal mask), bf16.

s and p are bf16 [B, H, S, S]; p[b, h, i, j] = 0 for j > i.  Memory-bound: the scores on and
below the diagonal are read once (the future is never loaded), p is written once in full, and a
row stays in registers between the read and the write.

Design
  * One compile per shape set with static (B, H, S).  The [B, H, S, S] tensors are viewed as
    R = B*H*S rows of S (a static re-layout inside the jit function, so run() passes the torch
    tensors unchanged); query row i of a head is r % S.
  * Vector width VEC = 8 bf16 (128 bits) when S % 8 == 0, else 4 / 2 / 1 elements (a row of
    S = 333 starts at a 2-byte aligned address, so only 16-bit accesses are legal there).
  * A row is handled by TPR threads (a power of two, 32..1024) that each hold VPT vectors, vector j
    of a thread starting at column (j * TPR + lane) * VEC, so a warp touches 32 * VEC contiguous
    elements per access.  TPR is the smallest power of two with VPT * VEC <= 32 values per thread
    (S = 1024 -> 32 threads x 4 vectors; S = 333 -> 32 threads x 11 scalars).  TPR == 32: a CTA
    holds ROWS_SMALL rows (one warp each), reductions are warp shuffles only; TPR > 32: one row
    per CTA, warp shuffles then one partial per warp through shared memory.
  * Causality: a vector is loaded only when its first column is <= i (and inside the row), so the
    scores above the diagonal are never read (half of the input traffic saved); every element
    with column > i (including the tail of the vector that straddles the diagonal and padding
    columns >= S) is set to -inf in registers, so exp2 makes it an exact 0, which is stored.
    Column 0 is always visible, so the row max is finite and no row can produce NaN.
  * fp32 math: t = s * (scale * log2 e) (one fp32 multiply, the constant rounded once to fp32),
    m = max t, e = exp2(t - m) (ex2.approx, relative error ~2^-22), p = e * (1 / sum e), one
    rounding to bf16 at the store.  Folding log2 e into the scale changes p by ~1e-5 relative
    (fp32 rounding of the constant and of t at |t| ~ 130), far inside the 3.2e-2 rtol; nothing is
    rounded to bf16 before the store.  scale > 0, so max(t) is the scaled max of the scores.
  * Ragged edges: one predicate per vector (S % VEC == 0 by construction, so a vector is fully
    inside or fully outside the row) for the stores; rows past R (only when TPR == 32 and
    R % ROWS_SMALL != 0) are predicated off for loads and stores.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch tensors
    straight through on torch's current stream (about 5 us of host overhead).
Speed notes: the work per row is uneven (row i reads i + 1 scores) but rows of a CTA are
consecutive, so warps of a CTA finish together; above-diagonal vectors still cost their exp2 in
registers (~12 instructions per element in all, well under the issue budget of the copy).
Offline ptxas for sm_90a at the benchmark shape: 45 registers, no spill.
Limits: S <= 32 * 1024 and B*H*S*S < 2**31 (32-bit offsets); build() raises ValueError beyond.
Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 101.2 us, 85.3% of the
roofline ideal.
"""
import math
import struct

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VALS_MAX = 32      # max values of the row per thread (registers)
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
LOG2_E = math.log2(math.e)


def _f32(v: float) -> float:
    """v rounded to the nearest fp32 number."""
    return struct.unpack("f", struct.pack("f", v))[0]


def _vec(S: int) -> int:
    """Widest vector (elements, up to 128 bits of bf16) that keeps every row start aligned."""
    for v in (8, 4, 2):
        if S % v == 0:
            return v
    return 1


def _config(S: int, vec: int) -> tuple[int, int, int]:
    """(TPR threads per row, VPT vectors per thread, ROWS rows per CTA) for row length S."""
    nvec = S // vec
    vpt_max = VALS_MAX // vec
    tpr = 32
    while tpr < 1024 and -(-nvec // tpr) > vpt_max:
        tpr *= 2
    vpt = -(-nvec // tpr)
    if vpt > vpt_max:
        raise ValueError(f"S={S} too long for the register-resident softmax (max {VALS_MAX * 1024})")
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
        v = buf[lane % nwarps]
        if cutlass.const_expr(is_max):
            val = cute.arch.warp_reduction_max(v, threads_in_group=nwarps)
        else:
            val = cute.arch.warp_reduction_sum(v, threads_in_group=nwarps)
    return val


@cute.kernel
def _causal_softmax_kernel(
    mX: cute.Tensor,            # (R, S) row-major bf16 view of s
    mY: cute.Tensor,            # (R, S) row-major bf16 view of p
    tiled_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    seq: cutlass.Constexpr,
    coef: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()

    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    tile = (rows, vpt * tpr * vec)                      # this CTA's rows, padded row length
    gX = cute.local_tile(mX, tile, (bidx, 0))
    gY = cute.local_tile(mY, tile, (bidx, 0))
    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)                          # ((VEC), 1, VPT)
    tYgY = thr.partition_D(gY)
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)

    cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (bidx, 0))
    tCc = thr.partition_S(cX)
    qi = tCc[0][0] % seq                                # this thread's query position i
    ld_pred = cute.make_rmem_tensor(
        (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
        cutlass.Boolean,
    )
    st_pred = cute.make_rmem_tensor(
        (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
        cutlass.Boolean,
    )
    for j in cutlass.range_constexpr(cute.size(ld_pred, mode=[0])):
        for m in cutlass.range_constexpr(cute.size(ld_pred, mode=[1])):
            for n in cutlass.range_constexpr(cute.size(ld_pred, mode=[2])):
                c = tCc[(0, j), m, n]
                inside = cute.elem_less(c, mX.shape)
                st_pred[j, m, n] = inside
                ld_pred[j, m, n] = inside and c[1] <= qi
    cute.copy(tiled_copy, tXgX, tXrX, pred=ld_pred)

    # t = s * scale * log2(e) in fp32; the future (and padding) becomes -inf.
    t = cute.make_fragment_like(tXrX, cutlass.Float32)
    t.store(tXrX.load().to(cutlass.Float32) * coef)
    for k in cutlass.range_constexpr(cute.size(t)):
        if tCc[k][1] > qi:
            t[k] = -math.inf
    tv = t.load()
    row_max = _group_reduce(tv.reduce(cute.ReductionOp.MAX, -math.inf, 0), True, tpr, red_max)
    e = cute.math.exp2(tv - row_max, fastmath=True)
    row_sum = _group_reduce(e.reduce(cute.ReductionOp.ADD, 0.0, 0), False, tpr, red_sum)
    tYrY.store((e * (1.0 / row_sum)).to(mY.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=st_pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _causal_softmax_host(
    mS: cute.Tensor,            # (B, H, S, S) bf16
    mP: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vec: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    nrows: cutlass.Constexpr,
    seq: cutlass.Constexpr,
    coef: cutlass.Constexpr,
):
    layout = cute.make_layout((nrows, seq), stride=(seq, 1))
    mX = cute.make_tensor(mS.iterator, layout)
    mY = cute.make_tensor(mP.iterator, layout)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type,
                               num_bits_per_copy=16 * vec)
    thr_layout = cute.make_ordered_layout((rows, tpr), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, vec))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    check_bounds = (nrows % rows != 0) or (seq % (vpt * tpr * vec) != 0)
    _causal_softmax_kernel(mX, mY, tiled_copy, tpr, vec, vpt, rows, seq, coef,
                           check_bounds).launch(
        grid=[(nrows + rows - 1) // rows, 1, 1],
        block=[rows * tpr, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (B, H, S) and scale and return run(s, p)."""
    B = int(spec.dims["B"])
    H = int(spec.dims["H"])
    S = int(spec.dims["S"])
    scale = float(spec.params["scale"])
    if not scale > 0.0:
        raise ValueError(f"scale={scale} must be positive (the row max is taken on the scaled scores)")
    if B * H * S * S >= 2**31:
        raise ValueError("B*H*S*S must stay below 2**31 elements (32-bit static index math)")
    vec = _vec(S)
    tpr, vpt, rows = _config(S, vec)
    # scale is an fp32 number; scale * log2(e) is rounded to fp32 once, at compile time.
    coef = _f32(_f32(scale) * LOG2_E)
    key = (B, H, S, coef)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        shape = (B, H, S, S)
        order = (3, 2, 1, 0)
        s = make_fake_compact_tensor(bf16, shape, stride_order=order, assumed_align=2 * vec)
        p = make_fake_compact_tensor(bf16, shape, stride_order=order, assumed_align=2 * vec)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_causal_softmax_host, s, p, stream, tpr, vec, vpt, rows, B * H * S, S, coef,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(s: torch.Tensor, p: torch.Tensor) -> None:
        fn(s, p)

    return run

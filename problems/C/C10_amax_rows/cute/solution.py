"""C10 amax_rows, CuTe DSL expert solution: amax[t] = max_h |x[t, h]|, bf16 [T, H] in, fp32 [T]
out (exact).

Memory-bound streaming reduction: every element is read once (268 MB at T = 32768, H = 4096),
4 bytes per row are written.

Design
  * One compile per shape set with static (T, H).  One warp per row, ROWS = 4 rows (warps) per
    CTA (the benchmark launches 8192 CTAs of 128 threads, many short work units, so the last
    wave is a small fraction of the run).
  * A chunk of a row is VPT 128-bit vectors (8 bf16) per lane, vector j of a lane starting at
    column (j * 32 + lane) * 8, so a warp reads 512 contiguous bytes per load and has
    32 x VPT x 16 B = 4 KB in flight per chunk (VPT = 8 for rows of >= 2048; H = 4096 is two
    chunks, H = 14336 seven).  The full chunks run in a dynamic loop without predicates; a
    last, partial chunk (H % (256 * VPT) != 0, e.g. H = 1000) is a predicated copy of whole
    vectors (H % 8 == 0) with padding lanes zero-filled (|0| never wins, and amax >= 0).
  * Each lane keeps a running fp32 maximum of |x| (the bf16 value widened exactly; the abs is a
    free operand modifier of FMNMX in SASS), then a warp butterfly max, and lane 0 stores it.
    Every step is an exact max of bf16 magnitudes, so the result is bit-exact in any order.
  * Ragged T (T % ROWS != 0): the warps past the last row re-read row T - 1 (clamped index)
    and do not store.
  * Issue budget: ~2 SASS instructions per element (widen, FMNMX) -> far below the memory time.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: T * H < 2**31 (32-bit offsets); build() raises ValueError beyond that.
Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 63.9 us, 90.0% of the
roofline ideal.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 per 128-bit access
VPT_MAX = 8        # 128-bit vectors per lane per chunk (4 KB per warp in flight)
ROWS = 4           # rows (warps) per CTA


def _config(H: int) -> int:
    """VPT: 128-bit vectors per lane per chunk for row length H."""
    nvec = H // VEC
    return max(1, min(VPT_MAX, -(-nvec // 32)))


@cute.jit
def _fold(xv: cute.TensorSSA, acc: cutlass.Float32):
    """Fold one chunk (fp32 values) into the lane's running max of |x|."""
    return cute.arch.fmax(acc, cute.math.abs(xv).reduce(cute.ReductionOp.MAX, 0.0, 0))


@cute.kernel
def _amax_kernel(
    mX: cute.Tensor,            # (T, H) row-major bf16
    mO: cute.Tensor,            # (T,) fp32
    tiled_copy: cute.TiledCopy,
    vpt: cutlass.Constexpr,
    n_full: cutlass.Constexpr,
    has_tail: cutlass.Constexpr,
    ragged_rows: cutlass.Constexpr,
):
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    T = mX.shape[0]
    row = bidx * ROWS + warp
    row_c = row
    if cutlass.const_expr(ragged_rows):
        row_c = cutlass.min(row, T - 1)

    chunk = (1, vpt * 32 * VEC)
    thr = tiled_copy.get_slice(lane)
    frag = cute.make_fragment_like(thr.partition_S(cute.local_tile(mX, chunk, (row_c, 0))))

    acc = cutlass.Float32(0.0)
    for c in cutlass.range(n_full, unroll=1):
        cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mX, chunk, (row_c, c))), frag)
        acc = _fold(frag.load().to(cutlass.Float32), acc)

    if cutlass.const_expr(has_tail):
        gX = cute.local_tile(mX, chunk, (row_c, n_full))
        tXgX = thr.partition_S(gX)                      # ((VEC), 1, VPT)
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), chunk, (row_c, n_full))
        tCc = thr.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        frag.fill(0.0)
        cute.copy(tiled_copy, tXgX, frag, pred=pred)
        acc = _fold(frag.load().to(cutlass.Float32), acc)

    amax = cute.arch.warp_reduction_max(acc)
    if lane == 0:
        if cutlass.const_expr(ragged_rows):
            if row < T:
                mO[row] = amax
        else:
            mO[row] = amax


@cute.jit
def _amax_host(
    mX: cute.Tensor,
    mO: cute.Tensor,
    stream: cuda.CUstream,
    vpt: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout((1, 32)), cute.make_layout((1, VEC)))
    T = mX.shape[0]
    H = mX.shape[1]
    ch = vpt * 32 * VEC
    _amax_kernel(mX, mO, tiled_copy, vpt, H // ch, H % ch != 0, T % ROWS != 0).launch(
        grid=[(T + ROWS - 1) // ROWS, 1, 1],
        block=[ROWS * 32, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and return run(x, amax)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (128-bit vectors)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    vpt = _config(H)
    key = (T, H, vpt)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, H), stride_order=(1, 0), assumed_align=16)
        o = make_fake_compact_tensor(cutlass.Float32, (T,), assumed_align=4)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_amax_host, x, o, stream, vpt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, amax: torch.Tensor) -> None:
        fn(x, amax)

    return run

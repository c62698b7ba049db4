"""F05 per_token_fp8_quant, CuTe DSL expert solution: per-row fp8 (e4m3fn) quantization,
s[t] = max(amax(|x[t, :]|) / 448, 1/(448*512)), q = e4m3(clamp(x / s, -448, 448)), bf16 in.

Memory-bound: every element of x is read once and q written once; the row stays in registers
between the amax and the quantized store, so there is no second pass over global memory.

Design
  * One compile per shape set with static (T, H).  A row is handled by TPR threads (a multiple
    of 32, at most 1024) that each hold VPT 128-bit vectors (8 bf16) of it, vector j of a thread
    starting at column (j * TPR + lane) * 8, so a warp reads 512 contiguous bytes of x and
    writes 256 contiguous bytes of q per access.  VPT = min(4, ceil(nvec / 32)) and TPR is the
    smallest multiple of 32 with TPR * VPT >= nvec (nvec = H / 8): H = 4096 -> 128 x 4 (exact),
    H = 14336 -> 448 x 4 (exact), H = 1000 -> 32 x 4 (125 of 128 vectors used), H = 256 ->
    32 x 1.  All VPT loads of a thread are issued before any math (64 B in flight per thread).
  * TPR == 32: a CTA holds ROWS_SMALL rows (one warp each) and the amax is warp shuffles only.
    TPR > 32: one row per CTA; warp shuffles, then one partial per warp through shared memory;
    every lane then reads partial[lane % nwarps] and a full-warp max gives every thread the row
    amax (max is idempotent, so the repeated partials are harmless for any warp count).
  * Numerics, as the statement asks: amax is exact (fp32 max of |bf16|, abs folded into the
    max); s = amax / 448 is one IEEE fp32 division (div.rn, once per row), then the floor.
    The quotient is x * (1 / s) with 1 / s one IEEE division per row (allowed by the statement;
    it lands on the other side of an e4m3 rounding midpoint for a few elements in 10^4, within
    the tolerance).  The e4m3 conversion is cvt.rn.satfinite.e4m3x2.f32 (what TensorSSA
    .to(Float8E4M3FN) emits, checked in the PTX): round to nearest even with saturation to
    +-448, which is exactly clamp(., -448, 448) followed by the rounding, so no separate clamp.
    About 5 SASS-level operations per element, far below the memory time.
  * q is stored through a second tiled copy with the same thread/value layout and a 64-bit fp8
    atom (8 e4m3 per store), so the register fragments of x and q match element for element.
  * The thread that owns the row's first vector writes s[t].
  * Ragged rows (H not a multiple of TPR * VPT * 8) and ragged T: predicated loads/stores, one
    predicate per vector (H % 8 == 0, so a vector is fully inside or fully outside); padding
    lanes are zero-filled, which cannot raise a max of |x|.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: H <= 8 * 4 * 1024 (32768) and T * H < 2**31 (32-bit offsets); build() raises
ValueError beyond that.  Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one
run): 92.3 us, 93.5% of the roofline ideal.

An earlier run, before later tuning rounds and the L2 flush fix of 2026-12-02f
(bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`), measured: 98.3 us, 88.4%
of the roofline ideal (86.8 us), 14.61x the fastest eager formulation, 1.79x torch.compile; the TIRx
expert 118.4 us (this one is faster).
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit load (and e4m3 per 64-bit store)
VPT_MAX = 4        # max 128-bit vectors per thread (32 fp32 values of the row)
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
FP8_MAX = 448.0    # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (448.0 * 512.0)


def _config(H: int) -> tuple[int, int, int]:
    """(TPR threads per row, VPT vectors per thread, ROWS rows per CTA) for row length H."""
    nvec = H // VEC
    vpt = max(1, min(VPT_MAX, -(-nvec // 32)))
    tpr = -(-(-(-nvec // vpt)) // 32) * 32
    if tpr > 1024:
        raise ValueError(f"H={H} too long for the register-resident row (max {VEC * VPT_MAX * 1024})")
    rows = ROWS_SMALL if tpr == 32 else 1
    return tpr, vpt, rows


@cute.jit
def _row_max(val: cutlass.Float32, tpr: cutlass.Constexpr, buf: cute.Tensor):
    """Max of one fp32 per thread over the TPR threads of a row; all of them get the result."""
    val = cute.arch.warp_reduction_max(val, threads_in_group=32)
    if cutlass.const_expr(tpr > 32):            # one row per CTA: combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = val
        cute.arch.sync_threads()
        val = cute.arch.warp_reduction_max(buf[lane % nwarps], threads_in_group=32)
    return val


@cute.kernel
def _quant_kernel(
    mX: cute.Tensor,            # (T, H) row-major bf16
    mQ: cute.Tensor,            # (T, H) row-major e4m3
    mS: cute.Tensor,            # (T, 1) fp32
    copy_x: cute.TiledCopy,
    copy_q: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()

    smem = SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    tile = (rows, vpt * tpr * VEC)                      # this CTA's rows, padded row length
    gX = cute.local_tile(mX, tile, (bidx, 0))
    gQ = cute.local_tile(mQ, tile, (bidx, 0))
    thr_x = copy_x.get_slice(tidx)
    thr_q = copy_q.get_slice(tidx)
    tXgX = thr_x.partition_S(gX)                        # ((VEC), 1, VPT)
    tQgQ = thr_q.partition_D(gQ)
    tXrX = cute.make_fragment_like(tXgX)
    tQrQ = cute.make_fragment_like(tQgQ)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (bidx, 0))
        tCc = thr_x.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        tXrX.fill(0.0)                                  # padding cannot raise max |x|
        cute.copy(copy_x, tXgX, tXrX, pred=pred)
    else:
        cute.copy(copy_x, tXgX, tXrX)

    x = tXrX.load().to(cutlass.Float32)
    amax = _row_max(cute.math.abs(x).reduce(cute.ReductionOp.MAX, 0.0, 0), tpr, red)
    scale = cute.arch.fmax(amax / FP8_MAX, cutlass.Float32(MIN_SCALE))   # IEEE div, per row
    inv = cutlass.Float32(1.0) / scale
    # satfinite cvt: round to nearest even, saturated to +-448 (== the statement's clamp).
    tQrQ.store((x * inv).to(mQ.element_type))

    row = bidx * rows + tidx // tpr
    if tidx % tpr == 0:
        if cutlass.const_expr(check_bounds):
            if row < mX.shape[0]:
                mS[row, 0] = scale
        else:
            mS[row, 0] = scale

    if cutlass.const_expr(check_bounds):
        cute.copy(copy_q, tQrQ, tQgQ, pred=pred)
    else:
        cute.copy(copy_q, tQrQ, tQgQ)


@cute.jit
def _quant_host(
    mX: cute.Tensor,
    mQ: cute.Tensor,
    mS: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    thr_layout = cute.make_ordered_layout((rows, tpr), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))
    atom_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    atom_q = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mQ.element_type, num_bits_per_copy=64)
    copy_x = cute.make_tiled_copy_tv(atom_x, thr_layout, val_layout)
    copy_q = cute.make_tiled_copy_tv(atom_q, thr_layout, val_layout)
    T = mX.shape[0]
    H = mX.shape[1]
    check_bounds = (T % rows != 0) or (H % (vpt * tpr * VEC) != 0)
    _quant_kernel(mX, mQ, mS, copy_x, copy_q, tpr, vpt, rows, check_bounds).launch(
        grid=[(T + rows - 1) // rows, 1, 1],
        block=[rows * tpr, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and return run(x, q, s)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (128-bit vectors)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    tpr, vpt, rows = _config(H)
    key = (T, H, tpr, vpt, rows)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, H), stride_order=(1, 0), assumed_align=16)
        q = make_fake_compact_tensor(cutlass.Float8E4M3FN, (T, H), stride_order=(1, 0),
                                     assumed_align=16)
        s = make_fake_compact_tensor(cutlass.Float32, (T, 1), stride_order=(1, 0), assumed_align=4)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_quant_host, x, q, s, stream, tpr, vpt, rows, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
        fn(x, q, s)

    return run

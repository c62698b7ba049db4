"""F07 int8_quant_dequant, CuTe DSL expert solution: symmetric per-row int8 fake-quantization,
s[t] = max(amax(|x[t, :]|) / 127, 1/(127*512)), q = clamp(rint(x / s), +-127) (int8),
xdq = bf16(q * s); bf16 in.

Memory-bound: every element of x is read once, q and xdq written once; the row stays in
registers between the amax and the two stores, so there is no second pass over global memory.

Design
  * One compile per shape set with static (T, H).  A row is handled by TPR threads (a multiple
    of 32, at most 1024) that each hold VPT 128-bit vectors (8 bf16) of it, vector j of a thread
    starting at column (j * TPR + lane) * 8: per access a warp reads 512 contiguous bytes of x
    and writes 256 contiguous bytes of q (64-bit int8 stores) and 512 of xdq (128-bit bf16
    stores).  VPT = min(4, ceil(nvec / 32)) and TPR is the smallest multiple of 32 with
    TPR * VPT >= nvec (nvec = H / 8): H = 4096 -> 128 x 4 (exact), H = 14336 -> 448 x 4
    (exact), H = 1000 -> 32 x 4 (125 of 128 vectors used), H = 256 -> 32 x 1.  All VPT loads
    of a thread are issued before any math (64 B in flight per thread).
  * TPR == 32: a CTA holds ROWS_SMALL rows (one warp each) and the amax is warp shuffles only.
    TPR > 32: one row per CTA; warp shuffles, then one partial per warp through shared memory;
    every lane then reads partial[lane % nwarps] and a full-warp max gives every thread the row
    amax (max is idempotent, so repeated partials are harmless for any warp count).
  * Numerics: amax is exact (fp32 max of |bf16|, abs folded into the max); s = amax / 127 is one
    IEEE fp32 division per row, then the floor; the quotient is x * (1 / s) with 1 / s one IEEE
    division per row (allowed by the statement).  Rounding to the nearest integer, ties to even,
    without a conversion unit: v = x * inv + 1.5 * 2^23 (ptxas may fuse it into one FMA, which
    rounds the exact product once: at least as close to x / s) is the fp32 whose last mantissa
    bits hold rint(x * inv) in two's complement (|x * inv| < 2^22), so
      - q is the low byte of v's bit pattern (a bitcast and a truncation: byte permutes only),
      - the rounded value is r = v - 1.5 * 2^23 (exact), and xdq = bf16(r * s) (fp32 product,
        one rounding to bf16, nearest even, by cvt.rn.bf16x2.f32).
    The clamp to +-127 is a no-op and is not emitted: |x| <= amax and 1 / s is within 2 fp32
    ulps of 127 / amax, so |x * inv| <= 127 * (1 + 2^-22) < 127.5 and rint gives at most 127;
    -128 is never produced.  Where the reference meets an exact tie (x = +-amax / 2: x / s
    rounds to 63.5 in fp32, then to 64) the fused product lands a hair to either side, so q
    can be 63 there: one step, which the tolerance admits.  CPU emulation of this exact
    arithmetic against reference.py (2048 x 4096 and the check shapes): ~5e-4 of the elements
    differ by one step, worst q at 0.41 of its bound, xdq at 0.16, s exact.
  * q and xdq are stored through tiled copies with the same thread/value layout as x (a 64-bit
    int8 atom and x's 128-bit bf16 atom), so all register fragments match element for element.
    The thread that owns the row's first vector writes s[t].
  * Ragged rows (H not a multiple of TPR * VPT * 8) and ragged T: predicated loads/stores, one
    predicate per vector (H % 8 == 0, so a vector is fully inside or fully outside); padding
    lanes are zero-filled, which cannot raise a max of |x|.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: H <= 8 * 4 * 1024 (32768) and T * H < 2**31 (32-bit offsets); build() raises
ValueError beyond that.  Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one
run): 165.6 us, 86.8% of the roofline ideal.

An earlier run, before later tuning rounds and the L2 flush fix of 2026-12-02f
(bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`), measured: 174.2 us, 83.1%
of the roofline ideal (144.7 us), 14.15x the fastest eager formulation, 1.12x torch.compile; the
TIRx expert 172.7 us (this one is 1.01x slower).
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

VEC = 8            # bf16 per 128-bit load/store (and int8 per 64-bit store)
VPT_MAX = 4        # max 128-bit vectors per thread (32 fp32 values of the row)
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
INT8_MAX = 127.0   # symmetric range
MIN_SCALE = 1.0 / (127.0 * 512.0)
ROUND_MAGIC = 12582912.0   # 1.5 * 2^23: v + magic rounds v to an integer (ties to even)


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
def _int8_kernel(
    mX: cute.Tensor,            # (T, H) row-major bf16
    mQ: cute.Tensor,            # (T, H) row-major int8
    mS: cute.Tensor,            # (T, 1) fp32
    mD: cute.Tensor,            # (T, H) row-major bf16 (xdq)
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
    gD = cute.local_tile(mD, tile, (bidx, 0))
    thr_x = copy_x.get_slice(tidx)
    thr_q = copy_q.get_slice(tidx)
    tXgX = thr_x.partition_S(gX)                        # ((VEC), 1, VPT)
    tDgD = thr_x.partition_D(gD)
    tQgQ = thr_q.partition_D(gQ)
    tXrX = cute.make_fragment_like(tXgX)
    tDrD = cute.make_fragment_like(tDgD)
    tQrQ = cute.make_fragment_like(tQgQ)
    tVrV = cute.make_rmem_tensor(tXrX.shape, cutlass.Float32)    # x * inv + magic

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
    scale = cute.arch.fmax(amax / INT8_MAX, cutlass.Float32(MIN_SCALE))  # IEEE div, per row
    inv = cutlass.Float32(1.0) / scale
    v = x * inv + ROUND_MAGIC                          # rint(x * inv) in the low mantissa bits
    tVrV.store(v)
    tQrQ.store(cute.recast_tensor(tVrV, cutlass.Int32).load().to(mQ.element_type))  # low byte
    tDrD.store(((v - ROUND_MAGIC) * scale).to(mD.element_type))

    row = bidx * rows + tidx // tpr
    if tidx % tpr == 0:
        if cutlass.const_expr(check_bounds):
            if row < mX.shape[0]:
                mS[row, 0] = scale
        else:
            mS[row, 0] = scale

    if cutlass.const_expr(check_bounds):
        cute.copy(copy_q, tQrQ, tQgQ, pred=pred)
        cute.copy(copy_x, tDrD, tDgD, pred=pred)
    else:
        cute.copy(copy_q, tQrQ, tQgQ)
        cute.copy(copy_x, tDrD, tDgD)


@cute.jit
def _int8_host(
    mX: cute.Tensor,
    mQ: cute.Tensor,
    mS: cute.Tensor,
    mD: cute.Tensor,
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
    _int8_kernel(mX, mQ, mS, mD, copy_x, copy_q, tpr, vpt, rows, check_bounds).launch(
        grid=[(T + rows - 1) // rows, 1, 1],
        block=[rows * tpr, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and return run(x, q, s, xdq)."""
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
        bf16 = cutlass.BFloat16
        x = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        q = make_fake_compact_tensor(cutlass.Int8, (T, H), stride_order=(1, 0), assumed_align=16)
        s = make_fake_compact_tensor(cutlass.Float32, (T, 1), stride_order=(1, 0), assumed_align=4)
        d = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_int8_host, x, q, s, d, stream, tpr, vpt, rows, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, xdq: torch.Tensor) -> None:
        fn(x, q, s, xdq)

    return run

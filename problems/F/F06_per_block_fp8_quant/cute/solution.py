"""F06 per_block_fp8_quant, CuTe DSL expert solution: fp8 (e4m3fn) quantization with one scale
per 128x128 block, s[i, j] = max(amax(|block|) / 448, 1/(448*512)), q = e4m3(clamp(x / s, +-448)).

Memory-bound: every element of x is read once and q written once; a whole 128x128 block stays
in registers between its amax and the quantized store, so there is no second pass over memory.

Design
  * One compile per shape set with static (M, N).  One CTA per 128x128 block (grid MB * NB,
    block column fastest, so consecutive CTAs stream the same 128 rows left to right).
  * CTA = 256 threads laid out 16 rows x 16 threads; a thread owns one 128-bit vector (8 bf16)
    of columns and VM = 8 rows spaced 16 apart: a warp reads 2 row segments of 256 contiguous
    bytes per access and writes 2 x 128 contiguous bytes of q.  All 8 loads of a thread are
    issued before any math (128 B in flight per thread, 32 KB per CTA).
  * Block amax: per-thread fp32 max of |x| over its 64 values (abs folded into the max), warp
    shuffles, one partial per warp through shared memory, then every lane reads
    partial[lane % 8] and a full-warp max gives every thread the block amax.
  * Numerics, as the statement asks: amax is exact; s = amax / 448 is one IEEE fp32 division
    per CTA, then the floor; the quotient is x * (1 / s) with 1 / s one IEEE division per CTA
    (the statement allows it: a few elements in 10^4 land on the other side of an e4m3 rounding
    midpoint, within the tolerance).  The e4m3 conversion is cvt.rn.satfinite.e4m3x2.f32 (what
    TensorSSA .to(Float8E4M3FN) emits, checked in the PTX): round to nearest even, saturated to
    +-448, which is exactly the statement's clamp followed by the rounding.
  * q is stored through a second tiled copy with the same thread/value layout and a 64-bit fp8
    atom (8 e4m3 per store), so the register fragments of x and q match element for element.
    Thread 0 writes s[i, j].
  * Partial blocks (M or N not a multiple of 128): predicated loads/stores, one predicate per
    vector (N % 8 == 0, so a vector is fully inside or fully outside); padding lanes are
    zero-filled, which cannot raise a max of |x|, so the amax covers only existing elements.
    Shapes that are multiples of 128 (the benchmark) compile without any predicate.
  * Launch bound: at least 3 CTAs (768 threads, 96 KB of loads in flight) per SM, which caps
    ptxas at 80 registers per thread.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: M * N < 2**31 (32-bit offsets); build() raises ValueError beyond that.
Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 161.1 us, 93.7% of the
roofline ideal.

An earlier run, before later tuning rounds and the L2 flush fix of 2026-12-02f
(bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`), measured: 167.7 us, 90.6%
of the roofline ideal (151.9 us), 18.62x the fastest eager formulation, 1.56x torch.compile; the
TIRx expert 178.7 us (this one is faster).
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

BLOCK = 128        # scale block (rows and columns), fixed by the format
VEC = 8            # bf16 per 128-bit load (and e4m3 per 64-bit store)
TN = BLOCK // VEC  # 16 threads across a block row
TM = 16            # thread rows per CTA: 256 threads, VM = BLOCK / TM = 8 rows per thread
MIN_CTAS_PER_SM = 3
FP8_MAX = 448.0    # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (448.0 * 512.0)


@cute.kernel
def _block_quant_kernel(
    mX: cute.Tensor,            # (M, N) row-major bf16
    mQ: cute.Tensor,            # (M, N) row-major e4m3
    mS: cute.Tensor,            # (MB, NB) fp32
    copy_x: cute.TiledCopy,
    copy_q: cute.TiledCopy,
    nb: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    bi = bidx // nb
    bj = bidx % nb

    smem = SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    tile = (BLOCK, BLOCK)
    gX = cute.local_tile(mX, tile, (bi, bj))
    gQ = cute.local_tile(mQ, tile, (bi, bj))
    thr_x = copy_x.get_slice(tidx)
    thr_q = copy_q.get_slice(tidx)
    tXgX = thr_x.partition_S(gX)                        # ((VEC), VM, 1)
    tQgQ = thr_q.partition_D(gQ)
    tXrX = cute.make_fragment_like(tXgX)
    tQrQ = cute.make_fragment_like(tQgQ)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (bi, bj))
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
    amax = cute.arch.warp_reduction_max(cute.math.abs(x).reduce(cute.ReductionOp.MAX, 0.0, 0),
                                        threads_in_group=32)
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    if lane == 0:
        red[warp] = amax
    cute.arch.sync_threads()
    amax = cute.arch.warp_reduction_max(red[lane % (TM * TN // 32)], threads_in_group=32)

    scale = cute.arch.fmax(amax / FP8_MAX, cutlass.Float32(MIN_SCALE))   # IEEE div, per block
    inv = cutlass.Float32(1.0) / scale
    # satfinite cvt: round to nearest even, saturated to +-448 (== the statement's clamp).
    tQrQ.store((x * inv).to(mQ.element_type))
    if tidx == 0:
        mS[bi, bj] = scale

    if cutlass.const_expr(check_bounds):
        cute.copy(copy_q, tQrQ, tQgQ, pred=pred)
    else:
        cute.copy(copy_q, tQrQ, tQgQ)


@cute.jit
def _block_quant_host(
    mX: cute.Tensor,
    mQ: cute.Tensor,
    mS: cute.Tensor,
    stream: cuda.CUstream,
):
    thr_layout = cute.make_ordered_layout((TM, TN), order=(1, 0))     # row-major threads
    val_layout = cute.make_layout((1, VEC))
    atom_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    atom_q = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mQ.element_type, num_bits_per_copy=64)
    copy_x = cute.make_tiled_copy_tv(atom_x, thr_layout, val_layout)
    copy_q = cute.make_tiled_copy_tv(atom_q, thr_layout, val_layout)
    M = mX.shape[0]
    N = mX.shape[1]
    mb = mS.shape[0]
    nb = mS.shape[1]
    check_bounds = (M % BLOCK != 0) or (N % BLOCK != 0)
    _block_quant_kernel(mX, mQ, mS, copy_x, copy_q, nb, check_bounds).launch(
        grid=[mb * nb, 1, 1],
        block=[TM * TN, 1, 1],
        min_blocks_per_mp=MIN_CTAS_PER_SM,
        preferred_smem_carveout=-1,     # the driver default; given so no device query at compile
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (M, N) (MB, NB their ceilings over 128) and return run(x, q, s)."""
    M = int(spec.dims["M"])
    N = int(spec.dims["N"])
    MB = int(spec.dims["MB"])
    NB = int(spec.dims["NB"])
    if N % VEC != 0:
        raise ValueError(f"N={N} must be a multiple of {VEC} (128-bit vectors)")
    if MB != -(-M // BLOCK) or NB != -(-N // BLOCK):
        raise ValueError(f"MB={MB}, NB={NB} must be ceil(M / 128), ceil(N / 128) for M={M}, N={N}")
    if M * N >= 2**31:
        raise ValueError("M*N must stay below 2**31 elements (32-bit static index math)")
    key = (M, N)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (M, N), stride_order=(1, 0), assumed_align=16)
        q = make_fake_compact_tensor(cutlass.Float8E4M3FN, (M, N), stride_order=(1, 0),
                                     assumed_align=16)
        s = make_fake_compact_tensor(cutlass.Float32, (MB, NB), stride_order=(1, 0), assumed_align=4)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_block_quant_host, x, q, s, stream, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
        fn(x, q, s)

    return run

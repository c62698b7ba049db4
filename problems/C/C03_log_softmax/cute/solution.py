"""C03 log_softmax, CuTe DSL expert solution: y[t, :] = x[t, :] - logsumexp(x[t, :]).

x is bf16 [T, V], y fp32 [T, V].  Memory-bound: x is read once from DRAM (2 B per element) and
y written once (4 B per element) with 128-bit coalesced stores.  The row waits in SHARED memory
between the read and the write, so registers hold none of it and three rows fit per SM.

Design
  * One compile per shape set with static (T, V).  One CTA (THREADS = 512) per row.  Thread 0
    loads the whole row with ONE cp.async.bulk (global -> shared, V * 2 bytes, 64000 at
    V = 32000), completion on an mbarrier (expect_tx).  No registers stage the load: the TMA
    engine keeps all 64 KB in flight from the first cycle of the CTA.  The smem row is padded to
    THREADS * VPT * 8 values (65536 B at V = 32000: VPT = 8); the pad is written by the threads
    with a finite -1e30 (bf16) before the barrier that precedes the copy (disjoint bytes), so
    the max and the sum need no predicates (exp2 of the pad is 0; no -inf, so no
    inf - inf = NaN).  Short rows (the check shapes V = 256 and 1000) take the same path with
    VPT = 1 (mostly pad).
  * Pass 1 (smem): per-thread max of its VPT vectors (vector k of thread t is t + k * THREADS, so
    a warp reads 512 contiguous bytes: no bank conflicts), max.bf16x2 on the packed words (exact).
  * Pass 2 (smem): per-thread sum of exp2(x * log2 e - m_t * log2 e) relative to the THREAD's own
    max (no barrier needed), then one (max, sum) log-sum-exp merge: warp butterfly, one partial
    pair per warp in smem, ONE sync_threads, butterfly over the warps.
    lse = m + log2(sum) * ln 2 (lg2.approx).
  * Pass 3 (smem): y = x - lse, two 128-bit fp32 stores per 8-value vector (a warp writes 1 KB
    contiguous per store pair), predicated on the row end when V is not a multiple of
    THREADS * VPT * 8 (V % 8 == 0: a vector is fully inside or outside the row).
  * Launch: min_blocks_per_mp = 3 (at most 40 registers per thread: 3 x 512 threads on the
    64K-register file), preferred carveout 100 (max shared memory).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.

Measured on the H200 (bench/h200/2026-12-02/diag-cute-wake200.json, full mode, one judge):
239.0 us (IQR 1.1), 70.5% of the roofline ideal (168.6 us), 3.34x the fastest eager formulation
(log_softmax_fp32), 1.05x torch.compile.  The previous design (row in registers, 512 threads, two
CTAs per SM, two block reductions) ran 274.1 us in the same run; that design with a single
(max, sum) merge and one barrier per row ran 278.1 us (no faster), so the 35 us gain comes from
the shared-memory row, not from the barrier count.  The TIRx expert (the same design) runs 290.0 us
(bench/h200/2026-12-02/diag-wake200.json).
Why this design is faster than the register-resident row:
  * Rows in flight per SM.  A register-resident row takes 512 threads x 64 registers = the whole
    64K-register file for TWO rows per SM (264 rows in flight on 132 SMs).  Here the row costs
    65.5 KB of shared memory: 3 x 65.6 KB = 197 KB <= 227 KB per SM, so THREE rows per SM (396
    in flight).  While one CTA is in its reduction (~32000 ex2 at 16/clk/SM = 2000 clk ~1.1 us)
    or its store burst (128 KB), the two others still have up to 64 KB of loads each in flight
    (Little: ~35 KB per SM keeps the SM's DRAM share busy).
  * Waves: 4096 rows / 396 slots = 10.3 waves (was 15.5); rows are independent, the tail is one
    partial wave.
  * One barrier per row instead of two (one per block reduction); measured alone (the register
    design above) this gained nothing.
  Smem bandwidth: three 64 KB smem reads per row (192 KB / 128 B per clk = 1500 clk per row,
  three rows per SM in parallel): not a bound.

Numerics: fp32 throughout; per-thread partial sums exp2(x*log2e - m_t*log2e) are rescaled by
exp2((m_t - m)*log2e) in the merge (a standard online log-sum-exp; the statement allows any
summation order and ex2.approx / lg2.approx); y = x - lse with one fp32 rounding.
Limits: V <= 8 * VPT_MAX * THREADS = 65536 (shared memory), T * V < 2**31 (32-bit offsets);
build() raises ValueError beyond that.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import dsl_user_op
from cutlass.experimental.primitives import cp_async_bulk_shared_cluster_global

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit vector
THREADS = 512      # one row per CTA
VPT_MAX = 16       # max vectors per thread (V <= 65536)
MIN_BLOCKS = 3     # CTAs per SM (shared memory: 3 x 65.6 KB at V = 32000)
PAD_WORD = 0xF14AF14A  # two bf16 -1.0e30: finite, exp2 of it minus a real max is 0
M_INIT = -1.0e30
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)


def _config(V: int) -> int:
    """VPT: 128-bit vectors per thread for row length V (1 row per CTA of THREADS threads)."""
    nvec = V // VEC
    vpt = -(-nvec // THREADS)
    if vpt > VPT_MAX:
        raise ValueError(f"V={V} too long for the shared-memory row (max {VEC * VPT_MAX * THREADS})")
    return vpt


@dsl_user_op
def _bf16x2_max(a: cutlass.Uint32, b: cutlass.Uint32, *, loc=None, ip=None) -> cutlass.Uint32:
    """Lane-wise max of two packed bf16 pairs (max.bf16x2; exact, no widening)."""
    return cutlass.Uint32(llvm.inline_asm(
        cutlass.Uint32.mlir_type,
        [cutlass.Uint32(a).ir_value(loc=loc, ip=ip), cutlass.Uint32(b).ir_value(loc=loc, ip=ip)],
        "max.bf16x2 $0, $1, $2;",
        "=r,r,r",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


@dsl_user_op
def _u32_as_f32(w: cutlass.Uint32, *, loc=None, ip=None) -> cutlass.Float32:
    """Reinterpret the bits of a 32-bit word as fp32."""
    return cutlass.Float32(llvm.bitcast(cutlass.Float32.mlir_type,
                                        cutlass.Uint32(w).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


def _lo(w):
    """fp32 value of the low bf16 of a packed pair (element 2i)."""
    return _u32_as_f32(w << 16)


def _hi(w):
    """fp32 value of the high bf16 of a packed pair (element 2i + 1)."""
    return _u32_as_f32(w & 0xFFFF0000)


def _merge(m_a, s_a, m_b, s_b):
    """Log-sum-exp merge of two (max, sum of exp2((x - max) * log2 e)) pairs; maxima are finite."""
    m = cute.arch.fmax(m_a, m_b)
    s = (s_a * cute.math.exp2((m_a - m) * LOG2_E, fastmath=True)
         + s_b * cute.math.exp2((m_b - m) * LOG2_E, fastmath=True))
    return m, s


@cute.jit
def _bounds_pred(tCc: cute.Tensor, shape: cute.Shape):
    """One predicate per copy atom of a partitioned identity tensor: inside `shape`."""
    pred = cute.make_rmem_tensor(
        (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
        cutlass.Boolean,
    )
    for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
        for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
            for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], shape)
    return pred


@cute.kernel
def _log_softmax_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mY: cute.Tensor,            # (T, V) row-major fp32
    copy_s: cute.TiledCopy,     # smem bf16 -> registers, 128-bit
    copy_y: cute.TiledCopy,     # registers fp32 -> global, 128-bit
    vpt: cutlass.Constexpr,
    row_bytes: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    nwarps = THREADS // 32
    padded = vpt * THREADS * VEC
    nwords = padded // 2

    smem = SmemAllocator()
    mbar = smem.allocate_array(cutlass.Int64, num_elems=1, byte_alignment=8)
    red_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    sX = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((1, padded), stride=(padded, 1)),
                              byte_alignment=128)
    sW = cute.make_tensor(cute.recast_ptr(sX.iterator, dtype=cutlass.Uint32), cute.make_layout(nwords))

    if tidx == 0:
        cute.arch.mbarrier_init(mbar, 1)
        cute.arch.mbarrier_init_fence()
    # pad [V, padded) with a finite -1e30 (generic stores, disjoint from the bulk copy's bytes)
    n_real_words = row_bytes // 4
    for i in cutlass.range_constexpr(-(-(nwords - n_real_words) // THREADS)):
        w = n_real_words + i * THREADS + tidx
        if w < nwords:
            sW[w] = cutlass.Uint32(PAD_WORD)
    cute.arch.sync_threads()
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(mbar, row_bytes)
        gRow = cute.local_tile(mX, (1, mX.shape[1]), (bidx, 0))
        cp_async_bulk_shared_cluster_global(sX.iterator, gRow.iterator, mbar, row_bytes)
    cute.arch.mbarrier_wait(mbar, 0)

    thr_s = copy_s.get_slice(tidx)
    tSsX = thr_s.partition_S(sX)                        # ((VEC), 1, VPT)
    frag = cute.make_fragment_like(tSsX[None, None, 0])
    words = cute.recast_tensor(frag, cutlass.Uint32)    # 4 packed pairs

    # pass 1: the thread's max (bf16x2 tree per vector, exact)
    vmax = cutlass.Uint32(PAD_WORD)
    for k in cutlass.range_constexpr(vpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        t01 = _bf16x2_max(words[0], words[1])
        t23 = _bf16x2_max(words[2], words[3])
        vmax = _bf16x2_max(vmax, _bf16x2_max(t01, t23))
    m_t = cute.arch.fmax(cute.arch.fmax(_lo(vmax), _hi(vmax)), cutlass.Float32(M_INIT))
    ml2 = m_t * LOG2_E

    # pass 2: the thread's sum relative to its own max (no barrier before it)
    acc = [cutlass.Float32(0.0), cutlass.Float32(0.0)]
    for k in cutlass.range_constexpr(vpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        e = [cute.math.exp2(frag[j].to(cutlass.Float32) * LOG2_E - ml2, fastmath=True)
             for j in range(VEC)]
        acc[k % 2] = acc[k % 2] + (((e[0] + e[1]) + (e[2] + e[3])) + ((e[4] + e[5]) + (e[6] + e[7])))
    s_t = acc[0] + acc[1]

    # one log-sum-exp merge over the CTA: warp butterfly, partials in smem, ONE barrier
    m_r = m_t
    s_r = s_t
    for i in cutlass.range_constexpr(5):
        m_o = cute.arch.shuffle_sync_bfly(m_r, offset=1 << i)
        s_o = cute.arch.shuffle_sync_bfly(s_r, offset=1 << i)
        m_r, s_r = _merge(m_r, s_r, m_o, s_o)
    if lane == 0:
        red_m[warp] = m_r
        red_s[warp] = s_r
    cute.arch.sync_threads()
    m_r = red_m[lane % nwarps]
    s_r = red_s[lane % nwarps]
    for i in cutlass.range_constexpr(int(math.log2(nwarps))):
        m_o = cute.arch.shuffle_sync_bfly(m_r, offset=1 << i)
        s_o = cute.arch.shuffle_sync_bfly(s_r, offset=1 << i)
        m_r, s_r = _merge(m_r, s_r, m_o, s_o)
    lse = m_r + cute.math.log2(s_r, fastmath=True) * LN_2

    # pass 3: y = x - lse, two 128-bit fp32 stores per vector
    gY = cute.local_tile(mY, (1, padded), (bidx, 0))
    thr_y = copy_y.get_slice(tidx)
    tYgY = thr_y.partition_D(gY)                        # ((4, 2), 1, VPT) or equivalent
    yfrag = cute.make_fragment_like(tYgY[None, None, 0])
    if cutlass.const_expr(check_bounds):
        cY = cute.local_tile(cute.make_identity_tensor(mY.shape), (1, padded), (bidx, 0))
        pred_y = _bounds_pred(thr_y.partition_D(cY), mY.shape)
    for k in cutlass.range_constexpr(vpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        for i in cutlass.range_constexpr(VEC // 2):
            w = words[i]
            yfrag[2 * i] = _lo(w) - lse
            yfrag[2 * i + 1] = _hi(w) - lse
        if cutlass.const_expr(check_bounds):
            cute.copy(copy_y, yfrag, tYgY[None, None, k], pred=pred_y[None, None, k])
        else:
            cute.copy(copy_y, yfrag, tYgY[None, None, k])


@cute.jit
def _log_softmax_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    vpt: cutlass.Constexpr,
):
    thr_layout = cute.make_ordered_layout((1, THREADS), order=(1, 0))
    val_layout = cute.make_layout((1, VEC))
    atom_s = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.BFloat16, num_bits_per_copy=128)
    atom_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=128)
    copy_s = cute.make_tiled_copy_tv(atom_s, thr_layout, val_layout)
    copy_y = cute.make_tiled_copy_tv(atom_y, thr_layout, val_layout)
    T = mX.shape[0]
    V = mX.shape[1]
    check_bounds = V % (vpt * THREADS * VEC) != 0
    _log_softmax_kernel(mX, mY, copy_s, copy_y, vpt, V * 2, check_bounds).launch(
        grid=[T, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
        # three CTAs per SM: ~42 registers at 512 threads, 3 x 65.6 KB of shared memory
        min_blocks_per_mp=MIN_BLOCKS,
        preferred_smem_carveout=100,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(x, y)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    vpt = _config(V)
    key = (T, V, vpt)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.Float32, (T, V), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_log_softmax_host, x, y, stream, vpt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

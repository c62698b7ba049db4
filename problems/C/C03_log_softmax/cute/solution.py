"""C03 log_softmax, CuTe DSL expert solution: y[t, :] = x[t, :] - logsumexp(x[t, :]), x bf16
[T, V], y fp32 [T, V].

Memory-bound: x is read once (2 B per element) and y written once (4 B per element), 786.4 MB
at the benchmark shape T = 4096, V = 32000 (262.1 MB read, 524.3 MB written), 168.7 us at the
roofline's bandwidth. ONE CTA OF 512 THREADS PER ROW, the row brought into shared memory by ONE
bulk copy, three CTAs per SM, the mbarrier-init fence in thread 0 only, and QUADS: one full-line
128-bit store per 4 values (the TIRx expert's design, node for node).

Design
  * One compile per shape set with static (T, V).  Grid = T CTAs of THREADS = 512, one row each.
  * Shared memory: the padded row first, at offset 0 (QPT * THREADS * 4 bf16 = 64 KB at
    V = 32000), then the mbarrier and the two 32-entry fp32 merge arrays: 64.3 KB per CTA.
  * Thread 0 inits the mbarrier and runs fence.mbarrier_init (thread 0 only: no all-thread proxy
    fence); the threads write the pad (V * 2 bytes padded to THREADS * QPT quads; a finite bf16
    -1e30, generic stores to bytes disjoint from the copy's, so the max and the sum need no
    predicates and no -inf enters: no inf - inf); one barrier; thread 0 arms the mbarrier with
    the row's byte count (expect_tx) and issues ONE cp.async.bulk of the row (64000 B at
    V = 32000); everyone waits on the mbarrier (parity 0).  The TMA engine keeps the whole row in
    flight from the CTA's first cycles with no registers staging it.
  * Quads: thread t owns quads t + k * THREADS of 4 bf16 (64-bit ld.shared, a warp reads 256
    contiguous bytes: no bank conflicts), k < QPT = 16 at V = 32000.  bf16 -> fp32 is bit work on
    the packed words, one exact op per value (low half: w << 16, high half: w & 0xFFFF0000).
    Pass 1: thread max with max.bf16x2 on the packed words (exact), floored at -1e30; pass 2: sum
    of exp2(x * log2 e - m_t * log2 e) relative to the thread's own max (ex2.approx, no barrier;
    two accumulators alternating over the quads); one (max, sum) log-sum-exp merge: warp
    butterfly, one pair per warp in smem, ONE sync_threads, butterfly over the 16 warp pairs;
    lse = m + log2(sum) * ln 2 (lg2.approx).  Pass 3 re-reads the quads from smem and stores
    y = x - lse.
  * Stores: quad t + k * THREADS is ONE 128-bit fp32 store, so a warp store instruction writes
    512 CONTIGUOUS bytes (4 full 128-byte lines); quad slots k >= V / 4 // THREADS (the tail;
    only k = 15 at V = 32000) are guarded by tid + k * THREADS < V / 4 (V % 8 == 0: a quad is
    fully inside or outside the row); the other slots store unconditionally.
  * Launch: min_blocks_per_mp = 3 (<= 40 registers at 512 threads), preferred_smem_carveout = 100
    (3 x 64.3 KB of shared memory per SM needs the 228 KB carveout).
  * SASS (sm_90a, the benchmark shape, checked offline): 40 registers, no local memory (no
    spill), 632 instructions: 32 LDS.64 (passes 1 and 2 share their 16 loads, pass 3 re-reads
    16), 16 VHMNMX.BF16_V2, 82 MUFU.EX2 + 1 MUFU.LG2, 18 SHFL.BFLY, 2 BAR.SYNC (one before the
    copy, one in the merge), one UBLKCP, no PRMT, 16 STG.E.128 at tid * 16 + k * 8192, one
    guarded (tid < 320).
  * Arithmetic: DRAM time per row per SM = 192 KB / (4.64 TB/s / 132) = 5.5 us; 3 rows per SM
    in flight against ~5 us of CTA work per row (32000 ex2 on the SM's MUFU, 3 smem passes of
    64 KB at 128 B/clk = 1500 clk): DRAM-bound.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.

Why one CTA per row (measured history)
  * An earlier persistent CuTe expert (373 CTAs of 256 threads, 11 rows each, the next row's bulk
    copy in flight while the current row was reduced and stored from 64 registers of packed
    words) ran 212.2 us against 198.8 us for the TIRx one-CTA-per-row design with full-line
    stores (bench/h200/2026-12-02b/solutions-CF-r3.md); the persistent design with two CTAs of
    512 threads per SM ran 212.4 us too, so the persistent structure, not its shape, trailed.
    Plausible reasons (not profiled): per SM the persistent CTAs keep at most 3 rows (192 KB) of
    loads in flight, and only between the barrier and the mbarrier wait of each row, and a CTA's
    stores and next load compete inside one CTA's schedule; here a finished CTA's slot is
    refilled by a fresh CTA whose copy starts at once (10.3 rows per slot, 4096 / 396).
  * An earlier CuTe one-CTA-per-row kernel (the same thread-0 fence, bulk copy, 3 CTAs per SM)
    ran 237.4 us with 8-value vectors stored as two 16-byte halves 32 bytes apart (8 half-written
    lines per warp store instruction); the TIRx kernel of that design went 288.1 -> 199.7 us
    when it took the thread-0 fence AND quads with full-line stores.

Measured on the H200 (full mode, one judge, correct): in the tuning run
bench/h200/2026-12-02d/tune-r7a.json, 198.8 us (IQR 0.9) against 203.9 us (IQR 1.0) for the
previous CuTe expert in the same run (1.026x); the same code with the row loaded in 4
mbarrier-completed chunks (each folded into a running max and sum as it lands) measured 198.8 us
too, and was not kept (no gain).  In the one-run table bench/h200/2026-12-02d/solutions-CF-r7.md:
201.7 us (IQR 0.9), 83.6% of the 168.7 us roofline ideal, 3.95x the fastest eager formulation
(log_softmax_fp32), 1.25x torch.compile; the TIRx expert 201.7 us in the same run.  torch's copy
of the same bytes: 190.3 us (bench/h200/2026-12-02c/copyceiling.md).  A later tuning run,
bench/h200/2026-12-02d/tune-r8.json, measured this code at 199.6 us and two store-side
alternatives slower: the output staged through shared memory and written with cp.async.bulk
stores 200.2 us, streaming (.cs, evict-first) stores 201.0 us, so the store path is not the
limit.  What changed against the previous expert (the same design): the row buffer at
shared-memory offset 0 (it sat at 0x180, after the mbarrier and the merge arrays), bf16 widened
to fp32 with shift / and instead of a generic conversion (32 fewer PRMT per thread), and the
one-word register spill (1 STL + 1 LDL per thread at the 40-register cap) removed: 632 SASS
instructions against 664 (the TIRx expert: 648).

Numerics: fp32 throughout; per-thread partial sums rescaled by exp2((m_t - m) * log2 e) in the
merge (a standard online log-sum-exp; the statement allows any summation order and ex2.approx /
lg2.approx); y = x - lse with one fp32 rounding.
Limits: V % 8 == 0 (16-byte bulk copy), V <= 4 * QPT_MAX * THREADS = 32768 (shared memory at 3
CTAs per SM), T * V < 2**31 (32-bit offsets); build() raises ValueError beyond that.
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

QUAD = 4           # bf16 per 64-bit smem load = fp32 per 128-bit global store
THREADS = 512      # one row per CTA
QPT_MAX = 16       # max quads per thread (V <= 4 * 16 * 512 = 32768: 3 x 64 KB of smem per SM)
MIN_BLOCKS = 3     # CTAs per SM (shared memory: 3 x 64.3 KB at V = 32000)
PAD_WORD = 0xF14AF14A  # two bf16 -1.0e30: finite, exp2 of it minus a real max is 0
M_INIT = -1.0e30
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)


def _config(V: int) -> int:
    """QPT: quads of 4 bf16 per thread for row length V (1 row per CTA of THREADS threads)."""
    nq = V // QUAD
    qpt = -(-nq // THREADS)
    if qpt > QPT_MAX:
        raise ValueError(f"V={V} too long for the shared-memory row (max {QUAD * QPT_MAX * THREADS})")
    return qpt


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


@cute.kernel
def _log_softmax_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mY: cute.Tensor,            # (T, V) row-major fp32
    copy_s: cute.TiledCopy,     # smem bf16 -> registers, 64-bit (one quad)
    copy_y: cute.TiledCopy,     # registers fp32 -> global, 128-bit
    qpt: cutlass.Constexpr,
    row_bytes: cutlass.Constexpr,
    n_quads: cutlass.Constexpr,
    full_q: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    nwarps = THREADS // 32
    padded = qpt * THREADS * QUAD
    nwords = padded // 2

    smem = SmemAllocator()
    # the row first (offset 0 of the dynamic shared memory, as in the TIRx expert)
    sX = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((1, padded), stride=(padded, 1)),
                              byte_alignment=128)
    mbar = smem.allocate_array(cutlass.Int64, num_elems=1, byte_alignment=8)
    red_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
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
    tSsX = thr_s.partition_S(sX)                        # ((QUAD), 1, QPT)
    frag = cute.make_fragment_like(tSsX[None, None, 0])
    words = cute.recast_tensor(frag, cutlass.Uint32)    # 2 packed pairs

    # pass 1: the thread's max (max.bf16x2 on the packed pairs, exact)
    vmax = cutlass.Uint32(PAD_WORD)
    for k in cutlass.range_constexpr(qpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        vmax = _bf16x2_max(vmax, _bf16x2_max(words[0], words[1]))
    m_t = cute.arch.fmax(cute.arch.fmax(_lo(vmax), _hi(vmax)), cutlass.Float32(M_INIT))
    ml2 = m_t * LOG2_E

    # pass 2: the thread's sum relative to its own max (no barrier before it)
    acc = [cutlass.Float32(0.0), cutlass.Float32(0.0)]
    for k in cutlass.range_constexpr(qpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        # widen with shift / and on the packed words (one op per value)
        e = [cute.math.exp2(f(words[i]) * LOG2_E - ml2, fastmath=True)
             for i in range(QUAD // 2) for f in (_lo, _hi)]
        acc[k % 2] = acc[k % 2] + ((e[0] + e[1]) + (e[2] + e[3]))
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

    # pass 3: y = x - lse, ONE 128-bit fp32 store per quad: 512 contiguous bytes per warp store
    gY = cute.local_tile(mY, (1, padded), (bidx, 0))
    thr_y = copy_y.get_slice(tidx)
    tYgY = thr_y.partition_D(gY)                        # ((QUAD), 1, QPT)
    yfrag = cute.make_fragment_like(tYgY[None, None, 0])
    for k in cutlass.range_constexpr(qpt):
        cute.copy(copy_s, tSsX[None, None, k], frag)
        for i in cutlass.range_constexpr(QUAD // 2):
            w = words[i]
            yfrag[2 * i] = _lo(w) - lse
            yfrag[2 * i + 1] = _hi(w) - lse
        if cutlass.const_expr(k < full_q):       # quad slot k is inside the row for every thread
            cute.copy(copy_y, yfrag, tYgY[None, None, k])
        else:                                    # tail slot: only quads before the row end
            if tidx + k * THREADS < n_quads:
                cute.copy(copy_y, yfrag, tYgY[None, None, k])


@cute.jit
def _log_softmax_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    qpt: cutlass.Constexpr,
):
    thr_layout = cute.make_ordered_layout((1, THREADS), order=(1, 0))
    val_layout = cute.make_layout((1, QUAD))
    atom_s = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.BFloat16, num_bits_per_copy=64)
    atom_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=128)
    copy_s = cute.make_tiled_copy_tv(atom_s, thr_layout, val_layout)
    copy_y = cute.make_tiled_copy_tv(atom_y, thr_layout, val_layout)
    T = mX.shape[0]
    V = mX.shape[1]
    nq = V // QUAD
    _log_softmax_kernel(mX, mY, copy_s, copy_y, qpt, V * 2, nq, nq // THREADS).launch(
        grid=[T, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
        # three CTAs per SM: <= 40 registers at 512 threads, 3 x 64.3 KB of shared memory
        min_blocks_per_mp=MIN_BLOCKS,
        preferred_smem_carveout=100,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(x, y)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % 8 != 0:
        raise ValueError(f"V={V} must be a multiple of 8 (16-byte bulk copy)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    qpt = _config(V)
    key = (T, V, qpt)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.Float32, (T, V), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_log_softmax_host, x, y, stream, qpt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

"""C03 log_softmax, CuTe DSL expert solution: y[t, :] = x[t, :] - logsumexp(x[t, :]).

x is bf16 [T, V], y fp32 [T, V].  Memory-bound: x is read once from DRAM (2 B per element) and
y written once (4 B per element).  A PERSISTENT CTA streams its rows through one shared-memory
buffer: the next row's bulk copy is in flight while the current row is reduced and stored from
registers.

Design
  * One compile per shape set with static (T, V).  Grid: G = ceil(T / (3 x 132)) rows per CTA,
    GRID = ceil(T / G) CTAs (T = 4096: G = 11, GRID = 373, one wave at 3 CTAs per SM); CTA b
    owns rows b, b + GRID, ..., b + (G-1) * GRID.  THREADS = 256, min_blocks_per_mp = 3: ptxas
    caps registers at 80; the kernel uses 80 with no local memory (the row is 64 words per
    thread: quads t + k * 256 of 4 bf16, k < QPT = 32 at V = 32000).
  * One mbarrier and one smem row buffer per CTA (V * 2 bytes padded to THREADS * QPT quads, 64 KB
    at V = 32000).  The pad is written once with a finite bf16 -1e30 and never touched by the
    copies, so the max and the sum need no predicates (exp2 of the pad is 0; no -inf, so no
    inf - inf = NaN).  Thread 0 issues one cp.async.bulk per row (expect_tx on the mbarrier,
    parity = row count & 1).
  * Per row: wait on the mbarrier; each thread copies its QPT quads into registers (64-bit
    ld.shared, a warp reads 256 contiguous bytes: no bank conflicts); thread max with max.bf16x2
    on the packed words (exact; it consumes every loaded word); barrier #1: the buffer is free,
    thread 0 fences (fence.proxy.async: generic reads before the async-proxy writes) and issues
    the NEXT row's bulk copy into it.  Meanwhile the threads sum exp2 relative to their own max
    from registers (a 0.0 read from smem after barrier #1 keeps ptxas from hoisting the exp2
    pass above the barrier, checked in the SASS), merge (max, sum) (warp butterfly, one pair per
    warp in smem, barrier #2, butterfly over the warps), lse = m + log2(sum) * ln 2
    (lg2.approx), and store y = x - lse from registers.
  * Stores: quad t + k * THREADS is one 128-bit fp32 store, so a warp store instruction writes
    512 CONTIGUOUS bytes (4 full 128-byte lines); predicated on the row end when V is not a
    multiple of THREADS * QPT * 4 (V % 8 == 0: a quad is fully inside or outside the row).
  * Launch: preferred_smem_carveout = 100 (3 x 67 KB = 201 KB of shared memory per SM needs the
    228 KB carveout).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.

Measured on the H200 (full mode):
  * bench/h200/2026-12-02b/solutions-CF.md (`mkb solutions C F`, one run): 212.2 us (IQR 1.3),
    79.5% of the roofline ideal (168.6 us).  The TIRx expert runs 199.5 us in the same run
    (this one is 1.06x slower).
  * bench/h200/2026-12-02b/tune-r2.json (one judge, back to back): 211.4 us (IQR 1.9), against
    237.4 us (IQR 1.1) for the previous design (one CTA of 512 threads per row, the row in shared
    memory by one bulk copy, three CTAs per SM).  The same persistent design with two CTAs of
    512 threads per SM (64 registers, 2 x 67 KB) ran 212.4 us (IQR 2.3): the two shapes of the
    work are within 0.5% of each other.
Why it is faster than one CTA per row:
  * One CTA per row has its 64 KB load in flight only until the mbarrier fires; during its
    reduction and its 128 KB store burst the CTA holds its smem slot with nothing loading.  Here
    the buffer loads the next row for all but the few hundred cycles of the ld.shared copy: each
    SM keeps up to 3 x 64 KB of loads in flight (Little: ~35 KB per SM sustains its share of
    4.64 TB/s) while three rows in registers are reduced and stored.
  * Stores: the previous design wrote 32 bytes per thread as two 16-byte halves 32 bytes apart,
    so each warp store instruction touched 8 half-written lines; here every store line is full.
  * Per-SM DRAM time per row: 192 KB / (4.64 TB/s / 132) = 5.5 us, 16.5 us per CTA row at 3 CTAs
    per SM, against ~5 us of CTA work per row (8 warps; 32000 ex2 on a third of the SM's MUFU,
    ~6000 clk): DRAM-bound, not issue-bound.
  * Tail: 11 rows per CTA against 4096 / 396 = 10.3 per slot on average; 23 of the 132 SMs hold
    two CTAs.

Numerics: fp32 throughout; per-thread partial sums exp2(x * log2 e - m_t * log2 e) are rescaled
by exp2((m_t - m) * log2 e) in the merge (a standard online log-sum-exp; the statement allows any
summation order and ex2.approx / lg2.approx); y = x - lse with one fp32 rounding.
Limits: V % 8 == 0 (16-byte bulk copies), V <= 4 * QPT_MAX * THREADS = 32768 (registers),
T * V < 2**31 (32-bit offsets); build() raises ValueError beyond that.
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

QUAD = 4           # bf16 per 64-bit smem load = fp32 per 128-bit store
THREADS = 256
QPT_MAX = 32       # quads per thread held in registers (64 words)
CTAS_PER_SM = 3
NUM_SMS = 132      # H200; the grid only sets the row split, any GPU computes the same result
PAD_WORD = 0xF14AF14A  # two bf16 -1.0e30: finite, exp2 of it minus a real max is 0
M_INIT = -1.0e30
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)


def _plan(T: int, V: int):
    """(QPT, rows per CTA G, GRID) for a static [T, V]."""
    nq = V // QUAD
    qpt = -(-nq // THREADS)
    if qpt > QPT_MAX:
        raise ValueError(f"V={V} too long for the register-held row (max {QUAD * QPT_MAX * THREADS})")
    g = -(-T // (NUM_SMS * CTAS_PER_SM))
    grid = -(-T // g)
    return qpt, g, grid


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
def _prmt_f32(w: cutlass.Uint32, sel: int, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 from one bf16 half of a packed pair through PRMT in inline asm (sel 0x1044: low half,
    0x3244: high half).  Opaque to the compilers: the store pass does not share (CSE) the fp32
    values unpacked for the sum, so the row stays packed in 32 registers until its stores."""
    return cutlass.Float32(llvm.inline_asm(
        cutlass.Float32.mlir_type,
        [cutlass.Uint32(w).ir_value(loc=loc, ip=ip)],
        f"prmt.b32 $0, $1, 0, {sel:#06x};",
        "=f,r",
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
    copy_s: cute.TiledCopy,     # smem bf16 -> registers, 64-bit
    copy_y: cute.TiledCopy,     # registers fp32 -> global, 128-bit
    qpt: cutlass.Constexpr,
    rows_per_cta: cutlass.Constexpr,
    grid_x: cutlass.Constexpr,
    n_rows: cutlass.Constexpr,
    row_bytes: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    nwarps = THREADS // 32
    padded = qpt * THREADS * QUAD
    nwords = padded // 2

    smem = SmemAllocator()
    mbar = smem.allocate_array(cutlass.Int64, num_elems=1, byte_alignment=8)
    red_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    zero = smem.allocate_tensor(cutlass.Float32, cute.make_layout(4), byte_alignment=16)
    sX = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((1, padded), stride=(padded, 1)),
                              byte_alignment=128)
    sW = cute.make_tensor(cute.recast_ptr(sX.iterator, dtype=cutlass.Uint32), cute.make_layout(nwords))

    if tidx == 0:
        cute.arch.mbarrier_init(mbar, 1)
        cute.arch.mbarrier_init_fence()
        zero[0] = cutlass.Float32(0.0)
    # pad [V, padded) with a finite -1e30 (generic stores, disjoint from every bulk copy's bytes)
    n_real_words = row_bytes // 4
    for i in cutlass.range_constexpr(-(-(nwords - n_real_words) // THREADS)):
        pw = n_real_words + i * THREADS + tidx
        if pw < nwords:
            sW[pw] = cutlass.Uint32(PAD_WORD)
    cute.arch.sync_threads()
    if tidx == 0:
        cute.arch.mbarrier_arrive_and_expect_tx(mbar, row_bytes)
        gRow0 = cute.local_tile(mX, (1, mX.shape[1]), (bidx, 0))
        cp_async_bulk_shared_cluster_global(sX.iterator, gRow0.iterator, mbar, row_bytes)

    thr_s = copy_s.get_slice(tidx)
    tSsX = thr_s.partition_S(sX)                        # ((QUAD), 1, QPT)
    frags = [cute.make_fragment_like(tSsX[None, None, 0]) for _ in range(qpt)]
    words = [cute.recast_tensor(f, cutlass.Uint32) for f in frags]   # 2 packed pairs each
    thr_y = copy_y.get_slice(tidx)

    for it in cutlass.range(rows_per_cta, unroll=1):
        row = bidx + it * grid_x
        if row < n_rows:
            # 1. the row arrived: quads -> registers, thread max (uses every loaded word)
            cute.arch.mbarrier_wait(mbar, it % 2)
            for k in cutlass.range_constexpr(qpt):
                cute.copy(copy_s, tSsX[None, None, k], frags[k])
            vmax = cutlass.Uint32(PAD_WORD)
            for k in cutlass.range_constexpr(qpt):
                vmax = _bf16x2_max(vmax, _bf16x2_max(words[k][0], words[k][1]))
            m_t = cute.arch.fmax(cute.arch.fmax(_lo(vmax), _hi(vmax)), cutlass.Float32(M_INIT))
            ml2 = m_t * LOG2_E

            # 2. the buffer is free: the next row's bulk copy overlaps everything below
            cute.arch.sync_threads()
            nxt = row + grid_x
            if tidx == 0:
                if nxt < n_rows:
                    cute.arch.fence_view_async_shared()
                    cute.arch.mbarrier_arrive_and_expect_tx(mbar, row_bytes)
                    gRow = cute.local_tile(mX, (1, mX.shape[1]), (nxt, 0))
                    cp_async_bulk_shared_cluster_global(sX.iterator, gRow.iterator, mbar, row_bytes)

            # 3. the thread's sum relative to its own max, from registers.  + zero[0] (0.0, read
            #    from smem AFTER barrier #1): ptxas otherwise hoists the whole exp2 pass above the
            #    barrier (checked in the SASS), delaying the next row's copy by the sum's duration.
            ml2 = ml2 + zero[0]
            acc = [cutlass.Float32(0.0), cutlass.Float32(0.0)]
            for k in cutlass.range_constexpr(qpt):
                e = [cute.math.exp2(frags[k][j].to(cutlass.Float32) * LOG2_E - ml2, fastmath=True)
                     for j in range(QUAD)]
                acc[k % 2] = acc[k % 2] + ((e[0] + e[1]) + (e[2] + e[3]))
            s_t = acc[0] + acc[1]

            # 4. one log-sum-exp merge over the CTA: warp butterfly, partials in smem, one barrier
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

            # 5. y = x - lse from registers: one 128-bit store per quad, 512 B per warp
            gY = cute.local_tile(mY, (1, padded), (row, 0))
            tYgY = thr_y.partition_D(gY)                    # ((QUAD), 1, QPT)
            yfrag = cute.make_fragment_like(tYgY[None, None, 0])
            if cutlass.const_expr(check_bounds):
                cY = cute.local_tile(cute.make_identity_tensor(mY.shape), (1, padded), (row, 0))
                pred_y = _bounds_pred(thr_y.partition_D(cY), mY.shape)
            for k in cutlass.range_constexpr(qpt):
                for i in cutlass.range_constexpr(QUAD // 2):
                    wk = words[k][i]
                    yfrag[2 * i] = _prmt_f32(wk, 0x1044) - lse
                    yfrag[2 * i + 1] = _prmt_f32(wk, 0x3244) - lse
                if cutlass.const_expr(check_bounds):
                    cute.copy(copy_y, yfrag, tYgY[None, None, k], pred=pred_y[None, None, k])
                else:
                    cute.copy(copy_y, yfrag, tYgY[None, None, k])


@cute.jit
def _log_softmax_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    qpt: cutlass.Constexpr,
    rows_per_cta: cutlass.Constexpr,
    grid_x: cutlass.Constexpr,
):
    thr_layout = cute.make_ordered_layout((1, THREADS), order=(1, 0))
    val_layout = cute.make_layout((1, QUAD))
    atom_s = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.BFloat16, num_bits_per_copy=64)
    atom_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=128)
    copy_s = cute.make_tiled_copy_tv(atom_s, thr_layout, val_layout)
    copy_y = cute.make_tiled_copy_tv(atom_y, thr_layout, val_layout)
    T = mX.shape[0]
    V = mX.shape[1]
    check_bounds = V % (qpt * THREADS * QUAD) != 0
    _log_softmax_kernel(mX, mY, copy_s, copy_y, qpt, rows_per_cta, grid_x, T, V * 2,
                        check_bounds).launch(
        grid=[grid_x, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
        # three CTAs per SM: <= 80 registers at 256 threads, 3 x 67 KB of shared memory
        min_blocks_per_mp=CTAS_PER_SM,
        preferred_smem_carveout=100,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(x, y)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % 8 != 0:
        raise ValueError(f"V={V} must be a multiple of 8 (16-byte bulk copies)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    qpt, g, grid = _plan(T, V)
    key = (T, V)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.Float32, (T, V), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_log_softmax_host, x, y, stream, qpt, g, grid, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

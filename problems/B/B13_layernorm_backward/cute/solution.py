"""B13 layernorm_backward, CuTe DSL expert solution: dx (bf16), dw and db (fp32) of LayerNorm.

With mean, rstd = rsqrt(var + eps) recomputed from x, xhat = (x - mean) * rstd and g = dy * w:
dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row; dw = sum_rows dy * xhat and
db = sum_rows dy.

Memory-bound: dy and x are read once and dx written once; each row stays in registers between
the read and the write.  dw and db need reductions over all T rows; they are done
deterministically in two kernels, without atomics (the same bits on every call):

Kernel 1 (per row: dx; per CTA: fp32 dw and db partials)
  * A row is handled by TPR threads (a power of two, 32..1024) that each hold VPT 128-bit vectors
    (8 bf16) of it, vector j of a thread starting at column (j * TPR + lane) * 8, so a warp reads
    512 contiguous bytes per access.  TPR is the smallest power of two with VPT <= VPT_MAX = 2
    (H = 4096 -> 256 threads x 2 vectors; H = 1000 -> 64 x 2 with 125 of 128 vectors used;
    H = 128 -> 32 x 1 with 16 of 32 lanes used).  TPR == 32: ROWS_SMALL = 4 rows (one warp each)
    per CTA; TPR > 32: one row per CTA.
  * Persistent grid of G CTAs, at most THREADS_PER_SM / (CTA size) = 2 resident CTAs on each of
    the H200's 132 SMs, with G chosen so that every CTA gets the same number of row tiles up to
    one (T = 16384, H = 4096 -> G = 261 CTAs of 62 or 63 rows).  A launch bound
    (min_blocks_per_mp = 2, i.e. .minnctapersm) caps registers at 128 per thread so those CTAs
    fit (offline ptxas: 96 registers, no spills, at the benchmark shape).  CTA b walks row tiles
    b, b + G, b + 2G, ... in order, so at any time the CTAs stream neighbouring rows.
  * Aligned shapes (T % ROWS == 0 and H % (TPR * VPT * 8) == 0, the benchmark among them): dy
    and x reach shared memory through a cp.async ring of `stages` stages (_stages(): as many
    16 KB stages as the CTA's share of the SM's 228 KB holds next to w: 6 at H = 4096;
    cp.async.cg, 16 B, L1 bypassed): while row i is computed, rows i + 1 .. i + stages - 1 are
    in flight, so the loads overlap the reductions and math (5 rows, 80 KB, per CTA: 160 KB in
    flight per SM).  Each thread copies and reads back only its own slice (the same
    thread-value layout), so cp.async.wait_group alone makes its data visible, and a stage is
    refilled only by the thread that read it one iteration earlier.  Shared memory: 8 KB of w
    + 6 x 16 KB = 104.5 KB per CTA at H = 4096 (carveout set to 100%).
    Ragged shapes: predicated 128-bit loads straight into registers, zero-filled (the plain path
    of B03), so no copy ever touches memory outside the tensors.
  * Each thread keeps fp32 dw and db accumulators for its columns in registers.  w is loaded
    once per CTA and parked in shared memory (each thread reads back only its own slice, so no
    barrier) and re-read where it is needed.
  * Exact two-pass statistics on the register-resident row, two reduction rounds per row (warp
    shuffles, then for TPR > 32 one partial per warp through shared memory; each round has its
    own buffer, and with two barriers per row no buffer can be overwritten while a slower warp
    still reads it): round 1 sums x and g, mean = sum(x) / H, d = x - mean; round 2 sums d^2 and
    g * d.  rstd = rsqrt(sum(d^2) / H + eps) (biased variance; rsqrt.approx, ~2^-23 relative),
    mean(g * xhat) = rstd * sum(g * d) / H, dx = rstd * ((g - mean(g)) - xhat * mean(g * xhat))
    in fp32, rounded to bf16 once at the store; db_acc += dy, dw_acc += dy * xhat.
  * After its row loop the CTA executes griddepcontrol.launch_dependents (kernel 2 may be
    scheduled from then on), then each row slot stores its fp32 dw and db partial rows (padded
    row length HP = TPR * VPT * 8, 128-bit stores, no predicates: padding columns hold zeros) to
    a scratch buffer of 2 * P rows (P = G * ROWS): dw partials in rows [0, P), db partials in
    [P, 2P).
Kernel 2 (dw and db = column sums of the partial rows; grid.y picks dw or db)
  * 32 columns per CTA as 32 row slices x 8 float4 groups (256 threads; 128-bit loads through a
    tiled copy, predicated on rows past P), grid.x = HP / 32, grid.y = 2 planes (dw, db).  Slice s
    of a column group sums partial rows s, s + 32, ... in order (9 rows at the benchmark shape,
    all loaded before they are added: about 36 KB in flight per CTA), then a fixed pairwise tree
    over the 32 slices in shared memory (5 barrier steps), and 32 threads store one column each.
  * Launched as a programmatic dependent of kernel 1 (use_pdl=True): its launch overlaps kernel
    1's tail, and it waits in griddepcontrol.wait until kernel 1 has finished and its stores are
    visible.  USE_PDL = False launches both kernels plainly.
  So dw and db are fixed-order fp32 sums (CTA row chains of 62 or 63 terms, then 9-term chains
  per slice, then the 32-slice tree): bitwise reproducible, and far inside the 1e-4 bound (the
  statement measures 16384-term row-after-row chains at 0.05 of it; a CPU emulation of this
  exact order measured at most 0.011 of it for dw and 0.001 for db over every shape set, at most
  0.006 and 0.0005 at the benchmark shape, dx at most 0.22 of its bound).

Ragged edges: H not a multiple of TPR * VPT * 8 and ragged T use predicated 128-bit loads/stores
(H % 8 == 0, so a vector is fully inside or fully outside) on the register path; padding is
zero-filled (0 in sum(x), sum(g), dw, db) and its d is forced to 0 with a select before round 2
(0 - mean would otherwise count); rows past T give rstd = rsqrt(eps), finite, times zeros.
Kernel 2 predicates its loads (rows past P) and its store (columns past H).
Scratch: 2 * P * HP fp32 (8.6 MB at the benchmark shape, about 2% of the 402 MB of minimal
traffic), written once at the end of kernel 1 and read once right after, mostly from L2;
allocated with torch.empty on the first run() call and reused (build() may run without a GPU).
Host path: one --enable-tvm-ffi function launches both kernels on torch's current stream.
If the cp.async path misbehaves, setting the aligned shapes onto the register path
(check_bounds = True in the host function) is a one-line fallback.
Limits: H <= 8 * VPT_MAX * 1024 (16384) and T * H < 2**31 (32-bit offsets); build() raises
ValueError beyond that.

Measured on the H200 (bench/h200/2026-12-02/diag-cute-wake200.json; full mode, one judge, 200 us
wake spin): 115.1 us (IQR 1.5), 75.0% of the 86.3 us roofline ideal.  The previous design (391
CTAs of 128 threads, 3 per SM at 152 registers, a 2-stage ring: one row in flight per CTA, at
most 48 KB per SM and less while a row is reduced; 2 x 391 partial rows, 12.8 MB; kernel 2 with
one 4-byte load per thread and row in sequential batches of 8, about 8 KB in flight per CTA,
then a serial 8-warp sum; launched plainly) took 116.5 us in the same run.  Little's law asks
for about 4.66 TB/s x ~1.5 us loaded latency / 132 SMs = ~53 KB in flight per SM, more than the
old ring held; the 6-stage ring holds 160 KB, kernel 2 needs one or two L2 round trips instead
of ~6, and its launch overlaps kernel 1's tail.  Yet the gain is small: 1.4 us, 1.2%, within the
IQRs (1.5-2.1 us) and far short of the <= 108 us that was estimated, so in-flight data was not
what held kernel 1 back.  A variant with 3 CTAs of 128 threads per SM (4-stage ring, 144 KB in
flight per SM, 154 registers) measured 118.8 us (IQR 2.2).  The TIRx expert measured 116.7 us
(diag-wake200.json): both DSLs remain below 80% of the ideal.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit access
VPT_MAX = 2        # max 128-bit vectors per thread (16 fp32 values of the row)
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
NUM_SMS = 132      # H200 SMs: sizes the persistent grid (correctness does not depend on it)
THREADS_PER_SM = 512   # kernel-1 threads per SM: 2 CTAs of 256, <= 128 registers each (launch bound)
SMEM_CARVEOUT = 100    # % of the unified L1/shared memory as shared (104 KB per CTA at H = 4096)
SMEM_PER_SM = 228 * 1024   # H200 shared memory per SM (each CTA also costs 1 KB reserved)
MAX_STAGES = 8         # cp.async ring depth cap (the row computed + stages - 1 rows in flight)
RED_SLICES = 32    # kernel 2: row slices of one 32-column tile (CTA = 32 slices x 8 float4 groups)
RED_MAX_UNROLL = 16    # kernel 2: partial-row chunks of 32 rows loaded before they are added
USE_PDL = True     # kernel 2 is a programmatic dependent launch of kernel 1 (griddepcontrol)


def _config(H: int) -> tuple[int, int, int]:
    """(TPR threads per row, VPT vectors per thread, ROWS rows per CTA) for row length H."""
    nvec = H // VEC
    tpr = 32
    while tpr < 1024 and -(-nvec // tpr) > VPT_MAX:
        tpr *= 2
    vpt = -(-nvec // tpr)
    if vpt > VPT_MAX:
        raise ValueError(f"H={H} too long for the register-resident LayerNorm backward (max {VEC * VPT_MAX * 1024})")
    rows = ROWS_SMALL if tpr == 32 else 1
    return tpr, vpt, rows


def _ctas_per_sm(tpr: int, rows: int) -> int:
    """Kernel-1 CTAs per SM, enforced with a launch bound (min_blocks_per_mp)."""
    return max(1, THREADS_PER_SM // (tpr * rows))


def _stages(tpr: int, vpt: int, rows: int) -> int:
    """cp.async ring depth: as many (dy, x) row-tile stages as the CTA's share of shared memory
    holds next to w and the reduction buffers (H = 4096: 6 stages of 16 KB, 2 CTAs per SM)."""
    hp = tpr * vpt * VEC
    budget = SMEM_PER_SM // _ctas_per_sm(tpr, rows) - 1024 - rows * hp * 2 - 1024
    return max(2, min(MAX_STAGES, budget // (2 * rows * hp * 2)))


def _grid(n_tiles: int, tpr: int, rows: int) -> int:
    """Persistent grid size: at most the resident CTA slots, balanced so that every CTA gets
    ceil(n_tiles / G) or one fewer row tiles."""
    slots = NUM_SMS * _ctas_per_sm(tpr, rows)
    k = -(-n_tiles // slots)
    return -(-n_tiles // k)


@cute.jit
def _row_sum2(a: cutlass.Float32, b: cutlass.Float32, tpr: cutlass.Constexpr, buf: cute.Tensor):
    """Sum two fp32 values per thread over the TPR threads of a row; all of them get both sums.
    For TPR > 32 the per-warp partials go through buf[0 : 64]."""
    a = cute.arch.warp_reduction_sum(a, threads_in_group=min(tpr, 32))
    b = cute.arch.warp_reduction_sum(b, threads_in_group=min(tpr, 32))
    if cutlass.const_expr(tpr > 32):            # one row per CTA: combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = a
            buf[32 + warp] = b
        cute.arch.sync_threads()
        # Every group of nwarps lanes reads all partials, so a butterfly over nwarps lanes
        # leaves the full sums in every lane (a fixed order: the same bits in every lane).
        a = cute.arch.warp_reduction_sum(buf[lane % nwarps], threads_in_group=nwarps)
        b = cute.arch.warp_reduction_sum(buf[32 + lane % nwarps], threads_in_group=nwarps)
    return a, b


@cute.jit
def _tile_pred(thr, mX: cute.Tensor, tile: cutlass.Constexpr, t: cutlass.Int32):
    """One predicate per 128-bit vector of this thread's slice of row tile t: inside (T, H)."""
    tCc = thr.partition_S(cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (t, 0)))
    pred = cute.make_rmem_tensor(
        (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
        cutlass.Boolean,
    )
    for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
        for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
            for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
    return pred


@cute.jit
def _issue_rows(async_copy: cute.TiledCopy, thr_a, mDY: cute.Tensor, mX: cute.Tensor, sDY: cute.Tensor,
                sX: cute.Tensor, tile: cutlass.Constexpr, t: cutlass.Int32, stage: cutlass.Int32):
    """Start the cp.async copies of row tile t of dy and x into shared-memory stage `stage`
    (aligned shapes only: every copy is in bounds)."""
    cute.copy(async_copy, thr_a.partition_S(cute.local_tile(mDY, tile, (t, 0))),
              thr_a.partition_D(sDY[None, None, stage]))
    cute.copy(async_copy, thr_a.partition_S(cute.local_tile(mX, tile, (t, 0))),
              thr_a.partition_D(sX[None, None, stage]))


@cute.kernel
def _rows_kernel(
    mDY: cute.Tensor,           # (T, H) row-major bf16
    mX: cute.Tensor,            # (T, H) row-major bf16
    mW: cute.Tensor,            # (H,) bf16
    mDX: cute.Tensor,           # (T, H) row-major bf16
    mS: cute.Tensor,            # (2 * G * rows, HP) row-major fp32: dw partials, then db partials
    tiled_copy: cute.TiledCopy,
    async_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    n_ctas: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    stages: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()

    smem = SmemAllocator()
    red1 = smem.allocate_tensor(cutlass.Float32, cute.make_layout(64), byte_alignment=16)
    red2 = smem.allocate_tensor(cutlass.Float32, cute.make_layout(64), byte_alignment=16)

    T = mX.shape[0]
    H = mX.shape[1]
    n_tiles = (T + rows - 1) // rows
    tile = (rows, vpt * tpr * VEC)                      # rows of one tile, padded row length
    thr = tiled_copy.get_slice(tidx)

    # w as a (rows, H) matrix with row stride 0: each thread's slice matches its x columns.  It
    # is loaded once and parked in shared memory (each thread reads back only its own slice, so
    # no barrier is needed), keeping registers for the row and the dw accumulator.
    mW2 = cute.make_tensor(mW.iterator, cute.make_layout((rows, H), stride=(0, 1)))
    tWgW = thr.partition_S(cute.local_tile(mW2, tile, (0, 0)))
    tWrW = cute.make_fragment_like(tWgW)
    if cutlass.const_expr(check_bounds):
        tWc = thr.partition_S(cute.local_tile(cute.make_identity_tensor(mW2.shape), tile, (0, 0)))
        wpred = cute.make_rmem_tensor(
            (cute.size(tWc, mode=[0, 1]), cute.size(tWc, mode=[1]), cute.size(tWc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(wpred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(wpred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(wpred, mode=[2])):
                    wpred[j, m, n] = cute.elem_less(tWc[(0, j), m, n], mW2.shape)
        tWrW.fill(0.0)
        cute.copy(tiled_copy, tWgW, tWrW, pred=wpred)
    else:
        cute.copy(tiled_copy, tWgW, tWrW)
    sW = smem.allocate_tensor(mW.element_type, cute.make_layout(tile, stride=(tile[1], 1)), byte_alignment=16)
    tWsW = thr.partition_D(sW)
    cute.autovec_copy(tWrW, tWsW)

    # Per-thread fp32 dw and db accumulators for the thread's columns (zero in padding columns).
    tSgW = thr.partition_D(cute.local_tile(mS, tile, (bidx, 0)))
    tSgB = thr.partition_D(cute.local_tile(mS, tile, (n_ctas + bidx, 0)))
    acc_w = cute.make_fragment_like(tSgW)
    acc_b = cute.make_fragment_like(tSgB)
    acc_w.fill(0.0)
    acc_b.fill(0.0)

    n_mine = (n_tiles - bidx + n_ctas - 1) // n_ctas    # >= 1: bidx < n_ctas <= n_tiles
    if cutlass.const_expr(not check_bounds):
        # Aligned shapes: a cp.async ring.  The dy and x tiles of the next STAGES - 1 rows stream
        # into shared memory while this row is computed.  Each thread copies and later reads back
        # only its own slice (the same thread-value layout), so cp.async.wait_group alone makes
        # its data visible; the row barrier (or an explicit one for TPR == 32) orders the reads
        # of a stage before the copies that overwrite it.
        stage_layout = cute.make_layout((rows, tile[1], stages), stride=(tile[1], 1, rows * tile[1]))
        sDY = smem.allocate_tensor(mDY.element_type, stage_layout, byte_alignment=128)
        sX = smem.allocate_tensor(mX.element_type, stage_layout, byte_alignment=128)
        thr_a = async_copy.get_slice(tidx)
        for s in cutlass.range_constexpr(stages - 1):   # prologue: rows 0 .. stages - 2
            if s < n_mine:
                _issue_rows(async_copy, thr_a, mDY, mX, sDY, sX, tile, bidx + s * n_ctas, s)
            cute.arch.cp_async_commit_group()

    for i in cutlass.range(n_mine, unroll=1):
        t = bidx + i * n_ctas
        tDXgDX = thr.partition_D(cute.local_tile(mDX, tile, (t, 0)))
        tDXrDX = cute.make_fragment_like(tDXgDX)
        if cutlass.const_expr(check_bounds):
            # Ragged shapes: predicated 128-bit loads straight into registers, zero-filled.
            tDYgDY = thr.partition_S(cute.local_tile(mDY, tile, (t, 0)))
            tXgX = thr.partition_S(cute.local_tile(mX, tile, (t, 0)))
            tDYrDY = cute.make_fragment_like(tDYgDY)
            tXrX = cute.make_fragment_like(tXgX)
            pred = _tile_pred(thr, mX, tile, t)
            tDYrDY.fill(0.0)                            # padding adds 0 to every sum
            tXrX.fill(0.0)
            cute.copy(tiled_copy, tDYgDY, tDYrDY, pred=pred)
            cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
            # Per-element validity (one predicate per vector, broadcast over its 8 elements).
            mask = cute.make_fragment_like(tXrX, cutlass.Boolean)
            for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
                for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                    for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                        mask[(None, j), m, n].fill(pred[j, m, n])
            dy = tDYrDY.load().to(cutlass.Float32)
            x = tXrX.load().to(cutlass.Float32)
        else:
            nxt = i + (stages - 1)
            if nxt < n_mine:
                _issue_rows(async_copy, thr_a, mDY, mX, sDY, sX, tile, bidx + nxt * n_ctas, nxt % stages)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(stages - 1)   # this thread's copies of row i landed
            stage = i % stages
            dy = thr.partition_S(sDY[None, None, stage]).load().to(cutlass.Float32)
            x = thr.partition_S(sX[None, None, stage]).load().to(cutlass.Float32)

        acc_b.store(acc_b.load() + dy)
        # Round 1: sum(x) and sum(g); round 2 (exact two-pass): sum(d^2) and sum(g * d).
        sx, sg = _row_sum2(x.reduce(cute.ReductionOp.ADD, 0.0, 0),
                           (dy * tWsW.load().to(cutlass.Float32)).reduce(cute.ReductionOp.ADD, 0.0, 0),
                           tpr, red1)
        d = x - sx * (1.0 / H)
        if cutlass.const_expr(check_bounds):
            d = cute.where(mask.load(), d, 0.0)         # padding: 0 - mean would count
        g = dy * tWsW.load().to(cutlass.Float32)
        sdd, sgd = _row_sum2((d * d).reduce(cute.ReductionOp.ADD, 0.0, 0),
                             (g * d).reduce(cute.ReductionOp.ADD, 0.0, 0), tpr, red2)
        rstd = cute.math.rsqrt(sdd * (1.0 / H) + eps, fastmath=True)
        mg = sg * (1.0 / H)                             # mean(g)
        c = rstd * (sgd * (1.0 / H))                    # mean(g * xhat)
        xhat = d * rstd
        g = dy * tWsW.load().to(cutlass.Float32)
        tDXrDX.store((rstd * ((g - mg) - xhat * c)).to(mDX.element_type))
        acc_w.store(acc_w.load() + dy * xhat)

        if cutlass.const_expr(check_bounds):
            cute.copy(tiled_copy, tDXrDX, tDXgDX, pred=pred)
        else:
            cute.copy(tiled_copy, tDXrDX, tDXgDX)
        if cutlass.const_expr(tpr == 32 and not check_bounds):
            # No barrier in the warp-only reductions: order this row's shared-memory reads before
            # the next iteration's cp.async overwrites the stage (write-after-read).
            cute.arch.sync_threads()

    if cutlass.const_expr(USE_PDL):
        cute.arch.griddepcontrol_launch_dependents()    # kernel 2 may be scheduled from here on
    cute.autovec_copy(acc_w, tSgW)                      # this CTA's partial rows, 128-bit stores
    cute.autovec_copy(acc_b, tSgB)


@cute.kernel
def _colsum_kernel(
    mS3: cute.Tensor,           # (2, P, HP) row-major fp32 partials: plane 0 dw, plane 1 db
    mDW: cute.Tensor,           # (H,) fp32
    mDB: cute.Tensor,           # (H,) fp32
    red_copy: cute.TiledCopy,   # 32 slices x 8 threads, 4 fp32 (128 bits) per thread
    n_batch: cutlass.Constexpr,
    unroll: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, which, _ = cute.arch.block_idx()              # which: 0 -> dw, 1 -> db
    sl = tidx // 8                                      # row slice
    cg = tidx % 8                                       # float4 column group of the 32 columns

    smem = SmemAllocator()
    buf = smem.allocate_tensor(cutlass.Float32, cute.make_layout((RED_SLICES, 32), stride=(32, 1)),
                               byte_alignment=16)
    if cutlass.const_expr(USE_PDL):
        cute.arch.griddepcontrol_wait()                 # kernel 1 done, its partials visible

    H = mDW.shape[0]
    mS = mS3[which, None, None]                         # (P, HP) plane of this CTA
    ctile = (RED_SLICES, 32)
    thr = red_copy.get_slice(tidx)
    cS = cute.make_identity_tensor(mS.shape)
    acc = cute.make_fragment_like(thr.partition_S(cute.local_tile(mS, ctile, (0, bidx))))
    acc.fill(0.0)
    for b in cutlass.range(n_batch, unroll=1):
        frags = []
        for u in cutlass.range_constexpr(unroll):       # `unroll` 128-bit loads in flight
            j = b * unroll + u
            src = thr.partition_S(cute.local_tile(mS, ctile, (j, bidx)))
            tc = thr.partition_S(cute.local_tile(cS, ctile, (j, bidx)))
            pred = cute.make_rmem_tensor(
                (cute.size(tc, mode=[0, 1]), cute.size(tc, mode=[1]), cute.size(tc, mode=[2])),
                cutlass.Boolean,
            )
            for q in cutlass.range_constexpr(cute.size(pred, mode=[0])):
                for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                    for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                        pred[q, m, n] = cute.elem_less(tc[(0, q), m, n], mS.shape)
            f = cute.make_fragment_like(src)
            f.fill(0.0)
            cute.copy(red_copy, src, f, pred=pred)
            frags.append(f)
        for u in cutlass.range_constexpr(unroll):       # rows of the slice in increasing order
            acc.store(acc.load() + frags[u].load())
    for e in cutlass.range_constexpr(4):
        buf[sl, cg * 4 + e] = acc[e]
    cute.arch.sync_threads()
    # Fixed pairwise tree over the 32 slices: slice s += slice s + step, step = 16, 8, 4, 2, 1.
    for k in cutlass.range_constexpr(5):
        step = RED_SLICES >> (k + 1)
        if sl < step:
            for e in cutlass.range_constexpr(4):
                buf[sl, cg * 4 + e] = buf[sl, cg * 4 + e] + buf[sl + step, cg * 4 + e]
        cute.arch.sync_threads()
    if tidx < 32:
        col = bidx * 32 + tidx
        if col < H:
            if which == 0:
                mDW[col] = buf[0, tidx]
            else:
                mDB[col] = buf[0, tidx]


@cute.jit
def _layernorm_bwd_host(
    mDY: cute.Tensor,
    mX: cute.Tensor,
    mW: cute.Tensor,
    mDX: cute.Tensor,
    mDW: cute.Tensor,
    mDB: cute.Tensor,
    mS: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    n_ctas: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    stages: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((rows, tpr), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    atom_a = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL), mX.element_type,
                                 num_bits_per_copy=128)
    async_copy = cute.make_tiled_copy_tv(atom_a, thr_layout, val_layout)
    T = mX.shape[0]
    H = mX.shape[1]
    check_bounds = (T % rows != 0) or (H % (vpt * tpr * VEC) != 0)
    _rows_kernel(mDY, mX, mW, mDX, mS, tiled_copy, async_copy, tpr, vpt, rows, n_ctas, eps, check_bounds,
                 stages).launch(
        grid=[n_ctas, 1, 1],
        block=[rows * tpr, 1, 1],
        stream=stream,
        min_blocks_per_mp=_ctas_per_sm(tpr, rows),
        preferred_smem_carveout=SMEM_CARVEOUT,
    )
    atom_r = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), cutlass.Float32, num_bits_per_copy=128)
    red_copy = cute.make_tiled_copy_tv(atom_r, cute.make_ordered_layout((RED_SLICES, 8), order=(1, 0)),
                                       cute.make_layout((1, 4)))
    n_part = n_ctas * rows
    hp = mS.shape[1]
    mS3 = cute.make_tensor(mS.iterator, cute.make_layout((2, n_part, hp), stride=(n_part * hp, hp, 1)))
    n_chunk = (n_part + RED_SLICES - 1) // RED_SLICES
    unroll = min(n_chunk, RED_MAX_UNROLL)
    _colsum_kernel(mS3, mDW, mDB, red_copy, (n_chunk + unroll - 1) // unroll, unroll).launch(
        grid=[hp // 32, 2, 1],
        block=[RED_SLICES * 8, 1, 1],
        stream=stream,
        use_pdl=USE_PDL,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and eps and return run(dy, x, w, dx, dw, db)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    eps = float(spec.params["eps"])
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (128-bit vectors)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    tpr, vpt, rows = _config(H)
    n_ctas = _grid(-(-T // rows), tpr, rows)
    n_part = n_ctas * rows
    hp = vpt * tpr * VEC
    stages = _stages(tpr, vpt, rows)
    key = (T, H, eps, tpr, vpt, rows, n_ctas, stages)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        dy = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        x = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(bf16, (H,), assumed_align=16)
        dx = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        dw = make_fake_compact_tensor(cutlass.Float32, (H,), assumed_align=16)
        db = make_fake_compact_tensor(cutlass.Float32, (H,), assumed_align=16)
        s = make_fake_compact_tensor(cutlass.Float32, (2 * n_part, hp), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_layernorm_bwd_host, dy, x, w, dx, dw, db, s, stream, tpr, vpt, rows, n_ctas, eps,
                          stages, options="--enable-tvm-ffi")
        _CACHE[key] = fn
    scratch: list = []                                  # the partials buffer, made on first run

    def run(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, dx: torch.Tensor, dw: torch.Tensor,
            db: torch.Tensor) -> None:
        if not scratch or scratch[0].device != dy.device:
            scratch[:] = [torch.empty((2 * n_part, hp), dtype=torch.float32, device=dy.device)]
        fn(dy, x, w, dx, dw, db, scratch[0])

    return run

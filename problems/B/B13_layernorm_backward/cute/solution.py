"""B13 layernorm_backward, CuTe DSL expert solution: dx (bf16), dw and db (fp32) of LayerNorm.

With mean, rstd = rsqrt(var + eps) recomputed from x, xhat = (x - mean) * rstd and g = dy * w:
dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row; dw = sum_rows dy * xhat and
db = sum_rows dy.

Memory-bound: dy and x are read once and dx written once; each row stays in registers between
the read and the write.  dw and db need reductions over all T rows; they are done
deterministically in two kernels, without atomics (the same bits on every call).

Design, and why each part is there:
  1. ONE persistent CTA per SM (G = 132 at the benchmark) made of NG row groups (NG = 512 /
     (TPR * ROWS): 2 groups of 256 threads at H = 4096).  A group has its own row tile,
     thread-value layout, cp.async ring and reduction buffers, and synchronises with its own
     named barrier (bar.sync 1 + group, TPR * ROWS threads), so the groups run as independently
     as two CTAs would.  After the row loop groups 1.. park their fp32 dw/db accumulators in
     shared memory and group 0 adds them in group order: the CTA writes ONE partial row per
     plane.  Partials: 2 x 132 x 4096 x 4 B = 4.3 MB (a CTA per row group would write twice
     that); they are written in one burst after every row is done and read back by kernel 2
     right after, so both the burst and kernel 2's reads (5 rows per slice) sit on the serial
     tail.
  2. One reduction round per row: the four sums x, x^2, g, g * x in one pass (warp butterflies,
     one partial per warp in shared memory, ONE group barrier, an 8-lane butterfly), one-pass
     statistics: mean = sum(x) / H, var = max(sum(x^2) / H - mean^2, 0),
     sum(g * xhat) = rstd * (sum(g * x) - mean * sum(g)).  The reduction buffer alternates
     between even and odd rows (a warp that races ahead to row i + 1 writes the other buffer;
     it can reach row i + 2's writes only after every warp of the group passed row i + 1's
     barrier, i.e. finished reading row i).  Half the barriers and shuffle chains of two-pass
     statistics: the row's latency chain is short, which matters because only 16 warps per SM
     carry the whole reduction latency.
  3. Few instructions per element: w is kept in registers as fp32 (loaded once), and
     xhat = x * rstd + (-mean * rstd), dx = rstd * g + (xhat * k1 + b0) with per-row scalars
     k1 = -rstd * mean(g * xhat), b0 = -rstd * mean(g) (FFMAs; offline ptxas 13 at the
     benchmark: 126 registers under the 128 cap of 512 threads, no spills; 275 FP instructions
     in the cubin against 303 for the two-pass formulation).  At ~20 instructions per element
     and 2.7 elements per cycle per SM needed at the roofline, issue is ~40-50% busy, so
     instruction count is not free.

Kernel 1 (per row: dx; per CTA: fp32 dw and db partials)
  * A row is handled by TPR threads (a power of two, 32..1024) that each hold VPT 128-bit
    vectors (8 bf16) of it, vector j of a thread starting at column (j * TPR + lane) * 8, so a
    warp reads 512 contiguous bytes per access.  TPR is the smallest power of two with
    VPT <= VPT_MAX = 2 (H = 4096 -> 256 x 2; H = 1000 -> 64 x 2 with 125 of 128 vectors used;
    H = 128 or 256 -> 32 x 1, ROWS_SMALL = 4 rows per group).
  * Row slots: slot s = CTA * NG + group takes row tiles s, s + G * NG, ... (62 or 63 rows at
    the benchmark: G = 132, 264 slots).  A launch bound (min_blocks_per_mp = 1, 512 threads)
    caps registers at 128.
  * Aligned shapes (T % ROWS == 0 and H % (TPR * VPT * 8) == 0): dy and x reach shared memory
    through a per-group cp.async ring (cp.async.cg, 16 B, L1 bypassed) of `stages` stages
    (H = 4096: 5 stages of 16 KB per group, 4 rows in flight per group, 128 KB per SM, far over
    the ~53 KB Little's law asks for).  Each thread copies and reads back only its own slice,
    so cp.async.wait_group alone makes its data visible; the group barrier orders a stage's
    reads before the copies that refill it.  Shared memory at H = 4096: 160 KB of rings + 32 KB
    combine buffer + 2 KB reduction buffers = 194 KB (carveout 100%).
    Ragged shapes: predicated 128-bit loads straight into registers, zero-filled.
  * Per-thread fp32 dw and db accumulators for the thread's columns, rows in increasing order.
  * After the row loop: griddepcontrol.launch_dependents, then the group combine and one
    128-bit store of each partial row (padded row length HP = TPR * VPT * 8; padding holds
    zeros) to a scratch of 2 * P rows (P = G * ROWS): dw partials [0, P), db partials [P, 2P).
Kernel 2 (dw and db = column sums of the partial rows; grid.y picks dw or db)
  * 32 columns per CTA as 32 row slices x 8 float4 groups; slice s sums partial rows s, s + 32,
    ... in order (loaded before they are added), then a fixed pairwise tree over the 32 slices
    in shared memory, and 32 threads store one column each.  Programmatic dependent launch:
    griddepcontrol.wait before the first read, so its launch overlaps kernel 1's tail.
Determinism (no atomics, the same bits on every call): every sum has a fixed order fixed at
build time -- per-thread row chains of 62 or 63 terms, group 0 + group 1 + ..., slice chains of
up to 5 partial rows, the 32-slice tree.  CPU emulation of this arithmetic and order against
reference.py (fp32, 2 trials of every shape set, x mean up to 7.5 standard deviations): worst
error / bound 0.215 for dx (its one bf16 rounding), 0.041 for dw, 0.0007 for db.

Ragged edges: padding vectors are zero-filled, so they add 0 to all four sums, to dw (dy = 0)
and db; rows past T give mean 0, var 0, rstd = rsqrt(eps), finite, and are not stored.
Kernel 2 predicates its loads (rows past P) and its store (columns past H).  Idle row slots
(fewer row tiles than slots, e.g. T = 4) run no iteration and contribute zeros.
Scratch: 2 * P * HP fp32 (4.3 MB at the benchmark), torch.empty on the first run() call and
reused (build() may run without a GPU); every element of it is rewritten by every call.
Host path: one --enable-tvm-ffi function launches both kernels on torch's current stream.
Limits: H <= 8 * VPT_MAX * 1024 (16384) and T * H < 2**31 (32-bit offsets).

Measured on the H200 (bench/h200/2026-12-02b/tune-r3.json; full mode, one judge): 110.9 us
(IQR 2.1); the previous expert (2 CTAs of 256 threads per SM, 261 CTAs, two-pass statistics
with two reduction rounds per row, w re-read from shared memory) 116.8 us (IQR 1.3) 40 minutes
earlier on the same machine (bench/h200/2026-12-02b/solutions-AB.md).  In the one-run expert
table with this code (bench/h200/2026-12-02b/solutions-AB-r3.md): 111.5 us (IQR 2.6), 77.5% of
the 86.4 us roofline ideal, 3.11x the fastest eager formulation, 2.29x torch.compile; the TIRx
expert (one CTA per SM of 3 row groups of 128 threads) 111.6 us.  The estimate was ~112 us: it matches.  The 80% target
(107.9 us) is not reached; the kernel-2 tail and the ~2 us pipeline fill remain.
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
ROWS_SMALL = 4     # rows per row group when one warp handles a row
NUM_SMS = 132      # H200 SMs: sizes the persistent grid (correctness does not depend on it)
THREADS_PER_SM = 512   # kernel-1 threads per SM: ONE CTA of row groups, <= 128 registers each (launch bound)
MAX_GROUPS = 15        # row groups per CTA (named barrier ids 1 .. 15)
SMEM_CARVEOUT = 100    # % of the unified L1/shared memory as shared (194 KB per CTA at H = 4096)
SMEM_BUDGET = 220 * 1024   # kernel-1 shared memory per CTA (the H200 allows 227 KB per CTA)
MAX_STAGES = 8         # cp.async ring depth cap (the row computed + stages - 1 rows in flight)
RED_SLICES = 32    # kernel 2: row slices of one 32-column tile (CTA = 32 slices x 8 float4 groups)
RED_MAX_UNROLL = 16    # kernel 2: partial-row chunks of 32 rows loaded before they are added
USE_PDL = True     # kernel 2 is a programmatic dependent launch of kernel 1 (griddepcontrol)


def _config(H: int) -> tuple[int, int, int]:
    """(TPR threads per row, VPT vectors per thread, ROWS rows per row tile) for row length H."""
    nvec = H // VEC
    tpr = 32
    while tpr < 1024 and -(-nvec // tpr) > VPT_MAX:
        tpr *= 2
    vpt = -(-nvec // tpr)
    if vpt > VPT_MAX:
        raise ValueError(f"H={H} too long for the register-resident LayerNorm backward (max {VEC * VPT_MAX * 1024})")
    rows = ROWS_SMALL if tpr == 32 else 1
    return tpr, vpt, rows


def _groups(tpr: int, rows: int) -> int:
    """Row groups (of TPR * ROWS threads, one row tile each) in the one CTA per SM."""
    return max(1, min(MAX_GROUPS, THREADS_PER_SM // (tpr * rows)))


def _comb_bytes(tpr: int, vpt: int, rows: int) -> int:
    """Shared memory that passes groups 1.. accumulators (dw and db, fp32) to group 0."""
    return (_groups(tpr, rows) - 1) * 2 * rows * tpr * vpt * VEC * 4


def _stages(tpr: int, vpt: int, rows: int) -> int:
    """cp.async ring depth per row group: as many (dy, x) row-tile stages as SMEM_BUDGET holds
    next to the reduction and combine buffers (H = 4096: 2 groups x 5 stages of 16 KB)."""
    hp = tpr * vpt * VEC
    ng = _groups(tpr, rows)
    budget = SMEM_BUDGET - 2 * ng * 128 * 4 - 1024 - _comb_bytes(tpr, vpt, rows)
    return max(2, min(MAX_STAGES, budget // (ng * 2 * rows * hp * 2)))


def _grid(n_tiles: int, tpr: int, rows: int) -> int:
    """Persistent grid size: one CTA on each of the NUM_SMS SMs (fewer when there are fewer row
    tiles than CTAs x groups); the strided deal gives every row slot (CTA, group)
    ceil(n_tiles / slots) or one fewer row tiles."""
    return min(NUM_SMS, -(-n_tiles // _groups(tpr, rows)))


@cute.jit
def _row_sum4(a: cutlass.Float32, b: cutlass.Float32, c: cutlass.Float32, d: cutlass.Float32,
              tpr: cutlass.Constexpr, nthr: cutlass.Constexpr, buf: cute.Tensor, base: cutlass.Int32,
              bar_id: cutlass.Int32):
    """Sum four fp32 values per thread over the TPR threads of a row; all of them get the four
    sums.  For TPR > 32 the per-warp partials go through buf[base : base + 128] and the row
    group's named barrier (bar_id, nthr threads)."""
    a = cute.arch.warp_reduction_sum(a, threads_in_group=min(tpr, 32))
    b = cute.arch.warp_reduction_sum(b, threads_in_group=min(tpr, 32))
    c = cute.arch.warp_reduction_sum(c, threads_in_group=min(tpr, 32))
    d = cute.arch.warp_reduction_sum(d, threads_in_group=min(tpr, 32))
    if cutlass.const_expr(tpr > 32):            # one row per group: combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx() % nwarps      # warp within the row group
        if lane == 0:
            buf[base + warp] = a
            buf[base + 32 + warp] = b
            buf[base + 64 + warp] = c
            buf[base + 96 + warp] = d
        cute.arch.barrier(barrier_id=bar_id, number_of_threads=nthr)
        # Every group of nwarps lanes reads all partials, so a butterfly over nwarps lanes
        # leaves the full sums in every lane (a fixed order: the same bits in every lane).
        a = cute.arch.warp_reduction_sum(buf[base + lane % nwarps], threads_in_group=nwarps)
        b = cute.arch.warp_reduction_sum(buf[base + 32 + lane % nwarps], threads_in_group=nwarps)
        c = cute.arch.warp_reduction_sum(buf[base + 64 + lane % nwarps], threads_in_group=nwarps)
        d = cute.arch.warp_reduction_sum(buf[base + 96 + lane % nwarps], threads_in_group=nwarps)
    return a, b, c, d


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
    """Start the cp.async copies of row tile t of dy and x into shared-memory stage `stage` of
    this thread's row group (aligned shapes only: every copy is in bounds)."""
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
    ng: cutlass.Constexpr,
    n_ctas: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    stages: cutlass.Constexpr,
):
    gtidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    gsize = rows * tpr                                  # threads of one row group
    grp = gtidx // gsize                                # row group of this thread
    tidx = gtidx % gsize                                # thread within its row group
    n_slots = n_ctas * ng
    slot_id = bidx * ng + grp                           # row tiles slot_id, slot_id + n_slots, ...
    bar_id = grp + 1                                    # the group's named barrier (0: the CTA's)

    smem = SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2 * ng * 128), byte_alignment=16)

    T = mX.shape[0]
    H = mX.shape[1]
    n_tiles = (T + rows - 1) // rows
    tile = (rows, vpt * tpr * VEC)                      # rows of one tile, padded row length
    thr = tiled_copy.get_slice(tidx)

    # w as a (rows, H) matrix with row stride 0: each thread's slice matches its x columns.  It
    # is loaded once and kept in registers as fp32 (a thread always owns the same columns).
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
    tWrF = cute.make_fragment_like(tWrW, cutlass.Float32)
    tWrF.store(tWrW.load().to(cutlass.Float32))

    # Per-thread fp32 dw and db accumulators for the thread's columns (zero in padding columns).
    tSgW = thr.partition_D(cute.local_tile(mS, tile, (bidx, 0)))
    tSgB = thr.partition_D(cute.local_tile(mS, tile, (n_ctas + bidx, 0)))
    acc_w = cute.make_fragment_like(tSgW)
    acc_b = cute.make_fragment_like(tSgB)
    acc_w.fill(0.0)
    acc_b.fill(0.0)

    n_mine = (n_tiles - slot_id + n_slots - 1) // n_slots    # >= 0 (0 for idle slots)
    if cutlass.const_expr(not check_bounds):
        # Aligned shapes: a cp.async ring per row group.  The dy and x tiles of the group's next
        # STAGES - 1 rows stream into shared memory while this row is computed.  Each thread
        # copies and later reads back only its own slice (the same thread-value layout), so
        # cp.async.wait_group alone makes its data visible; the group barrier orders the reads of
        # a stage before the copies that overwrite it.
        stage_layout = cute.make_layout((rows, tile[1], stages, ng),
                                        stride=(tile[1], 1, rows * tile[1], stages * rows * tile[1]))
        sDY4 = smem.allocate_tensor(mDY.element_type, stage_layout, byte_alignment=128)
        sX4 = smem.allocate_tensor(mX.element_type, stage_layout, byte_alignment=128)
        sDY = sDY4[None, None, None, grp]
        sX = sX4[None, None, None, grp]
        thr_a = async_copy.get_slice(tidx)
        for s in cutlass.range_constexpr(stages - 1):   # prologue: the group's rows 0 .. stages - 2
            if s < n_mine:
                _issue_rows(async_copy, thr_a, mDY, mX, sDY, sX, tile, slot_id + s * n_slots, s)
            cute.arch.cp_async_commit_group()

    for i in cutlass.range(n_mine, unroll=1):
        t = slot_id + i * n_slots
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
            dy = tDYrDY.load().to(cutlass.Float32)
            x = tXrX.load().to(cutlass.Float32)
        else:
            nxt = i + (stages - 1)
            if nxt < n_mine:
                _issue_rows(async_copy, thr_a, mDY, mX, sDY, sX, tile, slot_id + nxt * n_slots, nxt % stages)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(stages - 1)   # this thread's copies of row i landed
            stage = i % stages
            dy = thr.partition_S(sDY[None, None, stage]).load().to(cutlass.Float32)
            x = thr.partition_S(sX[None, None, stage]).load().to(cutlass.Float32)

        acc_b.store(acc_b.load() + dy)
        g = dy * tWrF.load()
        # One round, one-pass statistics: sum(x), sum(x^2), sum(g), sum(g * x) (padding: zeros).
        # The reduction buffer alternates between even and odd rows: row i + 1 writes the other
        # buffer, and row i + 2's writes come after row i + 1's barrier, which every warp of the
        # group reaches only after reading row i's partials.
        sx, sxx, sg, sgx = _row_sum4(x.reduce(cute.ReductionOp.ADD, 0.0, 0),
                                     (x * x).reduce(cute.ReductionOp.ADD, 0.0, 0),
                                     g.reduce(cute.ReductionOp.ADD, 0.0, 0),
                                     (g * x).reduce(cute.ReductionOp.ADD, 0.0, 0),
                                     tpr, gsize, red, (grp * 2 + i % 2) * 128, bar_id)
        mean = sx * (1.0 / H)
        var = cute.arch.fmax(sxx * (1.0 / H) - mean * mean, 0.0)
        rstd = cute.math.rsqrt(var + eps, fastmath=True)
        # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) = rstd * g + (b0 + xhat * k1) with
        # b0 = -rstd * mean(g), k1 = -rstd * mean(g * xhat), mean(g * xhat) = rstd * sum(g * (x - mean)) / H
        # and xhat = x * rstd + (-mean * rstd): three FFMAs per element.
        b0 = -rstd * (sg * (1.0 / H))
        k1 = -rstd * (rstd * ((sgx - mean * sg) * (1.0 / H)))
        xhat = x * rstd + (-mean * rstd)
        tDXrDX.store((g * rstd + (xhat * k1 + b0)).to(mDX.element_type))
        acc_w.store(acc_w.load() + dy * xhat)

        if cutlass.const_expr(check_bounds):
            cute.copy(tiled_copy, tDXrDX, tDXgDX, pred=pred)
        else:
            cute.copy(tiled_copy, tDXrDX, tDXgDX)
        if cutlass.const_expr(tpr == 32 and not check_bounds):
            # No barrier in the warp-only reductions: order this row's shared-memory reads before
            # the next iteration's cp.async overwrites the stage (write-after-read).
            cute.arch.barrier(barrier_id=bar_id, number_of_threads=gsize)

    if cutlass.const_expr(USE_PDL):
        cute.arch.griddepcontrol_launch_dependents()    # kernel 2 may be scheduled from here on
    nacc = cute.size(acc_w)
    if cutlass.const_expr(ng > 1):
        # Groups 1 .. ng - 1 park their accumulators in shared memory; group 0 adds them in group
        # order (fixed: the same bits on every call) and stores the CTA's partial rows.
        comb = smem.allocate_tensor(cutlass.Float32, cute.make_layout((ng - 1) * 2 * nacc * gsize),
                                    byte_alignment=16)
        if grp > 0:
            for e in cutlass.range_constexpr(nacc):
                comb[((grp - 1) * 2 * nacc + e) * gsize + tidx] = acc_w[e]
                comb[((grp - 1) * 2 * nacc + nacc + e) * gsize + tidx] = acc_b[e]
        cute.arch.sync_threads()
        if grp == 0:
            for gg in cutlass.range_constexpr(1, ng):
                for e in cutlass.range_constexpr(nacc):
                    acc_w[e] = acc_w[e] + comb[((gg - 1) * 2 * nacc + e) * gsize + tidx]
                    acc_b[e] = acc_b[e] + comb[((gg - 1) * 2 * nacc + nacc + e) * gsize + tidx]
    if grp == 0:
        cute.autovec_copy(acc_w, tSgW)                  # this CTA's partial rows, 128-bit stores
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
    ng = _groups(tpr, rows)
    _rows_kernel(mDY, mX, mW, mDX, mS, tiled_copy, async_copy, tpr, vpt, rows, ng, n_ctas, eps, check_bounds,
                 stages).launch(
        grid=[n_ctas, 1, 1],
        block=[ng * rows * tpr, 1, 1],
        stream=stream,
        min_blocks_per_mp=1,
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

"""B09 groupnorm_silu, CuTe DSL expert solution: y = silu(group_norm(x, 32, w, b, eps)), NCHW fp16,
fp32 math, one fp16 rounding; PERSISTENT thread-block clusters, each looping over (sample, group)
rows with the next row's slice prefetched into shared memory by bulk copies.

Memory-bound: x is read once and y written once; every element stays on chip between the read
and the write, so there is no second pass over global memory, even though one (sample, group)
statistic covers C/32 * H * W elements (262144 = 512 KB at the benchmark shape, far more than one
CTA can hold).

Layout: in NCHW a group (n, g) is one contiguous run of L = C/32 * H * W elements, so x is viewed
as a row-major (N * 32, L) matrix, one row per group (channel c = g * C/32 + col // (H * W)). A
cluster of K CTAs splits a row into K slices of SL = TPR * VPT * 8 elements (_config: the largest
K of 8, 4, 2, 1 with exactly K slices; benchmark K = 8, TPR = 512, VPT = 8, SL = 32768 = 64 KB).

Every call launches the same two kernels from one compiled host function
  (1) a one-warp kernel that zeroes the two int32 ticket counters and at once executes
  griddepcontrol.launch_dependents, (2) the main kernel with programmatic dependent launch
  (use_pdl=True). The main kernel's only access to the counter (rank 0, thread 0) comes after
  griddepcontrol.wait, so it sees the zeroes; every other thread runs its prologue (mbarrier
  init) meanwhile. Nothing carries over from one call to the next, so correctness does not
  depend on call order, shapes or a previous launch having completed. Why this matters for the
  judge: an earlier version of this design zeroed the counter with a kernel launched on the first
  call only (later launches reset it in-kernel); on the H200 the judge rejected it
  (`kernel_set_changed`: a timed call launched fewer kernels than the checked call). The
  counters are allocated in build() when a GPU is visible (else on the first call; allocation
  only, no kernel).

Design
  * Grid = NCL clusters of K CTAs, NCL = min(2 * SMs / K, ceil(groups / 4)) (benchmark: 33
    clusters = 264 CTAs = 2 per SM on 132 SMs, min_blocks_per_mp = 2, 64 registers). Each
    cluster loops over groups. The group of each iteration comes from a global ticket counter
    (atom.add by rank 0, thread 0, two iterations ahead), so the load is balanced whatever
    number of clusters the GPCs can hold at once (a cluster that starts late just draws a
    terminating ticket and exits). The first two tickets are drawn in the prologue into rank
    0's shared memory, one cluster barrier (also: every CTA started, mbarrier inits visible),
    then every CTA reads them over DSMEM (ld.shared::cluster).
  * Per CTA, per iteration: the current group's slice is in REGISTERS (32 per thread); the NEXT
    group's slice is in flight into a 64 KB shared-memory stage (4 cp.async.bulk of 16 KB,
    complete_tx on an mbarrier), issued right after the stage was copied into registers, i.e. a
    whole iteration before it is needed. Iteration: stats (sum, then M2 around the slice mean;
    2 block reductions) -> thread 0 pushes (sum, M2, ticket of iteration + 2) to every CTA of
    the cluster with st.async.shared::cluster (complete_tx of 16 B on that CTA's exchange
    mbarrier for this iteration's parity) -> every thread waits for the K * 16 bytes -> Chan
    merge from its own shared memory (mean = sum / L, M2 = sum_r M2_r + n_r (mean_r - mean)^2,
    as good as a two-pass computation) -> affine + SiLU + 128-bit stores from registers -> wait
    the stage's mbarrier -> stage to registers (ld.shared.v4) -> __syncthreads -> next bulk copy
    into the stage. No barrier.cluster in the loop: its arrive.release costs a MEMBAR.GPU,
    which here would wait for the previous group's 64 KB of outstanding global stores; st.async
    + mbarrier needs no fence. Iteration 0's slice is loaded straight into registers
    (ld.global.v4) while iteration 1's bulk copy fills the stage: 128 KB per CTA in flight.
  * Tickets: ctr[0] counts drawn tickets (ticket t = group t while t < groups); a cluster stops
    drawing after its first ticket >= groups.
  * Exchange slots / mbarriers alternate by iteration parity: a CTA can run at most one
    iteration ahead of a peer (it needs the peer's partials of the current one), so a parity's
    slot is rewritten only after every CTA has read it. A final cluster barrier keeps rank 0's
    ticket slots (read remotely in the prologue) alive until all peers are done.
  * Affine + SiLU in fp32: a = rstd * w, c = b - mean * a, v = x * a + c (one FMA),
    y = v * rcp(1 + exp2(-v * log2 e)) (ex2.approx + rcp.approx, relative error ~2^-22), one
    rounding to fp16 on the store. v << 0: exp2 -> inf, rcp -> 0, y = -0; v >> 0: y = v.
    rstd = rsqrt(M2 / L + eps) (rsqrt.approx, ~2^-23 relative). The slice sum is accumulated
    vector by vector (fp32, 64 values per thread), well inside the tolerance.
  * Registers: the slice stays packed fp16 (32 registers); each phase (sum, M2, apply) converts
    (x ^ z_p) to fp32, z_p = 0 re-read from shared memory after a barrier, so ptxas cannot merge
    the conversions of different phases (with an opaque cvt alone, ptxas 13.0 still merged them
    here and spilled 92 B per thread at the 64-register cap; with z_p: 64 registers, no spill,
    checked with ptxas -v on the benchmark PTX). Cost: one 16-bit XOR per element and phase.
  * w / b: read at the top of the iteration (latency behind the reductions), one load per
    distinct channel of the slice when it holds whole channels (benchmark: 2 channels,
    4 registers).
  * Ragged edges (L not a multiple of SL): predicated loads/stores, one predicate per vector
    (H * W % 8 == 0, so a vector never straddles a row end or a channel); padding lanes are
    zero-filled, add 0 to the sum and are masked out of M2; the last slice's element count is
    used in the Chan merge. At the check shapes: small K = 1 (one CTA, no cluster exchange),
    ragged (L = 1200) K = 2 slices of 768 + 432, medium K = 8, so the checks exercise the
    cluster merge, the ragged last slice and several iterations per cluster.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream; both launches come from one host call.

Why persistent clusters (arithmetic, H200, 132 SMs, 2 CTAs per SM)
  The previous design (one group per cluster, 2048 CTAs, load -> reductions -> cluster barrier
  -> SiLU -> stores -> exit) had loads in flight only at the start of each CTA's life: ~11.6 us
  per CTA where its 128 KB of DRAM traffic needs 3.5 us of the SM's 36 KB/us share
  (4.64 TB/s / 128). Here, per SM, 2 CTAs x (64 KB registers + 64 KB stage); each stage's bulk
  copy is issued one full iteration (~7 us) before it is consumed and needs ~2-3.5 us, so the SM
  has a 64 KB load in flight also while its CTAs sit in the reductions, the exchange and the
  SiLU (Little: ~35 KB per SM keeps its DRAM share busy). No CTA launch per group: 256 groups in
  33 long-lived clusters, ~8 iterations each. Compute per SM per group slice: MUFU
  32768 * 2 / 16 = 4096 clk (~2.2 us) + ~0.6 us stats, shared by 2 CTAs, below the 3.5 us of
  DRAM time per slice. A SiLU through one tanh.approx (half the MUFU work) measured within the
  noise on the previous design, with a thinner tolerance margin, so the exact SiLU is kept.
Limits: L <= 8 * 32768 (one cluster of 8 CTAs x 64 KB holds a group), N * C * H * W < 2**31;
build() raises ValueError beyond that.

Measured on the H200 (bench/h200/2026-12-02b/tune-r3.json, full mode, one judge): 85.9 us
(IQR 1.8); a 1-CTA-per-SM, two-stage alternative 109.2 us (IQR 1.4) in the same run; the
previous one-group-per-cluster expert 90.7 us (IQR 2.8) 40 minutes earlier on the same machine
(bench/h200/2026-12-02b/solutions-AB.md). In the one-run expert table with this code
(bench/h200/2026-12-02b/solutions-AB-r3.md): 85.8 us (IQR 1.3), 67.1% of the roofline ideal
(57.6 us), 5.34x the fastest eager formulation, 2.00x torch.compile; the TIRx expert (the same
design) 83.9 us. The estimate was 62-75 us; it came in at 86: the prefetch gains ~5 us, far
less than the arithmetic above suggests, so DRAM is still idle for part of each iteration (not
profiled; the zeroing kernel ahead of the first ticket draw was estimated at ~1-2 us).
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T, dsl_user_op
from cutlass.experimental.primitives import cp_async_bulk_shared_cluster_global

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # fp16 per 128-bit access
VPT_MAX = 8        # 128-bit vectors per thread at most (64 values: 32 data registers)
TPR_MAX = 512      # threads per CTA at most
K_MAX = 8          # CTAs per cluster at most (portable cluster size)
CTAS_PER_SM = 2    # 2 x 512 threads at 64 registers, 2 x ~65 KB of shared memory
MIN_ITERS = 4      # small problems: at most groups / 4 clusters (several iterations each)
N_BULK = 4         # bulk copies per stage fill (one thread issues them back to back)
DEFAULT_SMS = 132  # H200; used when no GPU is visible at build time
NEG_LOG2_E = -math.log2(math.e)


@dsl_user_op
def _ld_dsmem_i32(ptr, *, loc=None, ip=None) -> cutlass.Int32:
    """int32 load through a distributed-shared-memory pointer (ld.shared::cluster.s32)."""
    return cutlass.Int32(llvm.load(T.i32(), ptr.to_llvm_ptr(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def _smem_u32(ptr, *, loc=None, ip=None) -> cutlass.Int32:
    """32-bit shared-window address of a shared-memory pointer."""
    return cutlass.Int32(llvm.ptrtoint(T.i32(), ptr.to_llvm_ptr(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def _f32_bits(x, *, loc=None, ip=None) -> cutlass.Int32:
    """The bits of an fp32 as an int32."""
    return cutlass.Int32(llvm.bitcast(T.i32(), cutlass.Float32(x).ir_value(loc=loc, ip=ip),
                                      loc=loc, ip=ip))


@dsl_user_op
def _i32_as_f32(x, *, loc=None, ip=None) -> cutlass.Float32:
    """The fp32 whose bits are the int32 x."""
    return cutlass.Float32(llvm.bitcast(T.f32(), cutlass.Int32(x).ir_value(loc=loc, ip=ip),
                                        loc=loc, ip=ip))


@dsl_user_op
def _st_async_v4(dst, a, b, c, d, bar, rank, *, loc=None, ip=None) -> None:
    """st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32: 16 bytes from registers
    into CTA `rank`'s shared memory at the address of local `dst`, completing 16 transaction
    bytes on CTA `rank`'s mbarrier at the address of local `bar` (both 32-bit shared addresses).
    No fence and no global-memory ordering involved (unlike barrier.cluster.arrive.release,
    whose MEMBAR would wait for the previous group's outstanding global stores)."""
    ops = [cutlass.Int32(v).ir_value(loc=loc, ip=ip) for v in (dst, a, b, c, d, bar, rank)]
    llvm.inline_asm(
        None, ops,
        "{\n.reg .b32 ra, rb;\n"
        "mapa.shared::cluster.u32 ra, $0, $6;\n"
        "mapa.shared::cluster.u32 rb, $5, $6;\n"
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [ra], {$1, $2, $3, $4}, [rb];\n"
        "}",
        "r,r,r,r,r,r,r",
        has_side_effects=True, loc=loc, ip=ip)


@dsl_user_op
def _h2f(x, z, *, loc=None, ip=None) -> cutlass.Float32:
    """fp16 -> fp32 of (bits of x) ^ z through an opaque cvt.f32.f16.  z is 0 but re-read from
    shared memory after a barrier in each phase (sum, M2, apply), so ptxas cannot merge the
    conversions of different phases: merged, they kept 64 fp32 copies of the slice alive and
    spilled at the 64-register cap."""
    bits = llvm.bitcast(T.i16(), x.ir_value(loc=loc, ip=ip), loc=loc, ip=ip)
    zb = llvm.trunc(T.i16(), cutlass.Int32(z).ir_value(loc=loc, ip=ip), [], loc=loc, ip=ip)
    bits = llvm.xor(bits, zb, loc=loc, ip=ip)
    return cutlass.Float32(llvm.inline_asm(T.f32(), [bits], "cvt.f32.f16 $0, $1;", "=f,h",
                                           has_side_effects=True, loc=loc, ip=ip))


def _config(L: int) -> tuple[int, int, int]:
    """(TPR threads per CTA, VPT vectors per thread, K CTAs per group) for group length L
    (the largest K <= 8 with exactly K slices of SL = TPR * VPT * 8)."""
    for k in (8, 4, 2, 1):
        need = -(-L // k)
        tpr = 32
        while tpr < TPR_MAX and -(-need // (tpr * VEC)) > VPT_MAX:
            tpr *= 2
        vpt = -(-need // (tpr * VEC))
        if vpt > VPT_MAX:
            continue
        sl = tpr * vpt * VEC
        if (k - 1) * sl < L <= k * sl:
            return tpr, vpt, k
    raise ValueError(f"group of {L} elements does not fit one cluster of {K_MAX} CTAs")


def _n_clusters(rows: int, k: int, sms: int) -> int:
    """Clusters launched: all that 2 CTAs per SM hold, at most one per 4 groups."""
    return max(1, min(sms * CTAS_PER_SM // k, -(-rows // MIN_ITERS)))


@cute.jit
def _cta_sum(val: cutlass.Float32, tpr: cutlass.Constexpr, buf: cute.Tensor):
    """Sum one fp32 per thread over the CTA's TPR threads; all of them get the result."""
    val = cute.arch.warp_reduction_sum(val, threads_in_group=32)
    if cutlass.const_expr(tpr > 32):
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = val
        cute.arch.sync_threads()
        val = cute.arch.warp_reduction_sum(buf[lane % nwarps], threads_in_group=nwarps)
    return val


@cute.jit
def _cluster_sync(n_slices: cutlass.Constexpr):
    """Full cluster barrier (release / acquire); a CTA barrier when the 'cluster' is one CTA."""
    if cutlass.const_expr(n_slices > 1):
        cute.arch.cluster_arrive(aligned=True)
        cute.arch.cluster_wait()
    else:
        cute.arch.sync_threads()


@cute.jit
def _col_pred(thr, mX: cute.Tensor, tile: cutlass.Constexpr, rank: cutlass.Int32):
    """Predicate per 128-bit vector of the thread: its column lies inside the group row (the
    predicate depends only on the column). Built where it is used: a predicate tensor does not
    survive being captured by a dynamic if / while region."""
    cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (0, rank))
    tCc = thr.partition_S(cX)
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
def _fill_stage(mX: cute.Tensor, sX: cute.Tensor, bar, grp: cutlass.Int32, rank: cutlass.Int32,
                n_here: cutlass.Int32, sl: cutlass.Constexpr, n_last: cutlass.Constexpr):
    """One thread: arm the stage mbarrier and bulk-copy slice `rank` of group `grp` into sX."""
    src = cute.local_tile(mX, (1, sl), (grp, rank))
    cute.arch.mbarrier_arrive_and_expect_tx(bar, n_here * 2)
    if cutlass.const_expr(n_last == sl and sl % (N_BULK * VEC) == 0):
        bulk = sl // N_BULK                     # N_BULK copies of 16 KB (benchmark)
        for q in cutlass.range_constexpr(N_BULK):
            cp_async_bulk_shared_cluster_global(sX.iterator + q * bulk, src.iterator + q * bulk,
                                                bar, bulk * 2)
    else:
        cp_async_bulk_shared_cluster_global(sX.iterator, src.iterator, bar, n_here * 2)


@cute.kernel
def _gn_silu_persistent_kernel(
    mX: cute.Tensor,            # (N * G, L) row-major fp16: one row per (sample, group)
    mW: cute.Tensor,            # (C,) fp16
    mB: cute.Tensor,            # (C,) fp16
    mY: cute.Tensor,            # (N * G, L) row-major fp16
    mCtr: cute.Tensor,          # (2,) int32: [0] tickets drawn (zeroed by _zero_ctr_kernel)
    tiled_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    n_slices: cutlass.Constexpr,
    n_clusters: cutlass.Constexpr,
    rows: cutlass.Constexpr,
    hw: cutlass.Constexpr,
    cpg: cutlass.Constexpr,
    groups: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()

    L = cpg * hw
    sl = tpr * vpt * VEC
    n_last = L - (n_slices - 1) * sl            # elements in the group's last slice
    multi = n_slices > 1

    smem = SmemAllocator()
    mbar = smem.allocate_array(cutlass.Int64, num_elems=3, byte_alignment=8)  # stage, parts x 2
    red_a = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_b = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    # exchange slots [parity][rank][4 words]: (sum bits, M2 bits, ticket (rank 0), 0)
    xch = smem.allocate_tensor(cutlass.Int32, cute.make_layout(2 * n_slices * 4), byte_alignment=16)
    tick = smem.allocate_tensor(cutlass.Int32, cute.make_layout(4), byte_alignment=16)
    zsm = smem.allocate_tensor(cutlass.Int32, cute.make_layout(4), byte_alignment=16)  # zeros
    sX = smem.allocate_tensor(cutlass.Float16, cute.make_layout((1, sl), stride=(sl, 1)),
                              byte_alignment=128)
    stage_bar = mbar
    xbar = mbar + 1                             # + parity: the partial-exchange mbarriers

    rank = bidx % n_slices                      # rank in the cluster = slice of the group
    n_here = sl
    if cutlass.const_expr(n_last != sl):
        if rank == n_slices - 1:
            n_here = n_last

    tile = (1, sl)
    thr = tiled_copy.get_slice(tidx)
    tXsX = thr.partition_S(sX)                  # ((VEC), 1, VPT) in shared memory
    tXrX = cute.make_fragment_like(tXsX)
    g0X = cute.local_tile(mX, tile, (0, rank))
    tYrY = cute.make_fragment_like(thr.partition_D(g0X))

    # ---- prologue: rank 0 draws the tickets of iterations 0 and 1 into its own shared memory;
    # one cluster barrier (all CTAs started, mbarrier inits visible); every CTA reads them ----
    term = cutlass.Int32(0)                     # rank 0, thread 0: drew a terminating ticket
    if tidx < 4:
        zsm[tidx] = cutlass.Int32(0)
    if tidx == 0:
        cute.arch.mbarrier_init(stage_bar, 1)
        cute.arch.mbarrier_init(xbar, 1)
        cute.arch.mbarrier_init(xbar + 1, 1)
        cute.arch.mbarrier_init_fence()
        if rank == 0:
            # PDL: this grid may start while the zeroing kernel still runs; its counter write
            # is visible after griddepcontrol.wait (the only thread that touches the counter)
            cute.arch.griddepcontrol_wait()
            t0 = cute.arch.atomic_add(mCtr.iterator, cutlass.Int32(1), sem="relaxed", scope="gpu")
            t1 = cute.arch.atomic_add(mCtr.iterator, cutlass.Int32(1), sem="relaxed", scope="gpu")
            gt0 = cutlass.Int32(-1)
            gt1 = cutlass.Int32(-1)
            if t0 < rows:
                gt0 = t0
            if t1 < rows:
                gt1 = t1
            else:
                term = cutlass.Int32(1)
            tick[0] = gt0
            tick[1] = gt1
    g_cur = cutlass.Int32(-1)
    g_next = cutlass.Int32(-1)
    if cutlass.const_expr(multi):
        cute.arch.cluster_arrive(aligned=True)  # nothing outstanding yet: the release is cheap
        cute.arch.cluster_wait()
        g_cur = _ld_dsmem_i32(cute.arch.map_dsmem_ptr(tick.iterator, 0))
        g_next = _ld_dsmem_i32(cute.arch.map_dsmem_ptr(tick.iterator + 1, 0))
    else:
        cute.arch.sync_threads()
        g_cur = tick[0]
        g_next = tick[1]
    if g_cur >= 0:
        gX = cute.local_tile(mX, tile, (g_cur, rank))
        tXgX = thr.partition_S(gX)
        if cutlass.const_expr(check_bounds):
            tXrX.fill(0.0)
            cute.copy(tiled_copy, tXgX, tXrX, pred=_col_pred(thr, mX, tile, rank))
        else:
            cute.copy(tiled_copy, tXgX, tXrX)
    if tidx == 0:
        if g_next >= 0:
            _fill_stage(mX, sX, stage_bar, g_next, rank, n_here, sl, n_last)

    it = cutlass.Int32(0)
    while g_cur >= 0:
        # draw the ticket of iteration it + 2 (its latency hides behind the reductions)
        t2 = cutlass.Int32(rows)
        if tidx == 0:
            if rank == 0:
                if term == 0:
                    t2 = cute.arch.atomic_add(mCtr.iterator, cutlass.Int32(1), sem="relaxed",
                                              scope="gpu")

        # per-vector channel parameters of this group (latency hidden behind the reductions)
        g_chan0 = (g_cur % groups) * cpg
        w_v = []
        b_v = []
        if cutlass.const_expr(sl % hw == 0 and not check_bounds):
            # vector j of every thread lies in channel rank * (sl / hw) + j * tpr * 8 / hw:
            # one load per distinct channel (benchmark: 2 channels per slice, 4 registers)
            first = rank * (sl // hw)
            seen = {}
            for j in cutlass.range_constexpr(vpt):
                off = (j * tpr * VEC) // hw
                if cutlass.const_expr(off not in seen):
                    seen[off] = (mW[g_chan0 + first + off].to(cutlass.Float32),
                                 mB[g_chan0 + first + off].to(cutlass.Float32))
                w_v.append(seen[off][0])
                b_v.append(seen[off][1])
        elif cutlass.const_expr(hw % (tpr * VEC) == 0):
            for j in cutlass.range_constexpr(vpt):
                ch = (rank * sl + j * tpr * VEC) // hw
                if cutlass.const_expr(check_bounds):
                    if ch > cpg - 1:
                        ch = cpg - 1
                w_v.append(mW[g_chan0 + ch].to(cutlass.Float32))
                b_v.append(mB[g_chan0 + ch].to(cutlass.Float32))
        else:
            for j in cutlass.range_constexpr(vpt):
                col = rank * sl + (j * tpr + tidx) * VEC
                ch = col // hw
                if ch > cpg - 1:
                    ch = cpg - 1
                w_v.append(mW[g_chan0 + ch].to(cutlass.Float32))
                b_v.append(mB[g_chan0 + ch].to(cutlass.Float32))

        # slice statistics: sum, then M2 around the slice mean (padding masked out)
        z0 = zsm[0]
        tsum = cutlass.Float32(0.0)
        for j in cutlass.range_constexpr(vpt):
            s = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(VEC):
                s = s + _h2f(tXrX[i, 0, j], z0)
            tsum = tsum + s
        lsum = _cta_sum(tsum, tpr, red_a)
        lmean = lsum / cutlass.Float32(n_here)
        m2 = cutlass.Float32(0.0)
        if cutlass.const_expr(check_bounds):
            pred = _col_pred(thr, mX, tile, rank)
        z1 = zsm[1]
        for j in cutlass.range_constexpr(vpt):
            s = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(VEC):
                d = _h2f(tXrX[i, 0, j], z1) - lmean
                s = s + d * d
            if cutlass.const_expr(check_bounds):
                if pred[0, 0, j]:
                    m2 = m2 + s
            else:
                m2 = m2 + s
        lm2 = _cta_sum(m2, tpr, red_b)

        # ticket of iteration it + 2 (rank 0), sent along with the partials
        gt2 = cutlass.Int32(-1)
        if tidx == 0:
            if rank == 0:
                if term == 0:
                    if t2 < rows:
                        gt2 = t2
                    else:
                        term = cutlass.Int32(1)
        par = it % 2
        mean = lmean
        rstd = cute.math.rsqrt(lm2 * (1.0 / L) + eps, fastmath=True)
        g_after = cutlass.Int32(-1)
        if cutlass.const_expr(multi):
            # push (sum, M2, ticket) to every CTA of the cluster (st.async + complete_tx on the
            # parity's mbarrier), wait until all K partials of this iteration have landed here
            base = par * (n_slices * 4)
            if tidx == 0:
                cute.arch.mbarrier_arrive_and_expect_tx(xbar + par, n_slices * 16)
                dst = _smem_u32(xch.iterator + base + rank * 4)
                xb = _smem_u32(xbar + par)
                for r in cutlass.range_constexpr(n_slices):
                    _st_async_v4(dst, _f32_bits(lsum), _f32_bits(lm2), gt2, cutlass.Int32(0), xb,
                                 cutlass.Int32(r))
            cute.arch.mbarrier_wait(xbar + par, (it // 2) % 2)
            g_after = xch[base + 2]             # rank 0's ticket
            ps = cutlass.Float32(0.0)
            pm2 = cutlass.Float32(0.0)
            pn = cutlass.Float32(0.0)
            if lane < n_slices:
                ps = cutlass.Float32(_i32_as_f32(xch[base + lane * 4]))
                pm2 = cutlass.Float32(_i32_as_f32(xch[base + lane * 4 + 1]))
                pn = cutlass.Float32(sl)
                if cutlass.const_expr(n_last != sl):
                    if lane == n_slices - 1:
                        pn = cutlass.Float32(n_last)
            gmean = cute.arch.warp_reduction_sum(ps, threads_in_group=32) * (1.0 / L)
            term_m = cutlass.Float32(0.0)
            if lane < n_slices:
                dm = ps / pn - gmean
                term_m = pm2 + pn * dm * dm
            gm2 = cute.arch.warp_reduction_sum(term_m, threads_in_group=32)
            mean = gmean
            rstd = cute.math.rsqrt(gm2 * (1.0 / L) + eps, fastmath=True)
        else:
            if tidx == 0:
                tick[(it + 2) % 4] = gt2
            cute.arch.sync_threads()
            g_after = tick[(it + 2) % 4]

        # affine + SiLU, one fp16 rounding, 128-bit stores
        z2 = zsm[2]
        for j in cutlass.range_constexpr(vpt):
            a = rstd * w_v[j]
            sh = b_v[j] - mean * a
            for i in cutlass.range_constexpr(VEC):
                v = _h2f(tXrX[i, 0, j], z2) * a + sh
                e = cute.math.exp2(v * NEG_LOG2_E, fastmath=True)
                tYrY[i, 0, j] = (v * cute.math.rcp(e + 1.0, approx=True, ftz=True)).to(mY.element_type)
        gY = cute.local_tile(mY, tile, (g_cur, rank))
        tYgY = thr.partition_D(gY)
        if cutlass.const_expr(check_bounds):
            cute.copy(tiled_copy, tYrY, tYgY, pred=_col_pred(thr, mX, tile, rank))
        else:
            cute.copy(tiled_copy, tYrY, tYgY)

        # next group: stage -> registers, then refill the stage with the group after it
        if g_next >= 0:
            cute.arch.mbarrier_wait(stage_bar, it % 2)
            if cutlass.const_expr(check_bounds):
                tXrX.fill(0.0)
                cute.copy(tiled_copy, tXsX, tXrX, pred=_col_pred(thr, mX, tile, rank))
            else:
                cute.copy(tiled_copy, tXsX, tXrX)
            cute.arch.sync_threads()            # every thread is done reading the stage
            if tidx == 0:
                if g_after >= 0:
                    _fill_stage(mX, sX, stage_bar, g_after, rank, n_here, sl, n_last)
        g_cur = g_next
        g_next = g_after
        it = it + 1

    # rank 0's ticket slots are read remotely in the prologue: no CTA leaves before all did
    if cutlass.const_expr(multi):
        cute.arch.cluster_arrive_relaxed(aligned=True)
        cute.arch.cluster_wait()


@cute.kernel
def _zero_ctr_kernel(mCtr: cute.Tensor):
    """One warp: zero the ticket counters of the launch that follows, then let it start (PDL)."""
    tidx, _, _ = cute.arch.thread_idx()
    if tidx < 2:
        mCtr[tidx] = cutlass.Int32(0)
    cute.arch.griddepcontrol_launch_dependents()


@cute.jit
def _gn_silu_persistent_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    mCtr: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    n_slices: cutlass.Constexpr,
    n_clusters: cutlass.Constexpr,
    hw: cutlass.Constexpr,
    cpg: cutlass.Constexpr,
    groups: cutlass.Constexpr,
    eps: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((1, tpr), order=(1, 0))
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    rows = mX.shape[0] * groups
    L = cpg * hw
    grp_layout = cute.make_layout((rows, L), stride=(L, 1))
    mX2 = cute.make_tensor(mX.iterator, grp_layout)
    mY2 = cute.make_tensor(mY.iterator, grp_layout)
    check_bounds = L % (tpr * vpt * VEC) != 0
    # every call: zero the counters, then the main kernel (programmatic stream serialization:
    # it launches as soon as the zeroing kernel triggers and waits for it only before its
    # first ticket draw)
    _zero_ctr_kernel(mCtr).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)
    _gn_silu_persistent_kernel(mX2, mW, mB, mY2, mCtr, tiled_copy, tpr, vpt, n_slices, n_clusters,
                               rows, hw, cpg, groups, eps, check_bounds).launch(
        grid=[n_clusters * n_slices, 1, 1],
        block=[tpr, 1, 1],
        cluster=[n_slices, 1, 1],
        min_blocks_per_mp=min(32, CTAS_PER_SM * 512 // tpr),
        preferred_smem_carveout=100,    # max shared memory: 2 x ~66 KB per SM
        stream=stream,
        use_pdl=True,
    )


_CACHE: dict = {}


def _sm_count() -> int:
    """SMs of the current GPU, or the H200's 132 when none is visible (compile-only runs)."""
    try:
        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(torch.cuda.current_device())
                       .multi_processor_count)
    except Exception:  # pragma: no cover  (no driver)
        pass
    return DEFAULT_SMS


def build(spec):
    """Compile for spec's static (N, C, H, W), groups and eps and return run(x, w, b, y)."""
    N = int(spec.dims["N"])
    C = int(spec.dims["C"])
    H = int(spec.dims["H"])
    W = int(spec.dims["W"])
    groups = int(spec.params["groups"])
    eps = float(spec.params["eps"])
    if C % groups != 0:
        raise ValueError(f"C={C} must be a multiple of groups={groups}")
    hw = H * W
    if hw % VEC != 0:
        raise ValueError(f"H*W={hw} must be a multiple of {VEC} (128-bit vectors)")
    if N * C * hw >= 2**31:
        raise ValueError("N*C*H*W must stay below 2**31 elements (32-bit static index math)")
    cpg = C // groups
    L = cpg * hw
    tpr, vpt, n_slices = _config(L)
    n_clusters = _n_clusters(N * groups, n_slices, _sm_count())
    key = (N, C, H, W, groups, eps, n_clusters)
    fn = _CACHE.get(key)
    if fn is None:
        f16 = cutlass.Float16
        nchw = (N, C, H, W)
        x = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        w = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        b = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        y = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        ctr = make_fake_compact_tensor(cutlass.Int32, (2,), assumed_align=8)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_gn_silu_persistent_host, x, w, b, y, ctr, stream, tpr, vpt, n_slices,
                          n_clusters, hw, cpg, groups, eps, options="--enable-tvm-ffi")
        _CACHE[key] = fn
    main_fn = fn
    counters: dict = {}
    if torch.cuda.is_available():  # allocate here when a GPU is visible (not in compile mode)
        dev = torch.device("cuda", torch.cuda.current_device())
        counters[dev] = torch.empty(2, dtype=torch.int32, device=dev)

    def run(x, w, b, y) -> None:
        # the counters' content never matters between calls: every call zeroes them first
        ctr = counters.get(x.device)
        if ctr is None:
            ctr = torch.empty(2, dtype=torch.int32, device=x.device)
            counters[x.device] = ctr
        main_fn(x, w, b, y, ctr)

    return run

"""B09 groupnorm_silu, CuTe DSL expert solution: y = silu(group_norm(x, 32, w, b, eps)), NCHW fp16,
fp32 math, one fp16 rounding; PERSISTENT thread-block clusters, each looping over (sample, group)
rows with the next row's slice prefetched into shared memory by bulk copies; one-pass shifted
slice statistics; SiLU through one hardware tanh (tanh.approx.f32).

Memory-bound: x read once, y written once; a group's L = C/32 * H * W elements (512 KB at the
benchmark shape) stay on chip in between. A group is one contiguous run in NCHW: x is viewed as
a row-major (N * 32, L) matrix (channel c = g * C/32 + col // (H * W)). A cluster of K CTAs
splits a row into K slices of SL = TPR * VPT * 8 elements (_config: the largest K of 8, 4, 2, 1
with exactly K slices; benchmark K = 8, TPR = 512, VPT = 8, SL = 32768 = 64 KB).

Launch protocol: every call launches the same two kernels from one compiled host function, a
one-warp kernel that zeroes the two int32 ticket counters and at once executes
griddepcontrol.launch_dependents, then the main kernel with programmatic dependent launch
(use_pdl=True), whose only counter access (rank 0, thread 0) comes after griddepcontrol.wait.
Nothing carries over between calls (a version that zeroed the counter on the first call only was
rejected by the judge as `kernel_set_changed`). Counters: allocated in build() when a GPU is
visible, else on the first call. Host path: compiled with --enable-tvm-ffi against fake tensors;
run() passes the torch tensors straight through on torch's current stream.

Design
  * Grid = NCL clusters of K CTAs, NCL = min(2 * SMs / K, ceil(groups / 4)) (benchmark: 33
    clusters, 2 CTAs of 512 threads per SM, min_blocks_per_mp = 2, 64 registers). Each cluster
    loops over groups drawn from a global ticket counter (atom.add by rank 0, thread 0, two
    iterations ahead), so the work is balanced however many clusters the GPCs hold; a cluster
    stops after its first ticket >= groups. Prologue: ONE atom.add of 2 draws the first two
    tickets (one L2 round trip before the first load) into rank 0's shared memory; one cluster
    barrier (all CTAs started, mbarrier inits visible); every CTA reads them over DSMEM.
  * Per CTA and iteration: the current slice in REGISTERS (32 packed fp16 words per thread); the
    NEXT group's slice in flight into a 64 KB stage (4 cp.async.bulk of 16 KB, complete_tx on an
    mbarrier), issued a whole iteration before use. Iteration 0's slice is loaded straight into
    registers (ld.global.v4) while iteration 1's bulk copy fills the stage.
  * Slice statistics in ONE register pass around k = the slice's first element (a value of the
    data, so |mean - k| is a few std whatever the offset of x; a broadcast global load in
    iteration 0, sX[0] after the stage's mbarrier wait later): S1 = sum (x - k), S2 = sum
    (x - k)^2 in fp32 (per 128-bit vector, then per thread), ONE two-value block reduction (warp
    shuffles, one shared step, one __syncthreads), then sum = n k + S1, M2 = max(S2 - S1^2 / n, 0).
    Cancellation costs a factor 1 + (mean - k)^2 / var (~26 for a 5-sigma k) of fp32's 2^-24.
  * Exchange: thread 0 pushes (sum, M2, ticket of iteration + 2) to every CTA of the cluster with
    st.async.shared::cluster (16 B of complete_tx on that CTA's exchange mbarrier of the
    iteration's parity); every thread waits for the K * 16 bytes, then an exact Chan merge:
    mean = sum / L, M2 = sum_r M2_r + n_r (mean_r - mean)^2. No barrier.cluster in the loop: its
    arrive.release costs a MEMBAR.GPU that would wait for the previous group's stores. Slots and
    mbarriers alternate by parity (a CTA runs at most one iteration ahead of a peer); a final
    cluster barrier keeps rank 0's ticket slots alive until every peer is done.
  * Apply: rstd = rsqrt(M2 / L + eps) (rsqrt.approx), a = rstd * w, c = b - mean * a,
    h = v / 2 = x (a / 2) + c / 2 (one FFMA), silu(v) = v sigmoid(v) = h + h tanh(h): one
    MUFU.TANH and one FFMA per element instead of FMUL, MUFU.EX2, FADD, MUFU.RCP, FMUL (half the
    MUFU work); one rounding to fp16, 128-bit stores.
  * fp16 -> fp32 through 32-bit words: each packed pair is XORed once with a per-phase zero
    re-read from shared memory after a barrier (statistics, apply), then cvt.f32.f16 of each
    half, so ptxas cannot merge the two phases' conversions (merged, it kept 64 fp32 copies of
    the slice alive and spilled at the 64-register cap).
  * w / b: read at the top of the iteration, one load per distinct channel when the slice holds
    whole channels (benchmark: 2 channels, 4 registers).
  * Ragged edges (L not a multiple of SL): one predicate per vector on loads and stores
    (H * W % 8 == 0: a vector never straddles a channel); padding is zero-filled and masked out
    of S1 and S2; the last slice's count enters the merge. Check shapes: small K = 1 (one CTA, no
    exchange), ragged (L = 1200) K = 2 slices of 768 + 432, medium K = 8.
  * SASS (ptxas 13.0 -v, sm_90a, benchmark kernel): 64 registers, 0 spill, 1280 instructions,
    against 1464 for the same kernel with the exact SiLU and 1736 for the previous expert (two
    statistics passes, an XOR per 16-bit half): MUFU 132 -> 68 (64 TANH), HADD2.F32 196 -> 134,
    PRMT 114 -> 18, LOP3 248 -> 121, BAR.SYNC 5 -> 4; ~7 instructions per element fewer.
Numerics: statistics emulated in fp32 against an fp64 truth at every shape set, offsets up to
0.5 (167 std), scales 0.5-2: mean error <= 2e-5 std, rstd relative error <= 5e-7. SiLU: the
~1.1e-5 maximum relative error of tanh.approx.f32 is a public measurement (N. Juffa, NVIDIA
developer forums, 2021), not an error bound documented by NVIDIA; y's error from it is |h| dt.
So the CPU emulation (torch, every shape set, these statistics) perturbed tanh by 2^-11 relative
(~45x that figure, either sign): worst |y - ref| / tol 0.69 (0.15 with an exact tanh;
tol = 2e-3 + 6e-3 |y|); most negative v seen -6.1. Checked in Python: the shift's index for
every slice and shape set; the +2 first draw (1..299 groups, 1..33 clusters: each group once).
Limits (build() raises ValueError): L <= 8 * 32768 (one cluster holds a group), NCHW < 2**31.

Measured on the H200 (full mode, one judge; the tune run's JSON did not come back from the
machine, its verdicts and medians are in bench/h200/2026-12-02c/adopt-r5.txt and
bench/h200/2026-12-02c/logs/call7-tune-B-solutions-AB-copyceiling-job.log): 74.8 us (IQR 1.7)
against 85.8 us for the previous expert; in the same run this kernel with the exact ex2 + rcp
SiLU ran 79.6 us (IQR 1.1): the tanh SiLU saved ~5 us, the one-pass statistics, word-wise
conversion and single prologue atomic ~6 us. The arithmetic estimate was 74-78 us. In the
one-run table bench/h200/2026-12-02c/solutions-AB-r5.md: 74.7 us (IQR 1.2), 77.0% of the
57.5 us roofline ideal, 6.11x eager, 2.29x torch.compile, 1.15x faster than the previous
expert; the TIRx expert (same design) 74.3 us.
Both B09 experts (~74.5 us, 77% of the ideal) are still below 80% of the ideal.
Why it helped: the loads have a whole iteration of lead, so an iteration (~10.5 us before,
256 KB of DRAM traffic per SM = 8 us at the copy rate) was set by each CTA's serial chain
(stats -> barrier -> exchange -> apply -> stores -> stage copy -> barrier; not profiled), which
fewer barriers, MUFU ops and instructions shorten (the same tanh SiLU measured within the noise
on an older one-group-per-cluster design, paced by load latency at CTA start). One CTA of 1024
threads per SM ran 102.4 us (bench/h200/2026-12-02c/tune-r4.json): hence two of 512.
"""
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
def _w2f_lo(w, z, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 of the LOW fp16 of the 32-bit word (w ^ z) through an opaque cvt.f32.f16.  z is 0 but
    re-read from shared memory after a barrier in each phase (statistics, apply), so ptxas cannot
    merge the conversions of the two phases (merged, they kept 64 fp32 copies of the slice alive
    and spilled at the 64-register cap).  One 32-bit XOR per PAIR (the expert XORs each 16-bit
    half separately: PRMT + LOP per element)."""
    x = llvm.xor(cutlass.Uint32(w).ir_value(loc=loc, ip=ip), cutlass.Uint32(z).ir_value(loc=loc, ip=ip),
                 loc=loc, ip=ip)
    return cutlass.Float32(llvm.inline_asm(
        T.f32(), [x], "{\n.reg .b16 l, h;\nmov.b32 {l, h}, $1;\ncvt.f32.f16 $0, l;\n}", "=f,r",
        has_side_effects=True, loc=loc, ip=ip))


@dsl_user_op
def _w2f_hi(w, z, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 of the HIGH fp16 of the 32-bit word (w ^ z) (see _w2f_lo)."""
    x = llvm.xor(cutlass.Uint32(w).ir_value(loc=loc, ip=ip), cutlass.Uint32(z).ir_value(loc=loc, ip=ip),
                 loc=loc, ip=ip)
    return cutlass.Float32(llvm.inline_asm(
        T.f32(), [x], "{\n.reg .b16 l, h;\nmov.b32 {l, h}, $1;\ncvt.f32.f16 $0, h;\n}", "=f,r",
        has_side_effects=True, loc=loc, ip=ip))


@dsl_user_op
def _tanh_approx(x, *, loc=None, ip=None) -> cutlass.Float32:
    """tanh.approx.f32 (one MUFU.TANH; measured max relative error ~1.1e-5 since sm_75)."""
    return cutlass.Float32(llvm.inline_asm(
        T.f32(), [cutlass.Float32(x).ir_value(loc=loc, ip=ip)], "tanh.approx.f32 $0, $1;", "=f,f",
        has_side_effects=False, loc=loc, ip=ip))


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
def _cta_sum2(v0: cutlass.Float32, v1: cutlass.Float32, tpr: cutlass.Constexpr, buf0: cute.Tensor,
              buf1: cute.Tensor):
    """Sum two fp32 per thread over the CTA's TPR threads with ONE barrier; all get both sums."""
    v0 = cute.arch.warp_reduction_sum(v0, threads_in_group=32)
    v1 = cute.arch.warp_reduction_sum(v1, threads_in_group=32)
    if cutlass.const_expr(tpr > 32):
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf0[warp] = v0
            buf1[warp] = v1
        cute.arch.sync_threads()
        v0 = cute.arch.warp_reduction_sum(buf0[lane % nwarps], threads_in_group=nwarps)
        v1 = cute.arch.warp_reduction_sum(buf1[lane % nwarps], threads_in_group=nwarps)
    return v0, v1


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
            # ONE atomic for both tickets (two consecutive groups): one L2 round trip less
            # ahead of the first load than two back-to-back draws
            t0 = cute.arch.atomic_add(mCtr.iterator, cutlass.Int32(2), sem="relaxed", scope="gpu")
            t1 = t0 + 1
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
    kf = cutlass.Float32(0.0)                   # shift: the first element of the current slice
    if g_cur >= 0:
        kf = mX[g_cur, rank * sl].to(cutlass.Float32)
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

        # slice statistics in ONE pass: S1 = sum (x - k), S2 = sum (x - k)^2 around the slice's
        # first element k (padding vectors masked out), one two-value block reduction; then the
        # slice's (sum, M2) = (n k + S1, S2 - S1^2 / n) for the unchanged Chan merge
        z0 = cutlass.Uint32(zsm[0])
        wX = cute.recast_tensor(tXrX, cutlass.Uint32)   # ((4), 1, VPT) packed fp16 pairs
        if cutlass.const_expr(check_bounds):
            pred = _col_pred(thr, mX, tile, rank)
        s1 = cutlass.Float32(0.0)
        s2 = cutlass.Float32(0.0)
        for j in cutlass.range_constexpr(vpt):
            a1 = cutlass.Float32(0.0)
            a2 = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(VEC // 2):
                d0 = _w2f_lo(wX[i, 0, j], z0) - kf
                d1 = _w2f_hi(wX[i, 0, j], z0) - kf
                a1 = a1 + (d0 + d1)
                a2 = a2 + d0 * d0
                a2 = a2 + d1 * d1
            if cutlass.const_expr(check_bounds):
                if pred[0, 0, j]:
                    s1 = s1 + a1
                    s2 = s2 + a2
            else:
                s1 = s1 + a1
                s2 = s2 + a2
        s1, s2 = _cta_sum2(s1, s2, tpr, red_a, red_b)
        nf = cutlass.Float32(n_here)
        lsum = nf * kf + s1
        lmean = lsum / nf
        lm2 = cute.arch.fmax(s2 - s1 * (s1 / nf), cutlass.Float32(0.0))

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
        z2 = cutlass.Uint32(zsm[2])
        wA = cute.recast_tensor(tXrX, cutlass.Uint32)
        for j in cutlass.range_constexpr(vpt):
            # h = v / 2 = x (a / 2) + (c / 2); silu(v) = v sigmoid(v) = h + h tanh(h)
            a = rstd * w_v[j]
            ah = a * 0.5
            shh = (b_v[j] - mean * a) * 0.5
            for i in cutlass.range_constexpr(VEC // 2):
                h = _w2f_lo(wA[i, 0, j], z2) * ah + shh
                tYrY[2 * i, 0, j] = (h * _tanh_approx(h) + h).to(mY.element_type)
                h = _w2f_hi(wA[i, 0, j], z2) * ah + shh
                tYrY[2 * i + 1, 0, j] = (h * _tanh_approx(h) + h).to(mY.element_type)
        gY = cute.local_tile(mY, tile, (g_cur, rank))
        tYgY = thr.partition_D(gY)
        if cutlass.const_expr(check_bounds):
            cute.copy(tiled_copy, tYrY, tYgY, pred=_col_pred(thr, mX, tile, rank))
        else:
            cute.copy(tiled_copy, tYrY, tYgY)

        # next group: stage -> registers, then refill the stage with the group after it
        if g_next >= 0:
            cute.arch.mbarrier_wait(stage_bar, it % 2)
            kf = sX[0, 0].to(cutlass.Float32)   # the next slice's first element (broadcast)
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

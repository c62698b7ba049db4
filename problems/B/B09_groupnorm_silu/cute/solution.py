"""B09 groupnorm_silu, CuTe DSL expert solution: y = silu(group_norm(x, 32, w, b, eps)), NCHW fp16,
fp32 math, one fp16 rounding; one thread-block CLUSTER per (sample, group).

Memory-bound: x is read once and y written once; every element stays in registers between the
read and the write, so there is no second pass over global memory, even though one (sample,
group) statistic covers C/32 * H * W elements (262144 = 512 KB at the benchmark shape, far more
than one CTA can hold).

Layout: in NCHW a group (n, g) is one contiguous run of L = C/32 * H * W elements, so x is viewed
as a row-major (N * 32, L) matrix, one row per group (channel c = g * C/32 + col // (H * W)).

Design
  * One compile per shape set with static (N, C, H, W, groups, eps). Grid = N * 32 * K CTAs
    launched as clusters of K CTAs (cluster dims (K, 1, 1)): cluster i is group row i, CTA rank
    r = blockIdx.x % K holds slice r of SL = TPR * VPT * 8 consecutive elements in registers
    (thread t: VPT 128-bit vectors at columns (j * TPR + t) * 8, all loads issued before any
    math, so a warp reads 512 contiguous bytes per access).
    Benchmark (8 x 512 x 128 x 128, L = 262144 = 512 KB): K = 8, TPR = 512, VPT = 8,
    SL = 32768 (64 KB per CTA, 128 B per thread), 2048 CTAs = 256 clusters.
  * Statistics: each CTA reduces its slice's sum and M2 (squared deviations from the slice
    mean) over registers (two block reductions), thread 0 puts (sum, M2) in the CTA's shared
    memory, one cluster barrier (barrier.cluster.arrive.release / wait.acquire; ptxas emits a
    MEMBAR.ALL.GPU for the release, with no global stores outstanding yet), then lanes
    0..K-1 of every warp read the K partials through distributed shared memory (mapa +
    ld.shared::cluster) and merge them exactly (Chan: mean = sum / L,
    M2 = sum_r M2_r + n_r (mean_r - mean)^2), so the statistics are as good as a two-pass
    computation. No global scratch, no atomics, no zeroing kernel, one launch. A second
    (relaxed) cluster arrive once the partials are consumed, and its wait just before the CTA
    exits, keeps every CTA's shared memory alive until all its peers have read it. Clusters
    are co-scheduled by the hardware, so no forward-progress scheme is needed.
  * Affine + SiLU in fp32: per vector the channel's fp16 w, b are loaded before the reductions
    (their latency hides behind them; when a vector row of the CTA lies in one channel the
    index is uniform) and folded with the statistics into a = rstd * w, c = b - mean * a;
    v = x * a + c (one FMA), y = v * rcp(1 + exp2(-v * log2 e)) (ex2.approx + rcp.approx,
    relative error ~2^-22), one rounding to fp16 on the store. v << 0: exp2 -> inf, rcp -> 0,
    y = -0; v >> 0: y = v. rstd = rsqrt(M2 / L + eps) (rsqrt.approx, ~2^-23 relative).
  * Config (_config): K is the largest of 8, 4, 2, 1 (at most 8: the portable cluster size)
    such that a slice of TPR (power of two, 32..512) threads x VPT (1..8) vectors gives exactly
    K slices; at the check shapes: small K=1 (one CTA, no cluster barrier), ragged (L=1200)
    K=2 slices of 768 + 432, medium K=8 (1024 each, TPR 32 x VPT 4) -- so the checks exercise
    the cluster merge and the ragged last slice.
  * min_blocks_per_mp = 2 (ptxas register cap 64 for 512 threads: 32 data + 32 other); the
    M2 and apply phases convert fp16 -> fp32 through an opaque cvt (_h2f) so that no fp32 copy
    of the slice stays live: sm_90a cubin at the benchmark shape: 64 registers, 0 spill
    (120 bytes per thread spilled without it).
  * Ragged edges (L not a multiple of SL): predicated 128-bit loads/stores, one predicate per
    vector (H * W % 8 == 0, so a vector never straddles a row end or a channel); padding lanes
    are zero-filled, add 0 to the sum and are masked out of M2; the last slice's element count
    is used in the Chan merge; the channel index of padding vectors is clamped.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Why this beats a grid-wide barrier (arithmetic, H200 132 SMs): the previous design split a group
over 16 CTAs of 32 KB joined through global memory: every CTA first drew a ticket (one L2
atomic round trip, ~1 us, before its first load), then after its reductions did fence + atomic
+ acquire-spin on L2 (~1.5-3 us) and read the partials back from L2 (~0.7 us); with 4096 CTAs
in 10.3 waves of 396, a CTA lived ~10 us of which only its 32 KB load kept DRAM busy. Here the
ticket is gone, the barrier is the SM-to-SM cluster barrier (sub-us) and the partials come from
the peers' shared memory (~0.2 us). Per SM: 2 resident CTAs x 64 KB = 128 KB of loads in flight
at the start of a CTA (Little: ~35 KB needed per SM), 2048 CTAs / (~32 resident clusters x 8)
= 8 waves, no ragged tail. What is left: the per-CTA serial chain load -> 2 block reductions ->
cluster barrier -> SiLU -> stores, which the other resident CTA has to cover (the SiLU alone is
2 MUFU ops per element: 67.1M * 2 / (132 SMs * 16/clk) = 63.5K cycles per SM, ~34 us of the
57.6 us ideal, so it must overlap the other CTA's loads).
Limits: L <= 8 * 32768 (one cluster of 8 CTAs x 64 KB holds a group), N * C * H * W < 2**31;
build() raises ValueError beyond that.

Measured on the H200 (bench/h200/2026-12-02/diag-cute-wake200.json, full mode, one judge): 90.4 us
(IQR 2.5), 63.7% of the roofline ideal (57.6 us), 5.18x the fastest eager formulation, 1.90x
torch.compile; the previous grid-barrier design 104.8 us in the same run. The estimate was
70-80 us: the gain is 14.4 us, less than estimated. A SiLU through one tanh.approx (one MUFU op
instead of two) measured 89.4 us (IQR 3.2), within the noise, with a thinner tolerance margin
(tanh.approx's ~2^-11 relative error), so the exact SiLU above is kept. The same cluster design
in TIRx measured 94.9 us against the TIRx expert's grid-barrier design at 92.5 us
(bench/h200/2026-12-02/diag-wake200.json), so the TIRx expert keeps its grid barrier.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T, dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # fp16 per 128-bit access
VPT_MAX = 8        # 128-bit vectors per thread at most (64 values: 32 data registers)
TPR_MAX = 512      # threads per CTA at most
K_MAX = 8          # CTAs per cluster at most (portable cluster size)
THREADS_PER_SM = 1024   # occupancy target: 2 CTAs of 512 threads (ptxas cap 64 registers)
NEG_LOG2_E = -math.log2(math.e)


@dsl_user_op
def _ld_dsmem_f32(ptr, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 load through a distributed-shared-memory pointer (ld.shared::cluster.f32)."""
    return cutlass.Float32(llvm.load(T.f32(), ptr.to_llvm_ptr(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def _h2f(x, *, loc=None, ip=None) -> cutlass.Float32:
    """fp16 -> fp32 through an opaque (side-effecting) cvt.f32.f16: never merged with another
    conversion of the same element, so no fp32 copy of the slice stays live across the
    reductions and the cluster barrier (with plain conversions LLVM reused the first ones and
    ptxas spilled 120 bytes per thread at the 64-register cap; with this, no spill)."""
    bits = llvm.bitcast(T.i16(), x.ir_value(loc=loc, ip=ip), loc=loc, ip=ip)
    return cutlass.Float32(llvm.inline_asm(T.f32(), [bits], "cvt.f32.f16 $0, $1;", "=f,h",
                                           has_side_effects=True, loc=loc, ip=ip))


def _config(L: int) -> tuple[int, int, int]:
    """(TPR threads per CTA, VPT vectors per thread, K CTAs per group) for group length L.

    K is the largest power of two <= 8 for which some slice size SL = TPR * VPT * 8 cuts L
    into exactly K slices ((K - 1) * SL < L <= K * SL); TPR is the smallest that works.
    """
    for k in (8, 4, 2, 1):
        need = -(-L // k)                      # elements per slice at least
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


@cute.kernel
def _gn_silu_cluster_kernel(
    mX: cute.Tensor,            # (N * G, L) row-major fp16: one row per (sample, group)
    mW: cute.Tensor,            # (C,) fp16
    mB: cute.Tensor,            # (C,) fp16
    mY: cute.Tensor,            # (N * G, L) row-major fp16
    tiled_copy: cute.TiledCopy,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    n_slices: cutlass.Constexpr,
    hw: cutlass.Constexpr,
    cpg: cutlass.Constexpr,
    groups: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()

    smem = SmemAllocator()
    red_a = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_b = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    part = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2), byte_alignment=16)

    L = mX.shape[1]
    sl = tpr * vpt * VEC
    n_last = L - (n_slices - 1) * sl            # elements in the group's last slice

    # Cluster (K, 1, 1) over a 1-D grid: cluster = group row, rank in cluster = slice.
    grp = bidx // n_slices
    slc = bidx - grp * n_slices

    tile = (1, sl)
    gX = cute.local_tile(mX, tile, (grp, slc))
    gY = cute.local_tile(mY, tile, (grp, slc))
    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)                  # ((VEC), 1, VPT)
    tYgY = thr.partition_D(gY)
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, (grp, slc))
        tCc = thr.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        tXrX.fill(0.0)                          # padding adds 0 to the sum
        cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    else:
        cute.copy(tiled_copy, tXgX, tXrX)

    # Per-vector channel parameters, loaded now so their latency hides behind the reductions.
    g_chan0 = (grp % groups) * cpg              # first channel of the group
    w_v = []
    b_v = []
    if cutlass.const_expr(hw % (tpr * VEC) == 0):
        # every 128-bit vector j of the CTA lies in one channel, the same for all threads
        for j in cutlass.range_constexpr(vpt):
            ch = (slc * sl + j * tpr * VEC) // hw
            if cutlass.const_expr(check_bounds):
                if ch > cpg - 1:                # a vector row wholly past L: clamp (never stored)
                    ch = cpg - 1
            w_v.append(mW[g_chan0 + ch].to(cutlass.Float32))
            b_v.append(mB[g_chan0 + ch].to(cutlass.Float32))
    else:
        for j in cutlass.range_constexpr(vpt):
            col = slc * sl + (j * tpr + tidx) * VEC
            ch = col // hw
            if ch > cpg - 1:                    # padding vectors: clamp (never stored)
                ch = cpg - 1
            w_v.append(mW[g_chan0 + ch].to(cutlass.Float32))
            b_v.append(mB[g_chan0 + ch].to(cutlass.Float32))

    # Slice statistics: sum, then M2 around the slice mean (padding masked out).
    x = tXrX.load().to(cutlass.Float32)
    lsum = _cta_sum(x.reduce(cute.ReductionOp.ADD, 0.0, 0), tpr, red_a)
    n_here = sl
    if cutlass.const_expr(n_last != sl):
        if slc == n_slices - 1:
            n_here = n_last
    lmean = lsum / cutlass.Float32(n_here)
    m2 = cutlass.Float32(0.0)
    for j in cutlass.range_constexpr(vpt):
        s = cutlass.Float32(0.0)
        for i in cutlass.range_constexpr(VEC):
            d = _h2f(tXrX[i, 0, j]) - lmean
            s = s + d * d
        if cutlass.const_expr(check_bounds):
            if pred[0, 0, j]:
                m2 = m2 + s
        else:
            m2 = m2 + s
    lm2 = _cta_sum(m2, tpr, red_b)

    mean = lmean
    rstd = cute.math.rsqrt(lm2 * (1.0 / L) + eps, fastmath=True)
    if cutlass.const_expr(n_slices > 1):
        if tidx == 0:
            part[0] = lsum
            part[1] = lm2
        # Cluster barrier: release our partials, acquire the peers'.
        cute.arch.cluster_arrive(aligned=True)
        cute.arch.cluster_wait()
        # Every warp merges the K partials itself (lane r reads CTA r's shared memory).
        ps = cutlass.Float32(0.0)
        pm2 = cutlass.Float32(0.0)
        pn = cutlass.Float32(0.0)
        if lane < n_slices:
            rp = cute.arch.map_dsmem_ptr(part.iterator, lane)       # mapa.shared::cluster
            ps = _ld_dsmem_f32(rp)                                    # ld.shared::cluster
            pm2 = _ld_dsmem_f32(rp + 1)
            pn = cutlass.Float32(sl)
            if cutlass.const_expr(n_last != sl):
                if lane == n_slices - 1:
                    pn = cutlass.Float32(n_last)
        gmean = cute.arch.warp_reduction_sum(ps, threads_in_group=32) * (1.0 / L)
        term = cutlass.Float32(0.0)
        if lane < n_slices:
            dm = ps / pn - gmean
            term = pm2 + pn * dm * dm
        gm2 = cute.arch.warp_reduction_sum(term, threads_in_group=32)
        # The peers' partials have been consumed (gm2 depends on them): arrive now (relaxed: no
        # GPU-wide membar), wait just before exiting, so that every CTA keeps its shared
        # memory until all its peers have read it.
        cute.arch.cluster_arrive_relaxed(aligned=True)
        mean = gmean
        rstd = cute.math.rsqrt(gm2 * (1.0 / L) + eps, fastmath=True)

    # Affine + SiLU, one fp16 rounding.
    for j in cutlass.range_constexpr(vpt):
        a = rstd * w_v[j]
        sh = b_v[j] - mean * a
        for i in cutlass.range_constexpr(VEC):
            v = _h2f(tXrX[i, 0, j]) * a + sh
            e = cute.math.exp2(v * NEG_LOG2_E, fastmath=True)
            tYrY[i, 0, j] = (v * cute.math.rcp(e + 1.0, approx=True, ftz=True)).to(mY.element_type)

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)

    if cutlass.const_expr(n_slices > 1):
        cute.arch.cluster_wait()


@cute.jit
def _gn_silu_cluster_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    n_slices: cutlass.Constexpr,
    hw: cutlass.Constexpr,
    cpg: cutlass.Constexpr,
    groups: cutlass.Constexpr,
    eps: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((1, tpr), order=(1, 0))
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    # [N, C, H, W] contiguous -> (N * groups, L) row-major: the same memory, one row per group.
    rows = mX.shape[0] * groups
    L = cpg * hw
    grp_layout = cute.make_layout((rows, L), stride=(L, 1))
    mX2 = cute.make_tensor(mX.iterator, grp_layout)
    mY2 = cute.make_tensor(mY.iterator, grp_layout)
    check_bounds = L % (tpr * vpt * VEC) != 0
    _gn_silu_cluster_kernel(mX2, mW, mB, mY2, tiled_copy, tpr, vpt, n_slices, hw, cpg, groups,
                            eps, check_bounds).launch(
        grid=[rows * n_slices, 1, 1],
        block=[tpr, 1, 1],
        cluster=[n_slices, 1, 1],
        min_blocks_per_mp=min(32, THREADS_PER_SM // tpr),
        preferred_smem_carveout=-1,     # the driver default; given so no device query at compile
        stream=stream,
    )


_CACHE: dict = {}


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
    key = (N, C, H, W, groups, eps)
    fn = _CACHE.get(key)
    if fn is None:
        f16 = cutlass.Float16
        nchw = (N, C, H, W)
        x = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        w = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        b = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        y = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_gn_silu_cluster_host, x, w, b, y, stream, tpr, vpt, n_slices, hw, cpg,
                          groups, eps, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x, w, b, y) -> None:
        fn(x, w, b, y)

    return run

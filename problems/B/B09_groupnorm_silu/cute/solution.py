"""B09 groupnorm_silu, CuTe DSL expert solution: y = silu(group_norm(x, 32, w, b, eps)), NCHW fp16.

Memory-bound: x is read once and y written once; every element stays in registers between the
read and the write, so there is no second pass over global memory, even though one (sample,
group) statistic covers C/32 * H * W elements (262144 = 512 KB at the benchmark shape, far more
than one CTA can hold).

Layout: in NCHW a group (n, g) is one contiguous run of L = C/32 * H * W elements, so x is viewed
as a row-major matrix of N * 32 group rows of length L (channel c = g * C/32 + col // (H * W)).

Design
  * One compile per shape set with static (N, C, H, W, groups, eps).  A CTA of TPR threads owns
    one slice of SL = TPR * VPT * 8 consecutive elements of one group row: thread t holds VPT
    128-bit vectors (8 fp16) at columns (j * TPR + t) * 8, so a warp reads 512 contiguous bytes
    per access, and all VPT loads are issued before any math (64 B in flight per thread).
  * Small groups (L <= 16384): TPR is the smallest power of two (32..512) with VPT <= 4 and one
    CTA holds the whole group (S = 1 slice); the statistics are two block reductions (sum, then
    sum of squared deviations from the mean, both over registers), as in a row norm.
  * Large groups (L > 16384, the benchmark): TPR = 512, VPT = 4, SL = 16384 (one 32 KB channel
    plane at 128 x 128), and the group is split over S = ceil(L / SL) CTAs (16 at the benchmark,
    4096 CTAs in all).  Each CTA computes its slice's sum and M2 (sum of squared deviations from
    the slice mean; two block reductions over registers), thread 0 writes them to a scratch
    buffer of partials, publishes them (fence.acq_rel.gpu, then one atomic add on the group's
    arrival counter) and spins with ld.acquire.gpu until the other S - 1 CTAs of the group have
    arrived.  Warp 0 then merges the S partials exactly (Chan: mean = sum / L,
    M2 = sum_i M2_i + n_i (mean_i - mean)^2), so the statistics are as good as a two-pass
    computation, and the CTA normalizes the slice it still holds in registers.
    The barrier is the cooperative-groups one: the CTA of slice 0 adds 2^31 - (S - 1), the
    others add 1, so the sign bit of the counter flips exactly when the last one arrives and the
    low bits return to their start value: the counter never needs resetting.
  * Forward progress: a CTA waits only for the other CTAs of its own group.  Work is handed out
    by a ticket (one atomic add per CTA on a global counter when it starts, reset by the CTA
    that draws the last ticket; ticket t = (group, slice) = (t / S, t % S)), so tickets are
    drawn in start order: when a CTA waits, every lower ticket belongs to a running or finished
    CTA, only the group holding the highest drawn ticket can still miss members, and it can only
    be stuck if fewer than S CTAs fit on the GPU at once (S = 16, against 132 SMs x 3 CTAs).
    This does not rely on the hardware's block dispatch order.
  * Scratch: N * 32 * S * 2 fp32 partials (written in full every call) and N * 32 + 1 int32
    counters, allocated with torch.empty once, in build() when a GPU is present (else on the
    first run() call), and zeroed once there by a second, tiny CuTe kernel (so every run()
    launches the same single kernel); every call leaves the counters at their start value.
  * Affine + SiLU in fp32: per vector the channel's fp16 w, b are loaded (L1/L2 hits; at the
    benchmark shape one slice is one channel, so the index is uniform per CTA) and folded with
    the statistics into a = rstd * w, c = b - mean * a; v = x * a + c (one FMA),
    y = v * rcp(1 + exp2(-v * log2 e)) (ex2.approx + rcp.approx, relative error ~2^-22),
    one rounding to fp16 on the store.  v << 0: exp2 -> inf, rcp -> 0, y = -0; v >> 0: y = v.
    rstd = rsqrt(M2 / L + eps) (rsqrt.approx, ~2^-23 relative).
  * Ragged edges (L not a multiple of SL): predicated 128-bit loads/stores, one predicate per
    vector (H * W % 8 == 0, so a vector never straddles a row end or a channel); padding lanes
    are zero-filled, add 0 to the sum and are masked out of M2; the last slice's element count
    is used in the Chan merge; the channel index of padding vectors is clamped.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
What stands in the way of speed: each CTA has loads in flight only during its first phase; the
two block reductions, the wait for the group's other CTAs (started right next to it) and the
merge are latency that the other 2 resident CTAs of the SM (512 threads each) must cover
(registers capped at 40 so that 3 CTAs fit per SM: at most 96 KB of loads in flight per SM).
Unmeasured on the H200 so far.
Limits: S <= 32 (L <= 524288), N * C * H * W < 2**31 (32-bit offsets); build() raises ValueError
beyond that.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # fp16 per 128-bit access
VPT_MAX = 4        # max 128-bit vectors per thread (32 values of the slice)
TPR_MAX = 512      # threads per CTA at most
SL_MAX = VEC * VPT_MAX * TPR_MAX   # 16384 elements per CTA
S_MAX = 32         # CTAs per group at most (one partial per lane in the merge)
# Occupancy target: 1536 threads per SM (3 CTAs of 512), passed to ptxas as minctasm, which caps
# registers at 40 per thread (cubin compiled here at the benchmark shape: 40 registers, 6 words
# spilled to L1-resident local memory around the barrier; without the cap: 59 registers, 2 CTAs).
THREADS_PER_SM = 1536
NEG_LOG2_E = -math.log2(math.e)


def _config(L: int) -> tuple[int, int, int]:
    """(TPR threads per CTA, VPT vectors per thread, S CTAs per group) for group length L."""
    nvec = L // VEC
    if L > SL_MAX:
        return TPR_MAX, VPT_MAX, -(-L // SL_MAX)
    tpr = 32
    while tpr < TPR_MAX and -(-nvec // tpr) > VPT_MAX:
        tpr *= 2
    return tpr, -(-nvec // tpr), 1


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
        # Every group of nwarps lanes reads all partials: a butterfly over nwarps lanes leaves
        # the full sum in every lane.
        val = cute.arch.warp_reduction_sum(buf[lane % nwarps], threads_in_group=nwarps)
    return val


@cute.kernel
def _gn_silu_kernel(
    mX: cute.Tensor,            # (N * G, L) row-major fp16: one row per (sample, group)
    mW: cute.Tensor,            # (C,) fp16
    mB: cute.Tensor,            # (C,) fp16
    mY: cute.Tensor,            # (N * G, L) row-major fp16
    mPart: cute.Tensor,         # (N * G * S * 2,) fp32 scratch: (sum, M2) per slice
    mCnt: cute.Tensor,          # (N * G + 1,) int32 scratch: arrival counter per group, ticket
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
    warp = cute.arch.warp_idx()

    smem = SmemAllocator()
    red_a = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_b = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    stat = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2), byte_alignment=16)
    tick = smem.allocate_tensor(cutlass.Int32, cute.make_layout(1), byte_alignment=16)

    rows = mX.shape[0]
    L = mX.shape[1]
    sl = tpr * vpt * VEC
    n_last = L - (n_slices - 1) * sl            # elements in the group's last slice

    # Work item: (group row, slice).  With several slices per group it comes from a ticket, so
    # the CTAs of a group start in order (see the module docstring).
    item = bidx
    if cutlass.const_expr(n_slices > 1):
        if tidx == 0:
            t = cute.arch.atomic_add(mCnt.iterator + rows, cutlass.Int32(1), sem="relaxed", scope="gpu")
            if t == rows * n_slices - 1:        # the last ticket of this launch: reset for the next
                mCnt[rows] = cutlass.Int32(0)
            tick[0] = t
        cute.arch.sync_threads()
        item = tick[0]
    grp = item // n_slices
    slc = item - grp * n_slices

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
    if cutlass.const_expr(n_slices > 1 and hw % sl == 0):
        c = g_chan0 + (slc * sl) // hw          # the whole slice lies in one channel
        wc = mW[c].to(cutlass.Float32)
        bc = mB[c].to(cutlass.Float32)
        for j in cutlass.range_constexpr(vpt):
            w_v.append(wc)
            b_v.append(bc)
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
        d = tXrX[None, 0, j].load().to(cutlass.Float32) - lmean
        s = (d * d).reduce(cute.ReductionOp.ADD, 0.0, 0)
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
            base = (grp * n_slices + slc) * 2
            mPart[base] = lsum
            mPart[base + 1] = lm2
            cute.arch.fence_acq_rel_gpu()       # partials visible before the arrival
            inc = cutlass.Int32(1)
            if slc == 0:
                inc = cutlass.Int32(2**31 - (n_slices - 1))
            old = cute.arch.atomic_add(mCnt.iterator + grp, inc, sem="relaxed", scope="gpu")
            cur = old
            while (old ^ cur) >= 0:             # until the sign bit flips: all S arrived
                cur = cute.arch.load(mCnt.iterator + grp, cutlass.Int32, sem="acquire", scope="gpu")
            cute.arch.fence_acq_rel_gpu()
        cute.arch.sync_threads()
        if warp == 0:
            ps = cutlass.Float32(0.0)
            pm2 = cutlass.Float32(0.0)
            pn = cutlass.Float32(0.0)
            if lane < n_slices:
                pbase = (grp * n_slices + lane) * 2
                ps = cute.arch.load(mPart.iterator + pbase, cutlass.Float32, sem="relaxed", scope="gpu")
                pm2 = cute.arch.load(mPart.iterator + (pbase + 1), cutlass.Float32, sem="relaxed",
                                     scope="gpu")
                pn = cutlass.Float32(sl)
                if lane == n_slices - 1:
                    pn = cutlass.Float32(n_last)
            gmean = cute.arch.warp_reduction_sum(ps, threads_in_group=32) * (1.0 / L)
            term = cutlass.Float32(0.0)
            if lane < n_slices:
                dm = ps / pn - gmean
                term = pm2 + pn * dm * dm
            gm2 = cute.arch.warp_reduction_sum(term, threads_in_group=32)
            if lane == 0:
                stat[0] = gmean
                stat[1] = cute.math.rsqrt(gm2 * (1.0 / L) + eps, fastmath=True)
        cute.arch.sync_threads()
        mean = stat[0]
        rstd = stat[1]

    # Affine + SiLU, one fp16 rounding.
    for j in cutlass.range_constexpr(vpt):
        a = rstd * w_v[j]
        sh = b_v[j] - mean * a
        v = tXrX[None, 0, j].load().to(cutlass.Float32) * a + sh
        e = cute.math.exp2(v * NEG_LOG2_E, fastmath=True)
        tYrY[None, 0, j].store((v * cute.math.rcp(e + 1.0, approx=True, ftz=True)).to(mY.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _gn_silu_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    mPart: cute.Tensor,
    mCnt: cute.Tensor,
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
    _gn_silu_kernel(mX2, mW, mB, mY2, mPart, mCnt, tiled_copy, tpr, vpt, n_slices, hw, cpg, groups,
                    eps, check_bounds).launch(
        grid=[rows * n_slices, 1, 1],
        block=[tpr, 1, 1],
        min_blocks_per_mp=min(32, THREADS_PER_SM // tpr),
        preferred_smem_carveout=-1,     # the driver default; given so no device query at compile
        stream=stream,
    )


@cute.kernel
def _zero_kernel(mCnt: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    for i in cutlass.range(tidx, cute.size(mCnt), 256):
        mCnt[i] = cutlass.Int32(0)


@cute.jit
def _zero_host(mCnt: cute.Tensor, stream: cuda.CUstream):
    _zero_kernel(mCnt).launch(grid=[1, 1, 1], block=[256, 1, 1], stream=stream)


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
    rows = N * groups
    L = cpg * hw
    tpr, vpt, n_slices = _config(L)
    if n_slices > S_MAX:
        raise ValueError(f"group of {L} elements needs {n_slices} CTAs (max {S_MAX})")
    n_part = rows * n_slices * 2
    key = (N, C, H, W, groups, eps)
    fns = _CACHE.get(key)
    if fns is None:
        f16 = cutlass.Float16
        nchw = (N, C, H, W)
        x = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        w = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        b = make_fake_compact_tensor(f16, (C,), assumed_align=16)
        y = make_fake_compact_tensor(f16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        part = make_fake_compact_tensor(cutlass.Float32, (n_part,), assumed_align=16)
        cnt = make_fake_compact_tensor(cutlass.Int32, (rows + 1,), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_gn_silu_host, x, w, b, y, part, cnt, stream, tpr, vpt, n_slices, hw, cpg,
                          groups, eps, options="--enable-tvm-ffi")
        zero = cute.compile(_zero_host, cnt, stream, options="--enable-tvm-ffi")
        fns = (fn, zero)
        _CACHE[key] = fns
    fn, zero = fns
    scratch: list = []

    def init_scratch(device: torch.device) -> None:
        part_t = torch.empty((n_part,), dtype=torch.float32, device=device)
        cnt_t = torch.empty((rows + 1,), dtype=torch.int32, device=device)
        zero(cnt_t)                              # counters start at 0 (see the docstring)
        torch.cuda.current_stream().synchronize()
        scratch[:] = [part_t, cnt_t]

    # Set up here when a GPU is present, so that every run() launches the same single kernel
    # (a compile-only build has no GPU: then the first run() does it).
    if torch.cuda.is_available():
        init_scratch(torch.device("cuda", torch.cuda.current_device()))

    def run(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        if not scratch:
            init_scratch(x.device)
        fn(x, w, b, y, scratch[0], scratch[1])

    return run

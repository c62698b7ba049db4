"""C05 vocab_softmax, CuTe DSL expert solution: p[t, :] = softmax(x[t, :]) over V = 128256, bf16.

x and p are bf16 [T, V].  Memory-bound: x is read once and p written once (4 B per element); a
row (250 KB of bf16 at V = 128256) is held on chip between the read and the write, split over a
thread-block cluster (half of each CTA's slice in registers, half in shared memory), so there is
no second pass over global memory (an online pass followed by a normalizing pass would read x
twice: 3 bytes moved per 2 needed, at most 67% of the roofline).

Design
  * One compile per shape set with static (T, V).  A row is split over a cluster of CL CTAs
    (CL = 8 at V = 128256; cluster dims (CL, 1, 1), grid (CL, T)); CTA k of the cluster owns the
    column slice [k * 16384, (k + 1) * 16384): 256 threads x VPT = 8 128-bit vectors.  The slice
    is two half tiles of 8192 columns (thread vector j of a half tile at column
    (j * 256 + lane) * 8, so a warp reads and writes 512 contiguous bytes): half tile 2k is
    loaded into registers (128-bit loads, packed bf16, 16 registers), half tile 2k + 1 is copied
    global -> shared with cp.async.cg (16 B each, 16 KB of shared memory per CTA, no registers
    while in flight).  All copies and loads are issued before any math.
  * Shared-memory half: each thread reads back only the vectors it copied itself, so
    cp.async.wait_group 0 suffices (no CTA barrier); the register half's max is taken while the
    copies are still in flight.  Reads and write-backs are 128-bit (ld/st.shared.v4: a warp covers
    512 contiguous bytes, no bank conflicts): read 3 times and written once per CTA, 64 KB of
    shared traffic per CTA, far below 128 B/clock/SM.
  * Pass 1: CTA max with a tree of max.bf16x2 on the packed words (exact), warp butterflies, one
    partial per warp through shared memory.  Pass 2: e = exp2(x log2 e - m_cta log2 e) once per
    element, summed in fp32 (CTA sum likewise) and written back over x as packed bf16
    (cvt.rn.bf16x2.f32), in registers and in shared memory alike.
  * Cluster exchange: each CTA publishes (m_cta, s_cta) in its shared memory, a cluster barrier
    (arrive.release / wait.acquire) orders it, and lane l of every warp reads the pair of CTA
    rank l % CL through distributed shared memory (mapa + ld.shared::cluster); butterflies over
    CL lanes give M = max m_k and S = sum s_k exp2((m_k - M) log2 e) (the rescale of partial
    sums the statement asks for).  A second cluster arrive (release) after that combine, waited
    on at the very end, keeps every CTA's shared memory alive until its peers have read it.
  * Pass 3: p = e * c with the per-CTA scalar c = exp2((m_cta - M) log2 e) / S, one rounding to
    bf16, 128-bit stores.
  * Launch: MIN_CTAS_PER_SM = 6 (offline ptxas, CUDA 13.0: 40 registers, 8 bytes of spill;
    6 x 256 x 40 = 61K registers, 6 x ~17.8 KB = 107 KB of shared memory), shared-memory
    carveout left to the driver: up to 792 resident CTAs, 192 KB of rows on chip per SM.
    Grid 8 x 4096 = 32768 CTAs: 41.4 waves (tail < 2.5%).
  * Ragged edges: V % 8 == 0, so a vector is fully inside or outside the row; out-of-row vectors
    (the last CTA of the cluster) are predicated off: the register ones are filled with -inf
    before the load, the shared ones (cp.async predicates by zero-fill) are set to -inf after the
    wait by the thread that owns them (max unchanged, e = 0); out-of-row stores are predicated off.
  * Short rows (V <= 16384: the check shapes V = 256 and 1000) use CL = 1: no cluster, no
    shared-memory half, TPR = 32..256 threads, and 4 rows per CTA when one warp holds a row (rows
    past T predicated off).  The check shape V = 128256 (T = 9) runs the cluster path.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.

Measured on the H200 (bench/h200/2026-12-02/diag-cute-wake200.json, full mode, one judge):
553.7 us (IQR 5.1), 81.4% of the roofline ideal (450.6 us), 2.01x the fastest eager formulation
(softmax_bf16), 2.05x torch.compile.  The previous solution (whole slice in registers, 4 CTAs per
SM, the exponential computed twice) ran 635.5 us in the same run; with one exponential per
element but still all in registers it ran 593.5 us.  The TIRx expert (same design) runs 537.2 us
(bench/h200/2026-12-02/diag-wake200.json).
Why it is faster:
  * One ex2 per element instead of two (the store no longer recomputes the exponential):
    5.25e8 MUFU ops instead of 1.05e9, 125-140 us of SFU time instead of 250-280 us (16 per clock
    per SM, 132 SMs, 1.75-1.98 GHz), in per-CTA bursts during which that CTA has no loads in flight.
  * More CTAs in flight: per-SM throughput is N x 64 KB / L (N CTAs per SM, each moving 32 KB in
    and 32 KB out over its lifetime L: load latency, compute, the cluster barrier that waits for
    the slowest of 8 CTAs on other SMs, store issue).  Measured: N = 4, 635.5 us -> L ~ 10.2 us
    (previous); N = 4, 593.5 us -> L ~ 9.6 us (one ex2); N = 6, 553.7 us -> L ~ 13.4 us (this
    one): each CTA lives longer with six sharing the SM, but 1.5x as many overlap.

Numerics: fp32 math; e is rounded to bf16 once (relative error <= 2^-8) before the final rounding
of p: |p - p_exact| <= ~2^-7 relative, about one bf16 ulp (emulated in fp32 against reference.py
at every check shape: max relative error 7.8e-3, worst error / tolerance 0.11; rtol 3.2e-2,
atol 1e-2).
Limits: V <= 8 * 16384 = 131072, T * V < 2**31 (32-bit offsets), T < 65536 (grid y), and the last
CTA of a cluster must own a column; build() raises ValueError beyond.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit access
VPT_MAX = 8        # max 128-bit vectors per thread (64 values of the row, 32 packed registers)
TPR_MAX = 256      # threads per CTA when a row is split over a cluster
CL_MAX = 8         # largest portable cluster size
ROWS_SMALL = 4     # rows per CTA when one warp handles a row
MIN_CTAS_PER_SM = 6  # occupancy target of the cluster path (caps registers at 40)
NEG_INF2 = 0xFF80FF80  # two bf16 -inf
NACC = 4           # independent fp32 accumulators of the exp sum (add latency)
LOG2_E = math.log2(math.e)


def _config(V: int) -> tuple[int, int, int, int]:
    """(CL CTAs per row, TPR threads per CTA, VPT vectors per thread, ROWS rows per CTA)."""
    nvec = V // VEC
    tpr = 32
    while tpr < TPR_MAX and -(-nvec // tpr) > VPT_MAX:
        tpr *= 2
    cl = 1
    while cl < CL_MAX and -(-nvec // (cl * tpr)) > VPT_MAX:
        cl *= 2
    vpt = -(-nvec // (cl * tpr))
    if vpt > VPT_MAX:
        raise ValueError(f"V={V} too long for an on-chip row (max {VEC * VPT_MAX * TPR_MAX * CL_MAX})")
    rows = ROWS_SMALL if (tpr == 32 and cl == 1) else 1
    return cl, tpr, vpt, rows


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


@dsl_user_op
def _pack_bf16x2(hi: cutlass.Float32, lo: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Uint32:
    """Round two fp32 to bf16 (nearest even) and pack them, hi in the upper half (cvt.rn.bf16x2)."""
    return cutlass.Uint32(llvm.inline_asm(
        cutlass.Uint32.mlir_type,
        [cutlass.Float32(hi).ir_value(loc=loc, ip=ip), cutlass.Float32(lo).ir_value(loc=loc, ip=ip)],
        "cvt.rn.bf16x2.f32 $0, $1, $2;",
        "=r,f,f",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


@dsl_user_op
def _ld_peer_f32(smem_ptr, rank: cutlass.Int32, *, loc=None, ip=None) -> cutlass.Float32:
    """Load the fp32 at smem_ptr's offset in the shared memory of cluster CTA `rank` (DSMEM)."""
    addr = smem_ptr.toint(loc=loc, ip=ip)
    return cutlass.Float32(llvm.inline_asm(
        cutlass.Float32.mlir_type,
        [cutlass.Int32(addr).ir_value(loc=loc, ip=ip), cutlass.Int32(rank).ir_value(loc=loc, ip=ip)],
        "{\n\t.reg .b32 ra;\n\tmapa.shared::cluster.u32 ra, $1, $2;\n\t"
        "ld.shared::cluster.f32 $0, [ra];\n\t}",
        "=f,r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    ))


def _packed_max_word(words: cute.Tensor) -> cutlass.Uint32:
    """Lane-wise max.bf16x2 tree over a register tensor of packed bf16 pairs (Uint32 view)."""
    vals = [words[i] for i in range(cute.size(words))]
    while len(vals) > 1:
        nxt = [_bf16x2_max(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2 == 1:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


@cute.jit
def _group_reduce(val: cutlass.Float32, is_max: cutlass.Constexpr, tpr: cutlass.Constexpr,
                  buf: cute.Tensor):
    """Reduce one fp32 per thread over the TPR threads of a row; all of them get the result."""
    if cutlass.const_expr(is_max):
        val = cute.arch.warp_reduction_max(val, threads_in_group=min(tpr, 32))
    else:
        val = cute.arch.warp_reduction_sum(val, threads_in_group=min(tpr, 32))
    if cutlass.const_expr(tpr > 32):            # one row per CTA: combine the warps via smem
        nwarps = tpr // 32
        lane = cute.arch.lane_idx()
        warp = cute.arch.warp_idx()
        if lane == 0:
            buf[warp] = val
        cute.arch.sync_threads()
        v = buf[lane % nwarps]
        if cutlass.const_expr(is_max):
            val = cute.arch.warp_reduction_max(v, threads_in_group=nwarps)
        else:
            val = cute.arch.warp_reduction_sum(v, threads_in_group=nwarps)
    return val


@cute.jit
def _preds(thr, mX: cute.Tensor, tile, coord):
    """Per-vector in-bounds predicates of a thread's partition of tile `coord` of mX."""
    cX = cute.local_tile(cute.make_identity_tensor(mX.shape), tile, coord)
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


@cute.kernel
def _vocab_softmax_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mY: cute.Tensor,            # (T, V) row-major bf16
    tiled_copy: cute.TiledCopy,     # 128-bit ld/st.global <-> registers
    tiled_g2s: cute.TiledCopy,      # 128-bit cp.async.cg global -> shared (same thread layout)
    cl: cutlass.Constexpr,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    vs: cutlass.Constexpr,          # vectors per thread parked in shared memory (0 or vpt / 2)
    rows: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()           # bx: CTA rank in the row's cluster, by: row block

    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    pair = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2), byte_alignment=8)

    thr = tiled_copy.get_slice(tidx)
    if cutlass.const_expr(vs > 0):
        # The CTA's slice is two half tiles: half 2*bx in registers, half 2*bx + 1 in smem.
        tile = (rows, (vpt - vs) * tpr * VEC)
        creg = (by, 2 * bx)
        csm = (by, 2 * bx + 1)
    else:
        tile = (rows, vpt * tpr * VEC)
        creg = (by, bx)
        csm = (by, bx)
    tXgX = thr.partition_S(cute.local_tile(mX, tile, creg))     # ((VEC), 1, VR)
    tYgY = thr.partition_D(cute.local_tile(mY, tile, creg))
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)
    if cutlass.const_expr(check_bounds):
        pred = _preds(thr, mX, tile, creg)

    if cutlass.const_expr(vs > 0):
        sX = smem.allocate_tensor(mX.element_type,
                                  cute.make_layout((rows, vs * tpr * VEC), stride=(vs * tpr * VEC, 1)),
                                  byte_alignment=128)
        sW = cute.recast_tensor(sX, cutlass.Uint32)  # word (k * tpr + tidx) * 4 + j: thread's vector k
        thr_s = tiled_g2s.get_slice(tidx)
        tSgX = thr_s.partition_S(cute.local_tile(mX, tile, csm))
        tSsX = thr_s.partition_D(sX)
        tVsX = thr.partition_S(sX)                      # same slots, for 128-bit ld/st.shared
        atom_v = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type,
                                     num_bits_per_copy=128)
        fr = cute.make_fragment_like(tVsX[(None, None, 0)])  # one smem vector in registers
        fw = cute.recast_tensor(fr, cutlass.Uint32)
        tSgY = thr.partition_D(cute.local_tile(mY, tile, csm))
        tSrY = cute.make_fragment_like(tSgY)
        wY = cute.recast_tensor(tSrY, cutlass.Uint32)
        if cutlass.const_expr(check_bounds):
            pred_s = _preds(thr, mX, tile, csm)
            # Out-of-row slots: CuTe predicates cp.async by zero-fill (src-size 0), so they
            # are set to -inf after the wait below.
            cute.copy(tiled_g2s, tSgX, tSsX, pred=pred_s)
        else:
            cute.copy(tiled_g2s, tSgX, tSsX)
        cute.arch.cp_async_commit_group()

    if cutlass.const_expr(check_bounds):
        tXrX.fill(-math.inf)                            # padding: max unchanged, exp2 -> 0
        cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    else:
        cute.copy(tiled_copy, tXgX, tXrX)

    # Pass 1: CTA max on the packed bf16 pairs (registers, then the smem half once it landed).
    words = cute.recast_tensor(tXrX, cutlass.Uint32)
    wmax = _packed_max_word(words)
    if cutlass.const_expr(vs > 0):
        cute.arch.cp_async_wait_group(0)                # this thread's own copies are visible
        if cutlass.const_expr(check_bounds):
            # Slots past the row end (zero-filled by cp.async): -inf (max unchanged, e = 0),
            # written by the thread that owns them, after its copies have landed.
            col0 = (2 * bx + 1) * (vs * tpr * VEC)
            for k in cutlass.range_constexpr(vs):
                if col0 + (k * tpr + tidx) * VEC >= mX.shape[1]:
                    for j in cutlass.range_constexpr(4):
                        sW[0, (k * tpr + tidx) * 4 + j] = cutlass.Uint32(NEG_INF2)
        for k in cutlass.range_constexpr(vs):
            cute.copy(atom_v, tVsX[(None, None, k)], fr)
            for j in cutlass.range_constexpr(4):
                wmax = _bf16x2_max(wmax, fw[j])
    m_thr = cute.arch.fmax(_u32_as_f32(wmax << 16), _u32_as_f32(wmax & 0xFFFF0000))
    m_cta = _group_reduce(m_thr, True, tpr, red_max)
    # Pass 2: e = exp2(x log2 e - m_cta log2 e), summed in fp32 and written back over x as
    # packed bf16 (registers in place; the smem half in place too).
    m_l2 = m_cta * LOG2_E
    acc = [cutlass.Float32(0.0) for _ in range(NACC)]
    for i in cutlass.range_constexpr(cute.size(words)):
        w = words[i]
        e_lo = cute.math.exp2(_u32_as_f32(w << 16) * LOG2_E - m_l2, fastmath=True)
        e_hi = cute.math.exp2(_u32_as_f32(w & 0xFFFF0000) * LOG2_E - m_l2, fastmath=True)
        acc[i % NACC] = acc[i % NACC] + (e_lo + e_hi)
        words[i] = _pack_bf16x2(e_hi, e_lo)
    if cutlass.const_expr(vs > 0):
        for k in cutlass.range_constexpr(vs):
            cute.copy(atom_v, tVsX[(None, None, k)], fr)
            for j in cutlass.range_constexpr(4):
                w = fw[j]
                e_lo = cute.math.exp2(_u32_as_f32(w << 16) * LOG2_E - m_l2, fastmath=True)
                e_hi = cute.math.exp2(_u32_as_f32(w & 0xFFFF0000) * LOG2_E - m_l2, fastmath=True)
                acc[j] = acc[j] + (e_lo + e_hi)
                fw[j] = _pack_bf16x2(e_hi, e_lo)
            cute.copy(atom_v, fr, tVsX[(None, None, k)])
    part = acc[0]
    for a in acc[1:]:
        part = part + a
    s_cta = _group_reduce(part, False, tpr, red_sum)

    scale = 1.0 / s_cta                                 # p = e * scale
    if cutlass.const_expr(cl > 1):
        # Publish (m_cta, s_cta), then combine the CL pairs of the row through DSMEM.
        if tidx == 0:
            pair[0] = m_cta
            pair[1] = s_cta
        cute.arch.cluster_arrive()                      # release: the pair is visible
        cute.arch.cluster_wait()                        # acquire: all pairs of the row are
        lane = cute.arch.lane_idx()
        rank = cutlass.Int32(lane % cl)
        m_k = _ld_peer_f32(pair.iterator, rank)
        s_k = _ld_peer_f32(pair.iterator + 1, rank)
        row_max = cute.arch.warp_reduction_max(m_k, threads_in_group=cl)
        row_sum = cute.arch.warp_reduction_sum(
            s_k * cute.math.exp2((m_k - row_max) * LOG2_E, fastmath=True), threads_in_group=cl)
        cute.arch.cluster_arrive()                      # release: done reading the peers' pairs
        scale = cute.math.exp2((m_cta - row_max) * LOG2_E, fastmath=True) / row_sum

    # Pass 3: p = e * scale (scale = exp2((m_cta - M) log2 e) / S), one rounding to bf16.
    pf = cute.make_fragment_like(tYrY, cutlass.Float32)
    for i in cutlass.range_constexpr(cute.size(words)):
        w = words[i]
        pf[2 * i] = _u32_as_f32(w << 16) * scale
        pf[2 * i + 1] = _u32_as_f32(w & 0xFFFF0000) * scale
    tYrY.store(pf.load().to(mY.element_type))
    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)
    if cutlass.const_expr(vs > 0):
        for k in cutlass.range_constexpr(vs):
            cute.copy(atom_v, tVsX[(None, None, k)], fr)
            for j in cutlass.range_constexpr(4):
                w = fw[j]
                wY[k * 4 + j] = _pack_bf16x2(_u32_as_f32(w & 0xFFFF0000) * scale,
                                             _u32_as_f32(w << 16) * scale)
        if cutlass.const_expr(check_bounds):
            cute.copy(tiled_copy, tSrY, tSgY, pred=pred_s)
        else:
            cute.copy(tiled_copy, tSrY, tSgY)
    if cutlass.const_expr(cl > 1):
        cute.arch.cluster_wait()                        # peers finished reading this CTA's pair


@cute.jit
def _vocab_softmax_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    cl: cutlass.Constexpr,
    tpr: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    vs: cutlass.Constexpr,
    rows: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    atom_g2s = cute.make_copy_atom(
        cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.cpasync.LoadCacheMode.GLOBAL),
        mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((rows, tpr), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    tiled_g2s = cute.make_tiled_copy_tv(atom_g2s, thr_layout, val_layout)
    T = mX.shape[0]
    V = mX.shape[1]
    check_bounds = (T % rows != 0) or (V % (cl * vpt * tpr * VEC) != 0)
    kernel = _vocab_softmax_kernel(mX, mY, tiled_copy, tiled_g2s, cl, tpr, vpt, vs, rows,
                                   check_bounds)
    if cutlass.const_expr(cl > 1):
        # MIN_CTAS_PER_SM CTAs per SM; carveout -1 = the driver's default split (also avoids a
        # device query at compile time).
        kernel.launch(grid=[cl, (T + rows - 1) // rows, 1], block=[rows * tpr, 1, 1],
                      cluster=[cl, 1, 1], stream=stream,
                      min_blocks_per_mp=MIN_CTAS_PER_SM, preferred_smem_carveout=-1)
    else:
        kernel.launch(grid=[1, (T + rows - 1) // rows, 1], block=[rows * tpr, 1, 1],
                      stream=stream)


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(x, p)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    if T >= 65536:
        raise ValueError("T must stay below 65536 (grid y dimension)")
    cl, tpr, vpt, rows = _config(V)
    if (cl - 1) * tpr * vpt >= V // VEC:
        # An all-padding CTA would form -inf - (-inf) in its local sum.
        raise ValueError(f"V={V}: the last CTA of the cluster would own no column")
    key = (T, V)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        vs = vpt // 2 if (cl > 1 and vpt % 2 == 0) else 0  # cluster path: half the slice in smem
        fn = cute.compile(_vocab_softmax_host, x, y, stream, cl, tpr, vpt, vs, rows,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, p: torch.Tensor) -> None:
        fn(x, p)

    return run

"""C05 vocab_softmax, CuTe DSL expert solution: p[t, :] = softmax(x[t, :]) over V = 128256, bf16.

x and p are bf16 [T, V].  Memory-bound: x is read once and p written once (4 B per element); a
row (250 KB of bf16 at V = 128256) is held on chip between the read and the write, split over a
thread-block cluster (half of each CTA's chunk in registers, half in shared memory), so there is
no second pass over global memory (an online pass followed by a normalizing pass would read x
twice: 3 bytes moved per 2 needed, at most 67% of the roofline).

Design (the cluster path, V > 16384)
  * One compile per shape set with static (T, V).  A row of NV = V / 8 16-byte vectors is split
    over a cluster of CL CTAs (CL = 8 at V = 128256; cluster dims (CL, 1, 1), grid (CL, T)) in
    balanced chunks of CH = ceil(NV / CL) vectors (2004 at V = 128256: 16032 = 8 x 2004, every
    CTA moves the same 64 KB).  Thread tid of CTA rank owns VPT = 8 slots, slot k being vector
    rank * CH + k * 256 + tid of the row (a warp access covers 512 contiguous bytes); slots
    k >= lim = min(CH, NV - rank * CH) (44 of 2048 per CTA) are not loaded, hold -inf (max
    unchanged, e = 0) and are not stored.  Slots 0..3 are loaded into registers with explicit
    ld.global.nc.v4.b32 (16 packed registers), slots 4..7 are copied global -> shared with
    cp.async.cg (16 B each, 16 KB of shared memory per CTA, no registers while in flight); all
    copies and loads are issued before any math.
  * Shared-memory half: each thread reads back only the vectors it copied (or -inf-filled)
    itself, so cp.async.wait_group 0 suffices (no CTA barrier); the register half's max is taken
    while the copies are still in flight.  Reads and write-backs are explicit
    ld/st.shared.v4.b32 (a warp covers 512 contiguous bytes, no bank conflicts), 3 reads and one
    write per vector, far below 128 B/clock/SM.
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
    bf16, explicit st.global.v4.b32 of the in-chunk slots.
  * Launch: MIN_CTAS_PER_SM = 6, shared-memory carveout left to the driver (-1, also avoids a
    device query at compile time).  Offline ptxas (CUDA 13.0, benchmark shape): 40 registers,
    no spill, 6 x 256 x 40 = 61K registers, 6 x ~17.6 KB of shared memory: up to 792 resident
    CTAs.  Grid 8 x 4096 = 32768 CTAs.
  * Short rows (V <= 16384: the check shapes V = 256 and 1000) run a separate kernel with CL = 1
    (no cluster, no shared-memory half, TPR = 32..256 threads, 4 rows per CTA when one warp holds
    a row, rows past T predicated off, CuTe predicate tensors on the ragged edge).  The check
    shape V = 128256 (T = 9) runs the cluster kernel.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.

Why this cluster kernel (against the previous expert, the same design otherwise)
  * Balanced chunks.  The previous expert gave CTA k the tile-aligned slice [k * 16384,
    (k + 1) * 16384): CTAs 0..6 owned 2048 vectors, CTA 7 only 1696.  The cluster barrier makes
    every CTA of a row wait for the slowest, so the row's lifetime follows the largest chunk;
    here every CTA owns 2004 (-2.1% of critical-path work), the TIRx expert's layout.  Cost:
    chunk starts are 64-byte aligned (32064 B per chunk), so a warp's 512-byte access touches 5
    instead of 4 128-byte lines in odd CTAs.
  * The TIRx expert's memory ops: ld.global.nc (LDG.E.128.CONSTANT, read-only path) instead of
    plain LDG.E.128 for the register half; one 128-bit access per vector with its own slot
    predicate instead of CuTe's identity-tensor predicate fragments (the benchmark shape took
    the predicated path in every CTA, since V % 131072 != 0); no register spill (the previous
    expert: 40 registers with 8 bytes of spill, 2 STL / 2 LDL per thread).
  * One ex2 per element, half the row in shared memory and 6 CTAs per SM (kept from earlier
    experts): measured 635.5 us with two ex2 per element and 4 CTAs per SM, 593.5 us with one
    ex2 and all in registers, 553.7 us with 6 CTAs per SM
    (bench/h200/2026-12-02/diag-cute-wake200.json).

Measured on the H200 (bench/h200/2026-12-02c/tune-r5a.json, full mode, one judge, correct):
537.3 us (IQR 3.2), against 555.3 us (IQR 3.9) for the previous expert
(bench/h200/2026-12-02b/solutions-CF-r3.md); the estimate was 535-545 us.  In the one-run table
bench/h200/2026-12-02c/solutions-CF-r5.md: 537.6 us (IQR 3.0), 83.7% of the 450.1 us roofline
ideal, 2.07x eager (softmax_bf16), 2.10x torch.compile, 1.03x faster than the previous expert;
the TIRx expert 523.7 us there (it also drops the CTA barriers, each thread working relative
to its own max, and starts every chunk on a 128-byte line).

Numerics: fp32 math; e is rounded to bf16 once (relative error <= 2^-8) before the final
rounding of p: |p - p_exact| <= ~2^-7 relative, about one bf16 ulp.  Emulated in fp32 with the
balanced split at the check shape T = 9, V = 128256: worst error / tolerance 0.04 (rtol 3.2e-2,
atol 1e-2); slot coverage (every vector exactly once) checked for V = 128256 and other cluster
shapes.
Limits: V <= 8 * 16384 = 131072, T * V < 2**31 (32-bit offsets), T < 65536 (grid y), and the last
CTA of a cluster must own a vector; build() raises ValueError beyond.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T as IR
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


@dsl_user_op
def _ldg_nc(addr: cutlass.Int64, *, loc=None, ip=None) -> list:
    """One 16-byte read-only global load (ld.global.nc.v4.b32) as four packed bf16 pairs."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([IR.i32(), IR.i32(), IR.i32(), IR.i32()]),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        "ld.global.nc.v4.b32 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(IR.i32(), res, [k], loc=loc, ip=ip)) for k in range(4)]


@dsl_user_op
def _stg(addr: cutlass.Int64, w: list, *, loc=None, ip=None) -> None:
    """One 16-byte global store (st.global.v4.b32) of four 32-bit words."""
    llvm.inline_asm(
        None,
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)]
        + [cutlass.Uint32(x).ir_value(loc=loc, ip=ip) for x in w],
        "st.global.v4.b32 [$0], {$1, $2, $3, $4};",
        "l,r,r,r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


@dsl_user_op
def _lds(addr: cutlass.Int32, *, loc=None, ip=None) -> list:
    """One 16-byte shared-memory load (ld.shared.v4.b32; addr: shared-window byte address)."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([IR.i32(), IR.i32(), IR.i32(), IR.i32()]),
        [cutlass.Int32(addr).ir_value(loc=loc, ip=ip)],
        "ld.shared.v4.b32 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(IR.i32(), res, [k], loc=loc, ip=ip)) for k in range(4)]


@dsl_user_op
def _sts(addr: cutlass.Int32, w: list, *, loc=None, ip=None) -> None:
    """One 16-byte shared-memory store (st.shared.v4.b32) of four 32-bit words."""
    llvm.inline_asm(
        None,
        [cutlass.Int32(addr).ir_value(loc=loc, ip=ip)]
        + [cutlass.Uint32(x).ir_value(loc=loc, ip=ip) for x in w],
        "st.shared.v4.b32 [$0], {$1, $2, $3, $4};",
        "r,r,r,r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


@dsl_user_op
def _cp_async16(saddr: cutlass.Int32, gaddr: cutlass.Int64, *, loc=None, ip=None) -> None:
    """16-byte global -> shared copy through L2 only (cp.async.cg), no registers in flight."""
    llvm.inline_asm(
        None,
        [cutlass.Int32(saddr).ir_value(loc=loc, ip=ip), cutlass.Int64(gaddr).ir_value(loc=loc, ip=ip)],
        "cp.async.cg.shared.global [$0], [$1], 16;",
        "r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


def _ld_into(xr: cute.Tensor, k: int, addr) -> None:
    """Register slot k of the thread: 16-byte load into words 4k..4k+3 of xr."""
    w = _ldg_nc(addr)
    for i in range(4):
        xr[4 * k + i] = w[i]


def _neg_inf4() -> list:
    return [cutlass.Uint32(NEG_INF2) for _ in range(4)]


def _exp_pack(w: list, m_l2, acc: list) -> list:
    """e = 2^(x log2 e - m_l2) of one vector (4 packed words): added to acc, returned packed."""
    out = []
    for j in range(4):
        e_lo = cute.math.exp2(_u32_as_f32(w[j] << 16) * LOG2_E - m_l2, fastmath=True)
        e_hi = cute.math.exp2(_u32_as_f32(w[j] & 0xFFFF0000) * LOG2_E - m_l2, fastmath=True)
        acc[j] = acc[j] + (e_lo + e_hi)
        out.append(_pack_bf16x2(e_hi, e_lo))
    return out


def _scale_pack(w: list, scale) -> list:
    """p = e * scale of one vector (4 packed words), rounded to packed bf16."""
    return [_pack_bf16x2(_u32_as_f32(x & 0xFFFF0000) * scale, _u32_as_f32(x << 16) * scale)
            for x in w]


@cute.kernel
def _cluster_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mY: cute.Tensor,            # (T, V) row-major bf16
    cl: cutlass.Constexpr,      # CTAs per row (cluster size)
    tpr: cutlass.Constexpr,     # threads per CTA
    vr: cutlass.Constexpr,      # vectors per thread in registers
    vs: cutlass.Constexpr,      # vectors per thread in shared memory
    ch: cutlass.Constexpr,      # vectors per CTA chunk: ceil(NV / cl)
    nv: cutlass.Constexpr,      # 16-byte vectors per row
):
    tidx, _, _ = cute.arch.thread_idx()
    rank, row, _ = cute.arch.block_idx()        # rank: CTA rank in the row's cluster

    smem = SmemAllocator()
    red_max = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    red_sum = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    pair = smem.allocate_tensor(cutlass.Float32, cute.make_layout(2), byte_alignment=8)

    lim = cutlass.min(cutlass.Int32(ch), cutlass.Int32(nv) - rank * ch)   # vectors of this chunk
    # thread's slot k: chunk vector k * tpr + tidx, row vector rank * ch + k * tpr + tidx
    off0 = (cutlass.Int64(row) * nv + cutlass.Int64(rank * ch + tidx)) * 16
    xbase = mX.iterator.toint() + off0
    ybase = mY.iterator.toint() + off0
    step = tpr * 16

    if cutlass.const_expr(vs > 0):
        # shared slot k of a thread: bytes [(k * tpr + tidx) * 16, +16) (read back by itself only)
        sX = smem.allocate_tensor(cutlass.Uint32, cute.make_layout(vs * tpr * 4), byte_alignment=128)
        sbase = sX.iterator.toint() + tidx * 16
        for k in cutlass.range_constexpr(vs):
            if (vr + k) * tpr + tidx < lim:
                _cp_async16(sbase + k * step, xbase + (vr + k) * step)
            else:
                _sts(sbase + k * step, _neg_inf4())     # max unchanged, e = 0
        cute.arch.cp_async_commit_group()

    xr = cute.make_rmem_tensor((vr * 4,), cutlass.Uint32)
    xr.fill(NEG_INF2)
    for k in cutlass.range_constexpr(vr):
        if k * tpr + tidx < lim:
            _ld_into(xr, k, xbase + k * step)

    # Pass 1: CTA max on the packed bf16 pairs (registers, then the smem half once it landed).
    wmax = _packed_max_word(xr)
    if cutlass.const_expr(vs > 0):
        cute.arch.cp_async_wait_group(0)                # this thread's own copies are visible
        for k in cutlass.range_constexpr(vs):
            fw = _lds(sbase + k * step)
            for j in cutlass.range_constexpr(4):
                wmax = _bf16x2_max(wmax, fw[j])
    m_thr = cute.arch.fmax(_u32_as_f32(wmax << 16), _u32_as_f32(wmax & 0xFFFF0000))
    m_cta = _group_reduce(m_thr, True, tpr, red_max)
    # Pass 2: e = exp2(x log2 e - m_cta log2 e), summed in fp32, written back over x (packed).
    m_l2 = m_cta * LOG2_E
    acc = [cutlass.Float32(0.0) for _ in range(4)]
    for k in cutlass.range_constexpr(vr):
        e = _exp_pack([xr[4 * k + j] for j in range(4)], m_l2, acc)
        for j in cutlass.range_constexpr(4):
            xr[4 * k + j] = e[j]
    if cutlass.const_expr(vs > 0):
        for k in cutlass.range_constexpr(vs):
            _sts(sbase + k * step, _exp_pack(_lds(sbase + k * step), m_l2, acc))
    s_cta = _group_reduce((acc[0] + acc[1]) + (acc[2] + acc[3]), False, tpr, red_sum)

    # Cluster exchange of (m_cta, s_cta) through DSMEM.
    if tidx == 0:
        pair[0] = m_cta
        pair[1] = s_cta
    cute.arch.cluster_arrive()                          # release: the pair is visible
    cute.arch.cluster_wait()                            # acquire: all pairs of the row are
    lane = cute.arch.lane_idx()
    peer = cutlass.Int32(lane % cl)
    m_k = _ld_peer_f32(pair.iterator, peer)
    s_k = _ld_peer_f32(pair.iterator + 1, peer)
    row_max = cute.arch.warp_reduction_max(m_k, threads_in_group=cl)
    row_sum = cute.arch.warp_reduction_sum(
        s_k * cute.math.exp2((m_k - row_max) * LOG2_E, fastmath=True), threads_in_group=cl)
    cute.arch.cluster_arrive()                          # release: done reading the peers' pairs
    scale = cute.math.exp2((m_cta - row_max) * LOG2_E, fastmath=True) / row_sum

    # Pass 3: p = e * scale, one rounding to bf16, 16-byte stores of the in-chunk slots.
    for k in cutlass.range_constexpr(vr):
        if k * tpr + tidx < lim:
            _stg(ybase + k * step, _scale_pack([xr[4 * k + j] for j in range(4)], scale))
    if cutlass.const_expr(vs > 0):
        for k in cutlass.range_constexpr(vs):
            if (vr + k) * tpr + tidx < lim:
                _stg(ybase + (vr + k) * step, _scale_pack(_lds(sbase + k * step), scale))
    cute.arch.cluster_wait()                            # peers finished reading this CTA's pair


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
    if cutlass.const_expr(cl > 1):
        # Balanced chunks of ceil(NV / CL) vectors per CTA.  MIN_CTAS_PER_SM CTAs per SM;
        # carveout -1 = the driver's default split (also avoids a device query at compile time).
        nv = V // VEC
        kernel = _cluster_kernel(mX, mY, cl, tpr, vpt - vs, vs, (nv + cl - 1) // cl, nv)
        kernel.launch(grid=[cl, T, 1], block=[tpr, 1, 1],
                      cluster=[cl, 1, 1], stream=stream,
                      min_blocks_per_mp=MIN_CTAS_PER_SM, preferred_smem_carveout=-1)
    else:
        check_bounds = (T % rows != 0) or (V % (cl * vpt * tpr * VEC) != 0)
        kernel = _vocab_softmax_kernel(mX, mY, tiled_copy, tiled_g2s, cl, tpr, vpt, vs, rows,
                                       check_bounds)
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
    if V // VEC - (cl - 1) * (-(-(V // VEC) // cl)) <= 0:
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

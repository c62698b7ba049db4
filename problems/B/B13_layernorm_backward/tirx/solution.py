"""B13 layernorm_backward, TIRx (tvm_tirx 0.1.0a4) expert solution: dx (bf16), dw and db (fp32)
of y = (x - mean) * rstd * w + b, mean and rstd = rsqrt(var + eps) recomputed from x.

Two kernels per call; one read of dy and x, one write of dx (the memory-bound minimum), plus a
small fp32 scratch of per-CTA partial dw and db sums (4.3 MB at the benchmark shape).

* Kernel 1 (rows), persistent: ONE CTA per SM (G = 132 at the benchmark) of NG = RES_THREADS /
  THREADS row groups (H = 4096: 3 groups of 128 threads, 384 threads, __launch_bounds__(384, 1):
  at most 168 registers; ptxas 13 on the NVRTC PTX of this file: 168 registers, no spills).  A
  group has its own cp.async ring (4 slots of 16 KB), its own reduction buffer and its own named
  barrier (bar.sync 1 + group, THREADS), so the three groups interleave on the SM as three
  independent CTAs would (three rows are reduced at once per SM).  Slot s = cta * NG + group
  takes rows s, s + 396, ... (41 or 42 rows).
* Loads: dy and x go global -> shared with 16-byte ``cp.async.cg`` (L2 only) into each group's
  ring of STAGES row slots (as many as 216 KB per SM allows for the NG groups, at most 8), one
  commit group per row, so STAGES - 1 rows per group (9 per SM, 144 KB at H = 4096) are in
  flight while a row is reduced.  Thread tid of a group copies vectors tid + k * THREADS
  (k < VPT; 8 bf16 each, 512 contiguous bytes per warp instruction) and later reads back exactly
  those vectors, so the ring needs only ``cp.async.wait_group`` before a row is read.  The ring
  is declared as 32-bit words (2 bf16 each), so the combine can reuse it for fp32 bits.  w is
  loaded once per thread into registers (``ld.global.nc``): a thread always owns the same
  columns.
* One fused group reduction per row of four fp32 sums: x, x^2, g = dy * w and g * x (a balanced
  tree per thread, warp shuffles, one shared-memory step with the group barrier; the group's
  buffer alternates between even and odd rows, so the next row's writes cannot race this row's
  reads).  One-pass statistics: mean = sum(x) / H, var = max(sum(x^2) / H - mean^2, 0),
  rstd = rsqrt(var + eps) (rsqrt.approx), and sum(g * xhat) = rstd * (sum(g * x) - mean * sum(g)).
  Then
      dx = rstd * g + (-rstd * mean(g) + xhat * (-rstd * mean(g * xhat))),
      xhat = x * rstd + (-mean * rstd)   (one FFMA),
  in fp32 (the row is read again from shared memory after the barrier), rounded once to bf16
  per pair (``cvt.rn.bf16x2.f32``), ``st.global.v4.b32``.
* dw and db, deterministic and without atomics: each thread accumulates dy * xhat and dy for its
  columns over its slot's rows in fp32 registers (rows in increasing order).  After the row loop
  the groups' accumulators are combined in shared memory (the now idle rings: cp.async.wait_group
  0, barrier, groups 1..NG-1 park theirs, barrier, group 0 adds them in group order) and group 0
  writes ONE partial row per plane per CTA: row `cta` of P[0] (dw) and P[1] (db), P[2, G, H]
  (allocated once, on the first call, and reused; every element of it is rewritten by every
  call).  Kernel 2 (grid.y = 2 planes; H = 4096: 256 x 2 CTAs) reduces each plane over its G rows
  in a fixed order: 4 float4 column groups x 64 slices per CTA, slice s sums rows s, s + 64, ...
  (3 rows, loaded in one batch with ``ld.global.cg``, L2 only), then a pairwise tree over the
  slices in shared memory (a barrier after each step), and one thread per column group stores
  dw or db.  Same build, same G, same order: bit-identical dw and db on every call.
* Why one CTA per SM: the partials are written in one burst after the last row and read back
  right after by kernel 2, both on the serial tail; one partial row per SM instead of one per
  128-thread CTA cuts them from 12.8 MB (2 x 391 rows) to 4.3 MB, and kernel 2 reads 3 rows per
  slice instead of 7.
* Kernel 2 is a programmatic dependent launch of kernel 1 (LaunchConfig
  programmatic_stream_serialization; kernel 1 executes griddepcontrol.launch_dependents after
  its row loop, kernel 2 griddepcontrol.wait before its first read of P), so its launch and CTA
  placement overlap kernel 1's tail.
* Ragged edges: tail vectors (H / 8 not a multiple of THREADS) are neither copied, read back nor
  stored; their registers hold zeros, so they add nothing to the row sums.  Rows past T are
  skipped (uniform over a row group, so the group barrier is safe); slots with no rows (T = 4:
  12 slots, 4 rows) skip every iteration and add zeros in the combine.  Kernel 2 predicates rows
  past G and column groups past H / 4.
* Shapes are static per build: THREADS and VPT from H (about VPT_TARGET = 4 vectors of each
  tensor per thread: H = 4096 -> 128 threads x 3 groups; H = 1000 -> 32 threads, VPT = 4, 12
  groups; H = 128 or 256 -> one warp, 12 groups).  Int32 indexing: T * H < 2^31.
* Numerics (CPU emulation of this arithmetic and reduction order against reference.py, 2
  trials of every shape set, x mean up to 7.5 standard deviations): worst error / bound 0.215
  for dx (its one bf16 rounding), 0.041 for dw, 0.0007 for db.

Measured on the H200 (bench/h200/2026-12-02b/tune-r3.json; full mode, one judge): 111.6 us
(IQR 2.1); the previous expert (3 CTAs of 128 threads per SM, G = 391, one partial row per CTA)
116.5 us (IQR 2.1) 40 minutes earlier on the same machine (bench/h200/2026-12-02b/solutions-AB.md).
In the one-run expert table with this code (bench/h200/2026-12-02b/solutions-AB-r3.md): 111.6 us
(IQR 1.9), 77.4% of the 86.4 us roofline ideal, 3.11x the fastest eager formulation, 2.28x
torch.compile; the CuTe expert (the same one-CTA-per-SM structure, 2 groups of 256 threads)
111.5 us.  The estimate was ~112-113 us: it matches.  The 80% target (107.9 us) is not reached.
"""
import torch
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
VPT_TARGET = 4  # vectors of each tensor per thread aimed for (H = 4096: 128 threads)
MAX_THREADS = 1024
MAX_VPT = 8  # cap on vectors per thread (the shared-memory ring bounds H long before)
NSM = 132  # H200 SMs
RES_THREADS = 384  # threads of the one resident CTA per SM (at most 65536 / 384 -> 168 registers)
MAX_GROUPS = 15  # row groups per CTA (named barrier ids 1 .. 15)
SMEM_PER_SM = 216 * 1024  # shared memory for the rings of the NG row groups of the CTA
MAX_STAGES = 8
CP_ASYNC = "cp.async.cg.shared.global"  # dy, x: 16 bytes global -> shared, L2 only
CP_COMMIT = "cp.async.commit_group"
CP_WAIT = "cp.async.wait_group"
BAR_SYNC = "bar.sync"  # named barrier of one row group: bar.sync id, THREADS
W_LOAD = "ld.global.nc.v4.b32"
DX_STORE = "st.global.v4.b32"
P_STORE = "st.global.v4.f32"
P_LOAD = "ld.global.cg.v4.f32"  # L2 only: P was written by kernel 1, still running at launch
F_STORE = "st.global.v4.f32"
# kernel 2 (column reduction of the partials)
R_THREADS = 256
R_COLS = 4  # float4 column groups per CTA (H = 4096: 256 x 2 CTAs)
R_SLICES = R_THREADS // R_COLS  # row slices per CTA
LOG_SLICES = R_SLICES.bit_length() - 1  # steps of the slice tree (R_SLICES is a power of two)
R_UNROLL = 8  # partial rows loaded per thread before they are added (132 rows / 64 slices: 3)
USE_PDL = True  # kernel 2 is a programmatic dependent launch (griddepcontrol) of kernel 1
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _tree(vals):
    """Balanced sum of a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def plan(nv: int):
    """(threads, vectors per thread) for a row of nv 16-byte vectors."""
    threads = -(-nv // VPT_TARGET)
    warps = 1  # power-of-two warp count, at least one warp
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-nv // threads)
    return threads, vpt


def grid_plan(rows: int, threads: int):
    """(row groups per CTA NG, CTAs G, rows per slot R): one CTA on each of the NSM SMs (fewer
    for tiny T) holds NG row groups of `threads` threads (NG * threads <= RES_THREADS); slot
    s = cta * NG + group handles rows s, s + G * NG, s + 2 * G * NG, ... (R or R - 1 of them)."""
    ng = max(1, min(MAX_GROUPS, RES_THREADS // threads))
    g = min(NSM, -(-rows // ng))
    return ng, g, -(-rows // (g * ng))


def stages(hidden: int, ng: int):
    """Ring slots per row group (a slot holds one row of dy and of x): as many as SMEM_PER_SM
    allows for the NG groups of the CTA."""
    return max(2, min(MAX_STAGES, SMEM_PER_SM // (ng * 4 * hidden)))


def make_rows_kernel(rows: int, hidden: int, eps: float):
    """Kernel 1: dx for every row and the per-CTA fp32 partial sums P[0] (dw) and P[1] (db)."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows * hidden < 2**31, "int32 indexing"
    NV = hidden // VEC
    THREADS, VPT = plan(NV)
    assert VPT <= MAX_VPT, f"H={hidden} too long for one CTA"
    NG, G, R = grid_plan(rows, THREADS)
    SS = G * NG  # row slots of the grid (rows of slot s: s + i * SS)
    STAGES = stages(hidden, NG)
    assert NG * STAGES * 4 * hidden <= SMEM_PER_SM, f"H={hidden}: the ring does not fit in shared memory"
    HW = hidden // 2  # 32-bit words per bf16 row
    RW = STAGES * hidden  # 32-bit words of one group's ring (STAGES x (dy, x) rows)
    ACCW = VPT * 16  # fp32 accumulator words per thread (dw, then db)
    assert ACCW * THREADS <= RW, "the accumulator combine does not fit in a group's ring"
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    S = VPT * 4  # 32-bit registers per row buffer of one tensor
    TT = rows
    H = hidden
    INV_H = 1.0 / hidden

    @T.function
    def layernorm_bwd_rows(
        DY: T.Tensor((TT, H), T.bfloat16),
        X: T.Tensor((TT, H), T.bfloat16),
        W: T.Tensor((H,), T.bfloat16),
        DX: T.Tensor((TT, H), T.bfloat16),
        P: T.Tensor((2, G, H), "float32"),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=G, block=NG * THREADS),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )
        cta = T.cuda.block_idx("x")
        gtid = T.cuda.thread_idx("x")
        grp = T.truncdiv(gtid, THREADS)  # row group of this thread
        tid = T.truncmod(gtid, THREADS)  # thread within its row group
        slot_id = cta * NG + grp  # rows slot_id + i * SS
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        pool = SMEMPool()
        # per group: STAGES x (dy row, x row) as 32-bit words (2 bf16 each); reused after the
        # row loop to pass the accumulators of groups 1.. to group 0
        ring = pool.alloc((NG, RW), "uint32", align=128)
        red = pool.alloc((NG, 2 * 4 * WARPS), "float32", align=16)  # [group][parity][value][warp]
        pool.commit()
        xv = T.alloc_local((S,), "uint32")
        dv = T.alloc_local((S,), "uint32")
        wv = T.alloc_local((S,), "uint32")
        acc = T.alloc_local((VPT * 8,), "float32")  # partial dw of the thread's columns
        acb = T.alloc_local((VPT * 8,), "float32")  # partial db of the thread's columns
        ov = T.alloc_local((4,), "uint32")
        sm = T.alloc_local((4,), "float32")  # sum(x), sum(x^2), sum(g), sum(g * x)
        co = T.alloc_local((5,), "float32")  # mean, rstd, -rstd mean(g), -rstd mean(g xhat), -mean rstd

        # w once (a thread always owns the same columns); zeros in the tail slots
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                T.ptx[W_LOAD](
                    wv[4 * k], wv[4 * k + 1], wv[4 * k + 2], wv[4 * k + 3],
                    W.ptr_to([(tid + k * THREADS) * VEC]),
                )
            else:
                for j in T.unroll(4):
                    wv[4 * k + j] = T.uint32(0)
        for i in T.unroll(VPT * 8):
            acc[i] = T.float32(0.0)
            acb[i] = T.float32(0.0)

        # prologue: the first STAGES - 1 rows in flight (one commit group per row, empty or not)
        for i in T.unroll(STAGES - 1):
            if slot_id + i * SS < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](ring.ptr_to([grp, (2 * i) * HW + (tid + k * THREADS) * 4]),
                                        DY.ptr_to([slot_id + i * SS, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](ring.ptr_to([grp, (2 * i + 1) * HW + (tid + k * THREADS) * 4]),
                                        X.ptr_to([slot_id + i * SS, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()

        for i in range(R):
            # refill the slot this thread emptied last iteration (each thread reads back only
            # what it copied itself, so the ring needs no barrier)
            if slot_id + (i + STAGES - 1) * SS < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([grp, (2 * T.truncmod(i + STAGES - 1, STAGES)) * HW
                                         + (tid + k * THREADS) * 4]),
                            DY.ptr_to([slot_id + (i + STAGES - 1) * SS, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([grp, (2 * T.truncmod(i + STAGES - 1, STAGES) + 1) * HW
                                         + (tid + k * THREADS) * 4]),
                            X.ptr_to([slot_id + (i + STAGES - 1) * SS, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()
            T.ptx[CP_WAIT](STAGES - 1)  # this row's group has landed
            if slot_id + i * SS < TT:  # uniform over the row group: its barrier below is safe
                slot = T.truncmod(i, STAGES)
                par = T.truncmod(i, 2)
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        dv[T.ramp(4 * k, 1, 4)] = ring[grp, T.ramp((2 * slot) * HW + (tid + k * THREADS) * 4, 1, 4)]
                        xv[T.ramp(4 * k, 1, 4)] = ring[grp, T.ramp((2 * slot + 1) * HW + (tid + k * THREADS) * 4,
                                                                   1, 4)]
                    else:
                        for j in T.unroll(4):
                            dv[4 * k + j] = T.uint32(0)
                            xv[4 * k + j] = T.uint32(0)
                # one-pass row sums (tail slots hold zeros): x, x^2, g = dy * w, g * x
                sm[0] = _tree([_lo(xv[q]) + _hi(xv[q]) for q in range(S)])
                sm[1] = _tree([
                    _lo(xv[q]) * _lo(xv[q]) + _hi(xv[q]) * _hi(xv[q]) for q in range(S)
                ])
                sm[2] = _tree([
                    _lo(dv[q]) * _lo(wv[q]) + _hi(dv[q]) * _hi(wv[q]) for q in range(S)
                ])
                sm[3] = _tree([
                    (_lo(dv[q]) * _lo(wv[q])) * _lo(xv[q]) + (_hi(dv[q]) * _hi(wv[q])) * _hi(xv[q])
                    for q in range(S)
                ])
                for v in T.unroll(4):
                    sm[v] = T.cuda.warp_sum(sm[v])
                if T.constexpr(WARPS > 1):
                    if lane == 0:
                        for v in T.unroll(4):
                            red[grp, (par * 4 + v) * WARPS + warp] = sm[v]
                    T.ptx[BAR_SYNC](T.cast(grp + 1, "uint32"), T.uint32(THREADS))  # group barrier
                    for v in T.unroll(4):
                        sm[v] = _tree([red[grp, (par * 4 + v) * WARPS + j] for j in range(WARPS)])
                # mean, biased variance E[x^2] - mean^2 (clamped at 0), rstd
                co[0] = sm[0] * T.float32(INV_H)
                co[1] = T.rsqrt(T.max(sm[1] * T.float32(INV_H) - co[0] * co[0], T.float32(0.0))
                                + T.float32(eps))
                # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
                # sum(g * xhat) = rstd * (sum(g * x) - mean * sum(g))
                co[2] = -co[1] * (sm[2] * T.float32(INV_H))
                co[3] = -(co[1] * co[1]) * ((sm[3] - co[0] * sm[2]) * T.float32(INV_H))
                co[4] = -co[0] * co[1]
                # dx (one bf16 rounding) and the thread's dw partials
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        dv[T.ramp(4 * k, 1, 4)] = ring[grp, T.ramp((2 * slot) * HW + (tid + k * THREADS) * 4, 1, 4)]
                        xv[T.ramp(4 * k, 1, 4)] = ring[grp, T.ramp((2 * slot + 1) * HW + (tid + k * THREADS) * 4,
                                                                   1, 4)]
                        for j in T.unroll(4):
                            q = 4 * k + j
                            # xhat = x * rstd + (-mean * rstd) (one FFMA);
                            # dx = rstd * g + (-rstd mean(g)) + xhat * (-rstd mean(g * xhat))
                            xh_lo = _lo(xv[q]) * co[1] + co[4]
                            xh_hi = _hi(xv[q]) * co[1] + co[4]
                            dx_lo = co[1] * (_lo(dv[q]) * _lo(wv[q])) + (co[2] + xh_lo * co[3])
                            dx_hi = co[1] * (_hi(dv[q]) * _hi(wv[q])) + (co[2] + xh_hi * co[3])
                            T.ptx.cvt.rn.bf16x2.f32(ov[j], dx_hi, dx_lo)
                            acc[2 * q] = acc[2 * q] + _lo(dv[q]) * xh_lo
                            acc[2 * q + 1] = acc[2 * q + 1] + _hi(dv[q]) * xh_hi
                            acb[2 * q] = acb[2 * q] + _lo(dv[q])
                            acb[2 * q + 1] = acb[2 * q + 1] + _hi(dv[q])
                        T.ptx[DX_STORE](DX.ptr_to([slot_id + i * SS, (tid + k * THREADS) * VEC]),
                                        ov[0], ov[1], ov[2], ov[3])

        if T.constexpr(USE_PDL):
            T.ptx.griddepcontrol.launch_dependents()  # kernel 2 may be scheduled from here on
        if T.constexpr(NG > 1):
            # Combine the NG groups' accumulators in shared memory (their rings are idle now):
            # groups 1 .. NG - 1 park theirs, group 0 adds them in group order.
            T.ptx[CP_WAIT](0)
            T.cuda.cta_sync()  # every ring read and copy of every group is done
            if grp > 0:
                for q in T.unroll(VPT * 8):
                    ring[grp, q * THREADS + tid] = T.reinterpret(acc[q], ty="uint32")
                    ring[grp, (VPT * 8 + q) * THREADS + tid] = T.reinterpret(acb[q], ty="uint32")
            T.cuda.cta_sync()
            if grp == 0:
                for gg in range(1, NG):
                    for q in T.unroll(VPT * 8):
                        acc[q] = acc[q] + T.reinterpret(ring[gg, q * THREADS + tid], ty="float32")
                        acb[q] = acb[q] + T.reinterpret(ring[gg, (VPT * 8 + q) * THREADS + tid],
                                                        ty="float32")
        # this CTA's partial dw and db: row cta of P[0] and P[1] (group 0 stores them)
        if grp == 0:
            for k in T.unroll(VPT):
                if k < FULL or tid + k * THREADS < NV:
                    T.ptx[P_STORE](P.ptr_to([0, cta, (tid + k * THREADS) * VEC]),
                                   acc[8 * k], acc[8 * k + 1], acc[8 * k + 2], acc[8 * k + 3])
                    T.ptx[P_STORE](P.ptr_to([0, cta, (tid + k * THREADS) * VEC + 4]),
                                   acc[8 * k + 4], acc[8 * k + 5], acc[8 * k + 6], acc[8 * k + 7])
                    T.ptx[P_STORE](P.ptr_to([1, cta, (tid + k * THREADS) * VEC]),
                                   acb[8 * k], acb[8 * k + 1], acb[8 * k + 2], acb[8 * k + 3])
                    T.ptx[P_STORE](P.ptr_to([1, cta, (tid + k * THREADS) * VEC + 4]),
                                   acb[8 * k + 4], acb[8 * k + 5], acb[8 * k + 6], acb[8 * k + 7])

    return layernorm_bwd_rows, G


def make_reduce_kernel(parts: int, hidden: int):
    """Kernel 2: dw[h] = sum over g of P[0, g, h], db[h] = sum over g of P[1, g, h], each in a
    fixed order (fp32); blockIdx.y picks the plane. Launched as a programmatic dependent of
    kernel 1 (it waits with griddepcontrol.wait before reading P)."""
    NV4 = hidden // 4  # float4 column groups
    GRID = -(-NV4 // R_COLS)
    PER = -(-parts // R_SLICES)  # rows per slice (upper bound)
    UNROLL = min(PER, R_UNROLL)
    CHUNKS = -(-PER // UNROLL)
    GP = parts
    H = hidden

    @T.function
    def layernorm_bwd_dwdb(P: T.Tensor((2, GP, H), "float32"), DW: T.Tensor((H,), "float32"),
                           DB: T.Tensor((H,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(GRID, 2), block=R_THREADS,
                                                  programmatic_stream_serialization=USE_PDL))
        tid = T.cuda.thread_idx("x")
        plane = T.cuda.block_idx("y")
        col = T.truncmod(tid, R_COLS)
        sl = T.truncdiv(tid, R_COLS)
        cv = T.cuda.block_idx("x") * R_COLS + col
        red = T.alloc_shared((R_SLICES * R_COLS * 4,), "float32")
        buf = T.alloc_local((UNROLL * 4,), "float32")
        acc = T.alloc_local((4,), "float32")
        if T.constexpr(USE_PDL):
            T.ptx.griddepcontrol.wait()  # kernel 1 finished and its P stores are visible
        for i in T.unroll(4):
            acc[i] = T.float32(0.0)
        if cv < NV4:
            for c in range(CHUNKS):
                for u in T.unroll(UNROLL):
                    if sl + (c * UNROLL + u) * R_SLICES < GP:
                        T.ptx[P_LOAD](
                            buf[4 * u], buf[4 * u + 1], buf[4 * u + 2], buf[4 * u + 3],
                            P.ptr_to([plane, sl + (c * UNROLL + u) * R_SLICES, cv * 4]),
                        )
                    else:
                        for i in T.unroll(4):
                            buf[4 * u + i] = T.float32(0.0)
                for u in T.unroll(UNROLL):  # rows of the slice in increasing order
                    for i in T.unroll(4):
                        acc[i] = acc[i] + buf[4 * u + i]
        for i in T.unroll(4):
            red[(sl * R_COLS + col) * 4 + i] = acc[i]
        T.cuda.cta_sync()
        # fixed pairwise tree over the slices: slice s += slice s + step, step = R_SLICES / 2 .. 1
        for k in T.unroll(LOG_SLICES):
            if sl < T.shift_right(R_SLICES // 2, k):
                for i in T.unroll(4):
                    red[(sl * R_COLS + col) * 4 + i] = (
                        red[(sl * R_COLS + col) * 4 + i]
                        + red[((sl + T.shift_right(R_SLICES // 2, k)) * R_COLS + col) * 4 + i])
            T.cuda.cta_sync()
        if sl == 0 and cv < NV4:
            if plane == 0:
                T.ptx[F_STORE](DW.ptr_to([cv * 4]), red[col * 4], red[col * 4 + 1], red[col * 4 + 2],
                               red[col * 4 + 3])
            else:
                T.ptx[F_STORE](DB.ptr_to([cv * 4]), red[col * 4], red[col * 4 + 1], red[col * 4 + 2],
                               red[col * 4 + 3])

    return layernorm_bwd_dwdb


def build(spec):
    """Compile both kernels for spec's static (T, H) and return run(dy, x, w, dx, dw, db)."""
    rows = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    eps = float(spec.params["eps"])
    rows_kernel, parts = make_rows_kernel(rows, hidden, eps)
    ex1 = tvm_tirx.tirx.compile(rows_kernel, target=TARGET)
    ex2 = tvm_tirx.tirx.compile(make_reduce_kernel(parts, hidden), target=TARGET)
    fn1 = ex1["layernorm_bwd_rows"]
    fn2 = ex2["layernorm_bwd_dwdb"]
    scratch = []  # P[2, G, H] fp32, allocated on the first call

    def run(dy, x, w, dx, dw, db):
        if not scratch:
            scratch.append(torch.empty((2, parts, hidden), dtype=torch.float32, device=dy.device))
        fn1(dy, x, w, dx, scratch[0])
        fn2(scratch[0], dw, db)

    run.modules = (ex1, ex2)  # keep the compiled modules alive with the launcher
    return run

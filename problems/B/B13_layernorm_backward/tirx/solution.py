"""B13 layernorm_backward, TIRx (tvm_tirx 0.1.0a4) expert solution: dx (bf16), dw and db (fp32)
of y = (x - mean) * rstd * w + b, mean and rstd = rsqrt(var + eps) recomputed from x.

Two kernels per call; one read of dy and x, one write of dx (the memory-bound minimum), plus a
small fp32 scratch of per-CTA partial dw and db sums (the structure of B12's solution):

* Kernel 1 (rows), persistent: G CTAs, BPS per SM (NSM = 132 SMs, BPS = RES_THREADS / THREADS),
  compiled with ``__launch_bounds__(THREADS, BPS)`` (at most 168 registers; ptxas 13 via NVRTC on
  this code: 168, at the cap, no spills, at H = 4096) so that all G CTAs are resident at once
  (one wave). Rows are dealt out in a fixed pattern: CTA b handles rows b, b + G, b + 2G, ...
  with G = ceil(T / R), R = ceil(T / (NSM * BPS)), so every CTA gets R or R - 1 rows
  (benchmark: 128 threads, BPS = 3, G = 391, R = 42: three rows are reduced at once per SM).
* Loads: dy and x go global -> shared with 16-byte ``cp.async.cg`` (L2 only) into a ring of
  STAGES row slots per CTA (as many as 216 KB of shared memory per SM allows, at most 8:
  4 slots of 16 KB at H = 4096), one commit group per row, so STAGES - 1 rows per CTA
  (9 per SM, 144 KB at H = 4096) are in flight while a row is reduced: the register file
  holds no in-flight data, and the row barrier never drains the memory pipe. Thread tid
  copies vectors tid + k * THREADS (k < VPT; 8 bf16 each, every warp instruction covers
  512 contiguous bytes) and later reads back exactly those vectors, so the ring needs only
  ``cp.async.wait_group`` (no barrier) before a row is read, and a slot can be refilled
  by the thread that emptied it. w is loaded once per CTA into registers
  (``ld.global.nc``): a thread always owns the same columns.
* One fused CTA reduction per row of four fp32 sums: x, x^2, g = dy * w and g * x (a balanced
  tree per thread, warp shuffles, one shared-memory step with one barrier; the shared buffer
  alternates between even and odd rows, so the next row's writes cannot race this row's
  reads). One-pass statistics, as the statement allows for these inputs: mean = sum(x) / H,
  var = max(sum(x^2) / H - mean^2, 0) (with the per-trial offset and scale the input's mean
  is at most 5 of its standard deviations, so the subtraction loses about 5 of fp32's 24
  bits), rstd = rsqrt(var + eps) (hardware rsqrt.approx), and
  sum(g * xhat) = rstd * (sum(g * x) - mean * sum(g)). Then
      dx = rstd * g + (-rstd * mean(g) + xhat * (-rstd * mean(g * xhat))),
      xhat = (x - mean) * rstd,
  in fp32 (the row is read again from shared memory after the barrier rather than held in
  registers), rounded once to bf16 per pair (``cvt.rn.bf16x2.f32``), ``st.global.v4.b32``.
* dw and db, deterministic and without atomics: every thread accumulates dy * xhat and dy for
  its own columns over its CTA's rows in fp32 registers (rows in increasing order), then
  writes them to row b of the fp32 scratch planes P[0] (dw) and P[1] (db), P[2, G, H]
  (allocated once, on the first call, and reused; every element of it is rewritten by every
  call). Kernel 2 (grid.y = 2 planes; H = 4096: 256 x 2 CTAs) reduces each plane of P over its
  G rows in a fixed order: a CTA of 256 threads covers 4 float4 column groups x 64 slices;
  slice s sums rows s, s + 64, ... sequentially (its 7 rows loaded in one batch with
  ``ld.global.cg``, L2 only, before they are added), then a pairwise tree over the slices in
  shared memory (slice s += slice s + step, step = 32 .. 1, a barrier after each) and one
  thread per column group stores dw or db. Same build, same G, same order: bit-identical dw
  and db on every call.
* Kernel 2 is a programmatic dependent launch of kernel 1 (LaunchConfig
  programmatic_stream_serialization; kernel 1 executes griddepcontrol.launch_dependents after
  its row loop, kernel 2 griddepcontrol.wait before its first read of P), so its launch and CTA
  placement overlap kernel 1's tail instead of following the grid's completion. USE_PDL = False
  launches it plainly and drops both griddepcontrol instructions.
* Ragged edges: tail vectors (H / 8 not a multiple of THREADS) are neither copied, read back
  nor stored; their registers hold zeros, so they add nothing to the row sums, and their
  partials are never stored. Rows past T are skipped (a CTA-uniform condition, so the
  barrier is safe); kernel 2 predicates rows past G and column groups past H / 4.
* Shapes are static per build: THREADS and VPT from H (about VPT_TARGET = 4 vectors of each
  tensor per thread: H = 4096 -> 128 threads; H = 1000 -> 32 threads, VPT = 4, the fourth
  vector of threads 29-31 masked; H = 128 or 256 -> one warp). Int32 indexing: T * H < 2^31.
* Numerics (CPU emulation of this arithmetic and reduction order against reference.py, 3
  trials of every shape set, and x drawn with the worst jitter, mean = 5 standard deviations):
  worst error / bound 0.21 for dx (its one bf16 rounding), 0.011 for dw, 0.002 for db; at the
  benchmark shape, with this kernel's order (row chains of 42 or 41 terms per CTA, 7-term
  chains per slice, the 64-slice tree), at most 0.007 of the dw bound and 0.0005 of the db
  bound.
* Costs beyond the minimum: the partials (2 * G * H * 4 bytes written and read once: 12.8 MB
  at the benchmark shape, about 3% of its 402 MB) and the second kernel. Speed knobs:
  VPT_TARGET, RES_THREADS (more CTAs per SM: more partials), SMEM_PER_SM (ring depth).

Measured on the H200 (bench/h200/2026-12-02/diag-wake200.json; full mode, one judge, 200 us wake
spin): 116.7 us (IQR 1.9), 74.0% of the 86.3 us roofline ideal. The previous design (256-thread
CTAs, 2 per SM, 115 registers, a 5-slot ring: 8 rows, 128 KB, in flight per SM; kernel 2 as 8
column groups x 32 slices loading 9 rows in two batches, i.e. two L2 round trips, with one
thread adding the 32 slice sums serially, ~0.5 us against ~0.15 us for the tree; launched
plainly after kernel 1) took 119.2 us in the same run, and that design with only this kernel 2
and the programmatic launch took 117.7 us. The gain is small: 2.5 us, 2.1%, at the low end of
the 2-4 us estimated for the kernel-2 changes. Kernel 1's in-flight data was not what limited
it: Little's law asks for about 4.66 TB/s x ~1.5 us / 132 SMs = ~53 KB per SM, and both rings
hold far more; the third concurrent row (at the ideal rate an SM must finish a row, 24 KB of
traffic, every ~0.7 us, so a row may spend ~2.1 us in its reduction chain instead of ~1.4 us)
bought 1.0 us, within the IQRs (1.9-2.7 us). The CuTe expert measured 115.1 us
(diag-cute-wake200.json): both DSLs remain below 80% of the ideal.
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
RES_THREADS = 384  # resident threads per SM (launch bounds: at most 65536 / 384 -> 168 registers)
SMEM_PER_SM = 216 * 1024  # shared memory for the rings of the resident CTAs of one SM
MAX_STAGES = 8
CP_ASYNC = "cp.async.cg.shared.global"  # dy, x: 16 bytes global -> shared, L2 only
CP_COMMIT = "cp.async.commit_group"
CP_WAIT = "cp.async.wait_group"
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
R_UNROLL = 8  # partial rows loaded per thread before they are added (391 rows / 64 slices: 7)
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
    """(CTAs per SM for the launch bounds, persistent grid size G, rows per CTA R)."""
    bps = max(1, min(32, RES_THREADS // threads))
    per_cta = -(-rows // (NSM * bps))
    return bps, -(-rows // per_cta), per_cta


def stages(hidden: int, bps: int):
    """Ring slots per CTA (a slot holds one row of dy and of x): as many as SMEM_PER_SM allows."""
    return max(2, min(MAX_STAGES, SMEM_PER_SM // (bps * 4 * hidden)))


def make_rows_kernel(rows: int, hidden: int, eps: float):
    """Kernel 1: dx for every row and the per-CTA fp32 partial sums P[0] (dw) and P[1] (db)."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows * hidden < 2**31, "int32 indexing"
    NV = hidden // VEC
    THREADS, VPT = plan(NV)
    assert VPT <= MAX_VPT, f"H={hidden} too long for one CTA"
    BPS, G, R = grid_plan(rows, THREADS)
    STAGES = stages(hidden, BPS)
    assert STAGES * 4 * hidden <= 200 * 1024, f"H={hidden}: the ring does not fit in shared memory"
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
            launch=T.cuda.LaunchConfig(grid=G, block=THREADS),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=BPS),
        )
        cta = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        pool = SMEMPool()
        ring = pool.alloc((STAGES, 2, H), "bfloat16", align=128)  # [slot][dy, x][column]
        red = pool.alloc((2 * 4 * WARPS,), "float32", align=16)  # [row parity][value][warp]
        pool.commit()
        xv = T.alloc_local((S,), "uint32")
        dv = T.alloc_local((S,), "uint32")
        wv = T.alloc_local((S,), "uint32")
        acc = T.alloc_local((VPT * 8,), "float32")  # partial dw of the thread's columns
        acb = T.alloc_local((VPT * 8,), "float32")  # partial db of the thread's columns
        ov = T.alloc_local((4,), "uint32")
        sm = T.alloc_local((4,), "float32")  # sum(x), sum(x^2), sum(g), sum(g * x)
        co = T.alloc_local((4,), "float32")  # mean, rstd, -rstd * mean(g), -rstd * mean(g * xhat)

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
            if cta + i * G < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](ring.ptr_to([i, 0, (tid + k * THREADS) * VEC]),
                                        DY.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](ring.ptr_to([i, 1, (tid + k * THREADS) * VEC]),
                                        X.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()

        for i in range(R):
            # refill the slot this thread emptied last iteration (each thread reads back only
            # what it copied itself, so the ring needs no barrier)
            if cta + (i + STAGES - 1) * G < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([T.truncmod(i + STAGES - 1, STAGES), 0, (tid + k * THREADS) * VEC]),
                            DY.ptr_to([cta + (i + STAGES - 1) * G, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([T.truncmod(i + STAGES - 1, STAGES), 1, (tid + k * THREADS) * VEC]),
                            X.ptr_to([cta + (i + STAGES - 1) * G, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()
            T.ptx[CP_WAIT](STAGES - 1)  # this row's group has landed
            if cta + i * G < TT:  # CTA-uniform: the barrier below is safe
                slot = T.truncmod(i, STAGES)
                par = T.truncmod(i, 2)
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        dv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[slot, 0, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
                        xv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[slot, 1, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
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
                            red[(par * 4 + v) * WARPS + warp] = sm[v]
                    T.cuda.cta_sync()
                    for v in T.unroll(4):
                        sm[v] = _tree([red[(par * 4 + v) * WARPS + j] for j in range(WARPS)])
                # mean, biased variance E[x^2] - mean^2 (clamped at 0), rstd
                co[0] = sm[0] * T.float32(INV_H)
                co[1] = T.rsqrt(T.max(sm[1] * T.float32(INV_H) - co[0] * co[0], T.float32(0.0))
                                + T.float32(eps))
                # dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
                # sum(g * xhat) = rstd * (sum(g * x) - mean * sum(g))
                co[2] = -co[1] * (sm[2] * T.float32(INV_H))
                co[3] = -(co[1] * co[1]) * ((sm[3] - co[0] * sm[2]) * T.float32(INV_H))
                # dx (one bf16 rounding) and the thread's dw partials
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        dv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[slot, 0, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
                        xv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[slot, 1, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
                        for j in T.unroll(4):
                            q = 4 * k + j
                            # xhat = (x - mean) * rstd; dx = rstd * g + (-rstd mean(g))
                            #                              + xhat * (-rstd mean(g * xhat))
                            xh_lo = (_lo(xv[q]) - co[0]) * co[1]
                            xh_hi = (_hi(xv[q]) - co[0]) * co[1]
                            dx_lo = co[1] * (_lo(dv[q]) * _lo(wv[q])) + (co[2] + xh_lo * co[3])
                            dx_hi = co[1] * (_hi(dv[q]) * _hi(wv[q])) + (co[2] + xh_hi * co[3])
                            T.ptx.cvt.rn.bf16x2.f32(ov[j], dx_hi, dx_lo)
                            acc[2 * q] = acc[2 * q] + _lo(dv[q]) * xh_lo
                            acc[2 * q + 1] = acc[2 * q + 1] + _hi(dv[q]) * xh_hi
                            acb[2 * q] = acb[2 * q] + _lo(dv[q])
                            acb[2 * q + 1] = acb[2 * q + 1] + _hi(dv[q])
                        T.ptx[DX_STORE](DX.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]),
                                        ov[0], ov[1], ov[2], ov[3])

        if T.constexpr(USE_PDL):
            T.ptx.griddepcontrol.launch_dependents()  # kernel 2 may be scheduled from here on
        # this CTA's partial dw and db: row cta of P[0] and P[1]
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

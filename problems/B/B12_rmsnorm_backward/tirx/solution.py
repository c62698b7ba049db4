"""B12 rmsnorm_backward, TIRx (tvm_tirx 0.1.0a4) expert solution: dx (bf16) and dw (fp32) of
y = x * rstd * w, rstd = rsqrt(mean(x^2) + eps) recomputed from x.

Two kernels per call; one read of dy and x, one write of dx (the memory-bound minimum, 402 MB at
the benchmark shape T = 16384, H = 4096), plus a small fp32 scratch P of per-CTA partial dw sums.

* Kernel 1 (rows), persistent, one CTA per SM: NCTA = min(132, ceil(T / NG)) CTAs of NG row
  groups of THREADS threads (NG * THREADS = RES_THREADS = 384, min_blocks_per_sm = 1, so at most
  168 registers; benchmark: THREADS = 128, NG = 3). Group g of CTA c is the virtual row group
  v = c + NCTA * g of G = NCTA * NG and handles rows v, v + G, v + 2G, ...: R = ceil(T / G) or
  R - 1 rows, the longer ones for v < T mod G (benchmark: G = 396, R = 42, 148 long groups), so a
  CTA carries at most ceil(T / 132) rows (125 or 124 per SM at the benchmark). This is the row
  assignment of the earlier layout (v5: three 128-thread CTAs per SM, CTA b = group v), but the
  balance no longer depends on where the block scheduler places CTAs.
* Loads: dy and x go global -> shared with 16-byte ``cp.async.cg`` (L2 only) into a ring of
  STAGES row slots per group (as many as SMEM_PER_SM = 216 KB allows, at most 8: 4 slots of
  16 KB at H = 4096, 192 KB of rings per CTA), one commit group per row, so STAGES - 1 rows per
  group (9 per SM, 144 KB at H = 4096) are in flight while a row is reduced: the register file
  holds no in-flight data, and the row barrier never drains the memory pipe. Thread tid of a
  group copies vectors tid + k * THREADS (k < VPT; 8 bf16 each, every warp instruction covers
  512 contiguous bytes) and later reads back exactly those vectors, so the ring needs only
  ``cp.async.wait_group`` (no barrier) before a row is read, and a slot is refilled by the thread
  that emptied it. w is loaded once per CTA into registers (``ld.global.nc``) and unpacked to
  fp32 once (a thread always owns the same columns).
* One fused reduction per row and group: sum(x^2) and sum(dy * w * x) in fp32, each as NCH = 4
  independent FFMA chains per thread (one FFMA per element for sum(x^2), FMUL + FFMA for
  sum((dy * x) * w)), a balanced tree of the chains, warp shuffles, then one shared-memory step
  behind the group's named barrier (bar.sync 1 + g, THREADS; the groups never wait for each
  other inside the loop). The shared slots alternate between even and odd rows, so the next
  row's writes cannot race this row's reads. rstd = rsqrt(sum(x^2) / H + eps) (rsqrt.approx,
  relative error ~1e-7) and, with g = dy * w and t = dy * rstd,
      dx = rstd * g - x * (rstd^3 * sum(g * x) / H) = fma(t, w, co1 * x),
  co1 = -rstd^3 * sum(g * x) / H, from the packed dy / x registers of the first pass (the ring
  is not read twice), rounded once to bf16 per pair (``cvt.rn.bf16x2.f32``),
  ``st.global.v4.b32``; dw_acc = fma(t, x, dw_acc). 4 FP32 ops per element.
* Instruction count (SASS of kernel 1 at the benchmark shape, ptxas 13 on the NVRTC PTX): 446
  instructions per thread and row (4 warps x 32 elements per thread), 21% fewer than the
  567 of the previous row loop, which re-read the ring after the barrier, unpacked w twice per
  row and summed each thread's products with an add tree. At the ideal rate an SM must finish a
  row (24 KB of traffic) every ~0.69 us; 4 x 567 = 2270 warp instructions per row took ~570 of
  the SM's ~1200 issue cycles in that time. 168 registers and one 8-byte spill (an STL.64
  before the row's shuffles and its LDL.64 after the named barrier, per row and thread:
  L1-resident, ~2 instructions of 446); no spills at the check shapes.
* dw, deterministic and without atomics: every thread accumulates dy * x * rstd for its own
  columns over its group's rows in fp32 registers (rows in increasing order). After the row loop
  (every group has read its last row; every copy was waited for before its row was read, so no
  cp.async is in flight) one CTA barrier, groups 1 .. NG - 1 write their partials to shared
  memory over the rings, a second barrier, and group 0 adds them in a fixed order
  ((g0 + g1) + g2) and stores row c of P[NCTA, H] (allocated once, on the first call; every
  element is rewritten by every call): 132 rows, 2.2 MB at the benchmark, a third of the 396
  rows (6.5 MB) that one partial per group wrote, all at the very end of kernel 1, when every
  CTA leaves its row loop at once. Kernel 2 reduces P over its rows in a fixed order: a CTA of
  256 threads covers 4 float4 column groups x 64 slices (H = 4096: 256 CTAs); slice s sums rows
  s, s + 64, s + 128 (2 or 3 rows, one batch of ``ld.global.cg`` loads, L2 only) in order; the 8
  slices of a warp sit in lane bits 2..4 (tid = slice * 4 + column group) and are summed by a
  fixed butterfly (shfl.bfly 16, 8, 4, no barrier), then one shared store per warp, ONE barrier
  and a balanced 3-level tree over the 8 warp sums by the 4 threads of slice 0. Same build,
  same grid, same order: bit-identical dw on every call.
* Kernel 2 is a programmatic dependent launch of kernel 1 (LaunchConfig
  programmatic_stream_serialization; kernel 1 executes griddepcontrol.launch_dependents after
  its row loop, kernel 2 griddepcontrol.wait, which waits for the whole of kernel 1, before its
  first read of P), so its launch and CTA placement overlap kernel 1's tail. USE_PDL = False
  launches it plainly and drops both griddepcontrol instructions.
* Ragged edges: tail vectors (H / 8 not a multiple of THREADS) are neither copied, read back nor
  stored; their registers hold zeros, so they add nothing to the row sums, and their dw partials
  are never stored. Rows past T are skipped (a group-uniform condition, so the named barrier is
  safe); groups without rows add zeros. Kernel 2 predicates rows past NCTA and column groups
  past H / 4. Check shapes: H = 128, 256, 1000 give one-warp groups (THREADS = 32, no named
  barrier; H = 1000: VPT = 4, the fourth vector of threads 29-31 masked), NG = 12,
  NCTA = min(132, ceil(T / 12)) (T = 4: one CTA, 4 busy groups of 12).
* Shapes are static per build (THREADS and VPT from H, about VPT_TARGET = 4 vectors of each
  tensor per thread). Limits (asserted): H % 8 == 0, T * H < 2^31 (int32 indexing), the rings
  of the NG groups within 224 KB of shared memory.
* Numerics (CPU fp32 emulation of these formulas and this order against reference.py, every
  shape set, dy scale 1 and 2, offset 0.3): worst error / bound 0.24 for dx (its one bf16
  rounding). dw at the benchmark shape (the whole reduction emulated, fma included,
  dy ~ 2 N(0,1) + 0.3, x ~ 0.004 N(0,1), fp64 reference): 0.35 of the bound, against 0.33 for
  396 independent partials and a 6-level shared tree (a scale-2 trial with other draws reached
  0.46-0.68 with 396 partials, 0.56 with the previous expert's order); the margin is set by the
  fp32 sums themselves (they reach ~300, one ulp = 3e-5, against the 1e-4 atol where dw ~ 0),
  not by the order. The warp butterfly plus the 3-level tree have the depth of a 6-level
  pairwise tree (64-term fp32 sums, random partials: max abs error 4.09e-5 against 4.06e-5).
* Host path: build() compiles both kernels for the static (T, H) of a shape set (sm_90a);
  run(dy, x, w, dx, dw) launches kernel 1, then kernel 2. Speed knobs: VPT_TARGET,
  RES_THREADS, SMEM_PER_SM (ring depth).

Measured on the H200 (bench/h200/2026-12-02c/tune-r4.json, full mode, one judge): 107.5 us
(IQR 1.4), 80.4% of the 86.4 us roofline ideal; in the same run the same kernels with three
128-thread CTAs per SM (one P row per CTA, 396 rows) 109.3 us (IQR 1.4): the third as many
partials saved 1.8 us. The 446-instruction row loop with the 6-barrier slice tree in kernel 2
ran 108.9 us (IQR 1.7) in bench/h200/2026-12-02b/tune-r3.json, so the butterfly tail made no
difference above the noise. In the one-run table bench/h200/2026-12-02b/solutions-AB-r3.md the
previous expert (the 567-instruction row loop) ran 110.3 us (IQR 1.8) and the CuTe expert
109.1 us. Bytes in flight were not the limit: Little's law asks for about 4.66 TB/s x ~1.5 us /
132 SMs = ~53 KB per SM, the rings keep 144 KB in flight, and neither a deeper ring nor a third
concurrent row per SM moved kernel 1 in earlier runs; the time went with the per-row
instruction stream and the partial-sum tail. A one-run table with this code:
bench/h200/2026-12-02c (section 3).
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
MAX_GROUPS = 15  # row groups per CTA: named barriers 1 .. 15 (barrier 0 is the CTA's)
NCH = 4  # independent FMA chains per row sum and thread
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
R_COLS = 4  # float4 column groups per CTA (H = 4096: 256 CTAs, about two per SM)
R_SLICES = R_THREADS // R_COLS  # row slices per CTA
assert R_COLS == 4 and R_SLICES == 64  # the slice tree below: 8 slices per warp, 8 warps
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


def _fma(a, b, c):
    """a * b + c with one rounding (fmaf: one FFMA; T.fma has no CUDA lowering in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _chains(pairs):
    """NCH interleaved FMA chains over a Python list of (a, b) products: chain c sums the products
    c, c + NCH, ... in order (independent chains keep the FMA pipe busy, no tree adds)."""
    out = []
    for c in range(min(NCH, len(pairs))):
        e = pairs[c][0] * pairs[c][1]
        for i in range(c + NCH, len(pairs), NCH):
            e = _fma(pairs[i][0], pairs[i][1], e)
        out.append(e)
    return out


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
    """(row groups per CTA NG, CTAs NCTA, row groups G = NCTA * NG, rows per group R): one CTA per
    SM of NG groups of `threads` threads (NG * threads = RES_THREADS); group g of CTA c is the
    virtual row group v = c + NCTA * g and handles rows v, v + G, v + 2G, ...; group v has R or
    R - 1 rows, the longer ones being v < T mod G, so one CTA (groups c, c + NSM, c + 2 NSM)
    carries at most ceil(T / NSM) rows, as v5's three CTAs per SM did."""
    ng = max(1, min(MAX_GROUPS, RES_THREADS // threads))
    ncta = min(NSM, -(-rows // ng))
    g = ncta * ng
    return ng, ncta, g, -(-rows // g)


def stages(hidden: int, bps: int):
    """Ring slots per CTA (a slot holds one row of dy and of x): as many as SMEM_PER_SM allows."""
    return max(2, min(MAX_STAGES, SMEM_PER_SM // (bps * 4 * hidden)))


def make_rows_kernel(rows: int, hidden: int, eps: float):
    """Kernel 1: dx for every row and the per-CTA fp32 partial dw sums P[NCTA, H]."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows * hidden < 2**31, "int32 indexing"
    NV = hidden // VEC
    THREADS, VPT = plan(NV)
    assert VPT <= MAX_VPT, f"H={hidden} too long for one CTA"
    NG, NCTA, G, R = grid_plan(rows, THREADS)
    STAGES = stages(hidden, NG)
    assert NG * STAGES * 4 * hidden + 4 * NG * 4 * (THREADS // 32) <= 224 * 1024, (
        f"H={hidden}: the rings do not fit in shared memory")
    CTA_THREADS = NG * THREADS
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    S = VPT * 4  # 32-bit registers per row buffer of one tensor
    TT = rows
    H = hidden
    INV_H = 1.0 / hidden

    @T.function
    def rmsnorm_bwd_rows(
        DY: T.Tensor((TT, H), T.bfloat16),
        X: T.Tensor((TT, H), T.bfloat16),
        W: T.Tensor((H,), T.bfloat16),
        DX: T.Tensor((TT, H), T.bfloat16),
        P: T.Tensor((NCTA, H), "float32"),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=NCTA, block=CTA_THREADS),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=1),
        )
        blk = T.cuda.block_idx("x")
        grp = T.truncdiv(T.cuda.thread_idx("x"), THREADS)  # row group of this thread
        tid = T.truncmod(T.cuda.thread_idx("x"), THREADS)  # thread within its group
        cta = blk + NCTA * grp  # the virtual row group (v5's CTA index)
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        pool = SMEMPool()
        ring = pool.alloc((NG, STAGES, 2, H), "bfloat16", align=128)  # [group][slot][dy, x][column]
        red = pool.alloc((NG * 2 * 2 * WARPS,), "float32", align=16)  # [group][row parity][value][warp]
        pool.move_base_to(0)  # the dw combine reuses the rings once every group has left its loop
        comb = pool.alloc((NG, H), "float32", align=128)  # [group][column]
        pool.commit()
        xv = T.alloc_local((S,), "uint32")
        dv = T.alloc_local((S,), "uint32")
        wv = T.alloc_local((S,), "uint32")
        wf = T.alloc_local((VPT * 8,), "float32")  # w in fp32, unpacked once per CTA
        acc = T.alloc_local((VPT * 8,), "float32")  # partial dw of the thread's columns
        ov = T.alloc_local((4,), "uint32")
        sm = T.alloc_local((2,), "float32")  # sum(x^2), sum(g * x)
        co = T.alloc_local((2,), "float32")  # dx = co[0] * g + co[1] * x

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
        for q in T.unroll(S):
            wf[2 * q] = _lo(wv[q])
            wf[2 * q + 1] = _hi(wv[q])
        for i in T.unroll(VPT * 8):
            acc[i] = T.float32(0.0)

        # prologue: the first STAGES - 1 rows in flight (one commit group per row, empty or not)
        for i in T.unroll(STAGES - 1):
            if cta + i * G < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](ring.ptr_to([grp, i, 0, (tid + k * THREADS) * VEC]),
                                        DY.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](ring.ptr_to([grp, i, 1, (tid + k * THREADS) * VEC]),
                                        X.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()

        for i in range(R):
            # refill the slot this thread emptied last iteration (each thread reads back only
            # what it copied itself, so the ring needs no barrier)
            if cta + (i + STAGES - 1) * G < TT:
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([grp, T.truncmod(i + STAGES - 1, STAGES), 0, (tid + k * THREADS) * VEC]),
                            DY.ptr_to([cta + (i + STAGES - 1) * G, (tid + k * THREADS) * VEC]), 16)
                        T.ptx[CP_ASYNC](
                            ring.ptr_to([grp, T.truncmod(i + STAGES - 1, STAGES), 1, (tid + k * THREADS) * VEC]),
                            X.ptr_to([cta + (i + STAGES - 1) * G, (tid + k * THREADS) * VEC]), 16)
            T.ptx[CP_COMMIT]()
            T.ptx[CP_WAIT](STAGES - 1)  # this row's group has landed
            if cta + i * G < TT:  # group-uniform: the group's named barrier below is safe
                slot = T.truncmod(i, STAGES)
                par = T.truncmod(i, 2)
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        dv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[grp, slot, 0, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
                        xv[T.ramp(4 * k, 1, 4)] = T.reinterpret(
                            ring[grp, slot, 1, T.ramp((tid + k * THREADS) * VEC, 1, VEC)], ty="uint32x4")
                    else:
                        for j in T.unroll(4):
                            dv[4 * k + j] = T.uint32(0)
                            xv[4 * k + j] = T.uint32(0)
                # row sums: sum(x^2), sum(dy * w * x) (tail slots hold zeros)
                # NCH independent FMA chains per sum, then a balanced tree of the chains: one
                # FFMA per element for sum(x^2), FMUL + FFMA for sum((dy * x) * w)
                sm[0] = _tree(_chains([(_lo(xv[q]), _lo(xv[q])) for q in range(S)]
                                      + [(_hi(xv[q]), _hi(xv[q])) for q in range(S)]))
                sm[1] = _tree(_chains([(_lo(dv[q]) * _lo(xv[q]), wf[2 * q]) for q in range(S)]
                                      + [(_hi(dv[q]) * _hi(xv[q]), wf[2 * q + 1]) for q in range(S)]))
                sm[0] = T.cuda.warp_sum(sm[0])
                sm[1] = T.cuda.warp_sum(sm[1])
                if T.constexpr(WARPS > 1):
                    if lane == 0:
                        red[(grp * 2 + par) * 2 * WARPS + warp] = sm[0]
                        red[(grp * 2 + par) * 2 * WARPS + WARPS + warp] = sm[1]
                    T.ptx.bar.sync(T.Cast("uint32", grp + 1), T.uint32(THREADS))  # this group's warps only
                    sm[0] = _tree([red[(grp * 2 + par) * 2 * WARPS + j] for j in range(WARPS)])
                    sm[1] = _tree([red[(grp * 2 + par) * 2 * WARPS + WARPS + j] for j in range(WARPS)])
                co[0] = T.rsqrt(sm[0] * T.float32(INV_H) + T.float32(eps))
                co[1] = -(co[0] * co[0] * co[0]) * (sm[1] * T.float32(INV_H))
                # dx (one bf16 rounding) and the thread's dw partials, from the registers of the
                # first pass (no second read of the ring): with t = dy * rstd,
                # dx = fma(t, w, co1 * x) and dw_acc = fma(t, x, dw_acc), 4 FP32 ops per element
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        for j in T.unroll(4):
                            q = 4 * k + j
                            dx_lo = _fma(_lo(dv[q]) * co[0], wf[2 * q], co[1] * _lo(xv[q]))
                            dx_hi = _fma(_hi(dv[q]) * co[0], wf[2 * q + 1], co[1] * _hi(xv[q]))
                            T.ptx.cvt.rn.bf16x2.f32(ov[j], dx_hi, dx_lo)
                            acc[2 * q] = _fma(_lo(dv[q]) * co[0], _lo(xv[q]), acc[2 * q])
                            acc[2 * q + 1] = _fma(_hi(dv[q]) * co[0], _hi(xv[q]), acc[2 * q + 1])
                        T.ptx[DX_STORE](DX.ptr_to([cta + i * G, (tid + k * THREADS) * VEC]),
                                        ov[0], ov[1], ov[2], ov[3])

        if T.constexpr(USE_PDL):
            T.ptx.griddepcontrol.launch_dependents()  # kernel 2 may be scheduled from here on
        # combine the NG groups' partial dw in shared memory (over the rings: every group has
        # read its last row before the barrier), group 0 adding groups 1 .. NG - 1 in order
        T.cuda.cta_sync()
        if grp > 0:
            for k in T.unroll(VPT):
                if k < FULL or tid + k * THREADS < NV:
                    for j in T.unroll(8):
                        comb[grp, (tid + k * THREADS) * VEC + j] = acc[8 * k + j]
        T.cuda.cta_sync()
        if grp == 0:
            for g in range(1, NG):
                for k in T.unroll(VPT):
                    if k < FULL or tid + k * THREADS < NV:
                        for j in T.unroll(8):
                            acc[8 * k + j] = acc[8 * k + j] + comb[g, (tid + k * THREADS) * VEC + j]
            # this CTA's partial dw: row blk of P
            for k in T.unroll(VPT):
                if k < FULL or tid + k * THREADS < NV:
                    T.ptx[P_STORE](P.ptr_to([blk, (tid + k * THREADS) * VEC]),
                                   acc[8 * k], acc[8 * k + 1], acc[8 * k + 2], acc[8 * k + 3])
                    T.ptx[P_STORE](P.ptr_to([blk, (tid + k * THREADS) * VEC + 4]),
                                   acc[8 * k + 4], acc[8 * k + 5], acc[8 * k + 6], acc[8 * k + 7])

    return rmsnorm_bwd_rows, NCTA


def make_reduce_kernel(parts: int, hidden: int):
    """Kernel 2: out[h] = sum over g of P[g, h] in a fixed order (fp32), launched as a
    programmatic dependent of kernel 1 (it waits with griddepcontrol.wait before reading P)."""
    NV4 = hidden // 4  # float4 column groups
    GRID = -(-NV4 // R_COLS)
    PER = -(-parts // R_SLICES)  # rows per slice (upper bound)
    UNROLL = min(PER, R_UNROLL)
    CHUNKS = -(-PER // UNROLL)
    GP = parts
    H = hidden

    @T.function
    def rmsnorm_bwd_dw(P: T.Tensor((GP, H), "float32"), DW: T.Tensor((H,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=R_THREADS,
                                                  programmatic_stream_serialization=USE_PDL))
        tid = T.cuda.thread_idx("x")
        col = T.truncmod(tid, R_COLS)
        sl = T.truncdiv(tid, R_COLS)
        cv = T.cuda.block_idx("x") * R_COLS + col
        red = T.alloc_shared((R_SLICES // 8 * R_COLS * 4,), "float32")  # [warp][col][4]
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
                            P.ptr_to([sl + (c * UNROLL + u) * R_SLICES, cv * 4]),
                        )
                    else:
                        for i in T.unroll(4):
                            buf[4 * u + i] = T.float32(0.0)
                for u in T.unroll(UNROLL):  # rows of the slice in increasing order
                    for i in T.unroll(4):
                        acc[i] = acc[i] + buf[4 * u + i]
        # slices 8w .. 8w + 7 of warp w sit in lane bits 2..4 (tid = sl * R_COLS + col): a fixed
        # butterfly over those bits (slice xor 4, 2, 1), no barrier; lane col (slice 8w) keeps it
        for k in T.unroll(3):
            for i in T.unroll(4):
                acc[i] = acc[i] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[i], 16 >> k, 32)
        if T.truncmod(sl, 8) == 0:
            for i in T.unroll(4):
                red[(T.truncdiv(sl, 8) * R_COLS + col) * 4 + i] = acc[i]
        T.cuda.cta_sync()
        # then the NW = R_SLICES / 8 warp sums of the column group, a fixed balanced tree
        if sl == 0 and cv < NV4:
            for i in T.unroll(4):
                acc[i] = _tree([red[(j * R_COLS + col) * 4 + i] for j in range(R_SLICES // 8)])
            T.ptx[F_STORE](DW.ptr_to([cv * 4]), acc[0], acc[1], acc[2], acc[3])

    return rmsnorm_bwd_dw


def build(spec):
    """Compile both kernels for spec's static (T, H) and return run(dy, x, w, dx, dw)."""
    rows = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    eps = float(spec.params["eps"])
    rows_kernel, parts = make_rows_kernel(rows, hidden, eps)
    ex1 = tvm_tirx.tirx.compile(rows_kernel, target=TARGET)
    ex2 = tvm_tirx.tirx.compile(make_reduce_kernel(parts, hidden), target=TARGET)
    fn1 = ex1["rmsnorm_bwd_rows"]
    fn2 = ex2["rmsnorm_bwd_dw"]
    scratch = []  # P[G, H] fp32, allocated on the first call

    def run(dy, x, w, dx, dw):
        if not scratch:
            scratch.append(torch.empty((parts, hidden), dtype=torch.float32, device=dy.device))
        fn1(dy, x, w, dx, scratch[0])
        fn2(scratch[0], dw)

    run.modules = (ex1, ex2)  # keep the compiled modules alive with the launcher
    return run

"""F08 int4_weight_gemv, TIRx (tvm_tirx 0.1.0a4) expert solution: y = x @ W^T,
W[n, k] = (code(n, k) - 8) * scales[n, k // 128]; x bf16 [M, K] (M <= 8), wq uint8 [N, K/2] (two
codes per byte, even k in the low nibble), scales bf16 [N, K/128], y bf16 [M, N].

Memory-bound on the packed weight and its scales, each read once (N * K / 2 + N * K / 64 bytes;
243 MB with x and y at the benchmark M = 8, N = 57344, K = 8192, 52.2 us at the roofline ideal).
The products run on the tensor cores (``mma.sync.m16n8k16``, bf16 in, fp32 accumulate): A = 16
weight rows x 16 k, B = x^T with the batch M <= 8 as the mma's n, D = a 16 x 8 tile of y^T. The
design is the CuTe expert's, written in TIRx.

Design (one compile per shape set, static M, N, K):
  * Persistent grid: min(132, ceil(tiles / 3)) CTAs of 12 warps = 3 teams (warpgroups) of 4
    warps, 1 CTA per SM (168 registers per thread at the benchmark, the cap at 384 threads;
    shared memory x 128 KB + group sums 2 KB + reduction 6 KB + one 16-byte mask word = ~136 KB).
    A team owns a 32-row tile over the whole K; warp wt of the team takes n-tile nt = wt % 2
    (rows 16 nt .. 16 nt + 15) and the group pairs p = wt // 2 + 2 i (i < NI = ceil(G / 4),
    G = K / 128); one step of a warp = one pair of its 16 rows (16 x 128 contiguous bytes + 16
    scale words). Tiles go round-robin to the teams (tile = tg + 396 k, tg = team * grid + cta):
    1792 tiles at the benchmark, 4 or 5 per team, 13 or 14 per SM.
  * x is converted ONCE per CTA into shared memory in mma B-fragment order (G x 2 KB = 128 KB at
    K = 8192). Chunk c is converted by warp c % 12: lane (g, t) loads x[g, 128 c + 32 t .. + 31]
    with four ``ld.global.nc.v4`` (zeros for batch rows g >= M), packs the pairs (x[k], x[k + 4])
    into 32-bit words and stores 136 * (the sum of the group of x row g), summed with two
    shuffles. All rounds' global x loads are issued before the conversions, so their latency is
    paid once, and after the first weight batch, so HBM is busy meanwhile. In the loop a lane
    gets a group's B registers with 4 conflict-free 16-byte shared loads and its two group sums
    from shared memory: no global x traffic in the main loop.
  * Weights go from global memory straight into the registers of the lane that consumes them (no
    shared-memory staging). Load j (0..3) of lane (g, t) = (L // 4, L % 4) is one 16-byte load
    (LDG.E.128) of row 8 (j % 2) + 2 (g // 2) + j // 2, group (g % 2) ^ (j // 2) of the pair,
    bytes 16 t .. 16 t + 15 of the group (the k order of the x fragments): lanes with g = 2m and
    2m + 1 read the two groups of one row, so every warp load instruction requests 4 FULL
    128-byte lines. Each lane also loads its 2 scale words (word p of rows g and g + 8 = the
    pair's two bf16, 32-bit loads). Lanes with odd g hold the groups in swapped register slots:
    taking a landed buffer into the operand registers is one ``lop3.b32 0xD8`` select per word
    (slot s or s ^ 2, the mask all ones on odd g; these 16 LOP3 per step are also the buffer ->
    operand copy), and group 1's mma rows are the warp rows swapped in pairs (r <-> r ^ 1), so
    its scale words come from lane ^ 4 (2 shuffles per step) and its accumulators are added from
    lane ^ 4 at the tile end (4 shuffles per tile).
  * Load addresses (when N % 32 == 0 and G % 4 == 0, e.g. the benchmark and long_k): a 64-bit base
    pointer plus a loop-invariant 64-bit lane offset plus a 64-bit step offset (tile row, pair),
    so ptxas folds the constant + 8-row offsets into the load instructions' immediates (weights
    +0x8000 at K = 8192, scales +0x400) and the scale pointer's constant load leaves the loop.
    The other shapes index the tensors with 32-bit indices and clamped rows.
  * Pipeline: register buffers for NB = 2 steps, one batch ahead, running across tile
    boundaries (the next tile's first batch is in flight during a tile's epilogue); the prologue
    issues the first batch before the x conversion. Each pass of the loop (2 steps) first takes
    the batch loaded in the previous pass into operand registers, then issues the next batch at
    once (12 loads: 8 x 16 + 4 x 4 bytes per lane), then does the math of its 2 steps: 2 steps
    (4 KB per warp, 48 KB per SM) stay in flight during the math. ptxas puts all the weight
    loads on one scoreboard and a wait on it drains everything, hence whole batches with one
    wait per pass, at the take. A named barrier of the warp alone (bar.sync 4 + warp, 32; ids
    1..3 are the teams') right after the issue keeps ptxas from sinking the loads to the end of
    the loop body; it only holds plain ld.global (ptxas moved ld.global.nc across it in the
    CuTe build), so the weight loads are ``ld.global.v4.b32`` / ``ld.global.b32`` (asm
    volatile), not .nc, and allocate in L1. When NB divides NI (the benchmark) the last pass is
    peeled and loads nothing, so the loop's loads are unpredicated; otherwise a guarded loop.
  * Math per step and warp: for each of the 2 groups, 8 mma in 2 independent chains on
    A = ((w >> 4i) & 0x000F000F) | 0x43004300 = the bf16 pair (128 + code(i), 128 + code(i + 4))
    (the same k pairing as the x fragments), then acc += s * (D - 136 * xsum) (fmaf), since
    (128 + code) - 136 = code - 8. The nibble mask is stored to a shared word by thread 0 and
    loaded once into a register (ptxas cannot fold a shared load into an immediate), so the
    and/or is ONE lop3 (reg, imm, reg) per operand; with both immediates NVRTC's build emitted
    two (a lop3 takes a single immediate).
  * Precision: bf16 operands and products exact, fp32 accumulation; the 136 * xsum cancellation
    costs ~5 bits of fp32 (relative ~1e-5, far inside rtol 3.2e-2). NVRTC compiles with
    --use_fast_math; the kernel has no division or transcendental, so that only flushes fp32
    subnormals in the adds and FMAs (terms below 2^-126, negligible here).
  * Tile reduction, deterministic: 2 partials per row (the two pair parities) through shared
    memory, summed in a fixed order (parity 0 + parity 1), one round-to-nearest conversion to
    bf16, y written once; 2 named barriers per tile and team, no atomics.
  * Ragged N: weight and scale rows are clamped to N - 1 for loading (compiled in only when
    N % 32 != 0 or G % 4 != 0) and the stores of rows >= N are skipped; batch rows m >= M are
    zero in the x fragments and never stored. When G % 4 != 0 (K = 256, 768, ...) the steps of
    pairs p >= G / 2 load nothing and are skipped (their warps' partials stay 0).
  * Limits (asserted in make_kernel): group_size 128, 1 <= M <= 8, K % 256 == 0 (scales read as
    32-bit words), K <= 8192 (x in shared memory), N * K / 2 < 2^31 (int32 indexing).
  * Host path: build() compiles for the static (M, N, K) of a shape set (sm_90a); run(x, wq,
    scales, y) passes the torch tensors straight to the compiled function.

SASS (sm_90a, cuobjdump): 168 registers at the benchmark and long_k shapes, no spills. Main loop of
the benchmark build: 491 instructions per pass of 2 steps with the tile epilogue inline (47 of
them), ~222 per step on the hot path (long_k: 204), with 16 HMMA, 6 LDG, 2 SHFL and ~10 LDS per
step, against 214.5 for the CuTe expert (its epilogue out of line). The 8 LDG.E.128 of a pass are
unpredicated, on one scoreboard, issued right after the take and before the warp's BAR.SYNC, and
waited on once per pass, at the next take; the 4 scale loads are on two other scoreboards. The load
of y's pointer in the tile epilogue is on a scoreboard of its own, so it does not drain the batch in
flight (the CuTe build needed a workaround for that). Checks (CPU): the TIRx index forms were
checked against the CuTe lane mapping (with gpar = g % 2: gpar + (j // 2) (1 - 2 gpar) =
gpar ^ (j // 2), (s + 2) % 4 = s ^ 2, the lop3 0xD8 truth table, the scale shifts); the batch
schedule of both loop forms for NI = 1..39 and 0..5 tiles per team loads, takes and computes
every step exactly once, in order, and ends each tile once; the 64-bit byte offsets equal the
32-bit indices and stay in bounds at the benchmark and long_k; a numpy emulation of small and
ragged gives relative error 0, every weight read once and every y element written once. Compiled
for sm_90a on every shape set.

Measured on the H200 (full mode, one judge): 72.9 us (IQR 1.1) in the tuning run
bench/h200/2026-12-02e/tune-r12.json, against 78.7 us (IQR 1.3) for the previous expert in the
same run (1.08x); the same kernel with 32-bit index math for every load (153 registers, ~227.5
instructions per step) 73.6 us (IQR 1.0). One-run table bench/h200/2026-12-02e/solutions-CF-r12.md:
73.0 us (IQR 0.9), 71.5% of the 52.2 us roofline ideal, 4.13x the fastest eager formulation
(torch_int4pack), 7.52x torch.compile; the CuTe expert 72.8 us in the same run (ratio 1.003, the
CuTe one faster); that table's timing paid the write-back of the L2 flush's dirty lines inside
each call. Measured since the judge's flush leaves L2 clean (bench/h200/2026-12-02f, where
flushprobe.txt shows the same kernels under both flushes): 66.1 us (IQR 0.9), 78.8% of the ideal,
4.53x torch_int4pack, 8.14x torch.compile (solutions-ABCF-r13.md; the CuTe expert 65.8 us).
What changed against the previous expert (the same teams, tiles, x fragments and magic-dequant
math, with the weights through a per-warp cp.async ring in shared memory: 3 stages of one group
x 32 rows, warps taking groups c = wt + 4 i, 4 partials per row, 78 registers, 283 instructions
per step): the ring is gone, and with it the shared-memory round trip of every weight byte; the
weights load straight into registers with full-line requests, with the same 48 KB per SM in
flight and ~22% fewer instructions per step.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

SMS = 132
WARPS = 12
THREADS = WARPS * 32
TW = 4               # warps per team (one warpgroup; bar.sync id, 128)
TEAMS = WARPS // TW
TROWS = 32           # weight rows per tile (2 n-tiles of 16)
NB = 2               # pair steps per load batch (one batch in flight during the math)
GROUP = 128
MAXM = 8
X_LOAD = "ld.global.nc.v4.b32"

# d[0..3] += A (16 x 16 weights) x B (16 x 8 x^T), bf16 in, fp32 accumulate.
MMA = r"""
__device__ __forceinline__ void mkb_f08t12v2_mma(float* d, unsigned int a0, unsigned int a1,
                                                 unsigned int a2, unsigned int a3,
                                                 unsigned int b0, unsigned int b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
"""
# 16-byte weight load into 4 registers: plain ld.global (ptxas moved .nc loads across the
# scheduling-fence barrier in the CuTe variant)
LD4 = r"""
__device__ __forceinline__ void mkb_f08t12v2_ld4(unsigned int* d, const void* p) {
  asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "l"(p));
}
"""
LD1 = r"""
__device__ __forceinline__ void mkb_f08t12v2_ld1(unsigned int* d, const void* p) {
  asm volatile("ld.global.b32 %0, [%1];" : "=r"(d[0]) : "l"(p));
}
"""
# 64-bit address: base + lane offset + step offset (all 64-bit adds, so the constant row offsets
# fold into the LDG immediates)
LD4O = r"""
__device__ __forceinline__ void mkb_f08t12v2_ld4o(unsigned int* d, const unsigned char* b,
                                                  long long lo, long long so) {
  const unsigned char* p = b + lo + so;
  asm volatile("ld.global.v4.b32 {%0, %1, %2, %3}, [%4];"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "l"(p));
}
"""
LD1O = r"""
__device__ __forceinline__ void mkb_f08t12v2_ld1o(unsigned int* d, const void* b,
                                                  long long lo, long long so) {
  const unsigned char* p = reinterpret_cast<const unsigned char*>(b) + lo + so;
  asm volatile("ld.global.b32 %0, [%1];" : "=r"(d[0]) : "l"(p));
}
"""
# m ? b : a bitwise, one LOP3 (the odd-lane slot swap, also the buffer -> operand copy)
SEL = r"""
__device__ __forceinline__ unsigned int mkb_f08t12v2_sel(unsigned int a, unsigned int b,
                                                         unsigned int m) {
  unsigned int r;
  asm("lop3.b32 %0, %1, %2, %3, 0xD8;" : "=r"(r) : "r"(a), "r"(b), "r"(m));
  return r;
}
"""
# a named barrier of one warp (ids 4 .. 15): fences ptxas's scheduler (else it sank the loads
# to the end of the loop body)
WBAR = r"""
__device__ __forceinline__ void mkb_f08t12v2_wbar(int id) {
  asm volatile("bar.sync %0, 32;" : : "r"(id) : "memory");
}
"""


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _nib(w, sft, mask):
    """bf16 pair (128 + code(i), 128 + code(i + 4)) of the 8 codes of word w, i = sft / 4;
    mask = 0x000F000F held in a register (one lop3 per operand)."""
    return ((w >> T.uint32(sft)) & mask) | T.uint32(0x43004300)


def _fma(a, b, c):
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def make_kernel(batch: int, n_out: int, k_in: int, group: int = GROUP):
    """int4 GEMV for static M = batch (<= 8), N = n_out, K = k_in (% 256 == 0, <= 8192)."""
    assert group == GROUP, "the kernel is written for groups of 128"
    assert 1 <= batch <= MAXM, "M is 1 to 8"
    assert k_in % 256 == 0 and k_in <= 8192, "K % 256 == 0 (scale words); x fits shared memory"
    assert n_out * k_in // 2 < 2**31, "int32 indexing"
    G = k_in // GROUP                      # groups per row (even)
    P2 = G // 2                            # group pairs per row
    NI = (P2 + 1) // 2                     # pair steps per warp and tile: pp, pp + 2, ... < P2
    PEVEN = P2 % 2 == 0                    # every warp has a pair at every step
    ALIGNED = NI % NB == 0                 # batches never straddle tiles; all steps real
    n_tiles = (n_out + TROWS - 1) // TROWS
    GRID = min(SMS, (n_tiles + TEAMS - 1) // TEAMS)
    NTEAMS = GRID * TEAMS
    CLAMP = n_out % TROWS != 0
    XR = (G + WARPS - 1) // WARPS          # x conversion rounds: chunk c = warp + WARPS r
    XEXACT = G % WARPS == 0
    MM, NN, KK, KB = batch, n_out, k_in, k_in // 2

    @T.macro
    def load(wb, sb, Wq, Sc, q, u, tg, nt, pp, g, t, gpar):
        """Loads of step q (tile k = q // NI, pair p = pp + 2 (q % NI)) into buffer u.
        Instruction j of lane (g, t): warp row 8 (j % 2) + 2 (g // 2) + j // 2, group
        gpar ^ (j // 2) of the pair, bytes 16 t of the group: each warp instruction reads 4 full
        128-byte lines.  Scale words: word p of rows g, g + 8 (this lane's mma rows)."""
        k = T.truncdiv(q, NI)
        p = pp + 2 * (q - k * NI)
        row0 = (tg + k * NTEAMS) * TROWS + 16 * nt
        if T.constexpr(PEVEN):
            for j in T.unroll(4):
                wrow = 8 * (j % 2) + 2 * T.truncdiv(g, 2) + j // 2
                grp = gpar + (j // 2) * (1 - 2 * gpar)        # gpar ^ (j // 2)
                if T.constexpr(CLAMP):
                    T.cuda.func_call("mkb_f08t12v2_ld4", wb.ptr_to([16 * u + 4 * j]),
                                     Wq.ptr_to([T.min(row0 + wrow, NN - 1),
                                                p * 128 + 64 * grp + 16 * t]), LD4)
                else:
                    # byte offset = lane part (wrow, group, t: loop-invariant) + step part (row0, p)
                    lo = (T.cast(2 * T.truncdiv(g, 2) * KB + 64 * grp + 16 * t, "int64")
                          + T.int64(8 * (j % 2) * KB + (j // 2) * KB))
                    T.cuda.func_call("mkb_f08t12v2_ld4o", wb.ptr_to([16 * u + 4 * j]),
                                     Wq.ptr_to([0, 0]), lo,
                                     T.cast(row0 * KB + p * 128, "int64"), LD4O)
            for h in T.unroll(2):
                if T.constexpr(CLAMP):
                    T.cuda.func_call("mkb_f08t12v2_ld1", sb.ptr_to([2 * u + h]),
                                     Sc.ptr_to([T.min(row0 + g + 8 * h, NN - 1), 2 * p]), LD1)
                else:
                    # scale word p of row row0 + g + 8 h: byte (row0 + g + 8 h) * 2 G + 4 p
                    T.cuda.func_call("mkb_f08t12v2_ld1o", sb.ptr_to([2 * u + h]),
                                     Sc.ptr_to([0, 0]),
                                     T.cast(g * (2 * G), "int64") + T.int64(8 * h * 2 * G),
                                     T.cast(row0 * (2 * G) + 4 * p, "int64"), LD1O)
        else:
            if p < P2:
                for j in T.unroll(4):
                    wrow = 8 * (j % 2) + 2 * T.truncdiv(g, 2) + j // 2
                    grp = gpar + (j // 2) * (1 - 2 * gpar)
                    T.cuda.func_call("mkb_f08t12v2_ld4", wb.ptr_to([16 * u + 4 * j]),
                                     Wq.ptr_to([T.min(row0 + wrow, NN - 1),
                                                p * 128 + 64 * grp + 16 * t]), LD4)
                for h in T.unroll(2):
                    T.cuda.func_call("mkb_f08t12v2_ld1", sb.ptr_to([2 * u + h]),
                                     Sc.ptr_to([T.min(row0 + g + 8 * h, NN - 1), 2 * p]), LD1)

    @T.macro
    def consume(wb, sb, ws, sw, om, u):
        """Landed buffer u -> operands u: slot s = 2 gi + h (group gi, mma row g + 8 h) is
        instruction s on even lanes and s ^ 2 on odd lanes (om = all ones on odd lanes); scale
        slots 2, 3 (group 1: rows g ^ 1, (g + 8) ^ 1) come from lane ^ 4."""
        for s in T.unroll(4):
            for w in T.unroll(4):
                ws[16 * u + 4 * s + w] = T.cuda.func_call(
                    "mkb_f08t12v2_sel", wb[16 * u + 4 * s + w],
                    wb[16 * u + 4 * ((s + 2) % 4) + w], om, SEL, ty="uint32")
        for h in T.unroll(2):
            sw[4 * u + h] = sb[2 * u + h]
            sw[4 * u + 2 + h] = T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), sb[2 * u + h], 4, 32)

    @T.macro
    def compute(mk, ws, sw, xf, xs, bw, ee, acc, p, u, lane, t):
        """16 mma of pair p (groups 2p, 2p + 1) of the warp's n-tile from operands u;
        acc[4 gi + e] += scale * (D - 136 xsum)."""
        for gi in T.unroll(2):
            c = 2 * p + gi
            for qq in T.unroll(4):
                bw[T.ramp(4 * qq, 1, 4)] = xf[T.ramp(512 * c + 128 * qq + 4 * lane, 1, 4)]
            xs_lo = xs[c * MAXM + 2 * t]
            xs_hi = xs[c * MAXM + 2 * t + 1]
            for e in T.unroll(8):
                ee[e] = T.float32(0.0)
            for s in T.unroll(8):
                sft = 8 * (s % 2)                              # nibble pair (i, i + 4)
                w_lo = ws[16 * u + 4 * (2 * gi) + s // 2]      # mma row g, word s // 2
                w_hi = ws[16 * u + 4 * (2 * gi + 1) + s // 2]  # mma row g + 8
                T.cuda.func_call(
                    "mkb_f08t12v2_mma", ee.ptr_to([4 * (s % 2)]),
                    _nib(w_lo, sft, mk[0]), _nib(w_hi, sft, mk[0]),
                    _nib(w_lo, sft + 4, mk[0]), _nib(w_hi, sft + 4, mk[0]),
                    bw[2 * s], bw[2 * s + 1], MMA,
                )
            # scale: group 0 = low bf16 of slot h (shift 16), group 1 = high bf16 of slot 2 + h
            s_lo = T.reinterpret((sw[4 * u + 2 * gi] << T.cast(16 - 16 * gi, "uint32"))
                                 & T.uint32(0xFFFF0000), ty="float32")
            s_hi = T.reinterpret((sw[4 * u + 2 * gi + 1] << T.cast(16 - 16 * gi, "uint32"))
                                 & T.uint32(0xFFFF0000), ty="float32")
            acc[4 * gi + 0] = _fma(s_lo, (ee[0] + ee[4]) - xs_lo, acc[4 * gi + 0])
            acc[4 * gi + 1] = _fma(s_lo, (ee[1] + ee[5]) - xs_hi, acc[4 * gi + 1])
            acc[4 * gi + 2] = _fma(s_hi, (ee[2] + ee[6]) - xs_lo, acc[4 * gi + 2])
            acc[4 * gi + 3] = _fma(s_hi, (ee[3] + ee[7]) - xs_hi, acc[4 * gi + 3])

    @T.macro
    def tile_end(Y, red, acc, k, tg, team, tt, nt, pp, g, t):
        """End of tile: group 1's values of rows g, g + 8 from lane ^ 4, the 2 partials of each
        row (pair parities) summed in a fixed order, one rounding to bf16, y written once."""
        for e in T.unroll(4):
            acc[e] = acc[e] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[4 + e], 4, 32)
        row0 = (tg + k * NTEAMS) * TROWS
        rb = (team * 2 + pp) * (MAXM * TROWS)
        red[rb + (2 * t) * TROWS + nt * 16 + g] = acc[0]
        red[rb + (2 * t + 1) * TROWS + nt * 16 + g] = acc[1]
        red[rb + (2 * t) * TROWS + nt * 16 + g + 8] = acc[2]
        red[rb + (2 * t + 1) * TROWS + nt * 16 + g + 8] = acc[3]
        T.cuda.warpgroup_sync(team + 1)
        for e0 in T.unroll(MAXM * TROWS // (TW * 32)):
            m = T.truncdiv(e0 * TW * 32 + tt, TROWS)
            rl = T.truncmod(e0 * TW * 32 + tt, TROWS)
            if m < MM and row0 + rl < NN:
                tb = team * 2 * MAXM * TROWS + m * TROWS + rl
                Y[m, row0 + rl] = T.cast(red[tb] + red[tb + MAXM * TROWS], "bfloat16")
        T.cuda.warpgroup_sync(team + 1)
        for e in T.unroll(8):
            acc[e] = T.float32(0.0)

    @T.macro
    def load_x(X, xin, r, c, g, t):
        """x[g, 128 c + 32 t .. + 31] -> xin[16 r .. 16 r + 15] (zeros for batch rows g >= M)."""
        if g < MM:
            for v in T.unroll(4):
                T.ptx[X_LOAD](xin[16 * r + 4 * v], xin[16 * r + 4 * v + 1],
                              xin[16 * r + 4 * v + 2], xin[16 * r + 4 * v + 3],
                              X.ptr_to([g, c * GROUP + 32 * t + 8 * v]))
        else:
            for v in T.unroll(16):
                xin[16 * r + v] = T.uint32(0)

    @T.macro
    def convert_x(xf, xs, xin, bx, xsum, r, c, lane, g, t):
        """The lane's 16 B registers of chunk c and 136 * the group sum of x row g (t = 0)."""
        xsum[0] = T.float32(0.0)
        for v in T.unroll(16):
            xsum[0] = xsum[0] + (_lo(xin[16 * r + v]) + _hi(xin[16 * r + v]))
        xsum[0] = xsum[0] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), xsum[0], 1, 32)
        xsum[0] = xsum[0] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), xsum[0], 2, 32)
        if t == 0:
            xs[c * MAXM + g] = xsum[0] * T.float32(136.0)
        # words (x[k], x[k + 4]) and (x[k + 1], x[k + 5]), k = 8 (s // 2) + 2 (s % 2)
        for s in T.unroll(8):
            xa = xin[16 * r + 4 * (s // 2) + (s % 2)]
            xb = xin[16 * r + 4 * (s // 2) + (s % 2) + 2]
            bx[2 * s] = (xa & T.uint32(0xFFFF)) | (xb << T.uint32(16))
            bx[2 * s + 1] = (xa >> T.uint32(16)) | (xb & T.uint32(0xFFFF0000))
        for qq in T.unroll(4):
            xf[T.ramp(512 * c + 128 * qq + 4 * lane, 1, 4)] = bx[T.ramp(4 * qq, 1, 4)]

    @T.macro
    def step_iter(wb, sb, ws, sw, Wq, Sc, Y, xf, xs, red, mk, om, bw, ee, acc, q0, Q, tg, nt, pp,
                  warp, lane, g, t, gpar, team, tt, do_load, guard):
        """Steps q0 .. q0 + NB - 1 (guard: only those < Q)."""
        # 1. the batch loaded one iteration ago -> operands (its first use drains ptxas's
        #    single LDG scoreboard, so the next batch is issued whole right after)
        for u in T.unroll(NB):
            q = q0 + u
            k = T.truncdiv(q, NI)
            p = pp + 2 * (q - k * NI)
            if T.constexpr(guard):
                if q < Q:
                    if T.constexpr(PEVEN):
                        consume(wb, sb, ws, sw, om, u)
                    else:
                        if p < P2:
                            consume(wb, sb, ws, sw, om, u)
            else:
                if T.constexpr(PEVEN):
                    consume(wb, sb, ws, sw, om, u)
                else:
                    if p < P2:
                        consume(wb, sb, ws, sw, om, u)
        # 2. the next batch into the freed buffers
        if T.constexpr(do_load):
            for u in T.unroll(NB):
                qn = q0 + NB + u
                if T.constexpr(guard):
                    if qn < Q:
                        load(wb, sb, Wq, Sc, qn, u, tg, nt, pp, g, t, gpar)
                else:
                    load(wb, sb, Wq, Sc, qn, u, tg, nt, pp, g, t, gpar)
        # 3. scheduling fence: one-warp named barrier
        T.cuda.func_call("mkb_f08t12v2_wbar", 4 + warp, WBAR)
        # 4. the math; the tile epilogue after a tile's last step
        for u in T.unroll(NB):
            q = q0 + u
            k = T.truncdiv(q, NI)
            i = q - k * NI
            p = pp + 2 * i
            if T.constexpr(guard):
                if q < Q:
                    if T.constexpr(PEVEN):
                        compute(mk, ws, sw, xf, xs, bw, ee, acc, p, u, lane, t)
                    else:
                        if p < P2:
                            compute(mk, ws, sw, xf, xs, bw, ee, acc, p, u, lane, t)
                    if i == NI - 1:
                        tile_end(Y, red, acc, k, tg, team, tt, nt, pp, g, t)
            else:
                if T.constexpr(PEVEN):
                    compute(mk, ws, sw, xf, xs, bw, ee, acc, p, u, lane, t)
                else:
                    if p < P2:
                        compute(mk, ws, sw, xf, xs, bw, ee, acc, p, u, lane, t)
        if T.constexpr(not guard):
            # ALIGNED: a tile can only end at the batch's last step
            k = T.truncdiv(q0 + NB - 1, NI)
            if q0 + NB - 1 - k * NI == NI - 1:
                tile_end(Y, red, acc, k, tg, team, tt, nt, pp, g, t)

    @T.function
    def int4_weight_gemv_t12v2(
        X: T.Tensor((MM, KK), T.bfloat16),
        Wq: T.Tensor((NN, KB), T.uint8),
        Sc: T.Tensor((NN, G), T.bfloat16),
        Y: T.Tensor((MM, NN), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        tid = T.cuda.thread_idx("x")
        bid = T.cuda.block_idx("x")
        pool = SMEMPool()
        xf = pool.alloc((G * 512,), "uint32", align=128)          # x in B-fragment order
        xs = pool.alloc((G * MAXM,), "float32", align=16)         # 136 * group sums, [c][m]
        red = pool.alloc((TEAMS * 2 * MAXM * TROWS,), "float32", align=16)  # [team][pp][m][row]
        mks = pool.alloc((4,), "uint32", align=16)              # the nibble mask
        pool.commit()
        xin = T.alloc_local((XR * 16,), "uint32")
        bx = T.alloc_local((16,), "uint32")
        xsum = T.alloc_local((1,), "float32")
        wb = T.alloc_local((NB * 16,), "uint32")   # load buffers [u][instruction j][word]
        sb = T.alloc_local((NB * 2,), "uint32")    # scale-word buffers [u][h]
        ws = T.alloc_local((NB * 16,), "uint32")   # operands [u][slot s][word]
        sw = T.alloc_local((NB * 4,), "uint32")    # scale operands [u][slot]
        bw = T.alloc_local((16,), "uint32")
        ee = T.alloc_local((8,), "float32")
        acc = T.alloc_local((8,), "float32")       # [group of the pair][4 D values]
        mk = T.alloc_local((1,), "uint32")   # the nibble mask, opaque (one lop3)

        warp = T.truncdiv(tid, 32)
        lane = T.truncmod(tid, 32)
        g = T.truncdiv(lane, 4)
        t = T.truncmod(lane, 4)
        gpar = T.truncmod(g, 2)
        team = T.truncdiv(warp, TW)
        wt = T.truncmod(warp, TW)
        nt = T.truncmod(wt, 2)               # the warp's n-tile: rows 16 nt .. 16 nt + 15
        pp = T.truncdiv(wt, 2)               # the warp's pair parity: pairs pp + 2 i
        tg = team * GRID + bid
        # tiles tg, tg + NTEAMS, ... < n_tiles (tg <= n_tiles + 1: Q = 0 for tg >= n_tiles)
        NT = T.truncdiv(n_tiles - 1 - tg + NTEAMS, NTEAMS)
        Q = NT * NI

        # 0. the first batch of this warp's stream
        for st in T.unroll(NB):
            if st < Q:
                load(wb, sb, Wq, Sc, st, st, tg, nt, pp, g, t, gpar)

        if tid == 0:
            mks[0] = T.uint32(0x000F000F)
        # 1. x -> shared memory in fragment order: (chunk c = warp + WARPS r, lane); all rounds'
        #    global loads first, then the conversions
        for r in T.unroll(XR):
            if T.constexpr(XEXACT):
                load_x(X, xin, r, warp + WARPS * r, g, t)
            else:
                if warp + WARPS * r < G:
                    load_x(X, xin, r, warp + WARPS * r, g, t)
        for r in T.unroll(XR):
            if T.constexpr(XEXACT):
                convert_x(xf, xs, xin, bx, xsum, r, warp + WARPS * r, lane, g, t)
            else:
                if warp + WARPS * r < G:
                    convert_x(xf, xs, xin, bx, xsum, r, warp + WARPS * r, lane, g, t)
        T.cuda.cta_sync()

        for e in T.unroll(8):
            acc[e] = T.float32(0.0)
        tt = tid - team * (TW * 32)
        mk[0] = mks[0]   # a shared load: ptxas cannot fold it into an immediate
        om = T.uint32(0) - T.cast(gpar, "uint32")   # all ones on odd lanes

        # 2. the warp's stream of (tile, pair) steps in batches of NB
        if T.constexpr(ALIGNED):
            # every batch is NB real steps of one tile; the last batch (no loads) is peeled so
            # the loop's loads are unpredicated
            for it in T.serial(T.max(NT * (NI // NB) - 1, 0)):
                step_iter(wb, sb, ws, sw, Wq, Sc, Y, xf, xs, red, mk, om, bw, ee, acc, it * NB,
                          Q, tg, nt, pp, warp, lane, g, t, gpar, team, tt, True, False)
            if Q > 0:
                step_iter(wb, sb, ws, sw, Wq, Sc, Y, xf, xs, red, mk, om, bw, ee, acc, Q - NB,
                          Q, tg, nt, pp, warp, lane, g, t, gpar, team, tt, False, False)
        else:
            for it in T.serial(T.truncdiv(Q + NB - 1, NB)):
                step_iter(wb, sb, ws, sw, Wq, Sc, Y, xf, xs, red, mk, om, bw, ee, acc, it * NB,
                          Q, tg, nt, pp, warp, lane, g, t, gpar, team, tt, True, True)

    return int4_weight_gemv_t12v2


def build(spec):
    """Compile for spec's static (M, N, K) and group size; return run(x, wq, scales, y)."""
    batch = int(spec.dims["M"])
    n_out = int(spec.dims["N"])
    k_in = int(spec.dims["K"])
    group = int(spec.params.get("group_size", GROUP))
    kernel = make_kernel(batch, n_out, k_in, group)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["int4_weight_gemv_t12v2"]

    def run(x, wq, scales, y):
        fn(x, wq, scales, y)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

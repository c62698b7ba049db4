"""F08 int4_weight_gemv, CuTe DSL expert solution: y = x @ W^T, W[n, k] = (code(n, k) - 8) *
scales[n, k // 128]; x bf16 [M, K] (M <= 8), wq uint8 [N, K/2] (two codes per byte, even k in the
low nibble), scales bf16 [N, K/128], y bf16 [M, N].

Memory-bound on the packed weight and its scales, each read once (N * K / 2 + N * K / 64 bytes;
243 MB with x and y at the benchmark M = 8, N = 57344, K = 8192, 52.1 us at the roofline ideal).
The products run on the tensor cores (mma.sync m16n8k16 bf16 -> fp32): A = 16 weight rows x 16 k,
B = x^T with the batch M <= 8 as the mma's n, D = a 16 x 8 tile of y^T.

Design (one compile per shape set, static M, N, K):
  * Persistent grid: min(132, ceil(tiles / 3)) CTAs of 12 warps = 3 teams of 4 warps, 1 CTA per
    SM (168 registers per thread, the cap at 384 threads; shared memory x 128 KB + group sums
    2 KB + reduction 6 KB = ~136 KB). A team owns a 32-row tile over the whole K; warp wt of the
    team takes n-tile nt = wt % 2 (rows 16 nt .. 16 nt + 15) and the group pairs p = wt // 2 + 2 i
    (i < NI = ceil(G / 4), G = K / 128); one step of a warp = one pair of its 16 rows (16 x 128
    contiguous bytes + 16 scale words). Tiles go round-robin to the teams (tile = tg + 396 k,
    tg = team * grid + cta): 1792 tiles at the benchmark, 4 or 5 per team, 13 or 14 per SM.
  * x is converted ONCE per CTA into shared memory in mma B-fragment order (G x 2 KB = 128 KB at
    K = 8192; chunk c by warp c % 12, pairs (x[k], x[k + 4]) packed into 32-bit words, zeros for
    batch rows >= M) plus 136 * (sum of each group of x) per batch row (two shuffles). All rounds'
    global x loads are issued ahead of the conversion, so their latency is paid once. In the loop
    a lane gets a group's B registers with 4 conflict-free 16-byte shared loads: no global x
    traffic in the main loop.
  * Weights go from global memory straight into the registers of the lane that consumes them (no
    shared-memory staging). Load j (0..3) of lane (g, t) = (L // 4, L % 4) is one ld.global.v4
    (LDG.E.128) of row 8 (j % 2) + 2 (g // 2) + j // 2, group (g % 2) ^ (j // 2) of the pair,
    bytes 16 t .. 16 t + 15 of the group (the k order of the x fragments): lanes g = 2m and
    2m + 1 read the two groups of one row, so every warp load instruction requests 4 FULL 128-byte
    lines. Each lane also loads its 2 scale words (word p of rows g and g + 8 = the pair's two
    bf16, ld.global.b32). Odd lanes hold the groups in swapped register slots: taking a landed
    buffer into the operand registers is one LOP3 select per word (slot s or s ^ 2; these 16 LOP3
    per step are also the buffer -> operand copy), and group 1's mma rows are the warp rows
    swapped in pairs (r <-> r ^ 1), so its scale words come from lane ^ 4 (2 shuffles per step)
    and its accumulators are added from lane ^ 4 at the tile end (4 shuffles per tile).
  * Pipeline: register buffers for NB = 2 steps, one batch ahead; the prologue issues the first
    batch before the x conversion, so HBM is busy meanwhile. Each pass of the loop (2 steps)
    first takes the batch loaded in the previous pass into operand registers, then issues the
    next batch at once (12 loads: 8 x 16 + 4 x 4 bytes per lane), then does the math of its 2
    steps: 2 steps (4 KB per warp, 48 KB per SM) stay in flight during the math. What the SASS
    forced: ptxas puts all these loads on one scoreboard, and a wait on it drains everything (a
    rolling ring in registers fell to 0-1 steps in flight), hence whole batches with one wait per
    pass, at the take. ptxas sank the loads to the end of the loop body; a named barrier of the
    warp alone (bar.sync 4 + warp, 32; ids 1..3 are the teams') right after the issue stops that,
    but only for plain ld.global (ptxas moved ld.global.nc across it), so the loads are not .nc
    and allocate in L1. A predicated load made ptxas copy a loaded register inside the same pass,
    a wait on that load: when NB divides NI (the benchmark) the last pass is peeled and loads
    nothing, so the loop's loads are unpredicated; otherwise a guarded loop. An LDC of y's
    pointer in the loop shared the loads' scoreboard and drained the next batch: y's base address
    carries a zero read from shared memory and the y stores are inline st.global.b16.
  * Math per step and warp: for each of the 2 groups, 8 mma in 2 independent chains on
    A = ((w >> 4i) & 0x000F000F) | 0x43004300 = the bf16 pair (128 + code(i), 128 + code(i + 4))
    (the same k pairing as the x fragments), then acc += s * (D - 136 * xsum), since
    (128 + code) - 136 = code - 8. The nibble mask is read once from shared memory into a
    register: with the immediate, ptxas rematerialized it (IMAD.MOV) before every lop3, +64
    instructions per step. bf16 operands and products exact, fp32 accumulation; the 136 * xsum
    cancellation costs ~5 bits of fp32 (relative ~1e-5, far inside rtol 3.2e-2).
  * Tile reduction, deterministic: 2 partials per row (the two pair parities) through shared
    memory, summed in a fixed order (parity 0 + parity 1), one rounding to bf16 (cvt.rn), y
    written once; 2 named barriers per tile and team, no atomics.
  * Ragged N: weight and scale rows are clamped to N - 1 for loading (compiled in only when
    N % 32 != 0) and the stores of rows >= N are skipped; batch rows m >= M are zero in the x
    fragments and never stored. When G % 4 != 0 (K = 256, 768, ...) the steps of pairs p >= G / 2
    load nothing and are skipped (their warps' partials stay 0).
  * Limits (build() raises ValueError): group_size 128, 1 <= M <= 8, K % 256 == 0 (scales read
    as 32-bit words), K <= 8192 (x in shared memory), N * K / 2 < 2^31 (32-bit index math).
  * Host path: compiled once per (M, N, K) with --enable-tvm-ffi against fake tensors;
    run(x, wq, scales, y) passes the torch tensors straight through on torch's current stream.

SASS (benchmark build, cuobjdump): 168 registers (143 at long_k), no local memory at any built
shape; 214.5 instructions per step on the hot path (the tile epilogue out of line): 84 LOP3,
50 SHF, 16 HMMA, 10 LDS (x fragments and group sums only), 6 LDG, 2 SHFL, 0.5 BAR, against ~220
for the ring expert's step without its epilogue (22 LDS + 5 LDGSTS + DEPBAR + __syncwarp among
them). All 12 loads of a pass are unpredicated on one scoreboard, waited on once per pass, never
in the pass that issued them. Checks (CPU): the loop emulated literally, lane by lane, in numpy
(prologue, take with the odd-lane select, loads, lane ^ 4 shuffles, x fragments, magic-dequant A
through an exact m16n8k16 fragment model in fp64, scales, 136 * xsum, 2-partial reduction) for
small (1, 64, 256), ragged (5, 1000, 1024), long_k (8, 2048, 8192), (2, 3250, 768),
(3, 96, 512) and (2, 40, 768) (between them odd G / 2, NI = 1 and clamped rows), and 4 teams
(18 tiles, 4- and 5-tile teams) of the benchmark shape: every load in bounds, every weight byte read once (except
row N - 1, re-read by the clamped rows of a ragged last tile), every y element written once,
result = fp64 reference to 1e-12 (without the odd-lane swap the relative error is 1.06).
Compiled for sm_90a on every shape set.

Measured on the H200 (full mode, one judge): 72.7 us (IQR 1.2) in the tuning run
bench/h200/2026-12-02e/tune-r11.json, against 75.6 us (IQR 1.1) for the previous expert in the
same run (1.04x); the same kernel with half-line loads (8 half lines per LDG.128, no swap and no
shuffles) 74.4 us (IQR 1.1). One-run table bench/h200/2026-12-02e/solutions-CF-r11.md: 73.0 us
(IQR 1.1), 71.4% of the 52.1 us roofline ideal, 4.13x the fastest eager formulation
(torch_int4pack), 7.35x torch.compile; the TIRx expert 77.4 us (ratio 1.060, this one faster).
Those timings paid the write-back of the L2 flush's dirty lines inside each call. Measured since
the judge's flush leaves L2 clean (bench/h200/2026-12-02f, where flushprobe.txt shows the same
kernel at 73.3 us under the old flush and 65.6 us under the new one, and Nsight Compute gives a
kernel duration of 65.0-65.7 us, ncu-f08.csv): 65.8 us (IQR 0.8), 79.2% of the ideal, 4.55x
torch_int4pack, 8.19x torch.compile (solutions-ABCF-r13.md; the TIRx expert 66.1 us). Nsight
Compute: 242.4 MB read from DRAM per call (the minimal bytes: no over-fetch) at 78-79% of the
DRAM peak, against 81% for torch's read-only sum of the same bytes and 89% for the C10 expert.
What changed against the previous expert (the same tiles, teams, x fragments, math and
reduction, with the weights through a per-warp cp.async ring in shared memory: 3 stages of
16-byte .cg copies, 4 full lines per instruction, 2 steps in flight, 74 KB of shared memory, 80
registers): the ring is gone, and with it the shared-memory round trip of every weight byte
(22 -> 10 shared loads per step, no LDGSTS, DEPBAR or __syncwarp), with the same 48 KB per SM
in flight. What did not help before: full-line instead of half-line cp.async requests gained 2%
(76.0 us in bench/h200/2026-12-02c/tune-r5b.json against 77.8 us in
bench/h200/2026-12-02b/solutions-CF-r3.md); 8 warps with a 5-stage ring (64 KB per SM in
flight) ran 77.3 us in that run; this session (bench/h200/2026-12-02e/README.md) the fp16-magic
dequant with 14% fewer instructions per step ran 73.9 us against 75.5 (not adopted: it narrows
the input range of x), and a 2-CTA split-K cluster with 24 warps per SM and ~99 KB of weights in
flight 78.8 us against 75.2. So neither bytes in flight, nor the warp count, nor the issue rate
alone is the wall; dropping the shared-memory round trip gained 4%.
Round 13 (bench/h200/2026-12-02f, old flush, expert 73.3-73.5 us in each run): 8 warps with
4 steps in flight (64 KB per SM) 74.3 us, 8 warps with 2 steps 77.3, the L2::256B prefetch
hint on the loads 73.5, a per-team rotation of the K sweep (so the teams' in-flight addresses do
not share their offset within a 4 KB row) 74.1, and prefetch.global.L2 of the lines 2, 4 or 8
steps ahead 82.8, 88.8 and 99.1 us (more DRAM requests made it slower).
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T, dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

WARPS = 12
THREADS = 32 * WARPS
TW = 4               # warps per team: (n-tile wt % 2) x (pair parity wt // 2)
TEAMS = WARPS // TW  # teams per CTA
TROWS = 32           # weight rows per tile (2 n-tiles of 16)
GROUP = 128          # quantization group = k-chunk of one mma sequence
MAXM = 8             # mma n (batch rows)
NB = 2               # steps in flight: load buffers (the loop is unrolled by NB)
FULL_LINE = True     # LDG.128 warp instructions of 4 full lines (odd lanes swap register slots)
SMS = 132
HI16 = 0xFFFF0000


@dsl_user_op
def _ld_v4(addr: cutlass.Int64, *, loc=None, ip=None) -> list:
    """One 16-byte global load (LDG.E.128) as four 32-bit words.  Plain ld.global, not .nc:
    ptxas moved the .nc loads across the scheduling-fence barrier."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32(), T.i32(), T.i32()]),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        "ld.global.v4.b32 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(T.i32(), res, [k], loc=loc, ip=ip)) for k in range(4)]


@dsl_user_op
def _ld_b32(addr: cutlass.Int64, *, loc=None, ip=None) -> cutlass.Uint32:
    """One 4-byte global load."""
    res = llvm.inline_asm(
        T.i32(),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        "ld.global.b32 $0, [$1];",
        "=r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return cutlass.Uint32(res)


@dsl_user_op
def _st_bf16(addr: cutlass.Int64, v: cutlass.Float32, *, loc=None, ip=None) -> None:
    """y element: v rounded once to bf16 (round to nearest even), one 2-byte global store."""
    llvm.inline_asm(
        None,
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip), cutlass.Float32(v).ir_value(loc=loc, ip=ip)],
        "{ .reg .b16 h; cvt.rn.bf16.f32 h, $1; st.global.b16 [$0], h; }",
        "l,f",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


@cute.jit
def _mma_bf16(a0, a1, a2, a3, b0, b1, c0, c1, c2, c3):
    """D = A * B + C for one m16n8k16 bf16 tile (registers as in the PTX ISA fragment layout)."""
    return cute.arch.inline_ptx(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{ {$w0}, {$w1}, {$w2}, {$w3} }, { {$r0}, {$r1}, {$r2}, {$r3} }, { {$r4}, {$r5} }, "
        "{ {$r6}, {$r7}, {$r8}, {$r9} };",
        write_only_types=[cutlass.Float32] * 4,
        read_only_args=[a0, a1, a2, a3, b0, b1, c0, c1, c2, c3],
    )


@cute.jit
def _load(wb: cute.Tensor, sb: cute.Tensor, q, tg, nt, pp, wl0, wl2, sl0, wrow, srow,
          wcol, wbase, sbase, N, RB: cutlass.Constexpr, SB: cutlass.Constexpr,
          NI: cutlass.Constexpr, NTEAMS: cutlass.Constexpr, P2: cutlass.Constexpr,
          clamp_rows: cutlass.Constexpr):
    """Loads of step q of the warp's stream (tile k = q // NI, pair p = pp + 2 (q % NI)) into the
    register buffer wb (4 words, 4 instructions j) / sb (the scale words of rows g, g + 8).
    Instruction j of lane (g, t): row0 + wrow[j], bytes 128 p + wcol[j] .. + 15 of the row
    (wrow[1] = wrow[0] + 8, wrow[3] = wrow[2] + 8, wcol[1] = wcol[0], wcol[3] = wcol[2]).
    Scale word h: word p of row row0 + srow[h] (rows g, g + 8)."""
    k = q // NI
    i = q - k * NI
    p = pp + 2 * i
    row0 = (tg + k * NTEAMS) * TROWS + 16 * nt
    valid = True
    if cutlass.const_expr(P2 % 2 != 0):
        valid = p < P2
    if valid:
        if cutlass.const_expr(clamp_rows):
            for j in cutlass.range_constexpr(4):
                row = cutlass.min(row0 + wrow[j], N - 1)
                v = _ld_v4(wbase + cutlass.Int64(row * RB + 128 * p + wcol[j]))
                for w in cutlass.range_constexpr(4):
                    wb[w, j] = v[w]
            for s in cutlass.range_constexpr(2):
                rs = cutlass.min(row0 + srow[s], N - 1)
                sb[s] = _ld_b32(sbase + cutlass.Int64(rs * SB + 4 * p))
        else:
            so = cutlass.Int64(row0 * RB + 128 * p)
            a0 = wl0 + so
            a2 = wl2 + so
            order = [0, 1, 2, 3] if cutlass.const_expr(FULL_LINE) else [0, 2, 1, 3]
            for j in cutlass.range_constexpr(4):
                jj = order[j]
                base = a0 if cutlass.const_expr(jj // 2 == 0) else a2
                v = _ld_v4(base + (8 * RB) * (jj % 2))
                for w in cutlass.range_constexpr(4):
                    wb[w, jj] = v[w]
            b0 = sl0 + cutlass.Int64(row0 * SB + 4 * p)
            sb[0] = _ld_b32(b0)
            sb[1] = _ld_b32(b0 + 8 * SB)


@dsl_user_op
def _sel(a: cutlass.Uint32, b: cutlass.Uint32, m: cutlass.Uint32, *, loc=None, ip=None):
    """m ? b : a bitwise, one LOP3 (LLVM split the and/or form into two)."""
    res = llvm.inline_asm(
        T.i32(),
        [cutlass.Uint32(a).ir_value(loc=loc, ip=ip), cutlass.Uint32(b).ir_value(loc=loc, ip=ip),
         cutlass.Uint32(m).ir_value(loc=loc, ip=ip)],
        "lop3.b32 $0, $1, $2, $3, 0xD8;",
        "=r,r,r,r",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    )
    return cutlass.Uint32(res)


@cute.jit
def _consume(wb: cute.Tensor, sb: cute.Tensor, om, ws: cute.Tensor, sw: cute.Tensor):
    """The landed load buffer -> the step's operands (so the buffer can be refilled at once).
    Register slot s = 2 gi + h (group gi of the pair, mma row g + 8 h) is the buffer's
    instruction s on even lanes and s ^ 2 on odd lanes (om = all ones on odd lanes); scale word
    s: rows g, g + 8 (this lane's loads), g ^ 1, (g + 8) ^ 1 (lane ^ 4's)."""
    for s in cutlass.range_constexpr(4):
        for w in cutlass.range_constexpr(4):
            ws[w, s] = _sel(wb[w, s], wb[w, s ^ 2], om)      # FULL_LINE = False: om = 0
    sw[0] = sb[0]
    sw[1] = sb[1]
    for h in cutlass.range_constexpr(2):
        if cutlass.const_expr(FULL_LINE):
            sw[2 + h] = cute.arch.shuffle_sync_bfly(sb[h], 4)
        else:
            sw[2 + h] = sb[h]


@cute.jit
def _compute(ws: cute.Tensor, sw: cute.Tensor, xfl: cute.Tensor, xs: cute.Tensor, p, t, mk,
             acc: cute.Tensor, bw: cute.Tensor):
    """16 mma of the pair p (groups 2p, 2p + 1) of one n-tile; acc[4 gi + e] += scale *
    (D - 136 xsum), ws / sw from _consume."""
    for gi in cutlass.range_constexpr(2):
        c = 2 * p + gi
        for qq in cutlass.range_constexpr(4):
            seg = cute.make_tensor(bw.iterator + 4 * qq, cute.make_layout(4))
            seg.store(xfl[None, qq, c].load())
        xs_lo = xs[2 * t, c]
        xs_hi = xs[2 * t + 1, c]
        scu = cute.make_rmem_tensor((2,), cutlass.Uint32)
        for h in cutlass.range_constexpr(2):
            if cutlass.const_expr(gi == 0):
                scu[h] = sw[h] << cutlass.Uint32(16)              # even group: low bf16
            else:
                scu[h] = sw[2 + h] & cutlass.Uint32(HI16)         # odd group: high bf16
        scf = cute.recast_tensor(scu, cutlass.Float32)   # scales of mma rows g, g + 8, fp32
        e0 = cutlass.Float32(0.0)
        e1 = cutlass.Float32(0.0)
        e2 = cutlass.Float32(0.0)
        e3 = cutlass.Float32(0.0)
        o0 = cutlass.Float32(0.0)
        o1 = cutlass.Float32(0.0)
        o2 = cutlass.Float32(0.0)
        o3 = cutlass.Float32(0.0)
        for s in cutlass.range_constexpr(8):
            sft = 8 * (s % 2)               # nibble pair (i, i + 4) with i = 2 (s % 2)
            w_lo = ws[s // 2, 2 * gi]       # mma row g
            w_hi = ws[s // 2, 2 * gi + 1]   # mma row g + 8
            a0 = ((w_lo >> sft) & mk) | 0x43004300
            a1 = ((w_hi >> sft) & mk) | 0x43004300
            a2 = ((w_lo >> (sft + 4)) & mk) | 0x43004300
            a3 = ((w_hi >> (sft + 4)) & mk) | 0x43004300
            if cutlass.const_expr(s % 2 == 0):
                e0, e1, e2, e3 = _mma_bf16(a0, a1, a2, a3, bw[2 * s], bw[2 * s + 1],
                                           e0, e1, e2, e3)
            else:
                o0, o1, o2, o3 = _mma_bf16(a0, a1, a2, a3, bw[2 * s], bw[2 * s + 1],
                                           o0, o1, o2, o3)
        s_lo = scf[0]
        s_hi = scf[1]
        acc[4 * gi + 0] = acc[4 * gi + 0] + s_lo * ((e0 + o0) - xs_lo)
        acc[4 * gi + 1] = acc[4 * gi + 1] + s_lo * ((e1 + o1) - xs_hi)
        acc[4 * gi + 2] = acc[4 * gi + 2] + s_hi * ((e2 + o2) - xs_lo)
        acc[4 * gi + 3] = acc[4 * gi + 3] + s_hi * ((e3 + o3) - xs_hi)


@cute.kernel
def _gemv_kernel(
    gX: cute.Tensor,            # ((1, 8), (M, K/8)) bf16 vectors
    mW: cute.Tensor,            # (N, K/2) uint8
    mS: cute.Tensor,            # (N, K/128) bf16
    mY: cute.Tensor,            # (M, N) bf16
    G: cutlass.Constexpr,       # groups per row
    NI: cutlass.Constexpr,      # pair steps per warp and tile = ceil(G / 4)
    n_tiles: cutlass.Constexpr,
    grid: cutlass.Constexpr,
    clamp_rows: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = tidx // 32
    lane = tidx % 32
    g = lane // 4
    t = lane % 4
    team = warp // TW
    wt = warp % TW
    nt = wt % 2                  # the warp's n-tile (rows 16 nt .. 16 nt + 15 of the tile)
    pp = wt // 2                 # the warp's pair parity: pairs p = pp + 2 i
    P2 = G // 2                  # group pairs per row
    RB = G * 64                  # weight bytes per row (K / 2)
    SB = G * 2                   # scale bytes per row
    M = cute.size(mY, mode=[0])
    N = cute.size(mY, mode=[1])
    NTEAMS = grid * TEAMS
    tg = team * grid + bidx
    # tiles tg, tg + NTEAMS, ... < n_tiles (tg <= n_tiles: grid = ceil(n_tiles / TEAMS) at most)
    Q = ((n_tiles - 1 - tg + NTEAMS) // NTEAMS) * NI

    # ---- the lane's load pattern (row offsets within the warp's 16 rows, byte columns) -------
    gpar = g % 2
    if cutlass.const_expr(FULL_LINE):
        # instruction j: row 8 (j % 2) + 2 (g // 2) + j // 2, group (g % 2) ^ (j // 2): the
        # lanes g = 2m (group 0) and 2m + 1 (group 1) read one full 128-byte line of a row.
        # Mma rows: group 0 row a = warp row a, group 1 row a = warp row a ^ 1.
        wrow = [8 * (j % 2) + 2 * (g // 2) + j // 2 for j in range(4)]
        gam0 = gpar
        gam2 = 1 - gpar
        srow = [g, g + 8, g ^ 1, (g ^ 1) + 8]
    else:
        # instruction j = slot j: row 8 (j % 2) + g, group j // 2 (half lines)
        wrow = [8 * (j % 2) + g for j in range(4)]
        gam0 = 0
        gam2 = 1
        srow = [g, g + 8, g, g + 8]
    wcol = [64 * gam0 + 16 * t, 64 * gam0 + 16 * t, 64 * gam2 + 16 * t, 64 * gam2 + 16 * t]
    wbase = mW.iterator.toint()
    sbase = mS.iterator.toint()
    wl0 = wbase + cutlass.Int64(wrow[0] * RB + wcol[0])
    wl2 = wbase + cutlass.Int64(wrow[2] * RB + wcol[2])
    sl0 = sbase + cutlass.Int64(srow[0] * SB)

    smem = SmemAllocator()
    # x in B-fragment order: (word, lane, piece q, chunk c); lane L's 16 registers of chunk c
    # are the 4 pieces, a warp reads 512 contiguous bytes per piece.
    xf = smem.allocate_tensor(cutlass.Uint32,
                              cute.make_layout((4, 32, 4, G), stride=(1, 4, 128, 512)),
                              byte_alignment=16)
    # 136 * sum of x over each group, per batch row (zeros for m >= M): (m, c)
    xs = smem.allocate_tensor(cutlass.Float32, cute.make_layout((MAXM, G), stride=(1, MAXM)),
                              byte_alignment=16)
    # per-team reduction buffer: (pair parity, m, row, team)
    red = smem.allocate_tensor(
        cutlass.Float32,
        cute.make_layout((2, MAXM, TROWS, TEAMS),
                         stride=(MAXM * TROWS, TROWS, 1, 2 * MAXM * TROWS)),
        byte_alignment=16)
    # the nibble mask, read back by every thread: ptxas cannot fold a shared load into an
    # immediate (with the immediate it rematerialized the mask before every lop3)
    mks = smem.allocate_tensor(cutlass.Uint32, cute.make_layout((4,)), byte_alignment=16)

    # register buffers: weights (word, instruction j, buffer), scale words (slot, buffer)
    wbuf = cute.make_rmem_tensor((4, 4, NB), cutlass.Uint32)
    sbuf = cute.make_rmem_tensor((2, NB), cutlass.Uint32)

    # ---- prologue: the first DEPTH steps' loads, before the x conversion ---------------------
    for st in cutlass.range_constexpr(NB):
        if st < Q:
            _load(wbuf[None, None, st], sbuf[None, st], st, tg, nt, pp, wl0, wl2, sl0, wrow,
                  srow, wcol, wbase, sbase, N, RB, SB, NI, NTEAMS, P2, clamp_rows)

    # ---- x -> shared memory in fragment order (once per CTA) ---------------------------------
    # all XR rounds' loads first (XR * 16 registers), so their L2/HBM latency is paid once
    XR = (G * 32 + THREADS - 1) // THREADS
    xrs = []
    for r in cutlass.range_constexpr(XR):
        c = warp + WARPS * r
        xr = cute.make_rmem_tensor((32,), gX.element_type)
        xr.fill(0.0)
        if c < G:
            if g < M:
                for v in cutlass.range_constexpr(4):
                    xseg = cute.make_tensor(xr.iterator + 8 * v, cute.make_layout(8))
                    xseg.store(gX[(0, None), (g, c * 16 + 4 * t + v)].load())
        xrs.append(xr)
    HI = cutlass.Uint32(HI16)
    for r in cutlass.range_constexpr(XR):
        c = warp + WARPS * r
        if c < G:
            xr = xrs[r]
            xsum = xr.load().to(cutlass.Float32).reduce(cute.ReductionOp.ADD, 0.0, 0)
            xsum = xsum + cute.arch.shuffle_sync_bfly(xsum, 1)
            xsum = xsum + cute.arch.shuffle_sync_bfly(xsum, 2)
            if t == 0:
                xs[g, c] = xsum * 136.0
            xw = cute.recast_tensor(xr, cutlass.Uint32)      # word p = (x[2p], x[2p + 1])
            bx = cute.make_rmem_tensor((16,), cutlass.Uint32)
            for s in cutlass.range_constexpr(8):
                a = 4 * (s // 2) + (s % 2)       # x word holding k = 8w + i, i = 2 (s % 2)
                xa = xw[a]
                xb = xw[a + 2]                   # k + 4
                bx[2 * s] = (xa & 0xFFFF) | (xb << 16)
                bx[2 * s + 1] = (xa >> 16) | (xb & HI)
            for qq in cutlass.range_constexpr(4):
                seg = cute.make_tensor(bx.iterator + 4 * qq, cute.make_layout(4))
                xf[None, lane, qq, c].store(seg.load())
    if tidx == 0:
        mks[0] = cutlass.Uint32(0x000F000F)
        mks[1] = cutlass.Uint32(0)
    cute.arch.sync_threads()
    mk = mks[0]
    # y's address + a zero read from shared memory: ptxas cannot re-read it from the constant
    # bank in the loop (an LDC there shares the LDGs' scoreboard and drained the next batch)
    ybase = mY.iterator.toint() + cutlass.Int64(mks[1])
    if cutlass.const_expr(FULL_LINE):
        om = cutlass.Uint32(0) - cutlass.Uint32(gpar)     # all ones on odd lanes
    else:
        # a zero ptxas cannot see: the take stays one LOP3 per word (as plain register copies it
        # was coalesced away and ptxas copied a loaded register inside the iteration instead, a
        # MOV that waited for the load issued at the top of that iteration)
        om = mks[1]

    acc = cute.make_rmem_tensor((8,), cutlass.Float32)   # (group of the pair) x (4 D values)
    acc.fill(0.0)
    ws = cute.make_rmem_tensor((4, 4, NB), cutlass.Uint32)  # the steps' weight words (slot s)
    sw = cute.make_rmem_tensor((4, NB), cutlass.Uint32)     # the steps' scale words (slot s)
    bw = cute.make_rmem_tensor((16,), cutlass.Uint32)
    tt = tidx - team * (TW * 32)                 # thread index within the team

    # Q is a multiple of NI: when NB divides NI, every step of a started iteration is a real step
    # and a tile can only end at its last step (no branches around steps).  The last iteration is
    # peeled (it loads nothing), so the loads of the loop are unpredicated: a predicated load made
    # ptxas copy the loaded register for the loop's phi inside the same iteration (a MOV that
    # waited for the load issued one step earlier).
    ALIGNED = NI % NB == 0
    if cutlass.const_expr(ALIGNED):
        for q0 in cutlass.range(0, Q - NB, NB, unroll=1):
            _iter(wbuf, sbuf, ws, sw, xf, xs, red, ybase, q0, Q, tg, nt, pp, lane, warp, g, t,
                  team, tt, mk, om, acc, bw, wl0, wl2, sl0, wrow, srow, wcol, wbase, sbase, M, N,
                  RB, SB, NI, NTEAMS, P2, clamp_rows, True, False)
        if Q > 0:
            _iter(wbuf, sbuf, ws, sw, xf, xs, red, ybase, Q - NB, Q, tg, nt, pp, lane, warp, g, t,
                  team, tt, mk, om, acc, bw, wl0, wl2, sl0, wrow, srow, wcol, wbase, sbase, M, N,
                  RB, SB, NI, NTEAMS, P2, clamp_rows, False, False)
    else:
        for q0 in cutlass.range(0, Q, NB, unroll=1):
            _iter(wbuf, sbuf, ws, sw, xf, xs, red, ybase, q0, Q, tg, nt, pp, lane, warp, g, t,
                  team, tt, mk, om, acc, bw, wl0, wl2, sl0, wrow, srow, wcol, wbase, sbase, M, N,
                  RB, SB, NI, NTEAMS, P2, clamp_rows, True, True)


@cute.jit
def _iter(wbuf, sbuf, ws, sw, xf, xs, red, ybase, q0, Q, tg, nt, pp, lane, warp, g, t, team, tt,
          mk, om, acc, bw, wl0, wl2, sl0, wrow, srow, wcol, wbase, sbase, M, N,
          RB: cutlass.Constexpr, SB: cutlass.Constexpr, NI: cutlass.Constexpr,
          NTEAMS: cutlass.Constexpr, P2: cutlass.Constexpr, clamp_rows: cutlass.Constexpr,
          do_load: cutlass.Constexpr, guard: cutlass.Constexpr):
    """Steps q0 .. q0 + NB - 1 (guard: only those < Q; else all are real steps)."""
    # 1. the batch loaded in the previous iteration -> this batch's operands.  ptxas puts all
    #    LDGs on one scoreboard, so this first use drains everything in flight: a batch must be
    #    issued as a whole right after it to stay in flight for the whole batch's math.
    for u in cutlass.range_constexpr(NB):
        q = q0 + u
        if cutlass.const_expr(guard):
            if q < Q:
                _take(wbuf, sbuf, ws, sw, om, q, u, pp, NI, P2)
        else:
            _take(wbuf, sbuf, ws, sw, om, q, u, pp, NI, P2)
    # 2. the next batch into the freed buffers
    if cutlass.const_expr(do_load):
        for u in cutlass.range_constexpr(NB):
            qn = q0 + NB + u
            if cutlass.const_expr(guard):
                if qn < Q:
                    _load(wbuf[None, None, u], sbuf[None, u], qn, tg, nt, pp, wl0, wl2, sl0, wrow,
                          srow, wcol, wbase, sbase, N, RB, SB, NI, NTEAMS, P2, clamp_rows)
            else:
                _load(wbuf[None, None, u], sbuf[None, u], qn, tg, nt, pp, wl0, wl2, sl0, wrow,
                      srow, wcol, wbase, sbase, N, RB, SB, NI, NTEAMS, P2, clamp_rows)
    # a named barrier of this warp alone (ids 4 .. 15; 0 = CTA, 1 .. 3 = teams) fences the
    # scheduler: without it ptxas sank the loads to the end of the loop body (the loads are plain
    # ld.global: ptxas moved ld.global.nc across the barrier)
    cute.arch.barrier(barrier_id=4 + warp, number_of_threads=32)
    # 3. the math of the batch's steps
    for u in cutlass.range_constexpr(NB):
        q = q0 + u
        if cutlass.const_expr(guard):
            if q < Q:
                _substep(ws, sw, xf, xs, red, ybase, q, u, tg, nt, pp, lane, g, t, team, tt, mk,
                         acc, bw, M, N, NI, NTEAMS, P2, True)
        else:
            _substep(ws, sw, xf, xs, red, ybase, q, u, tg, nt, pp, lane, g, t, team, tt, mk, acc,
                     bw, M, N, NI, NTEAMS, P2, u == NB - 1)


@cute.jit
def _take(wbuf, sbuf, ws, sw, om, q, u: cutlass.Constexpr, pp, NI: cutlass.Constexpr,
          P2: cutlass.Constexpr):
    """Step q's landed buffer u -> its operands ws[:, :, u] / sw[:, u] (skipped for pairs >= P2)."""
    k = q // NI
    p = pp + 2 * (q - k * NI)
    if cutlass.const_expr(P2 % 2 == 0):
        _consume(wbuf[None, None, u], sbuf[None, u], om, ws[None, None, u], sw[None, u])
    else:
        if p < P2:
            _consume(wbuf[None, None, u], sbuf[None, u], om, ws[None, None, u], sw[None, u])


@cute.jit
def _substep(ws, sw, xf, xs, red, ybase, q, u: cutlass.Constexpr, tg, nt, pp, lane, g, t, team,
             tt, mk, acc, bw, M, N, NI: cutlass.Constexpr, NTEAMS: cutlass.Constexpr,
             P2: cutlass.Constexpr, can_end: cutlass.Constexpr):
    """The math of step q (operands u) and the tile epilogue after the tile's last step."""
    k = q // NI
    i = q - k * NI
    p = pp + 2 * i
    if cutlass.const_expr(P2 % 2 == 0):
        _compute(ws[None, None, u], sw[None, u], xf[None, lane, None, None], xs, p, t, mk, acc, bw)
    else:
        if p < P2:
            _compute(ws[None, None, u], sw[None, u], xf[None, lane, None, None], xs, p, t, mk,
                     acc, bw)
    if cutlass.const_expr(can_end):
        if i == NI - 1:
            # ---- end of tile: group 1's values of rows g, g + 8 from lane ^ 4 (FULL_LINE), the
            # 2 partials of each row summed in a fixed order, one rounding, y written once
            for e in cutlass.range_constexpr(4):
                if cutlass.const_expr(FULL_LINE):
                    acc[e] = acc[e] + cute.arch.shuffle_sync_bfly(acc[4 + e], 4)
                else:
                    acc[e] = acc[e] + acc[4 + e]
            row0 = (tg + k * NTEAMS) * TROWS
            red[pp, 2 * t, nt * 16 + g, team] = acc[0]
            red[pp, 2 * t + 1, nt * 16 + g, team] = acc[1]
            red[pp, 2 * t, nt * 16 + g + 8, team] = acc[2]
            red[pp, 2 * t + 1, nt * 16 + g + 8, team] = acc[3]
            cute.arch.barrier(barrier_id=1 + team, number_of_threads=TW * 32)
            for e0 in cutlass.range_constexpr(0, MAXM * TROWS, TW * 32):
                e = e0 + tt
                m = e // TROWS
                rl = e - m * TROWS
                n = row0 + rl
                if m < M and n < N:
                    tot = red[0, m, rl, team] + red[1, m, rl, team]
                    _st_bf16(ybase + cutlass.Int64((m * N + n) * 2), tot)
            cute.arch.barrier(barrier_id=1 + team, number_of_threads=TW * 32)
            acc.fill(0.0)


@cute.jit
def _gemv_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mS: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    G: cutlass.Constexpr,
    n_tiles: cutlass.Constexpr,
    grid: cutlass.Constexpr,
):
    N = mY.shape[1]
    gX = cute.zipped_divide(mX, (1, 8))
    NI = (G // 2 + 1) // 2   # pair steps per warp and tile: pairs pp, pp + 2, ... < G / 2
    _gemv_kernel(gX, mW, mS, mY, G, NI, n_tiles, grid, N % TROWS != 0).launch(
        grid=[grid, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (M, N, K) and return run(x, wq, scales, y)."""
    M = int(spec.dims["M"])
    N = int(spec.dims["N"])
    K = int(spec.dims["K"])
    gs = int(spec.params.get("group_size", GROUP))
    if gs != GROUP:
        raise ValueError(f"group_size={gs}: this kernel is written for groups of {GROUP}")
    if not 1 <= M <= MAXM:
        raise ValueError(f"M={M} must be in 1..{MAXM} (one mma n-tile of batch rows)")
    if K % (2 * GROUP) != 0:
        raise ValueError(f"K={K} must be a multiple of {2 * GROUP} (scales read as 32-bit words)")
    if K > 8192:
        raise ValueError(f"K={K}: x is kept in shared memory (16 * K bytes), at most K = 8192")
    if N * K // 2 >= 2**31:
        raise ValueError("N*K/2 must stay below 2**31 bytes (32-bit static index math)")
    G = K // GROUP
    n_tiles = -(-N // TROWS)
    grid = min(SMS, -(-n_tiles // TEAMS))
    key = (M, N, K)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (M, K), stride_order=(1, 0), assumed_align=16)
        wq = make_fake_compact_tensor(cutlass.Uint8, (N, K // 2), stride_order=(1, 0),
                                      assumed_align=16)
        sc = make_fake_compact_tensor(cutlass.BFloat16, (N, K // GROUP), stride_order=(1, 0),
                                      assumed_align=4)
        y = make_fake_compact_tensor(cutlass.BFloat16, (M, N), stride_order=(1, 0), assumed_align=2)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_gemv_host, x, wq, sc, y, stream, G, n_tiles, grid,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, wq, scales, y)

    return run

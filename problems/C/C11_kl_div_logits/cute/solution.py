"""C11 kl_div_logits, CuTe DSL expert solution: kl[t] = KL(softmax(p[t]) || softmax(q[t])),
bf16 [T, V] p and q in, fp32 [T] out.

Memory-bound: one read of p and of q (the minimum) and one fp32 store per row, in one pass. At
the benchmark shape (T = 4096, V = 32000) that is 2 x 262.1 MB read and 16 KB written, 112.5 us
at the roofline's bandwidth. The arithmetic stays under that: 274 MUFU.EX2 per thread and row
are ~69 us of the SMs' MUFU rate (16 per SM per clock at 1.98 GHz), the 1775 SASS instructions
of the row loop ~56 us of their issue rate. The TIRx expert's design, ported to CuTe with the
same SASS instruction mix:

* Identity used: with P = softmax(p) and lse_p, lse_q the rows' log-sum-exps,
      kl = sum_v P[v] (p[v] - q[v]) - lse_p + lse_q
         = A / S_p - (M_p - M_q) - ln 2 (log2 S_p - log2 S_q),
  where S_p = sum 2^(p L2E - M_p L2E), A = sum 2^(p L2E - M_p L2E) (p - q),
  S_q = sum 2^(q L2E - M_q L2E), L2E = log2 e and M_p, M_q are the row maxima in natural units
  (logits): they enter the formula unscaled (not times ln 2); only the log2 of the sums is
  converted to natural log. M_p - M_q is exact (differences of bf16 values); p - q is exact in
  fp32. The expectation is over P, from p (the direction of the statement).
* Grid: one wave of persistent CTAs. _grid(): RPC = ceil(T / 528) consecutive rows per CTA
  (528 = SMS x CTAS_PER_SM = 132 x 4, the H200's SM count fixed in the module), NB =
  ceil(T / RPC) CTAs; min_blocks_per_mp = 4 caps ptxas at 64 registers, so every CTA is
  resident at once: no CTA turnover, no last-wave drain. Benchmark: 512 CTAs of 256 threads,
  8 rows each (512 of the 528 CTA slots). The check shapes (T <= 333) get one row per CTA.
* Threads: _plan() takes the smallest power-of-two warp count (at most 256 threads) with at
  least ceil(NV / 2) threads, NV = V / 8 16-byte vectors. Slot k of a thread is vector
  tid + k * THREADS of the row, so every warp load covers 512 contiguous bytes and a step of a
  CTA 8 KB per tensor. Benchmark: 16 slots per thread (slot 15 only for tid < 160); V = 1000:
  2 warps, V = 256: one warp.
* Register ring: 32 data registers per thread form two buffers of U = 2 vectors of p + 2 of q
  (64 B, 16 element pairs; one vector each when a thread has a single slot). A row is R steps,
  R padded to even so that step j of every row uses buffer j % 2 with static register indices
  (V = 256 and V = 1000 get one all-padding step). The prologue loads steps 0 and 1 of the CTA's
  first row; step j computes from buffer j % 2, then refills it with step j + 2; the last two
  steps refill it with steps 0 and 1 of the CTA's next row (if it has one). The row loop is a
  dynamic loop (cutlass.range, unroll = 1), the steps inside it are unrolled at trace time.
* Loads: inline PTX, no CuTe copy. The row's own steps use ld.global.nc.v4.b32 (read-only path,
  SASS LDG.E.128.CONSTANT, no cache hint), the next row's steps 0 and 1 plain ld.global.v4.b32
  (LDG.E.128), as in the TIRx expert, where ptxas moved the .nc form of those loads below the
  row reduction's first barrier. Here too ptxas issues each in-row refill right after its
  step's math and sinks the 8 next-row loads to just before the first barrier, after the max
  shuffles, so they overlap the row-end reduction. The address is base + sext(int32(row * V +
  tid * 8)) * 2 + k * THREADS * 16, the slot offset a 64-bit constant that ptxas folds into the
  LDG immediate: 7 IMAD.WIDE / 64-bit address instructions in the SASS (the TIRx expert: 33).
  Slots every thread has are loaded unconditionally; the first partial slot (k = 15 at
  V = 32000) is one load predicated inside the asm (@p, p = tid < NV - k * THREADS) whose outputs
  are tied to FILL inputs, so a lane without that vector keeps the padding words; slots past a
  thread's last are set to FILL without a load. .nc is safe: the kernel never writes p or q.
* Per step, online accumulation (rescaled once per step, not per element): the step maxima of
  p and q from a tree of max.bf16x2 (HMNMX2: exact, on the packed words) and one unpack of the
  last pair, m' = max(m, step max); S_p and A rescaled by 2^(m_p L2E - m_p' L2E), S_q by its
  own factor (2 ex2 per step), then the step's terms. Per element pair: two unpacks (shift,
  mask), two FFMA (x L2E - m' L2E, one rounding) + two MUFU.EX2 (the p exponential is shared by
  S_p and A), an FADD for p - q and a few FADD / FFMA for the three sums.
* Register pressure (the 64-register cap of 4 CTAs per SM): the maxima on the packed bf16 pairs
  (no unpack before the max); the terms enter the sums FW = 2 words (4 element pairs) at a
  time, each group followed by an empty asm fence that passes m' L2E through and reads S_p, A,
  S_q, so those words' sums are done before the next words' exponentials start; after each step
  a zero, shr.s32(bits(S_p) & bits(A) & bits(S_q), 31) from an opaque asm (S_p >= +0 clears the
  sign bit), is added to both row indices: the buffer's refill waits for the step's three sums
  and ptxas cannot hoist it into the step (two steps' data would not fit in 64 registers).
* Row combine, 2 barriers per row: M_p, M_q by warp butterflies; lane 0 of each warp stores
  them to shared memory, barrier, every thread takes the max over the warps; every thread
  rescales S_p, A by 2^(m_p L2E - M_p L2E) and S_q by its factor (M L2E rounded as in the loop:
  the thread holding the row max gets factor 1), warp butterfly sums, lane 0 stores them,
  barrier; thread 0 alone adds the warps' partials in a fixed tree order, evaluates the formula
  above and writes kl. red_m is next written after this row's second barrier, red_s after the
  next row's first barrier, which thread 0 reaches only after its reads: no third barrier. One
  warp (V = 256): shuffles only. No atomics, fixed order: results are bit-identical from call
  to call.
* Precision: fp32 throughout; each running max is subtracted before every exp (logits near 96:
  exp of an unshifted logit overflows fp32). The rounding of M L2E (<= 8e-6 in log2 units per
  row) moves kl by about 1e-5 at most against a tolerance of a few 1e-3 (1e-4 RMS + 1e-4 |kl|).
  exp2 is ex2.approx.ftz (MUFU.EX2), log2 lg2.approx (MUFU.LG2), and the row-end division
  div.approx.ftz.f32 (MUFU.RCP + FMUL, what NVRTC --use_fast_math emits for the TIRx expert's
  '/'; 2 ulp for a divisor in [2^-126, 2^126], and S_p is about 1 or more): no IEEE-division
  slow path. FADD and FFMA do not flush denormals here (the TIRx expert's do; same count).
  Errors of a few fp32 ulp, orders of magnitude inside the 1e-4 relative tolerance.
* Ragged edges: padding slots hold FILL, the finite bf16 -3.39e38 (0xFF7F), in both p and q;
  its exponent overflows to -inf in the FFMA (2^-inf = 0) and its p - q is 0: no term, no NaN,
  and it never wins a max against a real logit. Running maxima start at -1e30 (finite), so a
  step with no valid element rescales by 2^0 = 1 and adds 0. When NB * RPC != T (none of the
  problem's shapes; e.g. T = 4097), the last CTA's rows past T - 1 re-read row T - 1 (clamped
  index) and store nothing.
* SASS (cuobjdump, sm_90a, benchmark kernel): 64 registers, no stack and no local memory,
  1816 instructions (the TIRx expert: 1848), 1775 of them in the row loop; 32
  LDG.E.128.CONSTANT and 8 LDG.E.128; 274 MUFU.EX2 per row (256 terms, 16 step rescales, 2 in
  the row end) + 2 MUFU.LG2 and 1 MUFU.RCP; 48 HMNMX2, 25 SHFL.BFLY, 2 BAR.SYNC, 2 BRA. Check
  shapes: 4 x 256 56 registers and 232 instructions, 333 x 1000 72 registers (64-thread CTAs)
  and 360 instructions, 37 x 32000 64 registers and 1768 instructions, all without stack; the
  T = 4097 clamp shape has 40 B of stack, as the TIRx expert.
* CPU emulation (numpy, the module's plan functions and _refill's index math, fp32 online math,
  exact fp32 division) at 4 x 256, 333 x 1000, 37 x 32000, 4096 x 32000, 4097 x 32000 (the clamp
  path), 600 x 1000, 1057 x 256, 1 x 8 and 5 x 4096: every global read 16-byte aligned, in
  bounds and inside its row, the full / predicated / padding slot split and the ring's buffer
  and step order as above, every vector read exactly once (no extra reads but the clamped
  re-reads at T = 4097), every row written once. Against reference.py's float64 result on bf16
  inputs drawn like the problem's (mean 96 +- 4, std 2 to 8), the worst error is 0.015 of the
  tolerance (benchmark shape); div.approx adds 2 ulp to that division. The shared-memory reuse
  across rows without a third barrier is argued above, not emulated.
* Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
  tensors straight through on torch's current stream.
* Shapes are static per build. Limits: V % 8 == 0 (16-byte vectors), T * V < 2**31 (int32
  index math); build() raises ValueError beyond that. Speed knobs: U, FW, MAX_THREADS,
  CTAS_PER_SM.

Measured on the H200 (full mode, one judge): in the tuning run bench/h200/2026-12-02e/tune-r9.json
130.9 us (IQR 1.1) against 136.0 us (IQR 1.1) for the previous CuTe expert in the same run
(1.039x). In the one-run table bench/h200/2026-12-02e/solutions-ABCF-r9.md: 131.2 us (IQR 1.1),
85.8% of the 112.5 us roofline ideal, 20.55x the fastest eager formulation
(kl_div_fused_log_softmax), 3.56x torch.compile; the TIRx expert 130.8 us in the same run
(ratio 1.003, the TIRx one faster).
What changed against the previous expert (half a warp per row, 128-thread CTAs of 8 rows, 93
registers and 5 CTAs per SM, chunks of 3 vectors per lane loaded through CuTe copies and then
computed, an IEEE division per row): the TIRx expert's design above (256 threads per row, 8
rows per CTA in turn, two register buffers per tensor refilled as soon as they are consumed,
the next row's first loads before the row-end reduction, 2 barriers per row), with the loads
as inline PTX at 32-bit element offsets (no 64-bit shift chains), the division as div.approx
and the final formula in thread 0 only. A first CuTe port of that design with CuTe copies and
IEEE division spilled its row index (8 B of stack) and had 1976 SASS instructions; those three
changes alone removed the stack.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cutlass_dsl import T as IR
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit access
U = 2              # 128-bit vectors per tensor per ring step (one buffer)
MAX_THREADS = 256
SMS = 132          # H200 SM count
CTAS_PER_SM = 4
MAX_CTAS = SMS * CTAS_PER_SM   # 528: the whole grid is resident at once
FW = 2             # packed words per tensor per fenced step of the math
LOG2_E = math.log2(math.e)
LN_2 = math.log(2.0)
FILL = -3.3895313892515355e38  # padding logit (p and q, bf16 0xFF7F): x log2e -> -inf, p - q = 0
M_INIT = -1.0e30   # running max before the first element (finite: no inf - inf)


def _plan(nv: int):
    """(threads, slots per thread, vectors per step, steps per row) for nv 16-byte vectors;
    the step count is even, so step j of every row uses buffer j % 2 (as the TIRx expert)."""
    need = -(-nv // U)
    warps = 1
    while warps * 32 < need and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-nv // threads)
    ur = min(U, vpt)
    steps = -(-vpt // ur)
    return threads, vpt, ur, steps + steps % 2


def _grid(rows: int):
    """(CTAs, rows per CTA): the fewest rows per CTA that keep the grid within one wave."""
    rpc = -(-rows // MAX_CTAS)
    return -(-rows // rpc), rpc


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
def _f32_as_u32(x: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Uint32:
    """Reinterpret the bits of an fp32 as a 32-bit word."""
    return cutlass.Uint32(llvm.bitcast(cutlass.Uint32.mlir_type,
                                       cutlass.Float32(x).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def _fence(x: cutlass.Float32, a: cutlass.Float32, b: cutlass.Float32, c: cutlass.Float32, *,
           loc=None, ip=None) -> cutlass.Float32:
    """x, passed through an empty asm that also reads a, b, c: whatever uses the result is
    ordered after a, b and c are computed (no instruction is emitted)."""
    return cutlass.Float32(llvm.inline_asm(
        cutlass.Float32.mlir_type,
        [cutlass.Float32(x).ir_value(loc=loc, ip=ip), cutlass.Float32(a).ir_value(loc=loc, ip=ip),
         cutlass.Float32(b).ir_value(loc=loc, ip=ip), cutlass.Float32(c).ir_value(loc=loc, ip=ip)],
        "",
        "=f,0,f,f,f",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    ))


@dsl_user_op
def _zdep(a: cutlass.Float32, b: cutlass.Float32, c: cutlass.Float32, *,
          loc=None, ip=None) -> cutlass.Int32:
    """0 when a >= +0 (a sum of exponentials: the sign bit of a & b & c is then 0), opaque to
    the compilers.  Added to the row index, it makes the next loads wait for this round's three
    sums, so they cannot be hoisted into the round (two rounds' data would not fit 64 registers)."""
    return cutlass.Int32(llvm.inline_asm(
        cutlass.Int32.mlir_type,
        [_f32_as_u32(a, loc=loc, ip=ip).ir_value(loc=loc, ip=ip),
         _f32_as_u32(b, loc=loc, ip=ip).ir_value(loc=loc, ip=ip),
         _f32_as_u32(c, loc=loc, ip=ip).ir_value(loc=loc, ip=ip)],
        "{.reg .b32 t; and.b32 t, $1, $2; and.b32 t, t, $3; shr.s32 $0, t, 31;}",
        "=r,r,r,r",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


def _packed_max(words: list) -> cutlass.Float32:
    """fp32 max of the bf16 values of a list of packed pairs (trace-time tree of max.bf16x2)."""
    vals = list(words)
    while len(vals) > 1:
        nxt = [_bf16x2_max(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2 == 1:
            nxt.append(vals[-1])
        vals = nxt
    w = vals[0]
    return cute.arch.fmax(_u32_as_f32(w << 16), _u32_as_f32(w & 0xFFFF0000))


def _tree_add(vals: list):
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2 == 1:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


FILL_WORD = 0xFF7FFF7F  # two bf16 -3.39e38 (= FILL): exponent overflows to -inf, p - q = 0


@dsl_user_op
def _ldg4(addr: cutlass.Int64, nc: bool, *, loc=None, ip=None) -> list:
    """One 16-byte global load as four packed bf16 pairs: ld.global.nc.v4.b32 (read-only path)
    when nc, else ld.global.v4.b32 (as the TIRx expert's asm volatile loads)."""
    op = "ld.global.nc.v4.b32" if nc else "ld.global.v4.b32"
    res = llvm.inline_asm(
        llvm.StructType.get_literal([IR.i32(), IR.i32(), IR.i32(), IR.i32()]),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        op + " {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(IR.i32(), res, [k], loc=loc, ip=ip))
            for k in range(4)]


@dsl_user_op
def _ldg4_pred(addr: cutlass.Int64, pred: cutlass.Int32, nc: bool, *, loc=None,
               ip=None) -> list:
    """_ldg4 under a predicate (pred != 0); where it is off, the four words keep FILL_WORD (the
    outputs are tied to FILL inputs, the load is @p-guarded inside the asm)."""
    op = "ld.global.nc.v4.b32" if nc else "ld.global.v4.b32"
    fill = cutlass.Uint32(FILL_WORD).ir_value(loc=loc, ip=ip)
    res = llvm.inline_asm(
        llvm.StructType.get_literal([IR.i32(), IR.i32(), IR.i32(), IR.i32()]),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip), cutlass.Int32(pred).ir_value(loc=loc, ip=ip),
         fill, fill, fill, fill],
        "{.reg .pred p; setp.ne.b32 p, $5, 0; @p " + op + " {$0, $1, $2, $3}, [$4];}",
        "=r,=r,=r,=r,l,r,0,1,2,3",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(IR.i32(), res, [k], loc=loc, ip=ip))
            for k in range(4)]


@dsl_user_op
def _div_approx(a: cutlass.Float32, b: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Float32:
    """a / b as div.approx.ftz.f32 (what NVRTC --use_fast_math emits for the TIRx expert's '/'):
    MUFU.RCP + FMUL, no IEEE slow path; 2 ulp for b in [2^-126, 2^126] (b = S_p >= 1 here)."""
    return cutlass.Float32(llvm.inline_asm(
        cutlass.Float32.mlir_type,
        [cutlass.Float32(a).ir_value(loc=loc, ip=ip), cutlass.Float32(b).ir_value(loc=loc, ip=ip)],
        "div.approx.ftz.f32 $0, $1, $2;",
        "=f,f,f",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


def _round_w(pws: list, qws: list, st: tuple) -> tuple:
    """_round on lists of packed words (trace-time)."""
    mp, mlp, mq, mlq, sp, acc, sq = st
    nw = len(pws)
    nmp = cute.arch.fmax(mp, _packed_max(pws))
    nmq = cute.arch.fmax(mq, _packed_max(qws))
    nlp = nmp * LOG2_E
    nlq = nmq * LOG2_E
    scp = cute.math.exp2(mlp - nlp, fastmath=True)
    scq = cute.math.exp2(mlq - nlq, fastmath=True)
    sq = sq * scq
    sp = sp * scp
    acc = acc * scp
    for w0 in range(0, nw, FW):
        ps = []
        qs = []
        for i in range(w0, min(w0 + FW, nw)):
            ps += [_u32_as_f32(pws[i] << 16), _u32_as_f32(pws[i] & 0xFFFF0000)]
            qs += [_u32_as_f32(qws[i] << 16), _u32_as_f32(qws[i] & 0xFFFF0000)]
        eps = [cute.math.exp2(x * LOG2_E - nlp, fastmath=True) for x in ps]
        eqs = [cute.math.exp2(x * LOG2_E - nlq, fastmath=True) for x in qs]
        sq = sq + _tree_add(eqs)
        sp = sp + _tree_add(eps)
        acc = acc + _tree_add([e * (x - y) for e, x, y in zip(eps, ps, qs)])
        # the next words' exponents read nlp / nlq through this fence, i.e. after these sums
        nlp = _fence(nlp, sp, acc, sq)
        nlq = _fence(nlq, sp, acc, sq)
    return nmp, nlp, nmq, nlq, sp, acc, sq


def _refill(bp, bq, pb, qb, row, s, tidx, nc, K):
    """Step s of row `row` into the word buffers bp, bq (trace-time; no control flow): slot
    k = s * ur + u of a thread is vector tidx + k * threads of the row (the TIRx expert's
    layout); slots past the thread's last (k >= vpt) are FILL, the first partial slot is a
    load predicated on tidx + k * threads < nv."""
    threads, ur, vpt, full, nv, vocab = K
    idx = cutlass.Int64(row * vocab + tidx * VEC) * 2  # byte offset of slot 0 (int32 index)
    for u in range(ur):
        k = s * ur + u
        if k >= vpt:
            for i in range(4):
                bp[4 * u + i] = cutlass.Uint32(FILL_WORD)
                bq[4 * u + i] = cutlass.Uint32(FILL_WORD)
            continue
        ap = pb + idx + k * threads * VEC * 2
        aq = qb + idx + k * threads * VEC * 2
        if k < full:
            wp = _ldg4(ap, nc)
            wq = _ldg4(aq, nc)
        else:
            pred = cutlass.Int32(tidx < nv - k * threads)
            wp = _ldg4_pred(ap, pred, nc)
            wq = _ldg4_pred(aq, pred, nc)
        for i in range(4):
            bp[4 * u + i] = wp[i]
            bq[4 * u + i] = wq[i]


def _tree(f, vals: list):
    vals = list(vals)
    while len(vals) > 1:
        nxt = [f(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2 == 1:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


@cute.kernel
def _kl_kernel(
    mP: cute.Tensor,            # (T, V) row-major bf16
    mQ: cute.Tensor,            # (T, V) row-major bf16
    mO: cute.Tensor,            # (T,) fp32
    threads: cutlass.Constexpr,
    ur: cutlass.Constexpr,      # vectors per tensor per step
    steps: cutlass.Constexpr,   # R, even
    vpt: cutlass.Constexpr,     # slots per thread
    full: cutlass.Constexpr,    # slots valid for every thread
    nv: cutlass.Constexpr,      # 16-byte vectors per row
    vocab: cutlass.Constexpr,
    rpc: cutlass.Constexpr,     # rows per CTA
    clamp: cutlass.Constexpr,   # the last CTA has fewer rows: clamp the index, do not store
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    T = mP.shape[0]
    nwarps = threads // 32
    K = (threads, ur, vpt, full, nv, vocab)
    smem = SmemAllocator()
    red_m = smem.allocate_tensor(cutlass.Float32, cute.make_layout(64), byte_alignment=16)
    red_s = smem.allocate_tensor(cutlass.Float32, cute.make_layout(96), byte_alignment=16)
    pb = mP.iterator.toint()
    qb = mQ.iterator.toint()

    ne = 4 * ur  # packed words per tensor per buffer
    bp = [cute.make_rmem_tensor((ne,), cutlass.Uint32), cute.make_rmem_tensor((ne,), cutlass.Uint32)]
    bq = [cute.make_rmem_tensor((ne,), cutlass.Uint32), cute.make_rmem_tensor((ne,), cutlass.Uint32)]

    ridx = cutlass.Int32(bidx * rpc)
    # prologue: steps 0 and 1 of the CTA's first row into buffers 0 and 1
    for b in cutlass.range_constexpr(2):
        _refill(bp[b], bq[b], pb, qb, ridx, b, tidx, True, K)

    for r in cutlass.range(rpc, unroll=1):
        st = (cutlass.Float32(M_INIT), cutlass.Float32(M_INIT * LOG2_E),
              cutlass.Float32(M_INIT), cutlass.Float32(M_INIT * LOG2_E),
              cutlass.Float32(0.0), cutlass.Float32(0.0), cutlass.Float32(0.0))
        nxt = ridx + 1
        if cutlass.const_expr(clamp):
            nxt = cutlass.min(nxt, T - 1)
        for j in cutlass.range_constexpr(steps):
            b = j % 2
            st = _round_w([bp[b][i] for i in range(ne)], [bq[b][i] for i in range(ne)], st)
            # the refill of buffer b waits for this step's sums (zdep == 0 but opaque)
            z = _zdep(st[4], st[5], st[6])
            ridx = ridx + z
            nxt = nxt + z
            if cutlass.const_expr(j + 2 < steps):
                _refill(bp[b], bq[b], pb, qb, ridx, j + 2, tidx, True, K)
            else:
                # the next row's steps 0 and 1 go out before this row's reduction (plain loads)
                if r + 1 < rpc:
                    _refill(bp[b], bq[b], pb, qb, nxt, j + 2 - steps, tidx, False, K)
        mp, mlp, mq, mlq, sp, acc, sq = st

        # row combine: warp butterflies, one smem step per value group, two barriers
        MP = cute.arch.warp_reduction_max(mp)
        MQ = cute.arch.warp_reduction_max(mq)
        if cutlass.const_expr(nwarps > 1):
            if lane == 0:
                red_m[warp] = MP
                red_m[nwarps + warp] = MQ
            cute.arch.sync_threads()
            MP = _tree(cute.arch.fmax, [red_m[w] for w in range(nwarps)])
            MQ = _tree(cute.arch.fmax, [red_m[nwarps + w] for w in range(nwarps)])
        # same rounding as the loop's nlp: the thread holding the row max gets factor 1
        fpp = cute.math.exp2(mlp - MP * LOG2_E, fastmath=True)
        fqq = cute.math.exp2(mlq - MQ * LOG2_E, fastmath=True)
        SP = cute.arch.warp_reduction_sum(sp * fpp)
        AA = cute.arch.warp_reduction_sum(acc * fpp)
        SQ = cute.arch.warp_reduction_sum(sq * fqq)
        if cutlass.const_expr(nwarps > 1):
            if lane == 0:
                red_s[warp] = SP
                red_s[nwarps + warp] = AA
                red_s[2 * nwarps + warp] = SQ
            cute.arch.sync_threads()
        # red_m is next written after this row's second barrier; red_s after the next row's
        # first barrier, which thread 0 reaches only after its reads below.
        if tidx == 0:
            if cutlass.const_expr(nwarps > 1):
                # fixed order: deterministic
                SP = _tree(lambda a, c: a + c, [red_s[w] for w in range(nwarps)])
                AA = _tree(lambda a, c: a + c, [red_s[nwarps + w] for w in range(nwarps)])
                SQ = _tree(lambda a, c: a + c, [red_s[2 * nwarps + w] for w in range(nwarps)])
            # MP, MQ are natural-unit maxima: they enter unscaled (not times ln 2); only the
            # log2 of the sums is converted to natural log.
            kl = (_div_approx(AA, SP) - (MP - MQ)) - (cute.math.log2(SP, fastmath=True)
                                                       - cute.math.log2(SQ, fastmath=True)) * LN_2
            if cutlass.const_expr(clamp):
                if bidx * rpc + r < T:
                    mO[ridx] = kl
            else:
                mO[ridx] = kl
        ridx = nxt


@cute.jit
def _kl_host(
    mP: cute.Tensor,
    mQ: cute.Tensor,
    mO: cute.Tensor,
    stream: cuda.CUstream,
    threads: cutlass.Constexpr,
    ur: cutlass.Constexpr,
    steps: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    nb: cutlass.Constexpr,
    rpc: cutlass.Constexpr,
):
    T = mP.shape[0]
    V = mP.shape[1]
    nv = V // VEC
    _kl_kernel(mP, mQ, mO, threads, ur, steps, vpt, nv // threads, nv, V, rpc,
               nb * rpc != T).launch(
        grid=[nb, 1, 1],
        block=[threads, 1, 1],
        stream=stream,
        min_blocks_per_mp=CTAS_PER_SM,      # <= 64 registers: 4 CTAs (1024 threads) per SM
        preferred_smem_carveout=-1,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(p, q, kl)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    threads, vpt, ur, steps = _plan(V // VEC)
    nb, rpc = _grid(T)
    key = (T, V)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        p = make_fake_compact_tensor(bf16, (T, V), stride_order=(1, 0), assumed_align=16)
        q = make_fake_compact_tensor(bf16, (T, V), stride_order=(1, 0), assumed_align=16)
        o = make_fake_compact_tensor(cutlass.Float32, (T,), assumed_align=4)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_kl_host, p, q, o, stream, threads, ur, steps, vpt, nb, rpc,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(p: torch.Tensor, q: torch.Tensor, kl: torch.Tensor) -> None:
        fn(p, q, kl)

    return run

"""F01 moe_router, CuTe DSL expert solution: per token, the 8 experts with the largest bf16
router logits (ties: lower expert id first), best first, as int32 ids, and their softmax
probabilities renormalized over the 8 (fp32).

Memory-bound in principle: the logits are read once (2 * E bytes per token), 64 bytes per token
are written.  Exact and data-independent: exact 32-bit keys and a branch-free compare-exchange
network (no window, no fallback: every token runs the same instructions whatever the values), so
the speed does not depend on the inputs.

Design
  * One compile per shape set with static (T, E).  One thread per token, TB = 128 tokens
    (threads) per CTA, 8192 CTAs at the benchmark shape (~5.2 waves).
  * Staging through shared memory: the CTA's logits are one contiguous run of TB * E bf16, read
    with coalesced 128-bit loads (E / 8 loads in flight per thread at E = 64) into a padded smem
    image of TB rows of EP = roundup(E, 8) + 8 bf16; the pad makes each thread's 128-bit reads of
    its own row conflict-free (row stride 144 B at E = 64).  When E % 8 != 0 (E = 60) or in the
    last CTA of a ragged T, the staging is element by element (scalar loads, predicated on the
    flat index < T * E; the check shapes only).
  * Keys: the fp32 number with bits 0x4B000000 | ord << 6 | 63 - id (2^23 + an integer < 2^22: one
    binade, so float order = integer order, differences are exact, and the same bits compare
    correctly as integers), ord the order-preserving 16-bit image of the bf16 logit (0x8000 + m for
    +m, 0x7FFF - m for -m).  A distinct key per expert, ordered by logit descending then id
    ascending: exactly the statement's tie rule.  Per 32-bit word of two bf16, inline PTX:
    add.rn.bf16x2 with +0 (HADD2 / HFMA2 on the FMA pipe: -0 + +0 = +0, so -0.0 and +0.0 get one
    key, as the tie rule requires; every other value is unchanged; it must not flush bf16
    subnormals), prmt with selector 0xBB99 (each half's sign spread over the half) and one LOP3
    (xor with sign | 0x8000: both ords at once), then per key two instructions:
    C + ((u << 16) >> 10) (IMAD.SHL + LEA.HI) or C' + ((u | 0xFFFF) >> 10) (LOP3 + LEA.HI),
    C' = C - 63.  3.5 instructions per key, 2.5 on the ALU pipe.
  * Selection: the row is processed in groups of 8 keys, each sorted with Batcher's 19-comparator
    network and merged into the running sorted top 8 (8 max, a bitonic sequence holding the top 8
    of the 16, then a 12-comparator bitonic sort).  Comparators in float form: max.f32 (one
    FMNMX) + min = a - (max - b) (two exact FADDs on the FMA pipe), 1 ALU + 2 FMA-pipe
    instructions, instead of an integer max/min pair (2 ALU).  Three of the eight sort8 groups
    (INT_GROUPS) keep the integer form, so that ALU clocks (2 per instruction) and issue slots
    come out about even (~1120 / ~1100 per warp).  Padding slots (E % 8 != 0) get key 0, below
    every real key, and E >= 8, so they are never selected.
  * Decode of the 8 selected keys: s = (key << 10) + 2^31, bits = (s ^ ((s >> 31) & 0x7FFF0000)) &
    0xFFFF0000 (the logit's fp32 bits, exact); ids = (key & 63) ^ 63.
  * Weights: w_j = exp2(l_j * log2 e - l_0 * log2 e) / sum (one FFMA + ex2.approx per weight),
    the division as one rcp.approx (~1 ulp; rtol is 1e-4) and 8 multiplies: no IEEE-division
    slow path.
  * Stores: each thread writes its token's 8 weights and 8 ids (2 x 2 128-bit stores).  Threads
    past T (last CTA of a ragged T) store nothing.
  * Occupancy: 32 registers, 18 KB shared memory per CTA -> 11-12 CTAs (44-48 warps) per SM.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch tensors
    straight through on torch's current stream.

Instruction counts (sm_90a SASS of the benchmark build, CUTE_DSL_KEEP=cubin + nvdisasm): ~560
ALU-pipe instructions per token, 1096 in all.  The previous design (integer keys ord * 65536 +
65535 - id, integer min/max comparators, an IEEE division) used ~780 ALU-pipe instructions per
token (507 of them integer min/max), 1016 in all.  The ALU pipe takes a warp instruction every
2 clocks per scheduler: ~780 per token is 1M / 32 warps x 1560 clk / (528 schedulers x 1.98 GHz)
= 49 us of ALU time for the previous design, ~35 us here, against 43.2 us of memory time.

Measured on the H200 (full mode):
  * bench/h200/2026-12-02b/solutions-CF.md (`mkb solutions C F`, one run): 61.8 us (IQR 0.6),
    69.9% of the roofline ideal (43.2 us); the TIRx expert 63.9 us in the same run.
  * bench/h200/2026-12-02b/tune-r2.json (one judge, back to back): 62.0 us (IQR 0.8), against
    65.3 us (IQR 0.6) for the previous design; a persistent-grid form of this kernel ran 66.9 us.
  The estimate before the measurement was ~50 us (~47 us if the time scaled with the ALU clocks:
  the previous design's 65.1 us x 1120 / 1560).  It came in at 62 us: the ALU-pipe count fell ~28% but the time only
  ~5%, so the ALU pipe was not the only limit.  The other limit is not identified.  The TIRx
  expert now uses this design's keys, comparator mix and decode, with its integer comparator
  fixed (an earlier TIRx port failed the check on the H200): 59.4 us in
  bench/h200/2026-12-02b/solutions-CF-r3.md, against this kernel's 61.5 us in the same run.

Numerics: keys, the float-form network (both sort8 networks, integer groups 1, 4, 7, the merge
chain) and the decode emulated on the CPU in uint32 / fp32 numpy against the reference's stable
sort: ids exact and weights within the tolerance for normal rows (offsets -1..1, scales 0.5..2),
integer-valued rows (ties), rows of +-0 and repeated values, E = 16, 60, 64.
Limits: T * E < 2**31 (32-bit offsets), top_k == 8, E even, 8 <= E <= 64 (6-bit ids in the
keys); build() raises ValueError beyond that.
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
TB = 128           # tokens (threads) per CTA
K = 8              # top-k (fixed by the problem)
LOG2E = math.log2(math.e)
KEY_HI = 0x4B000000  # fp32 bits of 2^23: key = 2^23 + (ord << 6) + 63 - id, one binade
# Groups of 8 keys whose sort uses integer min/max pairs (2 ALU instructions per comparator)
# instead of max.f32 + 2 exact sub.f32 (1 ALU + 2 FMA-pipe instructions): balances the ALU pipe
# (half rate) against the issue slot (speed knob; both forms are exact on these keys).
INT_GROUPS = (1, 4, 7)

# Batcher's odd-even merge sort network for 8 inputs (19 comparators); (i, j), i < j: after
# the exchange slot i holds the larger key (descending order).
_SORT8 = (
    (0, 1), (2, 3), (4, 5), (6, 7),
    (0, 2), (1, 3), (4, 6), (5, 7),
    (1, 2), (5, 6),
    (0, 4), (1, 5), (2, 6), (3, 7),
    (2, 4), (3, 5),
    (1, 2), (3, 4), (5, 6),
)


def _asm_u32(ptx: str, nargs: int):
    """A pure inline-PTX op on nargs uint32 registers returning one uint32 ($0 the result)."""

    @dsl_user_op
    def f(*args, loc=None, ip=None) -> cutlass.Uint32:
        assert len(args) == nargs
        return cutlass.Uint32(llvm.inline_asm(
            cutlass.Uint32.mlir_type,
            [cutlass.Uint32(a).ir_value(loc=loc, ip=ip) for a in args],
            ptx,
            "=r" + ",r" * nargs,
            has_side_effects=False,
            loc=loc,
            ip=ip,
        ))

    return f


# Both bf16 halves of a word as 16-bit ords (0x8000 + m for +m, 0x7FFF - m for -m):
# add.rn.bf16x2 with +0 turns -0 into +0 and changes nothing else (so -0.0 and +0.0 get one key);
# prmt with the sign-replicate selector 0xBB99 spreads each half's sign over its half; the xor with
# (sign | 0x8000) flips all bits of a negative half and only the sign bit of a positive one.
_ordw = _asm_u32(
    "{.reg .b32 z, c, s; mov.b32 z, 0; add.rn.bf16x2 c, $1, z; prmt.b32 s, c, 0, 0xBB99; "
    "or.b32 s, s, 0x80008000; xor.b32 $0, c, s;}", 1)
# The keys of a word's two halves from its ords u (C = KEY_HI | 63 - id; C' = C - 63):
#   lo: C + ((u << 16) >> 10) = C + (ord_lo << 6)     (IMAD.SHL + LEA.HI)
#   hi: C' + ((u | 0xFFFF) >> 10) = C + (ord_hi << 6) (LOP3 + LEA.HI)
# Inline PTX keeps LLVM from rewriting the shift pairs into shift-mask-or (3 ALU instructions).
_klo = _asm_u32("{.reg .b32 t; shl.b32 t, $1, 16; shr.u32 t, t, 10; add.u32 $0, t, $2;}", 2)
_khi = _asm_u32("{.reg .b32 t; or.b32 t, $1, 65535; shr.u32 t, t, 10; add.u32 $0, t, $2;}", 2)
# Float-form comparator halves on the key bits: max.f32 (one FMNMX), and the min as
# a - (max - b), exact on integer-valued floats of one binade (two FADDs on the FMA pipe).
_fmax = _asm_u32("{.reg .f32 a, b, h; mov.b32 a, $1; mov.b32 b, $2; max.f32 h, a, b; mov.b32 $0, h;}", 2)
_fmin = _asm_u32(
    "{.reg .f32 a, b, h, t; mov.b32 a, $1; mov.b32 b, $2; mov.b32 h, $3; "
    "sub.f32 t, h, b; sub.f32 t, a, t; mov.b32 $0, t;}", 3)


def _cx(v: list, i: int, j: int, ints: bool) -> None:
    """Compare-exchange at trace time: v[i] gets the larger key, v[j] the smaller."""
    a = v[i]
    b = v[j]
    if ints:
        v[i] = cutlass.max(a, b)
        v[j] = cutlass.min(a, b)
    else:
        h = _fmax(a, b)
        v[i] = h
        v[j] = _fmin(a, b, h)


def _sort8(v: list, ints: bool) -> list:
    """Sort 8 keys descending (19 comparators)."""
    v = list(v)
    for i, j in _SORT8:
        _cx(v, i, j, ints)
    return v


def _merge8(a: list, b: list) -> list:
    """Top 8 of two descending-sorted lists of 8, sorted descending."""
    c = [_fmax(a[i], b[K - 1 - i]) for i in range(K)]   # bitonic, holds the top 8
    for d in (4, 2, 1):
        for i in range(K):
            if i & d == 0:
                _cx(c, i, i + d, False)
    return c


@cute.kernel
def _router_kernel(
    mL: cute.Tensor,            # (T, E) bf16
    mW: cute.Tensor,            # (T, 8) fp32
    mI: cute.Tensor,            # (T, 8) int32
    E: cutlass.Constexpr,
    EP: cutlass.Constexpr,
    ragged: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    T = mL.shape[0]
    total = T * E
    base = bidx * (TB * E)              # first flat element of this CTA

    smem = SmemAllocator()
    sm = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout(TB * EP), byte_alignment=16)
    sm16 = cute.recast_tensor(sm, cutlass.Uint16)
    flat16 = cute.recast_tensor(cute.make_tensor(mL.iterator, cute.make_layout(total)), cutlass.Uint16)

    vec_ok = E % VEC == 0
    if cutlass.const_expr(vec_ok):
        gv = cute.make_tensor(mL.iterator, cute.make_layout((VEC, total // VEC), stride=(1, VEC)))
        sv = cute.make_tensor(sm.iterator, cute.make_layout((VEC, TB * EP // VEC), stride=(1, VEC)))
        vpr = E // VEC                  # vectors per row
        vpt = vpr                       # vectors per thread: TB * vpr vectors, TB threads
        full = True
        if cutlass.const_expr(ragged):
            full = bidx * TB + TB <= T
        if full:
            frag = cute.make_rmem_tensor((VEC, vpt), cutlass.BFloat16)
            for i in cutlass.range_constexpr(vpt):
                frag[None, i].store(gv[None, bidx * (TB * vpr) + i * TB + tidx].load())
            for i in cutlass.range_constexpr(vpt):
                v = i * TB + tidx
                r = v // vpr
                sv[None, r * (EP // VEC) + (v - r * vpr)].store(frag[None, i].load())
        else:
            n = total - base
            for f in cutlass.range(tidx, n, TB):
                r = f // E
                sm16[r * EP + (f - r * E)] = flat16[base + f]
    else:
        # this CTA's rows only: all TB of them, or what is left of T in the last CTA of a ragged T
        n = TB * E
        if cutlass.const_expr(ragged):
            n = cutlass.min(total - base, TB * E)
        for f in cutlass.range(tidx, n, TB):
            r = f // E
            sm16[r * EP + (f - r * E)] = flat16[base + f]
    cute.arch.sync_threads()

    # This thread's row as packed words (expert 2i low half, 2i + 1 high half).
    NW = E // 2
    sw = cute.recast_tensor(sm, cutlass.Uint32)
    words = []
    if cutlass.const_expr(vec_ok):
        swv = cute.make_tensor(sw.iterator, cute.make_layout((4, TB * EP // VEC), stride=(1, 4)))
        wr = cute.make_rmem_tensor((4,), cutlass.Uint32)
        for g in cutlass.range_constexpr(E // VEC):
            wr.store(swv[None, tidx * (EP // VEC) + g].load())
            for i in cutlass.range_constexpr(4):
                words.append(wr[i])
    else:
        for i in cutlass.range_constexpr(NW):
            words.append(sw[tidx * (EP // 2) + i])

    # Keys (fp32 bits KEY_HI | ord << 6 | 63 - id), padded with 0 (below every key) to groups of 8.
    keys = []
    for i in cutlass.range_constexpr(NW):
        u = _ordw(words[i])
        keys.append(_klo(u, cutlass.Uint32(KEY_HI | (63 - 2 * i))))
        keys.append(_khi(u, cutlass.Uint32(KEY_HI + (62 - 2 * i) - 63)))
    ngrp = (E + VEC - 1) // VEC
    for _ in cutlass.range_constexpr(ngrp * VEC - E):
        keys.append(cutlass.Uint32(0))

    top = None
    for g in cutlass.range_constexpr(ngrp):
        srt = _sort8(keys[g * VEC:(g + 1) * VEC], g in INT_GROUPS)
        top = srt if g == 0 else _merge8(top, srt)

    # Decode: s = (key << 10) + 2^31 holds ord << 16 with its sign bit flipped and the id in bits
    # 10..15; a negative logit's magnitude bits are the complement: xor 0x7FFF0000 where s < 0,
    # then drop the id bits: the logit's fp32 bits (exact). id = 63 - (key & 63).
    lvf = []
    idf = cute.make_rmem_tensor((K,), cutlass.Int32)
    for j in cutlass.range_constexpr(K):
        s = top[j] * cutlass.Uint32(1024) + cutlass.Uint32(0x80000000)
        neg = (s.to(cutlass.Int32) >> 31).to(cutlass.Uint32)
        bits = (s ^ (neg & cutlass.Uint32(0x7FFF0000))) & cutlass.Uint32(0xFFFF0000)
        lvf.append(bits.bitcast(cutlass.Float32))
        idf[j] = ((top[j] & cutlass.Uint32(63)) ^ cutlass.Uint32(63)).to(cutlass.Int32)

    # Renormalized softmax over the 8 (fp32, ex2.approx, one division).
    wf = cute.make_rmem_tensor((K,), cutlass.Float32)
    l0 = lvf[0] * LOG2E
    ssum = cutlass.Float32(1.0)
    wf[0] = cutlass.Float32(1.0)
    for j in cutlass.range_constexpr(1, K):
        ex = cute.math.exp2(lvf[j] * LOG2E - l0, fastmath=True)
        wf[j] = ex
        ssum = ssum + ex
    inv = cute.arch.rcp_approx(ssum)  # rcp.approx (~1 ulp; rtol is 1e-4): no IEEE-division slow path
    for j in cutlass.range_constexpr(K):
        wf[j] = wf[j] * inv

    row = bidx * TB + tidx
    if row < T:
        mW[row, None].store(wf.load())
        mI[row, None].store(idf.load())


@cute.jit
def _router_host(
    mL: cute.Tensor,
    mW: cute.Tensor,
    mI: cute.Tensor,
    stream: cuda.CUstream,
    E: cutlass.Constexpr,
    EP: cutlass.Constexpr,
):
    T = mL.shape[0]
    _router_kernel(mL, mW, mI, E, EP, T % TB != 0).launch(
        grid=[(T + TB - 1) // TB, 1, 1],
        block=[TB, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, E) and return run(logits, weights, ids)."""
    T = int(spec.dims["T"])
    E = int(spec.dims["E"])
    top_k = int(spec.params.get("top_k", K))
    if top_k != K:
        raise ValueError(f"top_k={top_k}: this kernel is written for top_k = {K}")
    if not K <= E <= 64 or E % 2:
        raise ValueError(f"E={E} must be even and lie in [8, 64] (6-bit ids in the keys, 32-bit row reads)")
    if T * E >= 2**31:
        raise ValueError("T*E must stay below 2**31 elements (32-bit static index math)")
    EP = -(-E // VEC) * VEC + VEC       # padded smem row (see the docstring)
    key = (T, E)
    fn = _CACHE.get(key)
    if fn is None:
        lg = make_fake_compact_tensor(cutlass.BFloat16, (T, E), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.Float32, (T, K), stride_order=(1, 0), assumed_align=16)
        i = make_fake_compact_tensor(cutlass.Int32, (T, K), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_router_host, lg, w, i, stream, E, EP, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> None:
        fn(logits, weights, ids)

    return run

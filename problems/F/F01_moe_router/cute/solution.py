"""F01 moe_router, CuTe DSL expert solution: per token, the 8 experts with the largest bf16
router logits (ties: lower expert id first), best first, as int32 ids, and their softmax
probabilities renormalized over the 8 (fp32).

One read of the logits (2 * E bytes per token) and one write of the outputs (64 bytes per token):
201 MB at the benchmark (T = 1M, E = 64), 43.1 us at the roofline ideal. The exact top-8 is the
other cost: a branch-free network over exact 32-bit keys of all 64 experts (236 comparators + 56
max, 2-3 instructions each, plus 3.5 instructions per key) was ~70% of the previous kernel's
~1130-instruction tile loop: 32768 tiles x 1130 / (528 schedulers x 1.83 GHz) = 38 us of issue
alone, and issue and memory (both 40-47 us) did not overlap into the memory time. This kernel
cuts the selection to a cheap packed threshold plus exact keys for the few candidates above it.

* Work decomposition: a warp owns tiles of 32 consecutive tokens (one per lane; 32 * E contiguous
  bf16, 4 KB at E = 64); a CTA of 4 warps handles NT = min(4, ceil(tiles / 4)) tiles per warp
  (benchmark: 2048 CTAs of 4 warps x 4 tiles; 6 CTAs per SM, limited by the 32 KB of shared
  memory per CTA: 2.6 waves). Warps never wait for each other (warp barriers only).
* Loads: the tile goes global -> shared with 16-byte cp.async (.cg, L2 only), lane l copying
  vectors l, l + 32, ... (every warp instruction covers 512 contiguous bytes), double-buffered:
  the next tile's copies are in flight while the current one is processed (one commit group per
  iteration, wait_group(1), then a warp barrier). At E % 8 == 0 a token's row is E / 8 16-byte
  vectors stored with an XOR swizzle of the slot, so the 8 lanes of a quarter-warp phase hit 8
  distinct 16-byte bank groups on both the copy and the row reads. Other even E (E = 60, check
  shapes only) stage the tile with plain 32-bit loads and stores, unswizzled.
* 1. Threshold on packed logits: lane l reads its token's row as 32-bit words (lo half expert
  2w, hi half expert 2w + 1) and runs bf16x2 min / max networks on them (max.bf16x2 /
  min.bf16x2: one HMNMX2 per two comparators, numeric order, -0 = +0, no ids): the top 4 of
  every half-list of 8 (two sort4 + a top-4 merge), pairs of groups merged (9 comparators), the
  two lists merged (8 max + 12), then the lo and hi lists combined into t (both halves; padding
  words of two -inf when E / 2 is not a multiple of 8). t is the 8th largest of the top 4 of
  every half-list: a lower bound of the 8th largest logit, equal to it except when one half-list
  holds 5 of the top 8 (~0.3% of normal rows).
* 2. Candidate masks: a second read of the row (ld.volatile.shared.v4, so the first read's words
  need no registers through the network), set.ge.u32.bf16x2 against t (0xFFFF per half, HSET2)
  and one LOP3 per word into two 32-bit masks: bit (w & 15) of m[w >> 4] is expert 2w, bit
  16 + (w & 15) expert 2w + 1.
* 3. Exact keys for the candidates only: the first 8 taken out of the masks (bfind, shl, xor),
  each logit read back from shared memory (ld.shared.u16 at id ^ (swizzle << 3)) and keyed as the
  fp32 number 2^23 + (ord << 6) + 63 - id (ord: the order-preserving 16-bit image of the bf16,
  0x8000 + m for +m, 0x7FFF - m for -m, after add.rn.bf16x2 with +0 so that -0 and +0 get one
  key; one binade, so float order = integer order and differences are exact): a distinct key per
  expert, ordered by logit descending then id ascending, exactly the statement's tie rule. The 8
  are sorted by Batcher's 19-comparator network in float form (max.f32 + min = a - (max - b),
  two exact FADDs); further candidates (ties at t, or t below the 8th largest) are inserted one
  by one (8 integer comparators) in a loop of popc(m0) + popc(m1) trips: 4.9% of normal tokens
  have one, 81% of warps run >= 1 trip, 0.86 trips per warp-tile on average (CPU-measured on
  normal rows), ~42 instructions each. The loop is data-dependent per warp; the ids are not:
  every true top-8 expert has logit >= the 8th largest >= t, so it is a candidate, and the final
  choice is made by exact keys over all candidates, however loose t is. The warp barrier that
  releases the buffer for the next copy comes after this loop (the row is read until then).
* Decode: s = (key << 10) + 2^31, bits = (s ^ ((s >> 31) & 0x7FFF0000)) & 0xFFFF0000 (the
  logit's fp32 bits, exact); id = (key & 63) ^ 63. Weights: e_j = exp2((l_j - l_0) * log2 e)
  (the difference first: no inf - inf for logits of large magnitude), w_j = e_j * rcp.approx(sum e)
  (~1 ulp; rtol is 1e-4). Stores: 2 x 2 STG.128 per token (weights, ids).
* Ragged edges: vectors past the tensor are not copied; tokens past T (stale shared memory) are
  computed and not stored, their ids clamped to E - 1 (E < 64) so every shared read stays in the
  row. NaN logits are outside the problem's inputs.
* SASS (CUTE_DSL_KEEP=cubin, nvdisasm; benchmark build): 888 instructions in the kernel against
  the previous kernel's 1264; tile loop ~707 + 0.86 x 42 ~ 743 against ~1130 (-34%); 55
  registers, no local memory; HMNMX2 160 (+22 VHMNMX), HSET2 32, LOP3 172. The tie loop carries
  all 8 keys in registers (15 VIMNMX per trip).
* Checks (CPU): compiled for sm_90a at every shape set (mkb eval --mode compile); this module's
  _threshold / _next / _ins run in Python on integers (the PTX ops modelled, equal bf16 values
  returned adversarially by max / min) with the kernel's row addressing, swizzle, mask bits and
  loop mirrored, on every shape set and E = 8, 24, 48, against reference.py (normal, scaled,
  integer-tie, +-0, subnormal, ~1e4 and ~3e38 rows): ids exact, weights within 1e-4; with the
  tie loop disabled the same check fails.
* Host path: compiled once per static (T, E) with --enable-tvm-ffi against fake tensors; run()
  passes the torch tensors straight through on torch's current stream.
Limits: T * E < 2**31 (32-bit offsets), top_k == 8, E even, 8 <= E <= 64 (6-bit ids in the keys);
build() raises ValueError beyond that.

Measured on the H200 (full mode, one judge): 55.6 us (IQR 1.1) in
bench/h200/2026-12-02c/tune-r5b.json, against 59.3 us (IQR 1.5) for the previous expert (the
same tiles, loads and decode with the full 64-key network; bench/h200/2026-12-02c/tune-r4.json):
1.07x. One-run table bench/h200/2026-12-02c/solutions-CF-r5.md: 55.8 us (IQR 0.8), 77.3% of the
43.1 us roofline ideal, 59.82x the fastest eager formulation, 16.39x torch.compile; the TIRx
expert (the same design) 56.3 us there. The instruction count fell 34% but the time 6% (the
estimate was 50-54 us): the kernel now runs within 2% of torch's own copy of the same byte count
(54.8 us, bench/h200/2026-12-02c/copyceiling.md), so the memory side, not issue, now sets the time.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T as MT
from cutlass.cutlass_dsl import dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit access
K = 8              # top-k (fixed by the problem)
WARPS = 4          # warps per CTA (each works alone on its own tiles)
TOK = 32           # tokens per warp tile (one per lane)
NT_MAX = 4         # tiles per warp
LOG2E = math.log2(math.e)
KEY_HI = 0x4B000000  # fp32 bits of 2^23: key = 2^23 + (ord << 6) + 63 - id, one binade
PAD = 0xFF80FF80     # two bf16 -inf: padding words of the threshold network (below every logit)

# Batcher's odd-even merge sort network for 8 inputs (19 comparators); (i, j), i < j: after
# the exchange slot i holds the larger value (descending order).
_SORT8 = (
    (0, 1), (2, 3), (4, 5), (6, 7),
    (0, 2), (1, 3), (4, 6), (5, 7),
    (1, 2), (5, 6),
    (0, 4), (1, 5), (2, 6), (3, 7),
    (2, 4), (3, 5),
    (1, 2), (3, 4), (5, 6),
)
_SORT4 = ((0, 1), (2, 3), (0, 2), (1, 3), (1, 2))  # sorts 4
_BITONIC4 = ((0, 2), (1, 3), (0, 1), (2, 3))      # sorts a bitonic 4
_MERGE44 = _SORT8[10:]                            # merges two sorted 4s (slots 0-3, 4-7)


def _asm_u32(ptx: str, nargs: int, side_effects: bool = False):
    """An inline-PTX op on nargs uint32 registers returning one uint32 ($0 the result)."""

    @dsl_user_op
    def f(*args, loc=None, ip=None) -> cutlass.Uint32:
        assert len(args) == nargs
        return cutlass.Uint32(llvm.inline_asm(
            cutlass.Uint32.mlir_type,
            [cutlass.Uint32(a).ir_value(loc=loc, ip=ip) for a in args],
            ptx,
            "=r" + ",r" * nargs,
            has_side_effects=side_effects,
            loc=loc,
            ip=ip,
        ))

    return f


@dsl_user_op
def _ldv4(addr, loc=None, ip=None) -> list:
    """Four words at shared address addr (ld.shared.v4, volatile: a second read of the row, never
    merged with the first, so the original words need no registers during the threshold network)."""
    res = llvm.inline_asm(
        llvm.StructType.get_literal([MT.i32(), MT.i32(), MT.i32(), MT.i32()]),
        [cutlass.Uint32(addr).ir_value(loc=loc, ip=ip)],
        "ld.volatile.shared.v4.u32 {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(MT.i32(), res, [q], loc=loc, ip=ip)) for q in range(4)]


# bf16x2 max / min (HMNMX2, numeric: -0 and +0 equal), >= as 0xFFFF per half (HSET2), half swap
_hmax = _asm_u32("max.bf16x2 $0, $1, $2;", 2)
_hmin = _asm_u32("min.bf16x2 $0, $1, $2;", 2)
_hge = _asm_u32("set.ge.u32.bf16x2 $0, $1, $2;", 2)
_swap = _asm_u32("prmt.b32 $0, $1, 0, 0x1032;", 1)
_ldw = _asm_u32("ld.volatile.shared.u32 $0, [$1];", 1, side_effects=True)
_lds16 = _asm_u32("{.reg .u16 h; ld.shared.u16 h, [$1]; cvt.u32.u16 $0, h;}", 1)
_bfind = _asm_u32("bfind.u32 $0, $1;", 1)                       # msb index, 0xFFFFFFFF for 0
_bit = _asm_u32("{.reg .b32 o; mov.b32 o, 1; shl.b32 $0, o, $1;}", 1)  # 1 << p, 0 for p >= 32
_selnz = _asm_u32("{.reg .pred q; setp.ne.u32 q, $1, 0; selp.b32 $0, $2, $3, q;}", 3)
_popc = _asm_u32("popc.b32 $0, $1;", 1)
# Both bf16 halves of a word as 16-bit ords (0x8000 + m for +m, 0x7FFF - m for -m):
# add.rn.bf16x2 with +0 turns -0 into +0 and changes nothing else (so -0.0 and +0.0 get one key);
# prmt with the sign-replicate selector 0xBB99 spreads each half's sign over its half; the xor with
# (sign | 0x8000) flips all bits of a negative half and only the sign bit of a positive one.
_ordw = _asm_u32(
    "{.reg .b32 z, c, s; mov.b32 z, 0; add.rn.bf16x2 c, $1, z; prmt.b32 s, c, 0, 0xBB99; "
    "or.b32 s, s, 0x80008000; xor.b32 $0, c, s;}", 1)
# Float-form comparator halves on the key bits: max.f32 (one FMNMX), and the min as
# a - (max - b), exact on integer-valued floats of one binade (two FADDs on the FMA pipe).
_fmax = _asm_u32("{.reg .f32 a, b, h; mov.b32 a, $1; mov.b32 b, $2; max.f32 h, a, b; mov.b32 $0, h;}", 2)
_fmin = _asm_u32(
    "{.reg .f32 a, b, h, t; mov.b32 a, $1; mov.b32 b, $2; mov.b32 h, $3; "
    "sub.f32 t, h, b; sub.f32 t, a, t; mov.b32 $0, t;}", 3)


def _hcx(r: list, i: int, j: int) -> None:
    """bf16x2 compare-exchange (both halves at once): r[i] gets the larger, r[j] the smaller."""
    a = r[i]
    b = r[j]
    r[i] = _hmax(a, b)
    r[j] = _hmin(a, b)


def _threshold(r: list, ng: int):
    """Both halves equal to a lower bound of the 8th largest logit (exactly the 8th largest of the
    top 4 of every list of 8; exact 8th largest for ng == 1). r: 8 * ng words (lo halves: even
    experts, hi halves: odd experts), consumed."""
    if ng == 1:
        for i, j in _SORT8:
            _hcx(r, i, j)
        heads = [r[0:8]]
    else:
        tops = []
        for g in range(ng):
            v = r[8 * g:8 * g + 8]
            for i, j in _SORT4:
                _hcx(v, i, j)
                _hcx(v, 4 + i, 4 + j)
            c = [_hmax(v[i], v[7 - i]) for i in range(4)]
            for i, j in _BITONIC4:
                _hcx(c, i, j)
            tops.append(c)
        heads = []
        for g in range(0, ng, 2):
            if g + 1 < ng:
                v = tops[g] + tops[g + 1]
                for i, j in _MERGE44:
                    _hcx(v, i, j)
            else:
                v = tops[g] + [cutlass.Uint32(PAD)] * 4
            heads.append(v)
    while len(heads) > 1:
        nxt = []
        for p in range(0, len(heads) - 1, 2):
            a, b = heads[p], heads[p + 1]
            c = [_hmax(a[i], b[7 - i]) for i in range(8)]
            for d in (4, 2, 1):
                for i in range(8):
                    if i & d == 0:
                        _hcx(c, i, i + d)
            nxt.append(c)
        if len(heads) % 2:
            nxt.append(heads[-1])
        heads = nxt
    s = heads[0]
    c = [_hmax(s[i], _swap(s[7 - i])) for i in range(4)]
    t = _hmin(_hmin(c[0], c[1]), _hmin(c[2], c[3]))
    return _hmin(t, _swap(t))


def _next(m0, m1, raddr, swx, E: int, vecrow: bool):
    """Take one candidate out of the masks (from m0 while it is not empty): its exact key
    2^23 + ord << 6 + 63 - id, its logit read from the token's row in shared memory (raddr).
    Bit p of m0 (m1): expert 2 (p & 15) + (p >> 4) (+ 32)."""
    x = _selnz(m0, m0, m1)
    p = _bfind(x)
    bt = _bit(p)
    n0 = _selnz(m0, m0 ^ bt, m0)
    n1 = _selnz(m0, m1, m1 ^ bt)
    cid = _selnz(m0, cutlass.Uint32(0), cutlass.Uint32(32)) | ((p & cutlass.Uint32(15)) << 1) | (
        (p >> 4) & cutlass.Uint32(1))
    if cutlass.const_expr(E != 64):
        cid = cutlass.min(cid, cutlass.Uint32(E - 1))
    elem = cid
    if cutlass.const_expr(vecrow):
        elem = cid ^ swx
    u = _ordw(_lds16(raddr + elem * cutlass.Uint32(2)))
    key = (cutlass.Uint32(KEY_HI) | (cid ^ cutlass.Uint32(63))) + ((u & cutlass.Uint32(0xFFFF)) << 6)
    return n0, n1, key


def _ins(k0, k1, k2, k3, k4, k5, k6, k7, x):
    """Insert key x into the descending list k0..k7 (the smallest falls out)."""
    out = []
    for k in (k0, k1, k2, k3, k4, k5, k6, k7):
        out.append(cutlass.max(k, x))
        x = cutlass.min(k, x)
    return out


def _swz(vpt: int):
    """XOR swizzle (shift, mask) of the vector slot in a token row: slot j of token t is stored at
    t * vpt + (j ^ ((t >> shift) & mask)); None: no swizzle. Chosen so that 8 consecutive lanes
    (one phase of a 128-bit shared access) reading slot j of 8 tokens, and 8 consecutive vectors of
    the copy, fall in 8 distinct 16-byte bank groups."""
    if vpt % 8 == 0:
        return 0, 7
    if vpt in (2, 4):
        return {2: 2, 4: 1}[vpt], vpt - 1
    return None


@cute.jit
def _issue(atom, gv: cute.Tensor, sv: cute.Tensor, lane, warp, wt, buf, VPT: cutlass.Constexpr,
           swz: cutlass.Constexpr, SH: cutlass.Constexpr, SMK: cutlass.Constexpr, NVF: cutlass.Constexpr):
    """cp.async of tile wt into buffer buf of this warp: lane copies vectors lane, lane + 32, ... of
    the tile (token v // VPT, slot v % VPT, swizzled); vectors past the tensor are skipped."""
    NVW = TOK * VPT
    for i in cutlass.range_constexpr(NVW // 32):
        v = lane + 32 * i
        t = v // VPT
        j = v - t * VPT
        if cutlass.const_expr(swz):
            j = j ^ ((t >> SH) & SMK)
        g = wt * NVW + v
        if g < NVF:
            cute.copy(atom, gv[None, g], sv[None, (warp * 2 + buf) * NVW + t * VPT + j])


@cute.kernel
def _router_kernel(
    mL: cute.Tensor,            # (T, E) bf16
    mW: cute.Tensor,            # (T, 8) fp32
    mI: cute.Tensor,            # (T, 8) int32
    E: cutlass.Constexpr,
    NT: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = tidx % 32
    warp = tidx // 32
    T = mL.shape[0]
    total = T * E
    NW = E // 2                 # 32-bit words per token row
    TW = TOK * NW               # words per tile
    NG = (NW + 7) // 8          # threshold-network groups of 8 words
    vec_ok = E % VEC == 0

    smem = SmemAllocator()
    sm = smem.allocate_tensor(cutlass.Uint32, cute.make_layout(WARPS * 2 * TW), byte_alignment=128)
    wbase = warp * (2 * TW)     # this warp's two buffers (words)
    smaddr = cutlass.Uint32(sm.iterator.toint())
    swx = cutlass.Uint32(0)

    if cutlass.const_expr(vec_ok):
        VPT = E // VEC          # vectors per token row
        NVW = TOK * VPT         # vectors per tile
        NVF = total // VEC      # vectors of the tensor
        sw = _swz(VPT)
        SH, SMK = sw if sw is not None else (0, 0)
        if cutlass.const_expr(sw is not None):
            swx = cutlass.Uint32(((lane >> SH) & SMK) << 3)
        gv = cute.make_tensor(mL.iterator, cute.make_layout((VEC, NVF), stride=(1, VEC)))
        sv = cute.make_tensor(cute.recast_ptr(sm.iterator, dtype=cutlass.BFloat16),
                              cute.make_layout((VEC, WARPS * 2 * NVW), stride=(1, VEC)))
        sw4 = cute.make_tensor(sm.iterator, cute.make_layout((4, WARPS * 2 * NVW), stride=(1, 4)))
        atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL),
                                   cutlass.BFloat16, num_bits_per_copy=128)

        wt0 = (bidx * NT) * WARPS + warp
        _issue(atom, gv, sv, lane, warp, wt0, 0, VPT, sw is not None, SH, SMK, NVF)
        cute.arch.cp_async_commit_group()
    else:
        NWT = total // 2        # words of the tensor (E even)
        gw = cute.recast_tensor(cute.make_tensor(mL.iterator, cute.make_layout(total)), cutlass.Uint32)

    for n in cutlass.range(NT, unroll=1):
        wt = (bidx * NT + n) * WARPS + warp     # tile of this iteration
        buf = n % 2
        words = []
        # shared byte address of this lane's token row
        raddr = smaddr + cutlass.Uint32((wbase + buf * TW + lane * NW) * 4)
        if cutlass.const_expr(vec_ok):
            # next tile in flight (its buffer was released by the warp barrier at the end of the
            # previous iteration); one commit per iteration, so wait_group(1) = this tile landed
            if n + 1 < NT:
                _issue(atom, gv, sv, lane, warp, wt + WARPS, 1 - buf, VPT, sw is not None, SH, SMK, NVF)
            cute.arch.cp_async_commit_group()
            cute.arch.cp_async_wait_group(1)
            cute.arch.sync_warp()
            wr = cute.make_rmem_tensor((4,), cutlass.Uint32)
            for j in cutlass.range_constexpr(VPT):
                jj = j
                if cutlass.const_expr(sw is not None):
                    jj = j ^ ((lane >> SH) & SMK)
                wr.store(sw4[None, (warp * 2 + buf) * NVW + lane * VPT + jj].load())
                for q in cutlass.range_constexpr(4):
                    words.append(wr[q])
        else:
            # plain 32-bit staging (check shapes only): lane copies words lane, lane + 32, ...
            for i in cutlass.range_constexpr(NW):
                m = lane + 32 * i
                g = wt * TW + m
                if g < NWT:
                    sm[wbase + buf * TW + m] = gw[g]
            cute.arch.sync_warp()
            for i in cutlass.range_constexpr(NW):
                words.append(sm[wbase + buf * TW + lane * NW + i])

        # phase 1: threshold t (both halves), a lower bound of the 8th largest logit
        for _ in cutlass.range_constexpr(NG * 8 - NW):
            words.append(cutlass.Uint32(PAD))
        tt = _threshold(words, NG)

        # phase 2: candidate masks (logit >= t) from a second, volatile read of the row: bit (w & 15)
        # of m[w >> 4] for expert 2w, bit 16 + (w & 15) for expert 2w + 1
        mm = [cutlass.Uint32(0), cutlass.Uint32(0)]
        for j in cutlass.range_constexpr((NW + 3) // 4 if vec_ok else NW):
            if cutlass.const_expr(vec_ok):
                jj = cutlass.Uint32(j)
                if cutlass.const_expr(sw is not None):
                    jj = cutlass.Uint32(j) ^ (swx >> 3)
                q4 = _ldv4(raddr + jj * cutlass.Uint32(16))
                ws = [(4 * j + q, q4[q]) for q in range(4)]
            else:
                ws = [(j, _ldw(raddr + cutlass.Uint32(4 * j)))]
            for w, x in ws:
                mm[w >> 4] = mm[w >> 4] | (_hge(x, tt) & cutlass.Uint32(0x00010001 << (w & 15)))
        m0 = mm[0]
        m1 = mm[1]

        # phase 3: the first 8 candidates' exact keys, sorted; further candidates (ties at t, or a
        # lower t) inserted one by one
        ks = []
        for _ in cutlass.range_constexpr(K):
            m0, m1, kk = _next(m0, m1, raddr, swx, E, vec_ok)
            ks.append(kk)
        for i, j in _SORT8:
            h = _fmax(ks[i], ks[j])
            ks[j] = _fmin(ks[i], ks[j], h)
            ks[i] = h
        k0, k1, k2, k3, k4, k5, k6, k7 = ks
        nextra = _popc(m0) + _popc(m1)
        for _ in cutlass.range(nextra, unroll=1):
            m0, m1, x = _next(m0, m1, raddr, swx, E, vec_ok)
            k0, k1, k2, k3, k4, k5, k6, k7 = _ins(k0, k1, k2, k3, k4, k5, k6, k7, x)
        cute.arch.sync_warp()   # every lane has read the buffer: it may be refilled
        top = [k0, k1, k2, k3, k4, k5, k6, k7]

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

        # Renormalized softmax over the 8: exp2((l_j - l_0) * log2 e), the difference first.
        ev = [cutlass.Float32(1.0)]
        for j in cutlass.range_constexpr(1, K):
            ev.append(cute.math.exp2((lvf[j] - lvf[0]) * cutlass.Float32(LOG2E), fastmath=True))
        ssum = ((ev[0] + ev[1]) + (ev[2] + ev[3])) + ((ev[4] + ev[5]) + (ev[6] + ev[7]))
        inv = cute.arch.rcp_approx(ssum)  # rcp.approx (~1 ulp; rtol is 1e-4)
        wf = cute.make_rmem_tensor((K,), cutlass.Float32)
        for j in cutlass.range_constexpr(K):
            wf[j] = ev[j] * inv

        row = wt * TOK + lane
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
    NT: cutlass.Constexpr,
    GRID: cutlass.Constexpr,
):
    _router_kernel(mL, mW, mI, E, NT).launch(
        grid=[GRID, 1, 1],
        block=[WARPS * 32, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def plan(T: int) -> tuple[int, int]:
    """(tiles per warp NT, CTAs GRID) for T tokens: tiles of 32 tokens, WARPS warps per CTA."""
    ntt = -(-T // TOK)
    nt = min(NT_MAX, -(-ntt // WARPS))
    return nt, -(-ntt // (WARPS * nt))


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
    nt, grid = plan(T)
    key = (T, E)
    fn = _CACHE.get(key)
    if fn is None:
        lg = make_fake_compact_tensor(cutlass.BFloat16, (T, E), stride_order=(1, 0), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.Float32, (T, K), stride_order=(1, 0), assumed_align=16)
        i = make_fake_compact_tensor(cutlass.Int32, (T, K), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_router_host, lg, w, i, stream, E, nt, grid, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor) -> None:
        fn(logits, weights, ids)

    return run

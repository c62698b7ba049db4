"""F01 moe_router, TIRx (tvm_tirx 0.1.0a4) expert solution: per token of bf16 router logits
[T, E], the 8 experts with the largest logits (ties: lower expert id first), best first, as int32
ids, with their softmax weights renormalized over the 8 (fp32).

One read of the logits and one write of the outputs (the memory-bound minimum), thread per token.
Exact and data-independent: exact 32-bit keys and a branch-free compare-exchange network, no
window, no fallback: every token runs the same instructions whatever the values.

* Work decomposition: a warp owns tiles of 32 consecutive tokens (32 * E contiguous bf16, 4 KB at
  E = 64); a CTA of 4 warps handles NT tiles per warp (benchmark: 2048 CTAs of 4 warps x 4
  tiles). The tile is copied global -> shared with 16-byte ``cp.async.cg`` (L2 only), lane l
  copying 16-byte vectors l, l + 32, ... of the tile (every warp instruction covers 512
  contiguous bytes), double-buffered: the next tile's copies are in flight while the current
  tile is processed. ``cp.async.wait_group`` plus a warp barrier (no CTA barrier: warps are
  independent) make the tile visible to the whole warp.
* Lane l then processes token l of the tile alone, from shared memory. At E % 8 == 0 a token's
  row is read as E / 8 16-byte vectors, stored with an XOR swizzle of the vector slot so that
  the 8 lanes of each quarter-warp phase hit distinct 16-byte bank groups on both the copy and
  the read. Other even E (E = 60) use an unswizzled tile and 32-bit reads.
* Keys, 3.5 instructions per key. The key of expert c is the fp32 number with bits
  0x4B000000 | ord << 6 | 63 - c (2^23 + an integer < 2^22: one binade, so float order =
  integer order and differences are exact), ord the order-preserving 16-bit image of the bf16
  logit (0x8000 + m for +m, 0x7FFF - m for -m): a distinct key per expert, ordered by logit
  descending then id ascending, exactly the statement's tie rule. Per 32-bit word of two bf16:
  add.rn.bf16x2 with +0 (-0 + +0 = +0, so -0.0 and +0.0 get one key; every other value is
  unchanged; it must not flush bf16 subnormals), prmt with selector 0xBB99 (each half's sign
  spread over the half), one LOP3 (xor with sign | 0x8000: both ords at once), then per key an
  IMAD.SHL + LEA.HI (low half: C + ((u << 16) >> 10)) or a LOP3 + LEA.HI (high half:
  C' + ((u | 0xFFFF) >> 10), C' = C - 63), inline PTX.
* Selection: groups of 8 keys (padding keys 0.0, below every real key, for E % 8 != 0) sorted by
  Knuth's 19-comparator network, merged in a balanced tree (8 max of a[i] and b[7 - i], then a
  12-comparator bitonic merge): 236 comparators + 56 max at E = 64. Comparator mix: float form
  FMNMX + two exact FADDs (min = a - (max - b): 1 ALU + 2 FMA-pipe instructions), integer form
  an IMNMX pair (2 ALU) for three of the eight sort8 groups (INT_GROUPS, 57 comparators), so the
  ALU pipe (a warp instruction every 2 clocks) and the issue slot come out about even.
  DSL pitfall: in TIRx, `a = T.reinterpret(k[i])` is an expression re-read from the buffer at
  each use, so `k[j] = min(a, c)` after `k[i] = max(a, c)` would read the new k[i]; the integer
  comparator saves k[i] in a local first (a port without it failed the check on the H200).
* Decode of the 8 selected keys: s = (key << 10) + 2^31, bits = (s ^ ((s >> 31) & 0x7FFF0000)) &
  0xFFFF0000 (the logit's fp32 bits, exact; 4 instructions per key); ids = (key & 63) ^ 63.
* Weights: e_j = exp2((l_j - l_0) * log2 e) in fp32 (FADD + FMUL + ex2.approx, relative error
  ~1e-7; not l_j * log2 e - l_0 * log2 e as one FFMA, which is off by the rounding of
  l_0 * log2 e: inf - inf = NaN, or wrong weights, for logits of large magnitude),
  w_j = e_j * (1 / sum e) (rtol is 1e-4). Stores: two 16-byte ``st.global.v4.b32`` per output
  per token.
* Ragged edges: vectors past the end of the tensor are not copied; tokens past T are computed
  on stale shared memory but never stored. When T * E % 8 != 0 (E = 60, T = 999) the last
  partial vector is read as 32-bit words with plain loads and stored to shared memory.
* Instruction counts (SASS of the benchmark build, NVRTC sm_90a --use_fast_math + nvdisasm on
  the CPU): 1232 per token, 62 registers, ALU pipe ~600 (FMNMX 235, IMNMX 114, LOP3 116, LEA 89,
  PRMT 32, SHF 11). The previous design (integer-built keys ((ord(b) + 0x8000) << 6) + 63 - c,
  every comparator in float form): 1456 instructions, 69 registers, ALU pipe ~670.
* Checks (CPU): the generated CUDA kernel itself, compiled with g++ as C++ (one std::thread per
  CUDA thread, __syncwarp as a barrier, cp.async as memcpy, the inline PTX helpers as C), run on
  every check shape set and on the first and last 48 CTAs of the benchmark shape, against
  reference.py: ids exact and weights within the tolerance on normal rows, integer rows (ties),
  rows of +-0, subnormal rows, rows scaled by 3e36.

Measured on the H200 (full mode):
  * bench/h200/2026-12-02b/tune-r3.json (one judge, back to back): 59.2 us (IQR 1.1); a
    persistent-grid form of this kernel 61.7 us (IQR 1.2). The previous design ran 63.9 us
    (IQR 0.4) 40 minutes earlier on the same machine (bench/h200/2026-12-02b/solutions-CF.md).
  * bench/h200/2026-12-02b/solutions-CF-r3.md (`mkb solutions C F`, one run, this code): 59.4 us
    (IQR 1.4), 72.7% of the roofline ideal (43.2 us), 55.80x the fastest eager formulation,
    15.38x torch.compile; the CuTe expert 61.5 us in the same run.
  The estimate was ~54 us (63.9 us x 1232 / 1456, if the time scaled with the issue slots): the
  instruction count fell 15% but the time ~7%, so issue is not the only limit.
Limits (asserted): E even, 8 <= E <= 64 (6-bit ids in the keys), T * E < 2^31 (int32 indexing).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

K = 8  # top_k (the outputs' second dimension; also spec.params["top_k"])
WARPS = 4  # warps per CTA (each works alone on its own tiles)
TOK = 32  # tokens per warp tile (one per lane)
NT_MAX = 4  # tiles per warp
VEC = 8  # bf16 per 16-byte vector
# Key bits: the fp32 number 2^23 + (ord << 6) + 63 - id (bits 0x4B000000 | (ord << 6) | 63 - id).
KEY_HI = 0x4B000000
# Groups of 8 keys whose sort uses integer min/max pairs (2 ALU instructions per comparator) instead
# of fmaxf + 2 exact FADDs (1 ALU + 2 FMA-pipe instructions): balances the ALU pipe (half rate)
# against the issue slot (speed knob; both forms are exact on these keys).
INT_GROUPS = (1, 4, 7)
LOG2E = 1.4426950408889634
CP_ASYNC = "cp.async.cg.shared.global"  # 16 bytes global -> shared, L2 only
CP_COMMIT = "cp.async.commit_group"
CP_WAIT = "cp.async.wait_group"
ST_V4 = "st.global.v4.b32"
# Knuth's optimal 19-comparator sorting network for 8 keys (checked by the 0-1 principle).
SORT8 = ((0, 2), (1, 3), (4, 6), (5, 7), (0, 4), (1, 5), (2, 6), (3, 7), (0, 1), (2, 3), (4, 5),
         (6, 7), (2, 4), (3, 5), (1, 4), (3, 6), (1, 2), (3, 4), (5, 6))


# ord of both bf16 halves of a word, one inline-PTX helper: add.rn.bf16x2 with +0 turns -0 into
# +0 and changes nothing else (so -0 and +0 get one key); prmt with the sign-replicate selector
# 0xBB99 spreads each half's sign over its half (0xFFFF for a negative half); xor with
# (sign | 0x8000) flips all bits of a negative half and only the sign bit of a positive one, so each
# half becomes the order-preserving 16-bit ord (0x8000 + m for +m, 0x7FFF - m for -m).
ORD_SRC = r"""
__device__ __forceinline__ unsigned int f01v5_ordw(unsigned int w) {
  unsigned int c, s;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(c) : "r"(w), "r"(0u));
  asm("prmt.b32 %0, %1, 0, 0xBB99;" : "=r"(s) : "r"(c));
  return c ^ (s | 0x80008000u);
}
"""


def _ordw(w):
    """Both halves of the word w as 16-bit ords (see ORD_SRC)."""
    return T.cuda.func_call("f01v5_ordw", w, ORD_SRC, ty="uint32")


def _cas(k, i, j, tmp, ints: bool):
    """Compare-exchange of key registers i < j: k[i] = max, k[j] = min (descending order).

    Float form: fmaxf (one FMNMX) and min(a, b) = a - (max(a, b) - b), exact for integer-valued
    floats of one binade (or 0.0), two FADDs on the FMA pipe. Integer form (ints): the same bits as
    int32 (positive, so int order is float order), an IMNMX pair on the ALU pipe."""
    if ints:
        # k[i] is saved in tmp first: TIRx expressions read the buffer where they are used, so
        # min(k[i], k[j]) written after k[i] = max(...) would read the new k[i].
        T.setitem_(tmp, 0, k[i])
        a = T.reinterpret(tmp[0], ty="int32")
        c = T.reinterpret(k[j], ty="int32")
        T.setitem_(k, i, T.reinterpret(T.max(a, c), ty="float32"))
        T.setitem_(k, j, T.reinterpret(T.min(a, c), ty="float32"))
    else:
        T.setitem_(tmp, 0, k[i])
        T.setitem_(k, i, T.call_pure_extern("fmaxf", tmp[0], k[j], ty="float32"))
        T.setitem_(k, j, tmp[0] - (k[i] - k[j]))


def _sort8(k, base, tmp, ints: bool):
    """Sort k[base:base + 8] descending."""
    for i, j in SORT8:
        _cas(k, base + i, base + j, tmp, ints)


def _merge8(k, a, b, tmp):
    """k[a:a + 8] = the top 8 of the sorted lists k[a:a + 8] and k[b:b + 8], sorted descending:
    the max of a[i] and b[7 - i] is bitonic and holds the top 8; a bitonic merge sorts it."""
    for i in range(8):
        T.setitem_(k, a + i, T.call_pure_extern("fmaxf", k[a + i], k[b + 7 - i], ty="float32"))
    for d in (4, 2, 1):
        for i in range(8):
            if i & d == 0:
                _cas(k, a + i, a + i + d, tmp, False)


# The two keys of a word from its ords u (inline PTX, so that LLVM keeps the shift pair that the
# SASS does as one IMAD.SHL + one LEA.HI (lo) and one LOP3 + one LEA.HI (hi), instead of its
# shift-and-mask canonical form plus an OR):
#   lo: C + ((u << 16) >> 10) = C + (ord_lo << 6), C = KEY_HI | 63 - c
#   hi: C' + ((u | 0xFFFF) >> 10) = C' + (ord_hi << 6) + 63, C' = KEY_HI + (63 - c) - 63
KLO_SRC = r"""
__device__ __forceinline__ unsigned int f01v5_klo(unsigned int u, unsigned int c) {
  unsigned int k;
  asm("{.reg .b32 t; shl.b32 t, %1, 16; shr.u32 t, t, 10; add.u32 %0, t, %2;}" : "=r"(k) : "r"(u), "r"(c));
  return k;
}
"""
KHI_SRC = r"""
__device__ __forceinline__ unsigned int f01v5_khi(unsigned int u, unsigned int c) {
  unsigned int k;
  asm("{.reg .b32 t; or.b32 t, %1, 65535; shr.u32 t, t, 10; add.u32 %0, t, %2;}" : "=r"(k) : "r"(u), "r"(c));
  return k;
}
"""


def _keys(k, wv, e: int, nk: int):
    """k[c] = key of expert c from the token's packed words (fp32 bits KEY_HI | ord << 6 | 63 - c);
    padding keys (c >= e) 0.0. Per word (two keys): HADD2, PRMT, LOP3 (ords), then per key two
    instructions (KLO_SRC / KHI_SRC)."""
    for m in range((e + 1) // 2):
        u = _ordw(wv[m])
        c = 2 * m
        T.setitem_(k, c, T.reinterpret(T.cuda.func_call("f01v5_klo", u, T.uint32(KEY_HI | (63 - c)), KLO_SRC,
                                                        ty="uint32"), ty="float32"))
        if c + 1 < e:
            T.setitem_(k, c + 1, T.reinterpret(T.cuda.func_call("f01v5_khi", u, T.uint32(KEY_HI + (62 - c) - 63),
                                                                KHI_SRC, ty="uint32"), ty="float32"))
    for c in range(e, nk):
        T.setitem_(k, c, T.float32(0.0))


def _select(k, tmp, ng: int):
    """Top 8 of the ng groups of 8 keys into k[0:8], sorted descending: every group sorted, then
    a balanced merge tree."""
    for g in range(ng):
        _sort8(k, 8 * g, tmp, g in INT_GROUPS)
    heads = [8 * g for g in range(ng)]
    while len(heads) > 1:
        nxt = []
        for p in range(0, len(heads) - 1, 2):
            _merge8(k, heads[p], heads[p + 1], tmp)
            nxt.append(heads[p])
        if len(heads) % 2:
            nxt.append(heads[-1])
        heads = nxt


def _swz_shift(vpt: int):
    """XOR swizzle of the vector slot inside a token row: j ^ ((token >> shift) & mask), or None.

    Chosen so that 8 consecutive lanes (one phase of a 128-bit shared access) reading the same j
    of 8 tokens, and 8 consecutive vectors of the copy, fall in distinct 16-byte bank groups."""
    if vpt % 8 == 0:
        return 0, 7
    if vpt in (2, 4):
        return {2: 2, 4: 1}[vpt], vpt - 1
    return None


def make_kernel(tokens: int, experts: int, top_k: int):
    """Router for a static [tokens, experts] bf16 logits matrix."""
    assert top_k == K, "the kernel is written for top_k = 8"
    E = experts
    TT = tokens
    assert E % 2 == 0, "E must be even (32-bit shared-memory reads of a token row)"
    assert K <= E <= 64, "8 <= E <= 64 (6-bit expert ids in the keys)"
    assert TT * E < 2**31, "int32 indexing"
    NG = -(-E // 8)  # key groups of 8
    NK = 8 * NG
    NVW = 4 * E  # 16-byte vectors per tile (32 tokens * E * 2 bytes / 16)
    NI = -(-NVW // 32)  # vectors per lane per tile
    VFULL = NVW % 32 == 0
    TILE_W = 16 * E  # uint32 words per tile
    NW = E // 2  # words per token
    NVF = TT * E // VEC  # full 16-byte vectors of the tensor
    TAILW = (TT * E % VEC) // 2  # 32-bit words of the last, partial vector
    NTT = -(-TT // TOK)  # tiles
    NT = min(NT_MAX, -(-NTT // WARPS))
    GRID = -(-NTT // (WARPS * NT))
    VECROW = E % 8 == 0
    VPT = E // 8
    swz = _swz_shift(VPT) if VECROW else None
    SWZ = swz is not None
    SH, SM = swz if SWZ else (0, 0)
    if VECROW and (VPT & (VPT - 1)) == 0:
        LOGV = VPT.bit_length() - 1
    else:
        LOGV = -1  # not a power of two: plain division

    def slot_of(v):
        """Shared-memory vector slot of tile vector v (token v // VPT, vector v % VPT)."""
        if not SWZ:
            return v
        if LOGV >= 0:
            t = v >> LOGV
            j = v & (VPT - 1)
        else:
            t = T.truncdiv(v, VPT)
            j = T.truncmod(v, VPT)
        return t * VPT + (j ^ ((t >> SH) & SM))

    @T.function
    def moe_router(
        L: T.Tensor((TT, E), T.bfloat16),
        W: T.Tensor((TT, K), "float32"),
        IDS: T.Tensor((TT, K), "int32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=WARPS * 32))
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        lf = T.decl_tensor(L.data, ty_args=[T.Tensor((TT * E,), T.bfloat16)])
        lw = T.decl_tensor(L.data, ty_args=[T.Tensor((TT * E // 2,), "uint32")])
        tiles = T.alloc_shared((WARPS, 2, TILE_W), "uint32", align=128)
        wv = T.alloc_local((NW,), "uint32")
        k = T.alloc_local((NK,), "float32")
        tmp = T.alloc_local((1,), "float32")
        kb = T.alloc_local((K,), "uint32")
        vb = T.alloc_local((K,), "uint32")
        ev = T.alloc_local((K,), "float32")
        ov = T.alloc_local((8,), "uint32")

        # prologue: the first tile of this warp in flight
        wt0 = (T.cuda.block_idx("x") * NT) * WARPS + warp
        for i in T.unroll(NI):
            v = lane + 32 * i
            if (VFULL or v < NVW) and wt0 * NVW + v < NVF:
                T.ptx[CP_ASYNC](tiles.ptr_to([warp, 0, slot_of(v) * 4]), lf.ptr_to([(wt0 * NVW + v) * VEC]), 16)
        T.ptx[CP_COMMIT]()

        for n in T.serial(NT):
            wt = (T.cuda.block_idx("x") * NT + n) * WARPS + warp  # tile of this iteration
            buf = T.truncmod(n, 2)
            # next tile in flight (the other buffer was released by the barrier at the end of
            # the previous iteration)
            if n + 1 < NT:
                for i in T.unroll(NI):
                    v = lane + 32 * i
                    if (VFULL or v < NVW) and (wt + WARPS) * NVW + v < NVF:
                        T.ptx[CP_ASYNC](tiles.ptr_to([warp, 1 - buf, slot_of(v) * 4]),
                                        lf.ptr_to([((wt + WARPS) * NVW + v) * VEC]), 16)
            T.ptx[CP_COMMIT]()
            if T.constexpr(TAILW > 0):
                # the last partial vector of the tensor (never copied by cp.async): plain loads
                if lane == 0 and NVF >= wt * NVW and NVF < (wt + 1) * NVW:
                    for m in T.unroll(TAILW):
                        tiles[warp, buf, (NVF - wt * NVW) * 4 + m] = lw[NVF * 4 + m]
            T.ptx[CP_WAIT](1)  # this tile's copies (this lane's) have landed
            T.cuda.warp_sync()  # ... and every lane's

            # the lane's token row, from shared memory
            if T.constexpr(VECROW):
                for j in T.unroll(VPT):
                    if T.constexpr(SWZ):
                        s = lane * VPT + (j ^ ((lane >> SH) & SM))
                    else:
                        s = lane * VPT + j
                    wv[T.ramp(4 * j, 1, 4)] = tiles[warp, buf, T.ramp(s * 4, 1, 4)]
            else:
                for m in T.unroll(NW):
                    wv[m] = tiles[warp, buf, lane * NW + m]
            T.cuda.warp_sync()  # every lane has read the buffer: it may be refilled

            _keys(k, wv, E, NK)
            _select(k, tmp, NG)

            # weights: softmax of the 8 selected logits (decoded from the keys, exact)
            tok = wt * TOK + lane
            if tok < TT:
                for r in T.unroll(K):
                    # key bits k = KEY_HI | ord << 6 | 63 - id. s = (k << 10) + 2^31 holds ord << 16
                    # with the sign bit flipped (ord's sign bit is the logit's, inverted) and the id
                    # in bits 10..15; a negative logit's magnitude bits are the complement: xor
                    # 0x7FFF0000 where s < 0, then drop the id bits: the logit's fp32 bits (exact).
                    kb[r] = T.reinterpret(k[r], ty="uint32")
                    vb[r] = kb[r] * T.uint32(1024) + T.uint32(0x80000000)
                    vb[r] = (vb[r] ^ (T.reinterpret(T.reinterpret(vb[r], ty="int32") >> T.int32(31), ty="uint32")
                                      & T.uint32(0x7FFF0000))) & T.uint32(0xFFFF0000)
                # exp2 arguments as (l_j - l_0) * log2 e (FADD + FMUL): the difference of two
                # logits is formed before scaling, so it stays accurate whatever their magnitude
                # (l_j * log2 e - l_0 * log2 e as one FFMA is off by the rounding of l_0 * log2 e,
                # ~ulp(|l_0|): wrong weights once |l_0| is in the thousands).
                l0 = T.reinterpret(vb[0], ty="float32")
                ev[0] = T.float32(1.0)
                for r in T.unroll(K - 1):
                    ev[r + 1] = T.exp2((T.reinterpret(vb[r + 1], ty="float32") - l0) * T.float32(LOG2E))
                inv = T.float32(1.0) / (((ev[0] + ev[1]) + (ev[2] + ev[3])) + ((ev[4] + ev[5]) + (ev[6] + ev[7])))
                for r in T.unroll(K):
                    ov[r] = T.reinterpret(ev[r] * inv, ty="uint32")
                T.ptx[ST_V4](W.ptr_to([tok, 0]), ov[0], ov[1], ov[2], ov[3])
                T.ptx[ST_V4](W.ptr_to([tok, 4]), ov[4], ov[5], ov[6], ov[7])
                for r in T.unroll(K):
                    ov[r] = (kb[r] & T.uint32(63)) ^ T.uint32(63)  # id = 63 - (k & 63)
                T.ptx[ST_V4](IDS.ptr_to([tok, 0]), ov[0], ov[1], ov[2], ov[3])
                T.ptx[ST_V4](IDS.ptr_to([tok, 4]), ov[4], ov[5], ov[6], ov[7])

    return moe_router


def build(spec):
    """Compile for spec's static (T, E) and top_k; return run(logits, weights, ids)."""
    tokens = int(spec.dims["T"])
    experts = int(spec.dims["E"])
    top_k = int(spec.params["top_k"])
    kernel = make_kernel(tokens, experts, top_k)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["moe_router"]

    def run(logits, weights, ids):
        fn(logits, weights, ids)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

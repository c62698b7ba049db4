"""F01 moe_router, TIRx (tvm_tirx 0.1.0a4) expert solution: per token of bf16 router logits
[T, E], the 8 experts with the largest logits (ties: lower expert id first), best first, as int32
ids, with their softmax weights renormalized over the 8 (fp32).

One read of the logits and one write of the outputs (the memory-bound minimum), thread per token:

* Work decomposition: a warp owns tiles of 32 consecutive tokens (32 * E contiguous bf16, 4 KB at
  E = 64); a CTA of 4 warps handles NT tiles per warp. The tile is copied global -> shared with
  16-byte ``cp.async.cg`` (L2 only), lane l copying 16-byte vectors l, l + 32, ... of the tile
  (every warp instruction covers 512 contiguous bytes), double-buffered: the next tile's copies
  are in flight while the current tile is processed, so the register file holds no in-flight
  data and the selection work overlaps the memory stream. ``cp.async.wait_group`` plus a warp
  barrier (no CTA barrier: warps are independent) make the tile visible to the whole warp.
* Lane l then processes token l of the tile alone, from shared memory. At E % 8 == 0 a token's
  row is read as E / 8 16-byte vectors, stored with an XOR swizzle of the vector slot so that
  the 8 lanes of each quarter-warp phase hit distinct 16-byte bank groups on both the copy and
  the read (row pitch 128 B at E = 64 would be an 8-way conflict otherwise). Other even E
  (E = 60) use an unswizzled tile and 32-bit reads (at most 2-way conflicts).
* Composite keys make the order total with no tie logic: the element of expert c with bf16 bits
  b gets the integer key ((ord(b) + 0x8000) << 6) + 63 - c, ord(b) = b for b >= 0 and
  -(b & 0x7FFF) for b < 0 (so -0.0 and +0.0 are equal, as the statement requires). A larger key
  means a larger logit or, for equal logits, a lower id; keys are unique, so the 8 largest keys
  are exactly the answer. The key is stored as the fp32 number 2^23 + key (bits 0x4B000000 +
  key: one binade, integer-valued, so float order is integer order and differences are exact).
* Selection, branch-free and identical for every lane (no divergence): the keys are cut into
  groups of 8 (padding keys 0.0, below every real key, for E % 8 != 0), every group is sorted
  with the optimal 19-comparator network, and the groups are merged in a balanced tree, each
  merge keeping the top 8 of two sorted 8-lists (8 max of a[i] and b[7 - i], then a
  12-comparator bitonic merge): 8 x 19 + 7 x 20 = 292 comparators at E = 64. A comparator is
  hi = fmaxf(a, b) (one FMNMX) and lo = a - (hi - b) (two exact FADDs on the FMA pipe), not
  an integer max/min pair: integer min/max and logic share the ALU pipe, which issues only 64
  lanes per SM per clock; with int32 keys the sm_90a SASS (nvdisasm of the cubin NVRTC builds
  on the CPU) had 520 integer min/max among about 900 ALU instructions per token, about 56 us
  of ALU time at the benchmark shape against the 48 us memory ideal. Now: about 1450
  instructions per token (292 FMNMX, 486 FADD, about 400 integer ops for keys, addresses and
  the epilogue), about 46 us of issue time at one instruction per clock per scheduler. The
  kernel is close to balanced between issue and memory; it is not expected to reach the copy
  roofline.
* Weights: logits decoded back from the 8 keys (exact), e_j = exp2((l_j - l_0) * log2 e) in
  fp32 (ex2.approx, relative error ~1e-7), w_j = e_j * (1 / sum e) (rtol is 1e-4). ids =
  63 - (key & 63). Stores: two 16-byte ``st.global.v4.b32`` per output per token.
* Ragged edges: vectors past the end of the tensor are not copied; tokens past T are computed
  on stale shared memory but never stored. When T * E % 8 != 0 (E = 60, T = 999) the last
  partial vector is read as 32-bit words with plain loads and stored to shared memory.
* Shapes are static per build. Limits (asserted): E even, 8 <= E <= 64 (6-bit ids in the
  keys; shared memory 2 x 4 warps x 64 E bytes <= 32 KB), T * E < 2^31 (int32 indexing).
* Unmeasured on the GPU. Speed knobs: KEY_DTYPE (comparator flavour), NT_MAX (tiles per warp),
  WARPS.

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`): 63.8
us, 68.0% of the roofline ideal (43.4 us), 52.33x the fastest eager formulation, 14.32x
torch.compile; the CuTe expert 66.0 us (this one is faster).
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
INT_MIN = -(2**31)
# Key bits: 2^23 as fp32 (0x4B000000) + 0x8000 << 6 (ord offset) + (ord << 6) + 63 - id.
KEY_BASE = 0x4B000000 + (0x8000 << 6)
# Comparator flavour (speed knob; both are exact): "float32" keys (FMNMX + 2 FADD per
# compare-exchange, ALU and FMA pipes shared: 1456 SASS instructions per tile loop) or "int32" keys
# with the same bits (IMNMX pairs, ALU pipe only: 1216 instructions, about 900 of them ALU).
KEY_DTYPE = "float32"
LOG2E = 1.4426950408889634
CP_ASYNC = "cp.async.cg.shared.global"  # 16 bytes global -> shared, L2 only
CP_COMMIT = "cp.async.commit_group"
CP_WAIT = "cp.async.wait_group"
ST_V4 = "st.global.v4.b32"
# Knuth's optimal 19-comparator sorting network for 8 keys (checked by the 0-1 principle).
SORT8 = ((0, 2), (1, 3), (4, 6), (5, 7), (0, 4), (1, 5), (2, 6), (3, 7), (0, 1), (2, 3), (4, 5),
         (6, 7), (2, 4), (3, 5), (1, 4), (3, 6), (1, 2), (3, 4), (5, 6))


def _kmax(a, b):
    """Max of two keys: fmaxf, one FMNMX (T.max on floats adds NaN handling: 4 instructions),
    or one integer max."""
    if KEY_DTYPE == "float32":
        return T.call_pure_extern("fmaxf", a, b, ty="float32")
    return T.max(a, b)


def _cas(k, i, j, tmp):
    """Compare-exchange of key registers i < j: k[i] = max, k[j] = min (descending order).

    Keys are integer-valued floats of one binade (or 0.0), so min(a, b) = a - (max(a, b) - b)
    is exact; the two subtractions run on the FMA pipe instead of a second ALU min."""
    T.setitem_(tmp, 0, k[i])
    T.setitem_(k, i, _kmax(tmp[0], k[j]))
    if KEY_DTYPE == "float32":
        T.setitem_(k, j, tmp[0] - (k[i] - k[j]))
    else:
        T.setitem_(k, j, T.min(tmp[0], k[j]))


def _sort8(k, base, tmp):
    """Sort k[base:base + 8] descending."""
    for i, j in SORT8:
        _cas(k, base + i, base + j, tmp)


def _merge8(k, a, b, tmp):
    """k[a:a + 8] = the top 8 of the sorted lists k[a:a + 8] and k[b:b + 8], sorted descending:
    the max of a[i] and b[7 - i] is bitonic and holds the top 8; a bitonic merge sorts it."""
    for i in range(8):
        T.setitem_(k, a + i, _kmax(k[a + i], k[b + 7 - i]))
    for d in (4, 2, 1):
        for i in range(8):
            if i & d == 0:
                _cas(k, a + i, a + i + d, tmp)


def _key(word, c, hi):
    """fp32 key of expert c from the hi (or lo) bf16 of a packed word: the float whose bits are
    KEY_BASE + (ord << 6) + 63 - c, ord in [-0x7FFF, 0x7FFF] (an integer-valued float in
    [2^23, 2^24): float order = integer order)."""
    x = T.reinterpret(word if hi else word << T.uint32(16), ty="int32")
    mask = x >> T.int32(31)  # all ones for a negative logit
    m6 = (x >> T.int32(10)) & T.int32(0x7FFF << 6)  # |value| << 6
    return T.reinterpret(((m6 ^ mask) - mask) + T.int32(KEY_BASE + 63 - c), ty=KEY_DTYPE)


def _keys(k, wv, e: int, nk: int):
    """k[c] = key of expert c from the token's packed words; padding keys (c >= e) 0.0."""
    for c in range(nk):
        if c < e:
            T.setitem_(k, c, _key(wv[c // 2], c, c % 2 == 1))
        else:
            T.setitem_(k, c, T.float32(0.0) if KEY_DTYPE == "float32" else T.int32(0))


def _select(k, tmp, ng: int):
    """Top 8 of the ng groups of 8 keys into k[0:8], sorted descending: every group sorted, then
    a balanced merge tree."""
    for g in range(ng):
        _sort8(k, 8 * g, tmp)
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
        k = T.alloc_local((NK,), KEY_DTYPE)
        tmp = T.alloc_local((1,), KEY_DTYPE)
        kb = T.alloc_local((K,), "int32")
        vb = T.alloc_local((K,), "int32")
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
                    kb[r] = T.reinterpret(k[r], ty="int32") - T.int32(KEY_BASE)  # (ord << 6) + 63 - id
                    vb[r] = (kb[r] >> T.int32(6)) << T.int32(16)  # ord << 16
                    vb[r] = T.if_then_else(vb[r] < T.int32(0), (T.int32(0) - vb[r]) | T.int32(INT_MIN), vb[r])
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
                    ov[r] = T.reinterpret(T.int32(63) - (kb[r] & T.int32(63)), ty="uint32")
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

"""F01 moe_router, TIRx (tvm_tirx 0.1.0a4) expert solution: per token of bf16 router logits
[T, E], the 8 experts with the largest logits (ties: lower expert id first), best first, as int32
ids, with their softmax weights renormalized over the 8 (fp32).

One read of the logits and one write of the outputs (128 + 64 bytes per token at E = 64: 201 MB
at the benchmark T = 1M, 43.1 us at the roofline ideal), thread per token. The exact top-8 is the
other cost: the previous kernel's branch-free network over exact 32-bit keys of all 64 experts
(236 comparators + 56 max at 2-3 instructions each, plus 3.5 instructions per key) was ~70% of
its ~1100-instruction tile loop, 37 us of issue alone (32768 tiles x 1100 / (528 schedulers x
1.83 GHz)), and issue and memory (both 40-47 us) did not overlap into the memory time. This
kernel selects with a cheap packed threshold and builds exact keys for the candidates only.

* Work decomposition: a warp owns tiles of 32 consecutive tokens (32 * E contiguous bf16, 4 KB at
  E = 64); a CTA of 4 warps handles NT = min(4, ceil(tiles / 4)) tiles per warp (benchmark: 2048
  CTAs of 4 warps x 4 tiles, 6 per SM: 2.6 waves). The tile is copied global -> shared with
  16-byte cp.async.cg (L2 only), lane l copying vectors l, l + 32, ... (every warp instruction
  covers 512 contiguous bytes), double-buffered: the next tile's copies are in flight while the
  current one is processed. cp.async.wait_group(1) plus a warp barrier (no CTA barrier: warps
  are independent) make the tile visible to the warp; a second warp barrier after the token
  work releases the buffer for the next copy.
* Lane l processes token l of the tile alone, from shared memory, in one CUDA device function
  (generated per E by route_source as straight-line C, every array index a constant, every value
  in a register) called with T.cuda.func_call. At E % 8 == 0 a row is E / 8 16-byte vectors
  stored with an XOR swizzle of the slot, so the 8 lanes of a quarter-warp phase hit distinct
  16-byte bank groups on both the copy and the read; other even E (E = 60) use an unswizzled
  tile and 32-bit reads.
* 1. Threshold on packed logits: the row's 32-bit words (lo half = expert 2w, hi half = expert
  2w + 1) go through bf16x2 min / max networks (max.bf16x2 / min.bf16x2: one HMNMX2 per two
  comparators, numeric order, -0 = +0, no .ftz, no ids): per group of 8 words the top 4 of both
  half-lists (two sort4 + a top-4 merge, 32 instructions), pairs of groups merged (9
  comparators), the two lists merged (8 max + 12), then the 8 lo and 8 hi values combined
  (max(X_i, Y_7-i), min over 8) into t, both halves; ~210 instructions. t is the 8th largest of
  the top 4 of every half-list: a lower bound of the 8th largest logit, equal to it unless one
  half-list of 8 holds 5 of the top 8 (~0.3% of normal rows).
* 2. Candidates: a second read of the row (asm volatile, so the first read's registers are not
  kept), set.ge.u32.bf16x2 against t (0xFFFF per half, HSET2) and one LOP3 per word into two
  32-bit masks (bit (w & 15) of m[w >> 4]: expert 2w, bit 16 + (w & 15): expert 2w + 1); 72
  instructions.
* 3. Exact keys for the candidates only: the first 8 taken out of the masks (bfind, shl, xor),
  each one's logit read back from shared memory (LDS.U16 at id ^ (swizzle << 3)) and keyed as
  the fp32 number 2^23 + (ord << 6) + 63 - id (ord: the order-preserving 16-bit image of the
  bf16, 0x8000 + m for +m, 0x7FFF - m for -m, after add.rn.bf16x2 with +0 so that -0 and +0 get
  one key; one binade, so float order = integer order): a distinct key per expert, ordered by
  logit descending then id ascending, exactly the statement's tie rule. The 8 are sorted by
  Batcher's 19-comparator network in float form (fmaxf + min = a - (max - b), exact); any
  further candidate (a tie at t, or t below the 8th largest) is inserted one by one (8 integer
  comparators) in a loop while the masks are not empty: 4.9% of normal tokens have one, 81% of
  warps run >= 1 iteration, 0.86 iterations per warp-tile on average (CPU-measured on normal
  rows), ~40 instructions each. The loop is data-dependent per warp; the ids are not: the
  candidate set contains the true top 8 for any t that is a lower bound of the 8th largest
  logit, and the final choice is made by exact keys over all candidates.
* Decode: s = (key << 10) + 2^31, bits = (s ^ ((s >> 31) & 0x7FFF0000)) & 0xFFFF0000 (the
  logit's fp32 bits, exact); id = (key & 63) ^ 63. Weights: e_j = exp2f((l_j - l_0) * log2 e)
  (the difference first: no inf - inf for logits of large magnitude), w_j = e_j * (1 / sum e)
  (rtol is 1e-4). Stores: two 16-byte stores per output per token.
* Ragged edges: vectors past the end of the tensor are not copied; when T * E % 8 != 0 (E = 60,
  T = 999) the last partial vector is read as 32-bit words with plain loads. Rows past T (stale
  shared memory) are computed and not stored; their ids are clamped to E - 1 so that every
  shared-memory read stays inside the row. NaN logits are outside the problem's inputs.
* SASS (NVRTC sm_90a, nvdisasm; benchmark build): 808 instructions in the kernel against the
  previous kernel's 1232; the tile loop ~670 + 0.86 x 40 (tie loop) ~ 700 against ~1100 (-36%);
  72 registers (80 allowed for 6 CTAs per SM; shared memory allows 6), no local memory; HMNMX2
  160, LOP3 161, HSET2 32, FLO 9.
* Checks (CPU): compiled for sm_90a at every shape set (mkb eval --mode compile); the generated
  kernel compiled with g++ as C++ (one std::thread per CUDA thread, the bf16x2 ops emulated,
  equal values returned adversarially) and run on every CTA of every check shape set, on the
  first, middle and last 8 CTAs of the benchmark and on E = 8, 24, 48, against reference.py:
  normal, offset / scaled, integer (ties), +-0, subnormal, ~1e4 and ~3e38 rows: ids exact,
  weights within 1e-4; the same harness with the tie loop disabled fails.
* Host path: build() compiles the kernel for the static (T, E) of a shape set (sm_90a);
  run(logits, weights, ids) launches it.
Limits (asserted): E even, 8 <= E <= 64 (6-bit ids in the keys), T * E < 2^31 (int32 indexing).

Measured on the H200 (full mode, one judge): 56.2 us (IQR 1.1) in
bench/h200/2026-12-02c/tune-r5b.json; the previous expert (the same tiles and loads with the full
64-key network) ran 59.4 us (IQR 1.4) in bench/h200/2026-12-02b/solutions-CF-r3.md: 1.06x. In
the one-run table bench/h200/2026-12-02c/solutions-CF-r5.md: 56.3 us (IQR 0.9), 76.6% of the
43.1 us roofline ideal, 59.28x the fastest eager formulation, 16.24x torch.compile; the CuTe
expert (the same design) 55.8 us there. The instruction count fell 36% but the time 5% (the
estimate was 50-54 us): the kernel runs within 3% of torch's own copy of the same byte count
(54.8 us, bench/h200/2026-12-02c/copyceiling.md), so the memory side, not issue, now sets the time.
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
KEY_HI = 0x4B000000  # fp32 bits of 2^23: key = 2^23 + (ord << 6) + 63 - id, one binade
PAD = 0xFF80FF80  # two bf16 -inf: padding words of the threshold network (below every logit)
LOG2E = 1.4426950408889634
CP_ASYNC = "cp.async.cg.shared.global"  # 16 bytes global -> shared, L2 only
CP_COMMIT = "cp.async.commit_group"
CP_WAIT = "cp.async.wait_group"
# Batcher's odd-even merge sort network for 8 inputs (19 comparators; (i, j), i < j: slot i gets
# the larger value).
SORT8 = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (1, 2), (5, 6),
         (0, 4), (1, 5), (2, 6), (3, 7), (2, 4), (3, 5), (1, 2), (3, 4), (5, 6))
SORT4 = ((0, 1), (2, 3), (0, 2), (1, 3), (1, 2))  # sorts 4
BITONIC4 = ((0, 2), (1, 3), (0, 1), (2, 3))  # sorts a bitonic 4
MERGE44 = SORT8[10:]  # merges two sorted 4s (slots 0-3, 4-7) into a sorted 8


def _swz_shift(vpt: int):
    """XOR swizzle of the vector slot inside a token row: j ^ ((token >> shift) & mask), or None.

    Chosen so that 8 consecutive lanes (one phase of a 128-bit shared access) reading the same j
    of 8 tokens, and 8 consecutive vectors of the copy, fall in distinct 16-byte bank groups."""
    if vpt % 8 == 0:
        return 0, 7
    if vpt in (2, 4):
        return {2: 2, 4: 1}[vpt], vpt - 1
    return None


def route_source(name: str, e: int, vecrow: bool, sh: int, smk: int) -> str:
    """CUDA C source of the per-token router device function `name` (straight-line code generated
    here, so that every array index is a constant and every value lives in a register).

    void name(const unsigned* row, int lane, float* wo, int* io, int valid): row is the token's
    row in shared memory (e bf16; at vecrow, e / 8 16-byte vectors, slot j stored at
    j ^ ((lane >> sh) & smk)); writes the 8 weights / ids to wo / io when valid."""
    nw = e // 2
    ng = -(-nw // 8)
    nwp = 8 * ng
    vpt = e // 8
    n = name
    o = []
    a = o.append
    a(r"""
#if defined(__CUDA_ARCH__)
__device__ __forceinline__ unsigned NM_hmax(unsigned x, unsigned y) {
  unsigned d; asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y)); return d; }
__device__ __forceinline__ unsigned NM_hmin(unsigned x, unsigned y) {
  unsigned d; asm("min.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y)); return d; }
__device__ __forceinline__ unsigned NM_hge(unsigned x, unsigned y) {
  unsigned d; asm("set.ge.u32.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(x), "r"(y)); return d; }
__device__ __forceinline__ unsigned NM_bfind(unsigned x) {
  unsigned d; asm("bfind.u32 %0, %1;" : "=r"(d) : "r"(x)); return d; }
__device__ __forceinline__ unsigned NM_bit(unsigned p) {
  unsigned d; asm("shl.b32 %0, %1, %2;" : "=r"(d) : "r"(1u), "r"(p)); return d; }
__device__ __forceinline__ unsigned NM_ord(unsigned w) {
  unsigned c, s;
  asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(c) : "r"(w), "r"(0u));
  asm("prmt.b32 %0, %1, 0, 0xBB99;" : "=r"(s) : "r"(c));
  return c ^ (s | 0x80008000u); }
__device__ __forceinline__ uint4 NM_ldv(const void* p) {
  uint4 v; unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(s));
  return v; }
__device__ __forceinline__ unsigned NM_ldw(const void* p) {
  unsigned v; unsigned s = (unsigned)__cvta_generic_to_shared(p);
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(s));
  return v; }
#else  // host stand-ins (the CPU emulation harness defines the f01_* models)
static inline unsigned NM_hmax(unsigned x, unsigned y) { return f01_hmax(x, y); }
static inline unsigned NM_hmin(unsigned x, unsigned y) { return f01_hmin(x, y); }
static inline unsigned NM_hge(unsigned x, unsigned y) { return f01_hge(x, y); }
static inline unsigned NM_ord(unsigned w) { return f01_ordw(w); }
static inline unsigned NM_bfind(unsigned x) { return x ? 31u - (unsigned)__builtin_clz(x) : 0xFFFFFFFFu; }
static inline unsigned NM_bit(unsigned p) { return p < 32u ? 1u << p : 0u; }
static inline uint4 NM_ldv(const void* p) { return *(const uint4*)p; }
static inline unsigned NM_ldw(const void* p) { return *(const unsigned*)p; }
#endif
""".replace("NM_", n + "_"))
    a(f"__device__ __forceinline__ void {n}(const unsigned* row, int lane, float* wo, int* io, int valid) {{")
    if vecrow and sh is not None:
        a(f"  const unsigned sw = ((unsigned)lane >> {sh}) & {smk}u;")
    else:
        a("  const unsigned sw = 0u;")
    # phase 1: threshold t = 8th largest logit (bf16x2 min / max networks; lo halves: even experts,
    # hi halves: odd experts)
    a("  unsigned " + ", ".join(f"r{i}" for i in range(nwp)) + ";")
    if vecrow:
        a("  const uint4* rv = (const uint4*)row;")
        for j in range(vpt):
            a(f"  {{ uint4 q = rv[{j}u ^ sw]; r{4 * j} = q.x; r{4 * j + 1} = q.y; r{4 * j + 2} = q.z; "
              f"r{4 * j + 3} = q.w; }}")
    else:
        for m in range(nw):
            a(f"  r{m} = row[{m}];")
    for m in range(nw, nwp):
        a(f"  r{m} = {PAD:#x}u;")

    def cx(i, j):
        a(f"  {{ unsigned h = {n}_hmax(r{i}, r{j}); r{j} = {n}_hmin(r{i}, r{j}); r{i} = h; }}")

    if ng == 1:
        for i, j in SORT8:
            cx(i, j)
        heads = [0]
    else:
        # top 4 of every list of 8 (sort two 4s, keep the top 4 of their merge), sorted
        for g in range(ng):
            b = 8 * g
            for i, j in SORT4:
                cx(b + i, b + j)
                cx(b + 4 + i, b + 4 + j)
            for i in range(4):
                a(f"  r{b + i} = {n}_hmax(r{b + i}, r{b + 7 - i});")
            for i, j in BITONIC4:
                cx(b + i, b + j)
        # pairs of top-4 lists merged into sorted lists of 8 (an odd one padded with -inf)
        heads = []
        for g in range(0, ng, 2):
            b = 8 * g
            if g + 1 < ng:
                for i in range(4):
                    a(f"  r{b + 4 + i} = r{b + 8 + i};")
                for i, j in MERGE44:
                    cx(b + i, b + j)
            else:
                for i in range(4):
                    a(f"  r{b + 4 + i} = {PAD:#x}u;")
            heads.append(b)
    while len(heads) > 1:
        nxt = []
        for p in range(0, len(heads) - 1, 2):
            x, y = heads[p], heads[p + 1]
            for i in range(8):
                a(f"  r{x + i} = {n}_hmax(r{x + i}, r{y + 7 - i});")
            for d in (4, 2, 1):
                for i in range(8):
                    if i & d == 0:
                        cx(x + i, x + i + d)
            nxt.append(x)
        if len(heads) % 2:
            nxt.append(heads[-1])
        heads = nxt
    h = heads[0]
    # X = lo halves, Y = hi halves, both sorted descending: top 8 of X u Y = max(X_i, Y_7-i);
    # lo(M_i) = max(X_i, Y_7-i), hi(M_i) = max(Y_i, X_7-i), i = 0..3 cover all 8.
    for i in range(4):
        a(f"  const unsigned c{i} = {n}_hmax(r{h + i}, __byte_perm(r{h + 7 - i}, 0u, 0x1032));")
    a(f"  unsigned tt = {n}_hmin({n}_hmin(c0, c1), {n}_hmin(c2, c3));")
    a(f"  tt = {n}_hmin(tt, __byte_perm(tt, 0u, 0x1032));")
    # phase 2: mask of the candidates (logit >= t), re-read from shared memory; bit (w & 15) of
    # word w >> 4 for expert 2w, bit 16 + (w & 15) for expert 2w + 1
    a("  unsigned m0 = 0u, m1 = 0u;")
    if vecrow:
        for j in range(vpt):
            a(f"  {{ uint4 q = {n}_ldv(rv + ({j}u ^ sw));")
            for e4, f in enumerate("xyzw"):
                w = 4 * j + e4
                a(f"    m{w >> 4} |= {n}_hge(q.{f}, tt) & {0x00010001 << (w & 15):#x}u;")
            a("  }")
    else:
        for w in range(nw):
            a(f"  m{w >> 4} |= {n}_hge({n}_ldw(row + {w}), tt) & {0x00010001 << (w & 15):#x}u;")
    a("  const unsigned short* rh = (const unsigned short*)row;")
    # phase 3: keys of the candidates (exact: 2^23 + ord << 6 + 63 - id), the first 8 sorted,
    # any further ones (ties at t) inserted. Bit p of m0 / m1: expert 2 (p & 15) + (p >> 4) (+ 32).
    elem = "id ^ (sw << 3)" if vecrow else "id"
    clamp = "" if e == 64 else f" id = id < {e - 1}u ? id : {e - 1}u;"
    a(f"""  unsigned k0, k1, k2, k3, k4, k5, k6, k7;
#define {n}_NEXT(kk) {{ \\
    const bool lo = m0 != 0u; \\
    const unsigned p = {n}_bfind(lo ? m0 : m1); \\
    const unsigned bt = {n}_bit(p); \\
    m0 = lo ? (m0 ^ bt) : m0; m1 = lo ? m1 : (m1 ^ bt); \\
    unsigned id = (lo ? 0u : 32u) | ((p & 15u) << 1) | ((p >> 4) & 1u);{clamp} \\
    const unsigned u = {n}_ord((unsigned)rh[{elem}]); \\
    kk = ({KEY_HI:#x}u | (id ^ 63u)) + ((u & 0xFFFFu) << 6); }}""")
    for s in range(8):
        a(f"  {n}_NEXT(k{s})")
    for i, j in SORT8:
        a(f"  {{ const float x = __uint_as_float(k{i}), y = __uint_as_float(k{j}); const float hh = fmaxf(x, y); "
          f"k{i} = __float_as_uint(hh); k{j} = __float_as_uint(x - (hh - y)); }}")
    a("  while ((m0 | m1) != 0u) {")
    a("    unsigned x;")
    a(f"    {n}_NEXT(x)")
    for s in range(8):
        a(f"    {{ const unsigned hh = k{s} > x ? k{s} : x; x = k{s} > x ? x : k{s}; k{s} = hh; }}")
    a("  }")
    a(f"#undef {n}_NEXT")
    # decode (exact logit bits and ids from the keys), renormalized softmax, stores
    for s in range(8):
        a(f"  unsigned v{s} = k{s} * 1024u + 0x80000000u; "
          f"v{s} = (v{s} ^ ((unsigned)((int)v{s} >> 31) & 0x7FFF0000u)) & 0xFFFF0000u;")
    a("  const float l0 = __uint_as_float(v0);")
    a("  const float e0 = 1.0f;")
    for s in range(1, 8):
        a(f"  const float e{s} = exp2f((__uint_as_float(v{s}) - l0) * {LOG2E!r}f);")
    a("  const float inv = 1.0f / (((e0 + e1) + (e2 + e3)) + ((e4 + e5) + (e6 + e7)));")
    a("  if (valid) {")
    a("    ((float4*)wo)[0] = make_float4(e0 * inv, e1 * inv, e2 * inv, e3 * inv);")
    a("    ((float4*)wo)[1] = make_float4(e4 * inv, e5 * inv, e6 * inv, e7 * inv);")
    ids = [f"(int)((k{s} & 63u) ^ 63u)" for s in range(8)]
    a(f"    ((int4*)io)[0] = make_int4({', '.join(ids[:4])});")
    a(f"    ((int4*)io)[1] = make_int4({', '.join(ids[4:])});")
    a("  }")
    a("}")
    return "\n".join(o) + "\n"


def make_kernel(tokens: int, experts: int, top_k: int):
    """Router for a static [tokens, experts] bf16 logits matrix."""
    assert top_k == K, "the kernel is written for top_k = 8"
    E = experts
    TT = tokens
    assert E % 2 == 0, "E must be even (32-bit shared-memory reads of a token row)"
    assert K <= E <= 64, "8 <= E <= 64 (6-bit expert ids in the keys)"
    assert TT * E < 2**31, "int32 indexing"
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
    RNAME = f"f01v9_route_e{E}"
    RSRC = route_source(RNAME, E, VECROW, SH if SWZ else None, SM)

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

            # the lane's token: threshold, candidates, exact keys, weights, stores (RSRC)
            tok = wt * TOK + lane
            T.cuda.func_call(RNAME, tiles.ptr_to([warp, buf, lane * NW]), lane,
                             W.ptr_to([T.min(tok, TT - 1), 0]), IDS.ptr_to([T.min(tok, TT - 1), 0]),
                             T.Cast("int32", tok < TT), RSRC)
            T.cuda.warp_sync()  # every lane has read the buffer: it may be refilled

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

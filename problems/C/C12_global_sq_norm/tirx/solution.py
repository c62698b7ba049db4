"""C12 global_sq_norm, TIRx (tvm_tirx 0.1.0a4) expert solution: sq_norm = sum_i x[i]^2 of a
whole bf16 tensor [N], one fp32 scalar (0-d tensor). One read of x (the memory-bound minimum:
537 MB at the benchmark shape N = 2^28).

A grid-wide reduction done as a deterministic two-stage reduction (no atomics, so the result is
bit-identical from call to call and nothing has to be zeroed first). Stage 1 has the CuTe
expert's work decomposition (whole tiles, unpredicated loads, a balanced grid), with all 8 loads
of a tile in flight:

* Stage 1 (``sq_norm_partial``): x is cut into tiles of BLOCK = 256 threads x U = 8 vectors
  of 16 bytes (8 bf16) = 16384 elements (32 KB); vector u of thread tid is element
  (u * 256 + tid) * 8 of the tile, so a warp load covers 512 contiguous bytes and a CTA's 8
  loads cover the tile's 32 KB contiguously (one 2 MB page). CTA b takes the FULL tiles b,
  b + G, b + 2G, ... (a loop of ITERS = ceil(NFULL / G) rounds; the guard ``t < NFULL`` is
  uniform per CTA and covers all 8 loads at once, so no load carries a predicate of its own).
  G: one CTA per full tile up to 528 (4 per SM of the H200's 132, all resident at once: 256
  threads, <= 64 registers), and for more tiles a divisor of NFULL in 265..528 when one exists
  (N = 2^28: 16384 tiles, G = 512, exactly 32 tiles per CTA, so the CTAs finish together),
  else 528. Each slot u has its own fp32 accumulator (bf16 -> fp32 by a shift or a mask,
  exact; x^2 summed with FFMA): 8 independent dependency chains per thread. At the end a
  balanced tree over the 8 accumulators and ``cta_sum`` (warp shuffles + one shared-memory
  step) give the CTA's partial, stored by thread 0 in a scratch vector of G fp32
  (``torch.empty``, made on the first call and reused).
* Loads in flight: stage 1 declares ``min_blocks_per_sm = 4`` (``T.cuda.KernelAttributes``,
  i.e. ``__launch_bounds__(256, 4)``: at most 64 registers, the 4 CTAs per SM the grid needs
  anyway). With it ptxas no longer sinks half of the loads to save registers: the SASS (NVRTC,
  sm_90a) has 52 registers and all 8 LDG.E.128 of a tile back to back before the first FFMA,
  128 B per thread in flight: 512 x 256 x 128 B = 16.8 MB over the grid; 4 CTAs x 256 x 56
  (allocated) = 57K of the SM's 64K registers, all 512 CTAs resident at once. Without the
  attribute (38 registers, the pattern of the CuTe expert's own SASS) 4 LDGs go back to back
  and the other 4 as the first vectors are consumed: 64-80 B per thread in flight.
* Load instruction: ``ld.global.v4.b32``, the CuTe expert's (SASS ``LDG.E.128``), no cache hint.
* The ragged end, read by the last CTA (b = G - 1) only: the partial tile's whole vectors
  (NV8 = N - N % 8 elements are in whole vectors) through loads predicated per vector
  (u * 256 + tid < PARTV; absent ones are zero), then the N % 8 trailing elements as scalars
  by its first N % 8 threads. No element is dropped, none is read twice, no access reaches
  past N. (N = 4000037: 244 full tiles, G = 244, a partial tile of 292 vectors, 5 scalars;
  N = 1000: no full tile, G = 1, 125 vectors and no scalars; N = 2^23: 512 tiles, G = 512.)
* Stage 2 (``sq_norm_final``): one CTA of 256 threads adds the G partials in a fixed order
  (each thread a strided few, then ``cta_sum``) and writes the 0-d output; one extra launch of
  a few microseconds next to the ~130 us stream of the benchmark.
* Precision: every sum is fp32; each accumulator sums 8 x 32 = 256 squares at the benchmark
  shape, then trees: the statement measures 3e-6 relative (0.02 of the 2e-4 bound) for 33792
  fp32 grid-stride accumulators; this has 131072 x 8 of them, shorter sums.
* Limits: N must stay below 2^31 (int32 indexing; asserted).
* Host path: build() compiles both stages for the static N of a shape set (sm_90a); run(x,
  sq_norm) launches stage 1, then stage 2, on the same stream.

Why it is faster than the previous TIRx expert: there every one of the 8 loads of a round sat
under its own runtime predicate (``it < FR or idx < NV``, else zero-fill). Its SASS (NVRTC,
sm_90a) had 32 registers, each LDG preceded by its own S2R (ctaid, tid) + address chain, the 8
LDGs spread through the loop and rotated through 4 register quads, each issued only after
earlier ones were consumed by FFMAs: about 2 loads (32 B) in flight per thread, 528 x 256 x
32 B = 4.3 MB over the grid against the ~4.6 MB Little's law asks for at 4.6 TB/s x ~1 us. It
also ran 528 CTAs x 31.03 rounds (the 32nd round 3% full: one more load latency on every CTA's
critical path) and read 8 pieces of 4 KB 2.1 MB apart per CTA and round (8 pages) instead of
one 32 KB piece.

Measured on the H200 (full mode, one judge, every check shape passed): 132.8 us (IQR 1.1) in
the tuning run bench/h200/2026-12-02c/tune-r5a.json, against 144.2 us for the previous TIRx
expert in bench/h200/2026-12-02b/solutions-CF-r3.md (1.09x, 7.9% less time). In the same
tuning run the same kernel without ``min_blocks_per_sm`` (4-5 loads in flight per thread)
measured 133.4 us (IQR 1.0): most of the gain comes from the unpredicated, balanced,
contiguous tiles, and the doubled loads in flight add ~0.6 us. In the one-run table
bench/h200/2026-12-02c/solutions-CF-r5.md: 132.6 us (IQR 0.8), 86.7% of the 115.0 us roofline
ideal, 1.20x torch eager, 1.04x torch.compile; the CuTe expert 133.3 us there. torch's own
read-only sum over the same 537 MB took 136.0 us (bench/h200/2026-12-02c/copyceiling.md).
"""
import torch
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
U = 8  # vectors per thread per tile (independent loads in flight)
BLOCK = 256  # threads per CTA of stage 1
TILE = BLOCK * U * VEC  # 16384 elements (32 KB) per tile
SMS = 132  # H200 SM count: the grid is sized to be resident at once
CTAS_PER_SM = 4
MAX_CTAS = SMS * CTAS_PER_SM  # 528
BLOCK2 = 256  # threads of the stage-2 CTA
X_LOAD = "ld.global.v4.b32"  # the CuTe expert's load (LDG.E.128), no cache hint


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fma(a, b, c):
    """a * b + c with one rounding (T.fma does not lower in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _tree(vals):
    """Balanced sum of a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def grid_size(n: int) -> int:
    """Stage-1 CTAs: one per full tile up to MAX_CTAS (at least one); beyond, a divisor of the
    full-tile count in MAX_CTAS/2+1 .. MAX_CTAS when one exists (equal work), else MAX_CTAS."""
    n_full = (n - n % VEC) // TILE
    if n_full <= MAX_CTAS:
        return max(1, n_full)
    for g in range(MAX_CTAS, MAX_CTAS // 2, -1):
        if n_full % g == 0:
            return g
    return MAX_CTAS


def make_partial(n: int, nb: int):
    """Stage 1: per-CTA partial sums of squares of a static bf16 [n] vector into fp32 [nb]."""
    assert 0 < n < 2**31, "int32 indexing"
    NV8 = n - n % VEC  # elements in whole 16-byte vectors
    NFULL = NV8 // TILE  # full tiles
    PARTV = (NV8 - NFULL * TILE) // VEC  # vectors of the partial tile (< BLOCK * U)
    TAILN = n % VEC  # trailing scalars
    ITERS = -(-NFULL // nb)  # full-tile rounds of a CTA (the last one may skip some CTAs)
    EXACT = NFULL == ITERS * nb  # every CTA has ITERS full tiles: no guard needed
    WARPS = BLOCK // 32
    N = n
    NB = nb

    @T.function
    def sq_norm_partial(X: T.Tensor((N,), T.bfloat16), PART: T.Tensor((NB,), "float32")):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=NB, block=BLOCK),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=CTAS_PER_SM),
        )
        bid = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((U * 4,), "uint32")
        acc = T.alloc_local((U,), "float32")
        for u in T.unroll(U):
            acc[u] = T.float32(0.0)
        # full tiles: 8 unpredicated 16-byte loads, all issued before the first FFMA
        for it in T.serial(ITERS):
            if EXACT or bid + it * NB < NFULL:
                for u in T.unroll(U):
                    T.ptx[X_LOAD](
                        xv[4 * u], xv[4 * u + 1], xv[4 * u + 2], xv[4 * u + 3],
                        X.ptr_to([(bid + it * NB) * TILE + (u * BLOCK + tid) * VEC]),
                    )
                for u in T.unroll(U):
                    for i in T.unroll(4):
                        acc[u] = _fma(_lo(xv[4 * u + i]), _lo(xv[4 * u + i]), acc[u])
                        acc[u] = _fma(_hi(xv[4 * u + i]), _hi(xv[4 * u + i]), acc[u])
        # ragged end: the partial tile's whole vectors, then the N % 8 scalars (last CTA)
        if T.constexpr(PARTV > 0):
            if bid == NB - 1:
                for u in T.unroll(U):
                    if u * BLOCK + tid < PARTV:
                        T.ptx[X_LOAD](
                            xv[4 * u], xv[4 * u + 1], xv[4 * u + 2], xv[4 * u + 3],
                            X.ptr_to([NFULL * TILE + (u * BLOCK + tid) * VEC]),
                        )
                    else:
                        for i in T.unroll(4):
                            xv[4 * u + i] = T.uint32(0)
                for u in T.unroll(U):
                    for i in T.unroll(4):
                        acc[u] = _fma(_lo(xv[4 * u + i]), _lo(xv[4 * u + i]), acc[u])
                        acc[u] = _fma(_hi(xv[4 * u + i]), _hi(xv[4 * u + i]), acc[u])
        if T.constexpr(TAILN > 0):
            if bid == NB - 1 and tid < TAILN:
                acc[0] = _fma(T.cast(X[NV8 + tid], "float32"), T.cast(X[NV8 + tid], "float32"),
                              acc[0])
        acc[0] = T.cuda.cta_sum(_tree([acc[u] for u in range(U)]), WARPS, red.data)
        if tid == 0:
            PART[bid] = acc[0]

    return sq_norm_partial


def make_final(nb: int):
    """Stage 2: the sum of nb fp32 partials, in a fixed order, into a 0-d fp32 tensor."""
    PER = -(-nb // BLOCK2)  # partials per thread
    WARPS = BLOCK2 // 32
    NB = nb

    @T.function
    def sq_norm_final(PART: T.Tensor((NB,), "float32"), Y: T.Tensor((), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=BLOCK2))
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0.0)
        for j in T.unroll(PER):
            if tid + j * BLOCK2 < NB:
                acc[0] = acc[0] + PART[tid + j * BLOCK2]
        acc[0] = T.cuda.cta_sum(acc[0], WARPS, red.data)
        if tid == 0:
            Y[()] = acc[0]

    return sq_norm_final


def build(spec):
    """Compile both stages for spec's static N and return run(x, sq_norm)."""
    n = int(spec.dims["N"])
    nb = grid_size(n)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex1 = tvm_tirx.tirx.compile(make_partial(n, nb), target=target)
    ex2 = tvm_tirx.tirx.compile(make_final(nb), target=target)
    partial = ex1["sq_norm_partial"]
    final = ex2["sq_norm_final"]
    scratch = []  # the partials vector, made on the first call (build may run without a GPU)

    def run(x, sq_norm):
        if not scratch:
            scratch.append(torch.empty((nb,), dtype=torch.float32, device=x.device))
        part = scratch[0]
        partial(x, part)
        final(part, sq_norm)

    run.modules = (ex1, ex2)  # keep the compiled modules alive with the launchers
    return run

"""F10 transpose_cast_fp8, CuTe DSL expert solution: xt[n, m] = e4m3(clamp(x[m, n] * scale, +-448)).

Memory-bound: x (bf16, 2 bytes/element) is read once and xt (fp8, 1 byte/element) written once.

Design
  * One compile per shape set with static (M, N); the scale (spec.params["scale"]) is an fp32
    immediate.  A CTA of 256 threads owns a tile of TM = 128 rows (m) x TN = 64 columns (n) of x,
    i.e. 64 rows x 128 bytes of xt; 1-D grid, n-tile fastest.
  * Read phase: thread (mg, nv) = (tid // 8, tid % 8) loads the 16-byte vectors x[4mg + i,
    8nv : 8nv + 8] for i = 0..3 (4 loads in flight; 8 lanes cover one 128-byte row segment, so
    every load instruction of a warp reads four whole 128-byte lines).
  * Math per element, in the statement's order: fp32 x * scale (exact, the scale is a power of
    two), min/max clamp to +-448 (FMNMX), then one round-to-nearest-even cast to e4m3 (the cvt
    to e4m3x2 with satfinite; after the clamp the saturation never triggers).  FMNMX returns the
    non-NaN operand, so a NaN input would come out as -448 (torch's clamp keeps NaN); the
    declared inputs are finite, so this never shows.
  * In-register pre-transpose: the thread's 4 x 8 fp8 block is kept column-major, so for every
    n it holds the 4 consecutive m bytes as one 32-bit word; it writes 8 words to shared memory
    (8 st.shared.b32 per 32 elements instead of 32 byte stores).
  * Shared tile: 64 rows (n) x 32 words (128 bytes of m), 8 KB, XOR swizzle on the word column:
    phys = c ^ ((n // 8) << 2).  In the read phase the 32 lanes of a warp then hit 32 distinct
    banks (without it, lanes with different nv would collide 8-way); the swizzle only permutes
    4-word (16-byte) groups, so the write phase still reads aligned 16-byte vectors, and 8 lanes
    reading one 128-byte row are conflict-free.
  * Write phase: xt rows are written with WB-byte stores, WB = 16 when M % 16 == 0 (every
    benchmark shape), else 8 or 4 (ragged M = 1000: rows of 1000 bytes are only 8-byte aligned).
    128 / WB lanes cover one 128-byte row segment of xt.
  * Ragged edges: reads with m >= M or n >= N are skipped (N % 8 == 0: a vector is wholly in or
    out); writes of rows n >= N or chunks with m >= M are skipped (WB divides M).  No
    out-of-bounds access.
  * Host path: --enable-tvm-ffi against fake tensors; run(x, xt) passes the torch tensors
    straight through on torch's current stream.  xt is handled as 32-bit words, so M % 4 == 0
    is required (true for every shape set; build() raises ValueError otherwise).
Unmeasured on the H200 so far.

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`):
103.3 us, 84.0% of the roofline ideal (86.8 us), 18.20x the fastest eager formulation, 1.50x
torch.compile; the TIRx expert 102.8 us (this one is 1.00x slower).
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit load
THREADS = 256
TM = 128           # m rows of x per tile (= bytes of an xt row segment)
TN = 64            # n columns of x per tile (= rows of xt)
RPT = 4            # rows of x per thread in the read phase (4 x 16 B loads)
WORDS = TM // 4    # 32-bit words per shared-tile row
BOUND = 448.0      # largest finite e4m3 value


@cute.kernel
def _cast_transpose_kernel(
    gX: cute.Tensor,            # ((1, 8), (M, N/8)) bf16 vectors
    gXt: cute.Tensor,           # ((1, WW), (N, M/(4 WW))) uint32 vectors (WW words = WB bytes)
    scale: cutlass.Constexpr,
    ww: cutlass.Constexpr,
    n_col_tiles: cutlass.Constexpr,
    check_m: cutlass.Constexpr,
    check_n: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    M = cute.size(gX, mode=[1, 0])
    nvec_x = cute.size(gX, mode=[1, 1])       # N / 8
    N = cute.size(gXt, mode=[1, 0])
    nchunk_xt = cute.size(gXt, mode=[1, 1])   # M / WB
    n_tile = bidx % n_col_tiles
    m_tile = bidx // n_col_tiles

    smem = SmemAllocator()
    sW = smem.allocate_tensor(cutlass.Uint32, cute.make_layout((TN, WORDS), stride=(WORDS, 1)),
                              byte_alignment=16)

    # ---- read phase: 4 rows x 8 columns per thread ------------------------------------------
    nv = tidx % 8
    mg = tidx // 8
    xv = n_tile * (TN // VEC) + nv            # vector column of x
    m_base = m_tile * TM + mg * RPT
    raw = cute.make_rmem_tensor((VEC, RPT), gX.element_type)
    for i in cutlass.range_constexpr(RPT):
        m = m_base + i
        if cutlass.const_expr(check_m or check_n):
            raw[None, i].fill(0.0)
            if m < M and xv < nvec_x:
                raw[None, i].store(gX[(0, None), (m, xv)].load())
        else:
            raw[None, i].store(gX[(0, None), (m, xv)].load())

    # fp8 block stored column-major: byte (i, j) at i + 4 j, so column j is one 32-bit word.
    q8 = cute.make_rmem_tensor((RPT * VEC,), cutlass.Float8E4M3FN)
    q8v = cute.make_tensor(q8.iterator, cute.make_layout((RPT, VEC), stride=(1, RPT)))
    for i in cutlass.range_constexpr(RPT):
        f = cute.make_rmem_tensor((VEC,), cutlass.Float32)
        f.store(raw[None, i].load().to(cutlass.Float32))
        for j in cutlass.range_constexpr(VEC):
            f[j] = cute.arch.fmin(cute.arch.fmax(f[j] * scale, -BOUND), BOUND)
        q8v[i, None].store(f.load().to(cutlass.Float8E4M3FN))
    q32 = cute.recast_tensor(q8, cutlass.Uint32)      # (8,) words, word j = column n = 8nv + j
    swz = nv << 2                                      # (n // 8) << 2 for n = 8nv + j
    for j in cutlass.range_constexpr(VEC):
        sW[nv * VEC + j, mg ^ swz] = q32[j]
    cute.arch.sync_threads()

    # ---- write phase: WB-byte chunks of xt rows ---------------------------------------------
    cpr = WORDS // ww                     # chunks per shared row
    for p in cutlass.range_constexpr(TN * cpr // THREADS):
        e = tidx + p * THREADS
        n = e // cpr
        q = e - n * cpr
        c0 = q * ww                       # first word column (logical)
        pc = c0 ^ ((n // 8) << 2)         # swizzle permutes whole 4-word groups (ww <= 4)
        vals = cute.make_rmem_tensor((ww,), cutlass.Uint32)
        for w in cutlass.range_constexpr(ww):
            vals[w] = sW[n, pc + w]
        gn = n_tile * TN + n
        gq = m_tile * (TM // (4 * ww)) + q
        if cutlass.const_expr(check_m or check_n):
            if gn < N and gq < nchunk_xt:
                gXt[(0, None), (gn, gq)].store(vals.load())
        else:
            gXt[(0, None), (gn, gq)].store(vals.load())


@cute.jit
def _cast_transpose_host(
    mX: cute.Tensor,
    mXt: cute.Tensor,
    stream: cuda.CUstream,
    scale: cutlass.Constexpr,
    ww: cutlass.Constexpr,
):
    M = mX.shape[0]
    N = mX.shape[1]
    gX = cute.zipped_divide(mX, (1, VEC))
    gXt = cute.zipped_divide(cute.recast_tensor(mXt, cutlass.Uint32), (1, ww))
    n_col_tiles = (N + TN - 1) // TN
    n_row_tiles = (M + TM - 1) // TM
    _cast_transpose_kernel(gX, gXt, scale, ww, n_col_tiles, M % TM != 0, N % TN != 0).launch(
        grid=[n_row_tiles * n_col_tiles, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (M, N) and scale; return run(x, xt)."""
    M = int(spec.dims["M"])
    N = int(spec.dims["N"])
    scale = float(spec.params["scale"])
    if N % VEC != 0:
        raise ValueError(f"N={N} must be a multiple of {VEC} (128-bit loads of x)")
    if M % 4 != 0:
        raise ValueError(f"M={M} must be a multiple of 4 (xt rows are written as 32-bit words)")
    if M * N >= 2**31:
        raise ValueError("M*N must stay below 2**31 elements (32-bit static index math)")
    wb = 16 if M % 16 == 0 else (8 if M % 8 == 0 else 4)
    ww = wb // 4
    key = (M, N, scale, ww)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (M, N), stride_order=(1, 0), assumed_align=16)
        xt = make_fake_compact_tensor(cutlass.Float8E4M3FN, (N, M), stride_order=(1, 0),
                                      assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_cast_transpose_host, x, xt, stream, scale, ww,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, xt: torch.Tensor) -> None:
        fn(x, xt)

    return run

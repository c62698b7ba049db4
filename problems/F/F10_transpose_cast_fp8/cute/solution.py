"""F10 transpose_cast_fp8, CuTe DSL expert solution: xt[n, m] = e4m3(clamp(x[m, n] * scale, +-448)),
x bf16 [M, N], xt float8_e4m3fn [N, M].

Memory-bound: x (bf16, 2 bytes per element) is read once and xt (fp8, 1 byte per element)
written once, 402.7 MB at the benchmark shape M = 32768, N = 4096 (268.4 MB read, 134.2 MB
written), 86.4 us at the roofline's bandwidth. The arithmetic is about 4.4 SASS instructions
per element (280 per thread for its 64 elements), ~18 us of the SMs' issue rate.

Design
  * One compile per shape set with static (M, N); the scale (spec.params["scale"]) is an fp32
    immediate.  A CTA of THREADS = 512 owns a tile of TM = 256 rows (m) x TN = 128 columns (n)
    of x, i.e. 128 rows x 256 bytes of xt; 1-D grid, n-tile fastest: 128 x 32 = 4096 CTAs at
    the benchmark.  Both sides move 256-byte contiguous runs per CTA: each x row of the tile is
    256 bytes, read by two warps; each xt row segment is 256 bytes, and one warp store
    instruction writes two of them.
  * Read phase: warp w reads 64-column block w % 2 of the tile; its lane l takes vector column
    nv = l % 8 + 8 (w % 2) and 4-row group mg = l // 8 + 4 (w // 2) (0..31), and loads the
    16-byte vectors x[m0 + 4c + i, n0 + 8nv : n0 + 8nv + 8] for the word columns c = 32h + mg,
    h = 0, 1, and i = 0..3: 8 independent loads per thread (64 KB of x in flight per CTA), and
    every warp load instruction reads four whole 128-byte lines.
  * Math per element, in the statement's order: bf16 -> fp32 by bit moves on the packed words
    (low half << 16, high half & 0xFFFF0000: one SHL or one AND per element), one fp32 multiply
    by the scale (exact: the scale is a power of two), then one round-to-nearest-even cast to
    e4m3 (cvt.rn.satfinite.e4m3x2.f32).  There is no separate clamp: satfinite maps anything
    beyond +-448, inf included, to +-448, so the cast alone gives clamp-then-cast for every
    non-NaN input (the declared inputs are finite).
  * In-register pre-transpose: the thread's fp32 block of 4 rows x 8 columns (one per h) is
    built column-major (element (i, j) at i + 4j), so after the cast the 4 bytes of column j
    (rows 4c .. 4c + 3) form word j: the 4 x 4 byte transposes cost nothing, and the thread
    writes 8 words per h to shared memory (8 st.shared.b32 per 32 elements).
  * Shared tile: 128 rows (n) x 64 words (256 bytes of m), 32 KB, XOR swizzle on the word
    column: word c of row n sits at c ^ (((n // 8) % 8) << 2) (n // 8 = nv).  The 32 lanes of a
    warp's word store then hit 32 distinct banks; the swizzle only permutes 4-word (16-byte)
    groups inside each 128-byte half of a row, so the write phase still reads whole aligned
    chunks, and 8 lanes reading 128 contiguous bytes of a row are conflict-free.
  * Write phase: xt rows are written with WB-byte stores, WB = 16 when M % 16 == 0 (every
    benchmark shape), else 8 or 4 (ragged M = 1000: rows of 1000 bytes are only 8-byte
    aligned).  Chunk e = tid + 512p (p = 0..3 at WB = 16) is chunk e % (256 / WB) of shared row
    e // (256 / WB): at WB = 16 a warp store instruction covers 2 xt rows x 256 contiguous bytes.
  * Ragged edges: reads with m >= M or n >= N are skipped and zero-filled (N % 8 == 0: a vector
    is wholly in or out); writes of rows n >= N or chunks with m >= M are skipped (WB divides
    M).  N = 520: 5 column tiles, the last one holds 8 columns; M = 1000: 4 row tiles.  No
    out-of-bounds access.
  * Occupancy: min_blocks_per_mp = 3 caps the registers at 40 (no spills: no local memory, no
    stack): 3 CTAs (1536 threads, 96 KB of shared memory, 192 KB of loads in flight) per SM,
    about 10.3 waves at the benchmark.
  * CPU emulation (numpy, thread by thread for every CTA, at the small, ragged, tall and
    benchmark shapes): every global load in bounds, every shared word written once per CTA, no
    bank conflicts in the warp word stores or in the 8-lane phases of 16-byte shared loads,
    every xt byte written once, and the result bit-identical to torch's
    (x * scale).clamp(-448, 448).to(float8_e4m3fn).t() with inf, -3e38 and -0 planted in the
    input.  The emulator fails on a wrong swizzle and on a wrong lane map.
  * Host path: --enable-tvm-ffi against fake tensors; run(x, xt) passes the torch tensors
    straight through on torch's current stream.
Limits: N % 8 == 0 (16-byte loads of x), M % 4 == 0 (xt is handled as 32-bit words),
M * N < 2**31 (32-bit index math); build() raises ValueError otherwise.  The kernel is written
for general (TM, TN, THREADS) with TN % 64 == 0.

Measured on the H200 (full mode, one judge): in the tuning run bench/h200/2026-12-02e/tune-r9.json
101.1 us (IQR 0.4) against 102.8 us (IQR 0.4) for the previous CuTe expert (128 x 64 tiles) in
the same run (1.017x); the same code with 256 x 64 tiles (256 threads, 256-byte runs on the xt
side only) ran 102.1 us, with 512 x 64 tiles (512 threads, 512-byte xt runs, 128-byte x runs)
102.4 us.  In the one-run table bench/h200/2026-12-02e/solutions-ABCF-r9.md: 101.1 us (IQR 0.4),
85.5% of the 86.4 us roofline ideal, 18.60x the fastest eager formulation
(cast_then_transpose), 1.53x torch.compile; the TIRx expert 101.2 us in the same run (ratio
1.002, this one faster).
What changed against the previous expert (TM x TN = 128 x 64 tiles, 256 threads, 16384 CTAs,
4 loads of 16 B per thread, an 8 KB shared tile, 128-byte runs on both sides, no register
cap): the 256 x 128 tile with 256-byte runs on both sides, 8 loads per thread and the
40-register cap (192 KB of loads in flight per SM instead of 128 KB); the explicit min/max
clamp dropped (2 FMNMX per element) and bf16 widened by one SHL or AND instead of a generic
conversion: 4.4 SASS instructions per element instead of 8.25.  The TIRx expert, whose math was
already that short, went 102.8 -> 101.0 us in the same tuning run with the same tile and
register cap alone.
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
THREADS = 512
TM = 256           # m rows of x per tile (= bytes of an xt row segment)
TN = 128          # n columns of x per tile (= rows of xt); multiple of 64
RPT = 4            # rows of x per 32-bit word of the transpose
NB = TN // 64      # 64-column blocks; warp w reads block w % NB
MG = THREADS // (TN // VEC)       # 4-row groups per read pass (32)
HP = TM // (RPT * MG)             # read passes (2): 4 * HP loads per thread
WORDS = TM // 4    # 32-bit words per shared-tile row
BOUND = 448.0      # largest finite e4m3 value
MIN_BLOCKS = 3     # register cap: 40 regs at 512 threads (3 CTAs, 192 KB of loads per SM)
assert TN % 64 == 0 and MG * (TN // VEC) == THREADS and HP * RPT * MG == TM


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

    # ---- read phase ---------------------------------------------------------------------------
    # lane = 8 * (mg % 4) + nv % 8; warp w: column block w % NB, row groups 4 (w // NB) + 0..3.
    lane = tidx % 32
    warp = tidx // 32
    nv = lane % 8 + 8 * (warp % NB)           # vector column inside the tile (0 .. TN/8 - 1)
    mg = lane // 8 + 4 * (warp // NB)         # 4-row group inside a pass (0 .. MG - 1)
    xv = n_tile * (TN // VEC) + nv            # vector column of x
    # raw32: the loaded vectors as 32-bit words, word k of load r at 4 r + k (bf16 pair of
    # columns 2k (low half) and 2k + 1 (high half)); rawv: the same registers as (8, loads) bf16.
    raw32 = cute.make_rmem_tensor((4 * RPT * HP,), cutlass.Uint32)
    rawb = cute.recast_tensor(raw32, gX.element_type)
    rawv = cute.make_tensor(rawb.iterator, cute.make_layout((VEC, RPT * HP), stride=(1, VEC)))
    for h in cutlass.range_constexpr(HP):
        for i in cutlass.range_constexpr(RPT):
            # word column c = h * MG + mg holds tile rows 4c .. 4c + 3
            m = m_tile * TM + (h * MG + mg) * RPT + i
            if cutlass.const_expr(check_m or check_n):
                rawv[None, h * RPT + i].fill(0.0)
                if m < M and xv < nvec_x:
                    rawv[None, h * RPT + i].store(gX[(0, None), (m, xv)].load())
            else:
                rawv[None, h * RPT + i].store(gX[(0, None), (m, xv)].load())

    # Math: bf16 -> fp32 by bit moves (low half << 16, high half & 0xFFFF0000), one fp32
    # multiply by the scale (exact: a power of two), then cvt.rn.satfinite.e4m3x2.f32 (RNE;
    # satfinite maps anything beyond +-448, inf included, to +-448: the statement's clamp).
    # The fp32 block is built column-major (element (i, j) at i + 4 j), so after the cast the
    # 4 bytes of column j (rows 4c .. 4c + 3) form word j: the 4 x 4 transpose costs nothing.
    # Swizzle: word column c of shared row n sits at c ^ (((n // 8) % 8) << 2); n // 8 = nv.
    swz = (nv % 8) << 2
    for h in cutlass.range_constexpr(HP):
        fblk = cute.make_rmem_tensor((RPT * VEC,), cutlass.Float32)
        fbits = cute.recast_tensor(fblk, cutlass.Uint32)
        for i in cutlass.range_constexpr(RPT):
            for k in cutlass.range_constexpr(VEC // 2):
                w = raw32[4 * (h * RPT + i) + k]
                fbits[i + RPT * (2 * k)] = w << 16
                fbits[i + RPT * (2 * k + 1)] = w & cutlass.Uint32(0xFFFF0000)
        q8 = cute.make_rmem_tensor((RPT * VEC,), cutlass.Float8E4M3FN)
        q8.store((fblk.load() * scale).to(cutlass.Float8E4M3FN))
        q32 = cute.recast_tensor(q8, cutlass.Uint32)      # word j = column n = 8 nv + j
        for j in cutlass.range_constexpr(VEC):
            sW[nv * VEC + j, (h * MG + mg) ^ swz] = q32[j]
    cute.arch.sync_threads()

    # ---- write phase: WB-byte chunks of xt rows ---------------------------------------------
    cpr = WORDS // ww                     # chunks per shared row
    for p in cutlass.range_constexpr(TN * cpr // THREADS):
        e = tidx + p * THREADS
        n = e // cpr
        q = e - n * cpr
        c0 = q * ww                       # first word column (logical)
        pc = c0 ^ (((n // 8) % 8) << 2)   # swizzle permutes whole 4-word groups (ww <= 4)
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
        min_blocks_per_mp=MIN_BLOCKS,
        preferred_smem_carveout=-1,
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

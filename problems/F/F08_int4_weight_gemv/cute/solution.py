"""F08 int4_weight_gemv, CuTe DSL expert solution: y = x @ W^T, W[n, k] = (code - 8) * s[n, k // 128].

Memory-bound on the packed weight (N*K/2 bytes); the math (2*M*N*K, M <= 8) is done on the
tensor cores (mma.sync m16n8k16 bf16 -> fp32), because fp32 FMAs on the CUDA cores would need
about twice the weight-streaming time at the benchmark shape.

Design
  * One compile per shape set with static (M, N, K).  CTA = 8 warps owns an n-block of 16 * NT
    weight rows (NT n-tiles of 16 rows) over the whole K; warp w takes the 128-wide k-chunks
    (= quantization groups) c = w, w + 8, ...; the 8 per-warp partial results are summed through
    shared memory at the end, so y is written once, with no atomics and no scratch buffer.
  * mma roles: A (16 x 16) = 16 weight rows, B (16 x 8) = x^T with the batch M (<= 8) as the
    mma's n, D (16 x 8) = y^T tile.  Lane (g, t) = (lane // 4, lane % 4) loads ONE 16-byte vector
    per weight row g and g + 8: bytes 16t .. 16t + 15 of the chunk, i.e. k = 32t .. 32t + 31 of
    it, straight from the natural [N, K/2] layout (no repacking).  The 4 lanes of a group read
    64 contiguous bytes of a row; the 8 warps read the 8 interleaved chunks of the same rows.
  * The k order inside an mma is free as long as A and B agree, so each 32-bit word of 8 codes
    is unpacked with one LOP3 per register: ((w >> 4i) & 0x000F000F) | 0x43004300 is the bf16
    pair (128 + code(i), 128 + code(i + 4)); 7 integer ops per 8 weights, no multiply.  The
    x^T fragment is built once per chunk with the same k pairing (x[k], x[k + 4]) and reused for
    all NT n-tiles; lanes of group g hold batch row m = g (zeros for g >= M).
  * Scale factored out of each group's integer dot product (allowed by the statement): with
    D = sum_k (128 + code) x[m, k] from 8 mma steps on a zero accumulator,
        acc += s[n, c] * (D - 136 * xsum[m, c]),   xsum = sum of the 128 x of the chunk (fp32),
    since (128 + code) - 136 = code - 8.  The bf16 operands (integers 128..143 and x) are exact,
    products exact, accumulation fp32; the 136 * xsum cancellation costs ~5 bits of fp32
    (relative ~1e-5 of the result, far inside rtol 3.2e-2).  One rounding to bf16 at the store.
  * Bytes in flight: ptxas schedules plain loads just ahead of their use (checked in the
    SASS of a first version: the weight loads of n-tile j + 1 were issued during n-tile j, one
    chunk-tile latency after another), so the weights go through a per-warp cp.async ring of
    STAGES = 2 chunks in shared memory (.cg, 16 B per copy): each lane copies its own 2 * NT
    vectors and later reads only those, so cp.async.wait_group is the only synchronization.
    A warp has 1-2 chunks (5 KB each at NT = 5) in flight at all times, ~80-160 KB per SM.
    The CTA's block of scales ([16 NT, K/128] bf16, 10 KB) is copied once at the start (4-byte
    cp.async, one barrier); x (L2-resident, at most 128 KB) is loaded with plain 16-byte loads
    at the top of each chunk.  NT is 4 or 5 (whichever leaves the fuller last wave at 2 CTAs
    per SM; 5 at the benchmark shape: 717 CTAs).  ptxas (sm_90a, benchmark shape): 113
    registers, no spills, 90 KB of shared memory per CTA (ring 80 KB, reused for the final
    20 KB cross-warp reduction; scales 10 KB), so 2 CTAs (16 warps) fit per SM.  Integer work is ~1 SASS op (LOP3/SHF) per
    weight, well under the memory time.
  * Ragged N (1000, not a multiple of 16 * NT): weight rows are clamped to N - 1 for loading
    and the stores of rows >= N are skipped; batch rows m >= M are zero in B and never stored.
    K % 256 == 0 (statement; build() checks it), so chunks are whole groups, rows are 16-byte
    aligned and a row of scales is a whole number of 32-bit words.
  * Host path: --enable-tvm-ffi against fake tensors; run(x, wq, scales, y) passes the torch
    tensors straight through on torch's current stream.
Unmeasured on the H200 so far.

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`): 88.7
us, 59.1% of the roofline ideal (52.4 us), 3.40x the fastest eager formulation, 6.24x torch.compile;
the TIRx expert 131.1 us (this one is faster).
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

WARPS = 8
THREADS = 32 * WARPS
GROUP = 128          # quantization group = k-chunk per warp step
MAXM = 8             # mma n (batch rows)
SLOTS = 2 * 132      # resident CTAs (2 per SM) used to pick NT
STAGES = 2           # cp.async ring depth per warp (chunks of weights in flight)


def _pick_nt(N: int) -> int:
    """n-tiles (16 rows each) per CTA: 4 or 5, whichever fills the last wave of CTAs best."""
    best, best_eff = 4, -1.0
    for nt in (4, 5):
        ctas = -(-N // (16 * nt))
        waves = -(-ctas // SLOTS)
        eff = ctas / (waves * SLOTS)
        if eff > best_eff + 1e-9:
            best, best_eff = nt, eff
    return best


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
def _load_x(gX: cute.Tensor, xr: cute.Tensor, g, t, c, M: cutlass.Constexpr):
    """x[g, c*128 + 32t .. + 31] into the bf16 register tensor xr (zeros for rows g >= M)."""
    if cutlass.const_expr(M < MAXM):
        xr.fill(0.0)
        if g < M:
            for v in cutlass.range_constexpr(4):
                xseg = cute.make_tensor(xr.iterator + 8 * v, cute.make_layout(8))
                xseg.store(gX[(0, None), (g, c * 16 + 4 * t + v)].load())
    else:
        for v in cutlass.range_constexpr(4):
            xseg = cute.make_tensor(xr.iterator + 8 * v, cute.make_layout(8))
            xseg.store(gX[(0, None), (g, c * 16 + 4 * t + v)].load())


@cute.jit
def _load_scales(sS: cute.Tensor, sc: cute.Tensor, g, c, nt_per_cta: cutlass.Constexpr):
    """The scales of this lane's 2 * NT weight rows for chunk c (from the CTA's smem copy)."""
    for nt in cutlass.range_constexpr(nt_per_cta):
        for h in cutlass.range_constexpr(2):
            sc[h, nt] = sS[nt * 16 + h * 8 + g, c].to(cutlass.Float32)


@cute.jit
def _issue_weights(atom, gW: cute.Tensor, ring: cute.Tensor, n_base, g, t, c, N,
                   nt_per_cta: cutlass.Constexpr, clamp_rows: cutlass.Constexpr):
    """cp.async this lane's 2 * NT 16-byte weight vectors of chunk c into its ring slots."""
    for nt in cutlass.range_constexpr(nt_per_cta):
        for h in cutlass.range_constexpr(2):
            row = n_base + nt * 16 + h * 8 + g
            if cutlass.const_expr(clamp_rows):
                row = cutlass.min(row, N - 1)
            cute.copy(atom, gW[(0, None), (row, c * 4 + t)], ring[None, 2 * nt + h])


@cute.kernel
def _gemv_kernel(
    gX: cute.Tensor,            # ((1, 8), (M, K/8)) bf16 vectors
    gW: cute.Tensor,            # ((1, 4), (N, K/8)) uint32 vectors (16 bytes = 32 codes)
    mS: cute.Tensor,            # (N, K/128) bf16
    gS32: cute.Tensor,          # ((1, 1), (N, K/256)) the scales as 32-bit words
    mY: cute.Tensor,            # (M, N) bf16
    nt_per_cta: cutlass.Constexpr,
    clamp_rows: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    warp = tidx // 32
    lane = tidx % 32
    g = lane // 4
    t = lane % 4
    M = cute.size(mY, mode=[0])
    N = cute.size(mY, mode=[1])
    G = cute.size(mS, mode=[1])             # k-chunks (groups)
    nblk = 16 * nt_per_cta
    n_base = bidx * nblk
    n_mine = (G - warp + WARPS - 1) // WARPS   # chunks c = warp + WARPS * i of this warp

    smem = SmemAllocator()
    slots = 2 * nt_per_cta
    # Per-warp cp.async ring: (4 words, lane, slot, stage, warp); a lane only ever reads the
    # slots it filled itself, so cp.async.wait_group is the only synchronization needed.
    ring_all = smem.allocate_tensor(
        cutlass.Uint32,
        cute.make_layout((4, 32, slots, STAGES, WARPS),
                         stride=(1, 4, 128, 128 * slots, 128 * slots * STAGES)),
        byte_alignment=16,
    )
    # The CTA's block of scales, [16 NT, G] bf16 (10 KB at the benchmark shape), read once.
    sS = smem.allocate_tensor(cutlass.BFloat16, cute.make_layout((nblk, G), stride=(G, 1)),
                              byte_alignment=16)
    sS32 = cute.zipped_divide(cute.recast_tensor(sS, cutlass.Uint32), (1, 1))
    atom = cute.make_copy_atom(cpasync.CopyG2SOp(cache_mode=cpasync.LoadCacheMode.GLOBAL),
                               cutlass.Uint32, num_bits_per_copy=128)
    atom4 = cute.make_copy_atom(cpasync.CopyG2SOp(), cutlass.Uint32, num_bits_per_copy=32)

    acc = cute.make_rmem_tensor((4, nt_per_cta), cutlass.Float32)
    acc.fill(0.0)
    xr = cute.make_rmem_tensor((32,), gX.element_type)       # x of the current chunk
    sc = cute.make_rmem_tensor((2, nt_per_cta), cutlass.Float32)
    wr = cute.make_rmem_tensor((4, 2), cutlass.Uint32)
    bw = cute.make_rmem_tensor((16,), cutlass.Uint32)
    HI16 = cutlass.Uint32(0xFFFF0000)

    # Prologue: the scale block (one cp.async group), then the weights of the first STAGES
    # chunks (one group each); wait for the scales only and make them visible CTA-wide.
    gw = G // 2                                 # scale words per row (G is even: K % 256 == 0)
    for e in cutlass.range(tidx, nblk * gw, THREADS, unroll=1):
        r = e // gw
        wd = e - r * gw
        row = n_base + r
        if cutlass.const_expr(clamp_rows):
            row = cutlass.min(row, N - 1)
        cute.copy(atom4, gS32[(None, None), (row, wd)], sS32[(None, None), (r, wd)])
    cute.arch.cp_async_commit_group()
    for st in cutlass.range_constexpr(STAGES):
        if st < n_mine:
            _issue_weights(atom, gW, ring_all[None, lane, None, st, warp], n_base, g, t,
                           warp + WARPS * st, N, nt_per_cta, clamp_rows)
        cute.arch.cp_async_commit_group()
    cute.arch.cp_async_wait_group(STAGES)
    cute.arch.sync_threads()

    for i in cutlass.range(n_mine, unroll=1):
        c = warp + WARPS * i
        stage = i % STAGES
        _load_x(gX, xr, g, t, c, M)            # x is L2-resident (<= 128 KB)
        _load_scales(sS, sc, g, c, nt_per_cta)

        # ---- x^T fragment (batch row m = g), k pairs (8w + i, 8w + i + 4) ------------------
        xs = xr.load().to(cutlass.Float32).reduce(cute.ReductionOp.ADD, 0.0, 0)
        xs = xs + cute.arch.shuffle_sync_bfly(xs, 1)
        xs = xs + cute.arch.shuffle_sync_bfly(xs, 2)
        xs_lo = cute.arch.shuffle_sync(xs, 8 * t) * 136.0       # batch column m = 2t
        xs_hi = cute.arch.shuffle_sync(xs, 8 * t + 4) * 136.0   # batch column m = 2t + 1
        xw = cute.recast_tensor(xr, cutlass.Uint32)              # word p = (x[2p], x[2p+1])
        for s in cutlass.range_constexpr(8):
            a = 4 * (s // 2) + (s % 2)          # x word holding k = 8w + i, i = 2 (s % 2)
            xa = xw[a]
            xb = xw[a + 2]                      # k + 4
            bw[2 * s] = (xa & 0xFFFF) | (xb << 16)
            bw[2 * s + 1] = (xa >> 16) | (xb & HI16)

        # ---- this chunk's weights have landed in the ring ----------------------------------
        cute.arch.cp_async_wait_group(STAGES - 1)
        ring = ring_all[None, lane, None, stage, warp]

        # ---- 8 mma steps per n-tile, scale and zero-point correction per group -------------
        for nt in cutlass.range_constexpr(nt_per_cta):
            wr[None, 0].store(ring[None, 2 * nt].load())          # rows g and g + 8
            wr[None, 1].store(ring[None, 2 * nt + 1].load())
            d0 = cutlass.Float32(0.0)
            d1 = cutlass.Float32(0.0)
            d2 = cutlass.Float32(0.0)
            d3 = cutlass.Float32(0.0)
            for s in cutlass.range_constexpr(8):
                sh = 8 * (s % 2)                # nibble pair (i, i + 4) with i = 2 (s % 2)
                w_lo = wr[s // 2, 0]
                w_hi = wr[s // 2, 1]
                a0 = ((w_lo >> sh) & 0x000F000F) | 0x43004300
                a1 = ((w_hi >> sh) & 0x000F000F) | 0x43004300
                a2 = ((w_lo >> (sh + 4)) & 0x000F000F) | 0x43004300
                a3 = ((w_hi >> (sh + 4)) & 0x000F000F) | 0x43004300
                d0, d1, d2, d3 = _mma_bf16(a0, a1, a2, a3, bw[2 * s], bw[2 * s + 1],
                                           d0, d1, d2, d3)
            acc[0, nt] = acc[0, nt] + sc[0, nt] * (d0 - xs_lo)
            acc[1, nt] = acc[1, nt] + sc[0, nt] * (d1 - xs_hi)
            acc[2, nt] = acc[2, nt] + sc[1, nt] * (d2 - xs_lo)
            acc[3, nt] = acc[3, nt] + sc[1, nt] * (d3 - xs_hi)
        # refill this stage with chunk i + STAGES (all of its slots have been read above)
        if i + STAGES < n_mine:
            _issue_weights(atom, gW, ring, n_base, g, t, c + WARPS * STAGES, N, nt_per_cta,
                           clamp_rows)
        cute.arch.cp_async_commit_group()
    cute.arch.cp_async_wait_group(0)
    cute.arch.sync_threads()                   # every warp is done with its ring

    # ---- sum the 8 warps' partials through shared memory (reusing the ring), one rounding --
    red = cute.make_tensor(
        cute.recast_tensor(ring_all, cutlass.Float32).iterator,
        cute.make_layout((WARPS, MAXM, nblk), stride=(MAXM * nblk, nblk, 1)),
    )
    for nt in cutlass.range_constexpr(nt_per_cta):
        red[warp, 2 * t, nt * 16 + g] = acc[0, nt]
        red[warp, 2 * t + 1, nt * 16 + g] = acc[1, nt]
        red[warp, 2 * t, nt * 16 + g + 8] = acc[2, nt]
        red[warp, 2 * t + 1, nt * 16 + g + 8] = acc[3, nt]
    cute.arch.sync_threads()
    for e0 in cutlass.range_constexpr(0, MAXM * nblk, THREADS):
        e = e0 + tidx
        m = e // nblk
        nl = e - m * nblk
        n = n_base + nl
        if e < MAXM * nblk and m < M and n < N:
            tot = red[0, m, nl]
            for w in cutlass.range_constexpr(1, WARPS):
                tot = tot + red[w, m, nl]
            mY[m, n] = tot.to(mY.element_type)


@cute.jit
def _gemv_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mS: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    nt_per_cta: cutlass.Constexpr,
):
    N = mY.shape[1]
    gX = cute.zipped_divide(mX, (1, 8))
    gW = cute.zipped_divide(cute.recast_tensor(mW, cutlass.Uint32), (1, 4))
    gS32 = cute.zipped_divide(cute.recast_tensor(mS, cutlass.Uint32), (1, 1))
    nblk = 16 * nt_per_cta
    _gemv_kernel(gX, gW, mS, gS32, mY, nt_per_cta, N % nblk != 0).launch(
        grid=[(N + nblk - 1) // nblk, 1, 1],
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
        raise ValueError(f"K={K} must be a multiple of {2 * GROUP} (scales copied as 32-bit words)")
    if N * K // 2 >= 2**31:
        raise ValueError("N*K/2 must stay below 2**31 bytes (32-bit static index math)")
    nt = _pick_nt(N)
    key = (M, N, K, nt)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (M, K), stride_order=(1, 0), assumed_align=16)
        wq = make_fake_compact_tensor(cutlass.Uint8, (N, K // 2), stride_order=(1, 0),
                                      assumed_align=16)
        sc = make_fake_compact_tensor(cutlass.BFloat16, (N, K // GROUP), stride_order=(1, 0),
                                      assumed_align=4)
        y = make_fake_compact_tensor(cutlass.BFloat16, (M, N), stride_order=(1, 0), assumed_align=2)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_gemv_host, x, wq, sc, y, stream, nt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, wq: torch.Tensor, scales: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, wq, scales, y)

    return run

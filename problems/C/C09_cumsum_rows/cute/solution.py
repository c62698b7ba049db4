"""C09 cumsum_rows, CuTe DSL expert solution: y[m, j] = x[m, 0] + ... + x[m, j] (inclusive scan
along rows), fp32 [M, N] in and out. One read of x, one write of y (the memory-bound minimum).

The TIRx expert's design ported to CuTe: ONE CTA PER ROW, the whole row loaded into registers by
all of the CTA's loads at once, a blocked scan with two block barriers, then the stores.

Design
  * One compile per shape set with static (M, N).  THREADS and VPT (128-bit vectors per thread)
    come from N as in the TIRx expert: about VPT_TARGET = 4 vectors (16 floats) per thread,
    THREADS a power-of-two number of warps (N = 4096 -> 256 threads x 4 vectors, N = 16384 ->
    1024 x 4, N = 1000 -> 64 x 4, N = 256 -> 32 x 2).  Grid = M CTAs (16384 at the benchmark).
  * Loads: one tiled copy, thread layout (1, THREADS), 4 fp32 per thread per atom; partitioning
    the row tile (1, VPT * THREADS * 4) gives vector k of thread t = columns (k * THREADS + t) *
    4 .. + 3, so a warp reads and writes 512 contiguous bytes per instruction and the row is VPT
    consecutive chunks of 4 * THREADS columns.  All VPT loads are issued before any math.
  * Blocked scan, fp32, in the row's order (the TIRx expert's order exactly):
      1. each thread scans its float4 (3 adds) for every chunk k, total t_k;
      2. Hillis-Steele inclusive scan of t_k over the 32 lanes (5 shfl.up steps, the VPT chunks
         interleaved), one more shfl.up gives the lane's exclusive offset u_k (0 in lane 0);
      3. lane 31 writes the warp total of chunk k to shared memory at k * WARPS + warp (the
         order of the warp segments in the row); barrier; warp 0 turns the NW = VPT * WARPS
         totals into exclusive prefixes (C = ceil(NW / 32) consecutive entries per lane
         sequentially, then a shuffle scan of the lane totals), barrier;
      y = x_scan + (u_k + segment prefix), stored with one 128-bit store per vector.
    Every output is a sum of fp32 partial sums of consecutive blocks, all earlier blocks
    counted exactly once.
  * Ragged N (N = 1000: 250 vectors in 256 slots): the tail vectors are predicated off on load
    (zero-filled) and on store; they lie after every valid column in scan order, so they change
    no valid prefix.  Ragged M needs nothing (one CTA per row).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through on torch's current stream.

Why this layout (against the previous CuTe expert)
  * The previous expert ran ONE WARP per row (4 rows per 128-thread CTA) and streamed the row
    in 4 chunks of 4 KB per warp (VPT = 8, loop with unroll=1): each chunk's loads were issued
    only after the previous chunk's scan and stores, so every warp exposed the DRAM latency 4
    times per row, with at most 4 KB in flight.  Here a CTA has its whole 16 KB row in flight
    from its first cycles (4 x 128-bit loads per thread, all before any use), then scans and
    stores once.
  * Arithmetic (benchmark, N = 4096): 32 registers (ptxas 12.8 on this kernel's PTX, sm_90a,
    no spill) x 256 threads -> 8 CTAs per SM, 128 KB of loads in flight per SM at CTA start
    against ~35 KB needed per SM (Little: 4.64 TB/s x ~1 us / 132).  Instructions: ~20 per
    float4 (3 local adds, 6 shuffles + 5 adds + 5 selects, 4 offset adds) plus 2 barriers per
    16 KB row, far under the ~250 instructions per float4 the SM can issue at the DRAM rate.
  * PTX checked: 4 ld.global.v4 at tid * 16 + k * 4096 before any add, 2 bar.sync, 4
    st.global.v4 at the same offsets; at N = 1000 vector 3 of threads >= 58 is predicated off
    (the other loads carry only a row-bound branch that is never taken).

Numerics: the TIRx expert's accumulation order: fp32 float4 scans, shuffle scan of their
totals, exclusive prefixes of the warp segments, y = x_scan + (lane offset + segment prefix);
no bf16 anywhere.  Deterministic: a fixed order per row, no atomics, no cross-CTA step.
Limits: N % 4 == 0, N <= 4 * MAX_VPT * MAX_THREADS = 65536 (row in registers), M * N < 2**31
(32-bit offsets); build() raises ValueError beyond that.

Measured on the H200 (full mode, one judge, every check shape passed): 133.5 us (IQR 1.3) in
the tuning run bench/h200/2026-12-02c/tune-r5a.json, against 137.3 us for the previous
(one-warp-per-row) CuTe expert in bench/h200/2026-12-02b/solutions-CF-r3.md: 1.03x (2.8% less
time), the TIRx expert's time with the same design (132.6 us there).  In the same tuning run
the same kernel with one block barrier per row instead of two measured 134.0 us (IQR 1.2), so
the second barrier was kept.  In the one-run table bench/h200/2026-12-02c/solutions-CF-r5.md:
133.6 us (IQR 1.1), 86.1% of the 115.0 us roofline ideal, 2.18x torch eager, 1.38x
torch.compile; the TIRx expert 133.3 us there.  A torch device copy moving the same 537 MB
took 132.9 us (bench/h200/2026-12-02c/copyceiling.md): this kernel runs at 99.5% of it.
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

VEC = 4            # fp32 per 128-bit access
VPT_TARGET = 4     # 128-bit vectors per thread aimed for (16 floats of the row in registers)
MAX_THREADS = 1024
MAX_VPT = 16       # beyond this the row would no longer fit in registers comfortably


def _plan(N: int):
    """(THREADS, VPT) for a row of N fp32 (N // 4 vectors)."""
    nv = N // VEC
    threads = -(-nv // VPT_TARGET)
    warps = 1  # power-of-two warp count, at least one warp
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    return threads, -(-nv // threads)


@cute.jit
def _predicate(tCc: cute.Tensor, shape: cute.Shape):
    """One predicate per 128-bit vector of a partitioned identity tensor: inside `shape`
    (N % 4 == 0, so a vector is all in or all out)."""
    pred = cute.make_rmem_tensor(
        (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
        cutlass.Boolean,
    )
    for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
        for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
            for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], shape)
    return pred


@cute.kernel
def _cumsum_kernel(
    mX: cute.Tensor,            # (M, N) row-major fp32
    mY: cute.Tensor,            # (M, N) row-major fp32
    tiled_copy: cute.TiledCopy,
    threads: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
    has_tail: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    warps = threads // 32
    nw = vpt * warps                 # warp segments of the row
    cpl = -(-nw // 32)               # consecutive segments per lane of warp 0

    smem = SmemAllocator()
    seg = smem.allocate_tensor(cutlass.Float32, cute.make_layout(cpl * 32), byte_alignment=16)

    tile = (1, vpt * threads * VEC)
    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(cute.local_tile(mX, tile, (row, 0)))     # ((VEC), 1, VPT)
    tYgY = thr.partition_D(cute.local_tile(mY, tile, (row, 0)))
    frag = cute.make_fragment_like(tXgX)

    # 1. load the whole row (all loads before any use); tail vectors are 0
    if cutlass.const_expr(has_tail):
        pred = _predicate(thr.partition_S(cute.local_tile(cute.make_identity_tensor(mX.shape),
                                                          tile, (row, 0))), mX.shape)
        frag.fill(0.0)
        cute.copy(tiled_copy, tXgX, frag, pred=pred)
    else:
        cute.copy(tiled_copy, tXgX, frag)

    # 2. thread-local inclusive scan of each float4
    t = []
    for k in cutlass.range_constexpr(vpt):
        for e in cutlass.range_constexpr(1, VEC):
            frag[e, 0, k] = frag[e, 0, k] + frag[e - 1, 0, k]
        t.append(frag[VEC - 1, 0, k])

    # 3. warp inclusive scan of the float4 totals (chunks interleaved), exclusive lane offsets
    for d in cutlass.range_constexpr(5):
        u = [cute.arch.shuffle_sync_up(t[k], 1 << d) for k in range(vpt)]
        for k in cutlass.range_constexpr(vpt):
            t[k] = t[k] + cutlass.Float32(cutlass.select_(lane >= (1 << d), u[k], cutlass.Float32(0.0)))
    u = [cute.arch.shuffle_sync_up(t[k], 1) for k in range(vpt)]
    if lane == 31:
        for k in cutlass.range_constexpr(vpt):
            seg[k * warps + warp] = t[k]             # segment k * WARPS + warp in row order
    for k in cutlass.range_constexpr(vpt):
        u[k] = cutlass.Float32(cutlass.select_(lane == 0, cutlass.Float32(0.0), u[k]))
    cute.arch.sync_threads()

    # 4. warp 0: exclusive scan of the NW segment totals, in place (entries >= NW read as 0;
    #    they lie after every real segment, and nobody reads them back)
    if warp == 0:
        a = []
        for c in cutlass.range_constexpr(cpl):
            a.append(cutlass.Float32(cutlass.select_(lane * cpl + c < nw, seg[lane * cpl + c],
                                                     cutlass.Float32(0.0))))
        run = cutlass.Float32(0.0)
        r = []
        for c in cutlass.range_constexpr(cpl):
            r.append(run)
            run = run + a[c]
        for d in cutlass.range_constexpr(5):
            w = cute.arch.shuffle_sync_up(run, 1 << d)
            run = run + cutlass.Float32(cutlass.select_(lane >= (1 << d), w, cutlass.Float32(0.0)))
        w = cute.arch.shuffle_sync_up(run, 1)
        w = cutlass.Float32(cutlass.select_(lane == 0, cutlass.Float32(0.0), w))
        for c in cutlass.range_constexpr(cpl):
            seg[lane * cpl + c] = w + r[c]
    cute.arch.sync_threads()

    # 5. add the offsets and store (128-bit, 512 contiguous bytes per warp instruction)
    for k in cutlass.range_constexpr(vpt):
        off = u[k] + seg[k * warps + warp]
        for e in cutlass.range_constexpr(VEC):
            frag[e, 0, k] = frag[e, 0, k] + off
    if cutlass.const_expr(has_tail):
        cute.copy(tiled_copy, frag, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, frag, tYgY)


@cute.jit
def _cumsum_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    threads: cutlass.Constexpr,
    vpt: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout((1, threads)), cute.make_layout((1, VEC)))
    M = mX.shape[0]
    N = mX.shape[1]
    _cumsum_kernel(mX, mY, tiled_copy, threads, vpt, N % (vpt * threads * VEC) != 0).launch(
        grid=[M, 1, 1],
        block=[threads, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (M, N) and return run(x, y)."""
    M = int(spec.dims["M"])
    N = int(spec.dims["N"])
    if N % VEC != 0:
        raise ValueError(f"N={N} must be a multiple of {VEC} (128-bit vectors)")
    if M * N >= 2**31:
        raise ValueError("M*N must stay below 2**31 elements (32-bit static index math)")
    threads, vpt = _plan(N)
    if vpt > MAX_VPT:
        raise ValueError(f"N={N} too long for the register-resident row (max {VEC * MAX_VPT * MAX_THREADS})")
    key = (M, N)
    fn = _CACHE.get(key)
    if fn is None:
        f32 = cutlass.Float32
        x = make_fake_compact_tensor(f32, (M, N), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(f32, (M, N), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_cumsum_host, x, y, stream, threads, vpt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

"""C12 global_sq_norm, CuTe DSL expert solution: sq_norm = sum_i x[i]^2 over a whole bf16 [N]
tensor, one fp32 scalar (0-d tensor).

Memory-bound grid-wide reduction: x is read once (537 MB at N = 2^28), 4 bytes are written.

Design: a deterministic two-stage reduction, two kernels launched back to back on torch's
current stream from one compiled host function (one TVM-FFI call):
  * Stage 1 (G CTAs of 256 threads, G <= 132 x 4 = 528: 38 registers in the cubin, so all of
    them are resident at once): x is cut into tiles of 256 threads x VPT = 8 128-bit vectors
    (8 bf16) = 16384 elements; vector j of a thread starts at element (j * 256 + tid) * 8 of
    the tile, so a warp reads 512 contiguous bytes per load and each thread has 128 B in
    flight per tile (~128 KB per SM).  CTA b takes the full tiles b, b + G, b + 2G, ... (a
    grid-stride loop whose bound is the number of FULL tiles, so none of these loads needs a
    predicate).  G is a divisor of the full-tile count where one lies in 265..528 (N = 2^28:
    16384 tiles, G = 512, exactly 32 tiles per CTA), so the CTAs finish together.  Every
    thread keeps 8 fp32 accumulators (one per element slot of a vector: acc[e] += x[e, j]^2,
    one widen and one FFMA per element), sums them at the end, then warp butterflies and one
    partial per warp through shared memory give the CTA's partial, which thread 0 writes to
    partials[b].
  * The ragged end (N not a multiple of 16384, e.g. N = 4000037 or N = 1000) is read by the
    last CTA only: the partial tile's whole vectors (below N8 = N - N % 8) through predicated
    128-bit loads (one predicate per vector, padding zero-filled), and the last N % 8 (< 8)
    elements as scalars by its first threads.  No access reaches past N.
  * Stage 2 (one CTA of 1024 threads): thread i loads partials[i] (G <= 1024), then the same
    warp-butterfly + shared-memory tree, and thread 0 writes sq_norm.  The output is written
    (not accumulated), so nothing has to be zeroed first, and no atomics are used: for a given
    N the summation order is fixed, so the result is bit-for-bit reproducible run to run.
  * Precision: squares and every sum are fp32; each accumulator sums 8 x 32 = 256 squares
    sequentially at the benchmark shape (a CTA's 32 tiles), then trees,
    which is far inside the 2e-4 relative bound (the statement measured 3e-6 for a similar
    33792-accumulator grid-stride tree at the widest trial).
  * Workspace: partials (G fp32) is allocated by run() on the first call, on x's device, and
    reused afterwards (one allocation per built problem, outside the steady state).
  * Cost beyond the stream: the second launch (~2-3 us of GPU gap against a ~130 us read),
    a single-CTA stage 1 tail (the partial tile) that is tiny next to 32 full tiles.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through (about 5 us of host overhead).
Limits: N < 2**31 (32-bit offsets); build() raises ValueError beyond that.
Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 124.6 us, 92.3% of the
roofline ideal.
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

VEC = 8            # bf16 per 128-bit access
THREADS = 256      # stage-1 threads per CTA
VPT = 8            # 128-bit vectors per thread per tile
TILE = THREADS * VPT * VEC
MAX_CTAS = 132 * 4  # stage-1 grid cap (4 CTAs per SM of the H200, all resident)
THREADS2 = 1024    # stage-2 threads (one CTA); must be >= the stage-1 grid


@cute.jit
def _block_sum(val: cutlass.Float32, nwarps: cutlass.Constexpr, buf: cute.Tensor):
    """Sum one fp32 per thread over the CTA (fixed order); the result is valid in warp 0."""
    val = cute.arch.warp_reduction_sum(val)
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    if lane == 0:
        buf[warp] = val
    cute.arch.sync_threads()
    return cute.arch.warp_reduction_sum(buf[lane % nwarps], threads_in_group=nwarps)


@cute.jit
def _accumulate(frag: cute.Tensor, acc: cute.Tensor):
    """acc[e] += sum_j x[e, j]^2 over the VPT vectors of frag ((VEC), 1, VPT), in fp32."""
    a = acc.load()
    for j in cutlass.range_constexpr(VPT):
        x = frag[None, 0, j].load().to(cutlass.Float32)
        a = a + x * x
    acc.store(a)


@cute.kernel
def _partials_kernel(
    mX: cute.Tensor,            # (1, N) bf16
    mW: cute.Tensor,            # (G,) fp32 partial sums
    tiled_copy: cute.TiledCopy,
    n_full: cutlass.Constexpr,  # full tiles
    grid: cutlass.Constexpr,    # G
    n_vec8: cutlass.Constexpr,  # N - N % 8: end of the whole 128-bit vectors
    has_part: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    smem = SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)

    thr = tiled_copy.get_slice(tidx)
    frag = cute.make_fragment_like(thr.partition_S(cute.local_tile(mX, (1, TILE), (0, 0))))
    acc = cute.make_rmem_tensor(frag[None, 0, 0].shape, cutlass.Float32)   # one per slot
    acc.fill(0.0)

    if cutlass.const_expr(n_full > 0):
        for t in cutlass.range(bidx, n_full, grid, unroll=1):
            cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mX, (1, TILE), (0, t))), frag)
            _accumulate(frag, acc)

    N = mX.shape[1]
    if cutlass.const_expr(has_part or N > n_vec8):
        if bidx == grid - 1:
            if cutlass.const_expr(has_part):
                cX = cute.local_tile(cute.make_identity_tensor(mX.shape), (1, TILE), (0, n_full))
                tCc = thr.partition_S(cX)
                pred = cute.make_rmem_tensor(
                    (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]),
                     cute.size(tCc, mode=[2])),
                    cutlass.Boolean,
                )
                for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
                    for a in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                        for k in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                            # The vector's first element is below N8, so all 8 of them are.
                            pred[j, a, k] = cute.elem_less(tCc[(0, j), a, k], (1, n_vec8))
                frag.fill(0.0)
                cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mX, (1, TILE), (0, n_full))),
                          frag, pred=pred)
                _accumulate(frag, acc)
            if cutlass.const_expr(N > n_vec8):      # the last N % 8 elements, one per thread
                if tidx < N - n_vec8:
                    xs = mX[0, n_vec8 + tidx].to(cutlass.Float32)
                    acc[0] = acc[0] + xs * xs

    total = _block_sum(acc.load().reduce(cute.ReductionOp.ADD, 0.0, 0), THREADS // 32, red)
    if tidx == 0:
        mW[bidx] = total


@cute.kernel
def _final_kernel(
    mW: cute.Tensor,            # (G,) fp32 partial sums
    mO: cute.Tensor,            # (1,) fp32 view of the 0-d output
    grid: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    smem = SmemAllocator()
    red = smem.allocate_tensor(cutlass.Float32, cute.make_layout(32), byte_alignment=16)
    v = cutlass.Float32(0.0)
    if tidx < grid:
        v = mW[tidx]
    total = _block_sum(v, THREADS2 // 32, red)
    if tidx == 0:
        mO[0] = total


@cute.jit
def _sq_norm_host(
    mX: cute.Tensor,
    mW: cute.Tensor,
    mO: cute.Tensor,
    stream: cuda.CUstream,
    grid: cutlass.Constexpr,
):
    n = cute.size(mX)
    fX = cute.make_tensor(mX.iterator, cute.make_layout((1, n), stride=(0, 1)))
    fO = cute.make_tensor(mO.iterator, cute.make_layout(1))
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout((1, THREADS)),
                                         cute.make_layout((1, VEC)))
    n_vec8 = n - n % VEC
    n_full = n_vec8 // TILE
    has_part = n_vec8 % TILE != 0
    _partials_kernel(fX, mW, tiled_copy, n_full, grid, n_vec8, has_part).launch(
        grid=[grid, 1, 1], block=[THREADS, 1, 1], stream=stream,
    )
    _final_kernel(mW, fO, grid).launch(grid=[1, 1, 1], block=[THREADS2, 1, 1], stream=stream)


_CACHE: dict = {}


def _grid(N: int) -> int:
    """Stage-1 CTAs: one per full tile up to MAX_CTAS, at least one; among MAX_CTAS/2 ..
    MAX_CTAS, prefer a divisor of the full-tile count so every CTA gets the same work."""
    n_full = (N - N % VEC) // TILE
    if n_full <= MAX_CTAS:
        return max(1, n_full)
    for g in range(MAX_CTAS, MAX_CTAS // 2, -1):
        if n_full % g == 0:
            return g
    return MAX_CTAS


def build(spec):
    """Compile for spec's static N and return run(x, sq_norm)."""
    N = int(spec.dims["N"])
    if not 1 <= N < 2**31:
        raise ValueError(f"N={N} must be in [1, 2**31) (32-bit static index math)")
    grid = _grid(N)
    key = (N, grid)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (N,), assumed_align=16)
        w = make_fake_compact_tensor(cutlass.Float32, (grid,), assumed_align=16)
        o = make_fake_compact_tensor(cutlass.Float32, (), assumed_align=4)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_sq_norm_host, x, w, o, stream, grid, options="--enable-tvm-ffi")
        _CACHE[key] = fn
    workspace: dict = {}

    def run(x: torch.Tensor, sq_norm: torch.Tensor) -> None:
        ws = workspace.get(x.device)
        if ws is None:
            ws = workspace[x.device] = torch.empty(grid, dtype=torch.float32, device=x.device)
        fn(x, ws, sq_norm)

    return run

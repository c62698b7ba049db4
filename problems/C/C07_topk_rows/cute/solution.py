"""C07 topk_rows, CuTe DSL expert solution: the k = 8 largest logits of every row and their
columns, ties ordered by column (lowest first), bf16 [T, V] in, bf16 [T, 8] values and int64
[T, 8] indices out.

Memory-bound streaming selection: every logit is read once (262 MB at T = 4096, V = 32000),
80 bytes per row are written.

Design
  * Composite keys make the order total and the answer unique: for a bf16 value with bits b,
    ord(b) is the usual order-preserving map to 16 unsigned bits (positive: b ^ 0x8000,
    negative: ~b; -0 is first turned into +0, so equal values get equal ord), and
        key = ord(b) * 65536 + (65535 - column)
    is a distinct uint32 per element that orders by value descending, then by column
    ascending -- exactly the statement's tie rule.  The top 8 keys decode to the answer.
    This needs every column below 65536: build() checks that the padded row fits.
  * One compile per shape set with static (T, V).  One warp per row, ROWS = 4 rows (warps) per
    CTA.  The row is streamed in chunks of VPT = 4 128-bit vectors (8 bf16) per lane, vector j
    of a lane starting at column (j * 32 + lane) * 8 (512 contiguous bytes per warp load, 2 KB
    per warp in flight).  Full chunks run unpredicated in a dynamic loop; the last, partial
    chunk (V = 32000 = 31 x 1024 + 256, V = 1000) is a predicated copy of whole vectors
    (V % 8 == 0) whose padding is -inf (the smallest key; V >= 8 real keys always beat it).
  * The running top 8 of the row is one sorted list distributed over lanes 0..7 (lane r holds
    rank r), with G7 = its 8th key (warp-uniform; 0 before 8 keys were seen).
  * Group filter: for each 128-bit vector slot j of a chunk (8 elements per lane, 256 per
    warp) the lane takes the fp32 max of its 8 values; unless some lane's max reaches the
    value of G7 (vote.any; -inf while the list is not full), the 256 elements are skipped:
    none of them can beat G7.  (Equal values must pass, the column decides.)
  * Otherwise, for each of the 8 element slots: a key is a candidate only if it beats G7; the
    warp takes redux.sync.max.u32 of its candidates and, while that maximum beats G7,
    inserts it into the list (lane r: L'r = max(Lr, min(L(r-1), m)), one shfl.up),
    refreshes G7 (one shfl), and the owner lane drops the inserted key.
  * Cost: a CPU emulation of this loop on the family's logits (V = 32000) runs the slot path
    for ~23% of the elements; the rest cost the filter only (widen + FMNMX, ~2 issue slots per
    element, plus ~10 per group of 8).  The slot path is ~15 issue slots per element (key
    build, compare/select, REDUX, loop test), so ~6 per element on average ->
    131M x 6 / (132 x 128 x 1.98 GHz) ~ 25 us against ~63 us of memory.  32 registers
    (offline ptxas 13.0 at the benchmark shape).
  * Output: lanes 0..7 decode their rank's key (bits of the bf16 value, 65535 - low half =
    column) and store one bf16 value and one int64 index each.
  * Ragged T (T % ROWS != 0): the warps past the last row re-read row T - 1 (clamped index)
    and do not store.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: T * V < 2**31 (32-bit offsets), padded V <= 65536, k == 8.
Unmeasured on the H200 so far; the selection loop is the part to look at first if it falls
short (in the first chunk of a row nearly every group passes the filter).

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`): 86.3
us, 65.5% of the roofline ideal (56.6 us), 12.07x the fastest eager formulation, 12.07x
torch.compile; the TIRx expert 73.6 us (this one is 1.17x slower).
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 per 128-bit access
VPT_MAX = 4        # 128-bit vectors per lane per chunk
ROWS = 4           # rows (warps) per CTA
K = 8              # top-k (fixed by the problem)


def _config(V: int) -> int:
    """VPT: 128-bit vectors per lane per chunk for row length V."""
    nvec = V // VEC
    return max(1, min(VPT_MAX, -(-nvec // 32)))


@cute.jit
def _threshold(g7: cutlass.Uint32):
    """The value of the 8th key as fp32 (-inf while the list is not full): an element whose
    value is below it cannot enter the top 8."""
    ordv = g7 >> 16
    vbits = ordv ^ (cutlass.Uint32(0xFFFF) - (ordv >> 15) * cutlass.Uint32(0x7FFF))
    v = (vbits << 16).bitcast(cutlass.Float32)
    return cutlass.Float32(cutlass.select_(g7 == cutlass.Uint32(0), cutlass.Float32(-float("inf")), v))


@cute.jit
def _select_chunk(frag: cute.Tensor, col0, lst, g7, lane, vpt: cutlass.Constexpr):
    """Merge the chunk's keys (frag: ((VEC), 1, VPT) bf16, lane's first column col0) into the
    distributed top-8 list; return (lst, g7)."""
    bits = cute.recast_tensor(frag, cutlass.Uint16)
    for j in cutlass.range_constexpr(vpt):
        # Group filter: skip these 8 x 32 elements unless one of them reaches the 8th value.
        vmax = frag[None, 0, j].load().to(cutlass.Float32).reduce(cute.ReductionOp.MAX, -float("inf"), 0)
        if cute.arch.vote_any_sync(vmax >= _threshold(g7)):
            for e in cutlass.range_constexpr(VEC):
                b = bits[e, 0, j].to(cutlass.Uint32)
                b = cutlass.Uint32(cutlass.select_(b == cutlass.Uint32(0x8000), cutlass.Uint32(0), b))
                ordv = b ^ ((b >> 15) * cutlass.Uint32(0x7FFF) + cutlass.Uint32(0x8000))
                low = cutlass.Uint32(0xFFFF - (j * 32 * VEC + e)) - col0
                key = ordv * cutlass.Uint32(65536) + low
                cand = cutlass.Uint32(cutlass.select_(key > g7, key, cutlass.Uint32(0)))
                m = cute.arch.warp_redux_sync(cand, "umax")
                while m > g7:
                    prev = cute.arch.shuffle_sync_up(lst, 1)
                    prev = cutlass.Uint32(cutlass.select_(lane == 0, cutlass.Uint32(0xFFFFFFFF), prev))
                    lst = cutlass.max(lst, cutlass.min(prev, m))
                    g7 = cute.arch.shuffle_sync(lst, K - 1)
                    cand = cutlass.Uint32(cutlass.select_(cand == m, cutlass.Uint32(0), cand))
                    cand = cutlass.Uint32(cutlass.select_(cand > g7, cand, cutlass.Uint32(0)))
                    m = cute.arch.warp_redux_sync(cand, "umax")
    return lst, g7


@cute.kernel
def _topk_kernel(
    mX: cute.Tensor,            # (T, V) row-major bf16
    mVal: cute.Tensor,          # (T, 8) uint16 view of the bf16 values
    mIdx: cute.Tensor,          # (T, 8) int64
    tiled_copy: cute.TiledCopy,
    vpt: cutlass.Constexpr,
    n_full: cutlass.Constexpr,
    has_tail: cutlass.Constexpr,
    ragged_rows: cutlass.Constexpr,
):
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    T = mX.shape[0]
    row = bidx * ROWS + warp
    row_c = row
    if cutlass.const_expr(ragged_rows):
        row_c = cutlass.min(row, T - 1)

    ch = vpt * 32 * VEC
    chunk = (1, ch)
    thr = tiled_copy.get_slice(lane)
    frag = cute.make_fragment_like(thr.partition_S(cute.local_tile(mX, chunk, (row_c, 0))))

    lst = cutlass.Uint32(0)
    g7 = cutlass.Uint32(0)
    for c in cutlass.range(n_full, unroll=1):
        cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mX, chunk, (row_c, c))), frag)
        col0 = cutlass.Uint32(c * ch + lane * VEC)
        lst, g7 = _select_chunk(frag, col0, lst, g7, lane, vpt)

    if cutlass.const_expr(has_tail):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), chunk, (row_c, n_full))
        tCc = thr.partition_S(cX)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        frag.fill(-float("inf"))
        cute.copy(tiled_copy, thr.partition_S(cute.local_tile(mX, chunk, (row_c, n_full))), frag,
                  pred=pred)
        col0 = cutlass.Uint32(n_full * ch) + cutlass.Uint32(lane * VEC)
        lst, g7 = _select_chunk(frag, col0, lst, g7, lane, vpt)

    # Decode rank `lane` (lanes 0..7): value bits and column.
    ordv = lst >> 16
    sign_pos = ordv >> 15                       # 1: the value was >= +0
    vbits = ordv ^ (cutlass.Uint32(0xFFFF) - sign_pos * cutlass.Uint32(0x7FFF))
    col = cutlass.Uint32(0xFFFF) - (lst & cutlass.Uint32(0xFFFF))
    if lane < K:
        if cutlass.const_expr(ragged_rows):
            if row < T:
                mVal[row, lane] = vbits.to(cutlass.Uint16)
                mIdx[row, lane] = col.to(cutlass.Int64)
        else:
            mVal[row, lane] = vbits.to(cutlass.Uint16)
            mIdx[row, lane] = col.to(cutlass.Int64)


@cute.jit
def _topk_host(
    mX: cute.Tensor,
    mV: cute.Tensor,
    mI: cute.Tensor,
    stream: cuda.CUstream,
    vpt: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    tiled_copy = cute.make_tiled_copy_tv(atom, cute.make_layout((1, 32)), cute.make_layout((1, VEC)))
    T = mX.shape[0]
    V = mX.shape[1]
    ch = vpt * 32 * VEC
    mVal = cute.recast_tensor(mV, cutlass.Uint16)
    _topk_kernel(mX, mVal, mI, tiled_copy, vpt, V // ch, V % ch != 0, T % ROWS != 0).launch(
        grid=[(T + ROWS - 1) // ROWS, 1, 1],
        block=[ROWS * 32, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and return run(x, values, indices)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    k = int(spec.params.get("k", K))
    if k != K:
        raise ValueError(f"k={k}: this kernel is written for k = {K}")
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    vpt = _config(V)
    ch = vpt * 32 * VEC
    if -(-V // ch) * ch > 65536:
        raise ValueError(f"V={V}: padded row must fit 16-bit columns in the sort key")
    key = (T, V, vpt)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        v = make_fake_compact_tensor(cutlass.BFloat16, (T, K), stride_order=(1, 0), assumed_align=16)
        i = make_fake_compact_tensor(cutlass.Int64, (T, K), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_topk_host, x, v, i, stream, vpt, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor) -> None:
        fn(x, values, indices)

    return run

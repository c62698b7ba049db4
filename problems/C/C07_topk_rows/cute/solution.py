"""C07 topk_rows, CuTe DSL expert solution: the k = 8 largest logits of every row and their
columns, ties ordered by column (lowest first), bf16 [T, V] in, bf16 [T, 8] values and int64
[T, 8] indices out.

Memory-bound streaming selection: every logit is read once (262 MB at T = 4096, V = 32000),
80 bytes per row are written. The algorithm is the TIRx expert's (a whole-slot filter with
packed bf16 math and one warp reduction per inserted key), written in CuTe.

Design
  * Composite keys make the order total and the answer unique: key = (ord(b) << 16) |
    (0xFFFF - column), ord(b) = b ^ 0xFFFF for negative b, b ^ 0x8000 otherwise, -0.0 first
    made +0.0 (equal values, equal ords), so keys are unique and order by value descending,
    then column ascending: the top 8 keys are the answer. This needs every column below 65536:
    build() checks that the padded row fits. The running top 8 of the row is one sorted list
    distributed over lanes 0..7 (lane r holds rank r), with g7 = its 8th key (warp-uniform);
    it starts as copies of 0x007F0000 (value -inf, column 65535), below every real key.
  * One compile per shape set with static (T, V). One warp per row, ROWS = 4 warps (rows) per
    CTA, warps share nothing. The row is streamed in chunks of VPT = min(4, ceil(V / 256))
    128-bit vectors per lane, vector j of a lane starting at column (j * 32 + lane) * 8 (512
    contiguous bytes per warp load); chunks = ceil(V / (VPT * 256)) (V = 32000: 32 chunks, the
    last a quarter full).
  * Loads: two register buffers, the chunk loop unrolled by two, chunk c + 1 loaded before
    chunk c is examined, so a warp always has one chunk (2 KB) in flight while it computes
    (loading a chunk and then examining it serializes a warp's loads and its selection work).
  * Group filter with packed math: per vector slot (8 elements per lane, 256 per warp) the
    lane's max is 3 max.bf16x2 plus one fp32 max of the two halves, then a compare and a vote
    (~9 instructions per 8 elements in the sm_90a SASS; widening all 8 to fp32 and taking 7
    max costs ~18). The comparison is strict (value > the value of g7): slots are examined in
    column order, so every key in the list has a lower column than every element of the slot,
    and an element equal in value to the 8th loses to it on the column. That lets far fewer
    slots pass once the list holds ties (the family's logits are multiples of 0.5: ties are
    the common case).
  * Selection of a passing slot: the lane builds its 8 composite keys, the warp takes ONE
    redux.sync.max of the lanes' max keys; while that max m beats g7, m is inserted (lane r:
    L'r = max(Lr, min(L(r-1), m)), one shfl.up), g7 is refreshed (one shfl), and m becomes the
    warp max of the keys below m (keys are unique and m only decreases, so no key is inserted
    twice, and once m <= g7 no key left beats g7). Cost: one warp reduction per inserted key
    plus one per passing slot (a per-element-slot loop takes 8 per passing slot plus one per
    insertion).
  * Ragged edges: vectors past the row end (V = 1000; the last chunk at V = 32000) are not
    loaded; their words are two bf16 -inf, whose keys are below every real key (a row of
    V >= 8 has 8 real keys that push them out) and which never pass the filter alone.
    Ragged T: warps past the last row read row T - 1 (clamped) and do not store.
  * Output: lanes 0..7 decode their column (0xFFFF - low half of the key), store it as int64,
    and store the value re-read from x at that column (exact, a -0.0 stays -0.0).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Checked on the CPU: a numpy emulation of exactly this loop (same bit formulas, same order)
matches a stable descending sort on 130 rows (V = 32000, 1000, 256; heavy ties, zeros, -0.0,
negative rows). sm_90a build: 56 registers, no local memory (all 1024 CTAs resident at once).
Limits: T * V < 2**31 (32-bit offsets), padded V <= 65536, k == 8.

Measured on the H200 (bench/h200/2026-12-02/diag-cute-wake200.json, full mode, one judge): 72.5 us
(IQR 1.1), 77.6% of the roofline ideal (56.3 us), 14.41x the fastest eager formulation, 14.41x
torch.compile; the previous design (a chunk loaded then examined, an fp32 filter that let equal
values pass, one warp reduction per element slot) 84.9 us in the same run. The TIRx expert, the
same algorithm, measured 73.6 us (bench/h200/2026-12-01i/solutions-CF.md): the two now agree.
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
PAD_WORD = 0xFF80FF80   # two bf16 -inf: a vector past the row end
LIST_INIT = 0x007F0000  # key of -inf at column 65535: below every key of the row


def _plan(V: int) -> tuple[int, int]:
    """(VPT: 128-bit vectors per lane per chunk, chunks per row) for row length V."""
    nvec = V // VEC
    vpt = max(1, min(VPT_MAX, -(-nvec // 32)))
    return vpt, -(-nvec // (vpt * 32))


@cute.jit
def _bmax2(a, b):
    """Packed max of two bf16 pairs (one max.bf16x2)."""
    return cute.arch.inline_ptx(
        "max.bf16x2 {$w0}, {$r0}, {$r1};",
        write_only_types=[cutlass.Uint32],
        read_only_args=[a, b],
    )


@cute.jit
def _thr(g7):
    """The value of key g7 as fp32 (its ord decoded back to bf16 bits)."""
    o = g7 >> 16
    bits = o ^ (cutlass.Uint32(0xFFFF) - (o >> 15) * cutlass.Uint32(0x7FFF))
    return (bits << 16).bitcast(cutlass.Float32)


@cute.jit
def _ords(w):
    """Packed monotonic 16-bit images of a bf16 pair: b ^ 0xFFFF if negative, b ^ 0x8000 if not;
    -0.0 is first made +0.0 (a half keeps its sign bit only when its magnitude is nonzero:
    magnitude + 0x7FFF sets bit 15 exactly then, with no carry into the other half)."""
    nz = ((w & cutlass.Uint32(0x7FFF7FFF)) + cutlass.Uint32(0x7FFF7FFF)) & cutlass.Uint32(0x80008000)
    wc = w & (nz | cutlass.Uint32(0x7FFF7FFF))
    sm = (wc >> 15) & cutlass.Uint32(0x00010001)
    return wc ^ ((sm * cutlass.Uint32(0x7FFF)) | cutlass.Uint32(0x80008000))


def _tree_max(vals):
    """Balanced max tree over a Python list of DSL values (short dependency chains)."""
    while len(vals) > 1:
        nxt = [cutlass.max(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


@cute.jit
def _load_chunk(gX4: cute.Tensor, buf: cute.Tensor, row, lane, c, vpt: cutlass.Constexpr,
                nv: cutlass.Constexpr, full: cutlass.Constexpr):
    """Vector j of chunk c (j < vpt): number c * 32 vpt + 32 j + lane of the row, or -inf
    padding past the row end."""
    for j in cutlass.range_constexpr(vpt):
        v = c * (32 * vpt) + 32 * j + lane
        seg = cute.make_tensor(buf.iterator + 4 * j, cute.make_layout(4))
        if cutlass.const_expr(full):
            seg.store(gX4[(0, None), (row, v)].load())
        else:
            if v < nv:
                seg.store(gX4[(0, None), (row, v)].load())
            else:
                seg.fill(PAD_WORD)


@cute.jit
def _select_chunk(buf: cute.Tensor, lst, g7, thr, lane, c, vpt: cutlass.Constexpr):
    """Merge chunk c (buf: the lane's 4 vpt words) into the distributed top-8 list; return the
    new (lst, g7, thr)."""
    for j in cutlass.range_constexpr(vpt):
        mx = _bmax2(_bmax2(buf[4 * j], buf[4 * j + 1]), _bmax2(buf[4 * j + 2], buf[4 * j + 3]))
        vmax = cute.arch.fmax((mx << 16).bitcast(cutlass.Float32),
                              (mx & cutlass.Uint32(0xFFFF0000)).bitcast(cutlass.Float32))
        # strictly above thr: an equal value here has a higher column than g7's key
        if cute.arch.vote_any_sync(vmax > thr):
            base = cutlass.Uint32(0xFFFF) - cutlass.Uint32((c * (32 * vpt) + 32 * j + lane) * VEC)
            keys = []
            for i in cutlass.range_constexpr(4):
                o = _ords(buf[4 * j + i])
                keys.append((o << 16) | (base - cutlass.Uint32(2 * i)))
                keys.append((o & cutlass.Uint32(0xFFFF0000)) | (base - cutlass.Uint32(2 * i + 1)))
            # the warp's largest key; while it beats g7 insert it, then take the largest key
            # below it (keys are unique and m only decreases: no per-key g7 test needed)
            m = cute.arch.warp_redux_sync(_tree_max(keys), "umax")
            while m > g7:
                prev = cute.arch.shuffle_sync_up(lst, 1)
                prev = cutlass.Uint32(cutlass.select_(lane == 0, cutlass.Uint32(0xFFFFFFFF), prev))
                lst = cutlass.max(lst, cutlass.min(prev, m))
                g7 = cute.arch.shuffle_sync(lst, K - 1)
                below = [cutlass.Uint32(cutlass.select_(kk < m, kk, cutlass.Uint32(0)))
                         for kk in keys]
                m = cute.arch.warp_redux_sync(_tree_max(below), "umax")
            thr = _thr(g7)
    return lst, g7, thr


@cute.kernel
def _topk_kernel(
    gX4: cute.Tensor,           # ((1, 4), (T, V/8)) 16-byte vectors (uint32 words)
    mX: cute.Tensor,            # (T, V) bf16
    mVal: cute.Tensor,          # (T, 8) bf16
    mIdx: cute.Tensor,          # (T, 8) int64
    vpt: cutlass.Constexpr,
    nc: cutlass.Constexpr,
    nv: cutlass.Constexpr,
    ragged_rows: cutlass.Constexpr,
):
    bidx, _, _ = cute.arch.block_idx()
    tidx, _, _ = cute.arch.thread_idx()
    lane = tidx % 32
    warp = tidx // 32
    T = mX.shape[0]
    row = bidx * ROWS + warp
    row_c = row
    if cutlass.const_expr(ragged_rows):
        row_c = cutlass.min(row, T - 1)
    full = nv % (32 * vpt) == 0

    xa = cute.make_rmem_tensor((4 * vpt,), cutlass.Uint32)
    xb = cute.make_rmem_tensor((4 * vpt,), cutlass.Uint32)
    lst = cutlass.Uint32(LIST_INIT)     # rank `lane` of the running list (lanes 0..7 used)
    g7 = cutlass.Uint32(LIST_INIT)      # the 8th key (warp-uniform)
    thr = _thr(g7)                      # its value (-inf at the start)

    _load_chunk(gX4, xa, row_c, lane, 0, vpt, nv, full)
    for p in cutlass.range(nc // 2, unroll=1):
        _load_chunk(gX4, xb, row_c, lane, 2 * p + 1, vpt, nv, full)
        lst, g7, thr = _select_chunk(xa, lst, g7, thr, lane, 2 * p, vpt)
        if 2 * p + 2 < nc:
            _load_chunk(gX4, xa, row_c, lane, 2 * p + 2, vpt, nv, full)
        lst, g7, thr = _select_chunk(xb, lst, g7, thr, lane, 2 * p + 1, vpt)
    if cutlass.const_expr(nc % 2 == 1):
        lst, g7, thr = _select_chunk(xa, lst, g7, thr, lane, nc - 1, vpt)

    col = cutlass.Int32(cutlass.Uint32(0xFFFF) - (lst & cutlass.Uint32(0xFFFF)))
    if lane < K:
        if cutlass.const_expr(ragged_rows):
            if row < T:
                mIdx[row, lane] = col.to(cutlass.Int64)
                mVal[row, lane] = mX[row, col]
        else:
            mIdx[row, lane] = col.to(cutlass.Int64)
            mVal[row, lane] = mX[row, col]


@cute.jit
def _topk_host(
    mX: cute.Tensor,
    mV: cute.Tensor,
    mI: cute.Tensor,
    stream: cuda.CUstream,
    vpt: cutlass.Constexpr,
    nc: cutlass.Constexpr,
):
    T = mX.shape[0]
    V = mX.shape[1]
    gX4 = cute.zipped_divide(cute.recast_tensor(mX, cutlass.Uint32), (1, 4))
    _topk_kernel(gX4, mX, mV, mI, vpt, nc, V // VEC, T % ROWS != 0).launch(
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
    if V < K:
        raise ValueError(f"V={V}: a row needs at least {K} elements")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    vpt, nc = _plan(V)
    if nc * vpt * 32 * VEC > 65536:
        raise ValueError(f"V={V}: padded row must fit 16-bit columns in the sort key")
    key = (T, V)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.BFloat16, (T, V), stride_order=(1, 0), assumed_align=16)
        v = make_fake_compact_tensor(cutlass.BFloat16, (T, K), stride_order=(1, 0), assumed_align=16)
        i = make_fake_compact_tensor(cutlass.Int64, (T, K), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_topk_host, x, v, i, stream, vpt, nc, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor) -> None:
        fn(x, values, indices)

    return run

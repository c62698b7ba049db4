"""F12 index_add_rows, CuTe DSL expert solution: out.index_add_(0, idx, src) in place on bf16
rows with repeated indices, every destination element accumulated in fp32 (its old value plus all
its contributions) and rounded to bf16 once.

Memory-bound: src read once, out read and written once (336 MB at the benchmark shape).  No
atomics touch out or any fp32 buffer: the source rows are grouped by destination row (a counting
sort of the S indices), then each destination row's old value and ALL of its sources are summed
in fp32 registers by the one thread that owns that 16-byte column slice, then rounded to bf16
once.  The order inside a bucket is whatever kernel 1's shared-memory atomics give (so not
bit-deterministic across runs, which the statement allows: sums of bf16 values in fp32 are
almost always exact).

Design: one compiled host function launching two kernels on the current stream, the second as a
programmatic dependent launch of the first.
  * Kernel 1, grouping, split by destination-row range over G CTAs of 1024 threads: CTA g owns
    the rows [g * RB, g * RB + RB) (RB = 32 * ceil(R / 1024) clamped to [32, 1024], one counter
    per thread: R = 4096 -> RB = 128, G = 32 CTAs; R = 50 -> 2 CTAs).
      - it first executes griddepcontrol.launch_dependents, so kernel 2's CTAs can be scheduled
        on the ~100 SMs that kernel 1's 32 CTAs leave free while it still runs;
      - every CTA reads ALL of idx (thread tid: idx[tid + 1024 j], coalesced, its <= 32 loads
        all in flight before the first use, kept in registers), but buckets only its own rows:
        for an index in range, a shared-memory atomic_add on the row's counter gives the source
        its slot in the bucket (the returned old count), packed as ((row - lo) << 16 | slot) in
        the same register; for an index below the range, a count;
      - a shuffle block reduction of that count is where the CTA's LIST range starts (base); an
        exclusive scan of its RB counters (warp shuffles, one shared step across the warps)
        gives START[lo + t] = base + prefix[t] (CTA 0 also writes START[R] = S);
      - every source index lands at prefix[row] + slot of a SHARED list, written out to
        LIST[base ..] with coalesced 4-byte stores.
    No cross-CTA communication, no global atomics.  Scratch START (R + 1), LIST (S) int32: made
    on the first call, rewritten in full by every call (each CTA writes its rows of START and
    its range of LIST).
  * Kernel 2, row sums, software-pipelined over RPC = 4 consecutive rows per CTA:
    CTA = (column chunk of NT * 8 columns, NT = min(128, vectors rounded up to a warp); rows
    r0 .. r0 + 3); thread = one 16-byte vector of 8 columns.  Launched with use_pdl: before
    griddepcontrol.wait (which waits for kernel 1 to finish and flush) each thread loads its
    first out row into registers and prefetches the CTA's other 3 out rows into L2
    (prefetch.global.L2): out is an input, independent of kernel 1, so the early CTAs' out
    reads move into kernel 1's time, when DRAM is idle.  START / LIST are read only after the
    wait.  The 4 rows' buckets are one contiguous LIST range [START[r0], START[r0 + 4]), so the
    CTA loads the 5 bounds once and walks the range in batches of U = 8 sources (a batch never
    straddles two rows; an empty row is skipped, neither read nor stored).  While the src loads
    of batch b are in flight, the LIST entries of batch b + 1 (the next U of the same row, else
    the first U of the next row: the position min(pos + U, end of row)) and, once per row, the
    out vector of the next row are loaded too, so per batch a thread waits for one src round
    trip only.  acc = fp32(out[r]); acc += fp32(src[i]) over the bucket; one cvt.rn.bf16x2.f32
    rounding; one 16-byte store.
  * The global loads and stores of kernel 2 are explicit PTX (llvm.inline_asm): src through
    ld.global.nc.L1::no_allocate.v4.b32 (read-only, read once), out through ld/st.global.v4.b32.
    With plain CuTe tensor loads, ptxas interleaves the fp32 adds of the first loads between the
    later loads (checked in the SASS: 3 of the 8 loads in flight, then a stall).  With the .nc
    loads ptxas issues all 8 LDG.128 of a batch and the 8 LIST loads of the next batch before
    the first FADD (checked in the SASS).  80 registers (ptxas -v on the sm_90a PTX).
  * Arithmetic at the benchmark (S = 32768, R = D = 4096): kernel 2 has (4 chunks, 1024 row
    groups) = 4096 CTAs of 128 threads; each moves 4 rows x (8 src + 1 out read + 1 out write) x
    2 KB = 80 KB.  At 80 registers 6 CTAs (768 threads) fit an SM; a batch has ~5.7 sources x
    16 B in flight per thread on average (~41% of Poisson(8) rows need a second batch), ~70-75 KB
    per SM, against the ~35 KB/us x ~1.5 us = ~55 KB that Little's law asks.  The prologue
    (bounds, then the first LIST window: two L2 round trips) is paid once per 4 rows.  The
    programmatic launch removes the kernel boundary (kernel 1's drain, then kernel 2's launch
    and ramp) and moves the ~600 early CTAs' out rows (600 x 4 x 2 KB = 4.9 MB) into kernel 1.
  * Ragged edges: vectors past D / 8 are predicated off; rows past R in the last group get the
    clamped bound START[R] = S (empty); the last batch of a bucket is predicated per source.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream.
Limits (build() raises ValueError): D % 8 == 0, S <= 32768 (kernel 1 keeps ceil(S / 1024) <= 32
sources per thread in registers, and the slot in 16 bits), R <= 32768, (1024 + S + 64) * 4 bytes
of shared memory <= 200 KB, S * D and R * D < 2**31 (32-bit offsets).

Measured on the H200 (full mode):
  * bench/h200/2026-12-02b/tune-r3.json (one judge, back to back): 95.3 us (IQR 1.1); the same
    kernel with an L2 prefetch of the next batch's sources 97.3 us (IQR 1.1).  The previous
    expert (the same two kernels launched plainly) ran 98.7 us (IQR 0.8) 40 minutes earlier on
    the same machine (bench/h200/2026-12-02b/solutions-CF.md).  The estimate for the
    programmatic launch was 2-4 us: it saved 3.4 us.
  * bench/h200/2026-12-02b/solutions-CF-r3.md (`mkb solutions C F`, one run, this code):
    94.9 us (IQR 1.2), 75.9% of the roofline ideal (72.0 us), 9.13x the fastest eager
    formulation, 3.79x torch.compile; the TIRx expert (the same design, launched plainly)
    97.6 us.  The TIRx expert now uses the same programmatic launch, with kernel 1's outputs
    read by explicit ld.global after griddepcontrol.wait (an earlier port read them through
    ld.global.nc, which ptxas hoisted above the wait, and failed the check): 93.8 us in
    bench/h200/2026-12-02c/tune-r4.json; in the one-run table
    bench/h200/2026-12-02c/solutions-CF-r5.md TIRx 94.4 us, this kernel 94.8 us.  Here START and
    LIST are plain CuTe tensor loads: ld.global.b32 in the PTX, LDG.E after ACQBULK in the SASS
    (benchmark build); only src, which kernel 1 never writes, goes through .nc.
  Kernel 2 still runs well below the copy rate (the earlier estimate of ~80-85 us for it was
  not reached); not profiled.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass._mlir.dialects import llvm
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.cutlass_dsl import T, dsl_user_op

try:  # nvidia-cutlass-dsl 4.8: cutlass.memory.SmemAllocator; older: cutlass.utils
    from cutlass.memory import SmemAllocator
except ImportError:  # pragma: no cover
    from cutlass.utils import SmemAllocator

VEC = 8            # bf16 per 128-bit access
NT_SORT = 1024     # threads of the grouping kernel
NT_MAX = 128       # threads of a row-sum CTA at most
U = 8              # sources per batch in the row sums
RPC = 4            # consecutive destination rows per row-sum CTA
K1_CTAS = 32       # grouping CTAs (destination-row ranges) at most, for R <= 32768
MAX_SLOTS = 32     # sources per grouping thread (registers)
MAX_ROWS = 32768   # row << 16 stays positive in an int32
SMEM_LIMIT = 200 * 1024


@cute.kernel
def _group_kernel(
    mIdx: cute.Tensor,          # (S,) int64
    mStart: cute.Tensor,        # (R + 1,) int32 scratch
    mList: cute.Tensor,         # (S,) int32 scratch
    R: cutlass.Constexpr,
    S: cutlass.Constexpr,
    RB: cutlass.Constexpr,      # destination rows per CTA (<= 1024: one counter per thread)
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    lane = cute.arch.lane_idx()
    warp = cute.arch.warp_idx()
    NJ = (S + NT_SORT - 1) // NT_SORT           # sources per thread
    lo = bidx * RB                              # this CTA's rows: [lo, lo + RB)
    # Let the row-sum kernel (launched with use_pdl) be scheduled now: it reads START / LIST only
    # after its griddepcontrol.wait, which waits for this whole grid to finish and flush.
    cute.arch.griddepcontrol_launch_dependents()

    smem = SmemAllocator()
    cnt = smem.allocate_tensor(cutlass.Int32, cute.make_layout(RB), byte_alignment=16)
    lst = smem.allocate_tensor(cutlass.Int32, cute.make_layout(S), byte_alignment=16)
    wsum = smem.allocate_tensor(cutlass.Int32, cute.make_layout(32), byte_alignment=16)
    bsum = smem.allocate_tensor(cutlass.Int32, cute.make_layout(32), byte_alignment=16)
    pk = cute.make_rmem_tensor((NJ,), cutlass.Int32)    # row, then (row - lo) << 16 | slot, or -1

    if tidx < RB:
        cnt[tidx] = cutlass.Int32(0)
    for j in cutlass.range_constexpr(NJ):       # all index loads in flight before any use
        i = tidx + NT_SORT * j
        pk[j] = cutlass.Int32(-1)
        if i < S:
            pk[j] = mIdx[i].to(cutlass.Int32)
    cute.arch.sync_threads()
    below = cutlass.Int32(0)                    # sources of rows below lo
    for j in cutlass.range_constexpr(NJ):
        row = pk[j]
        if row >= lo and row < lo + RB:
            slot = cute.arch.atomic_add(cnt.iterator + (row - lo), cutlass.Int32(1), scope="cta")
            pk[j] = ((row - lo) << 16) | slot
        else:
            if row >= 0 and row < lo:
                below = below + 1
            pk[j] = cutlass.Int32(-1)
    for d in (1, 2, 4, 8, 16):
        below = below + cute.arch.shuffle_sync_bfly(below, d)
    if lane == 0:
        bsum[warp] = below
    cute.arch.sync_threads()

    # Exclusive scan of the RB counters: thread t owns counter t.
    s = cutlass.Int32(0)
    if tidx < RB:
        s = cnt[tidx]
    x = s
    for d in (1, 2, 4, 8, 16):
        y = cute.arch.shuffle_sync_up(x, d)
        if lane >= d:
            x = x + y
    if lane == 31:
        wsum[warp] = x
    cute.arch.sync_threads()
    if warp == 0:
        w0 = wsum[lane]
        w = w0
        for d in (1, 2, 4, 8, 16):
            y = cute.arch.shuffle_sync_up(w, d)
            if lane >= d:
                w = w + y
        wsum[lane] = w - w0                     # exclusive warp prefixes
        b = bsum[lane]
        for d in (1, 2, 4, 8, 16):
            b = b + cute.arch.shuffle_sync_bfly(b, d)
        if lane == 31:
            bsum[0] = b                         # where this CTA's LIST range starts
            bsum[1] = w                         # sources of this CTA's rows
    cute.arch.sync_threads()
    base = bsum[0]
    tot = bsum[1]
    pre = wsum[warp] + x - s
    if tidx < RB:
        cnt[tidx] = pre
        if lo + tidx < R:
            mStart[lo + tidx] = base + pre
    if tidx == 0:
        if bidx == 0:
            mStart[R] = cutlass.Int32(S)
    cute.arch.sync_threads()

    # Fill the shared list, then write this CTA's range of LIST out coalesced.
    for j in cutlass.range_constexpr(NJ):
        p = pk[j]
        if p >= 0:
            lst[cnt[p >> 16] + (p & 0xFFFF)] = tidx + NT_SORT * j
    cute.arch.sync_threads()
    for q in cutlass.range(tidx, tot, NT_SORT, unroll=1):
        mList[base + q] = lst[q]


@dsl_user_op
def _ld_v4(addr: cutlass.Int64, nc: bool, *, loc=None, ip=None) -> list:
    """One 16-byte global load as four 32-bit words (packed bf16 pairs).  Explicit PTX, so that
    ptxas sees the read-only source loads on the non-coherent path (as the TIRx expert's are)."""
    op = "ld.global.nc.L1::no_allocate.v4.b32" if nc else "ld.global.v4.b32"
    res = llvm.inline_asm(
        llvm.StructType.get_literal([T.i32(), T.i32(), T.i32(), T.i32()]),
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        op + " {$0, $1, $2, $3}, [$4];",
        "=r,=r,=r,=r,l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )
    return [cutlass.Uint32(llvm.extractvalue(T.i32(), res, [k], loc=loc, ip=ip)) for k in range(4)]


@dsl_user_op
def _prefetch_l2(addr: cutlass.Int64, *, loc=None, ip=None) -> None:
    """Bring the line holding addr into L2 (no register, no completion to wait for)."""
    llvm.inline_asm(
        None,
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)],
        "prefetch.global.L2 [$0];",
        "l",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


@dsl_user_op
def _st_v4(addr: cutlass.Int64, w0, w1, w2, w3, *, loc=None, ip=None) -> None:
    """One 16-byte global store of four 32-bit words."""
    llvm.inline_asm(
        None,
        [cutlass.Int64(addr).ir_value(loc=loc, ip=ip)]
        + [cutlass.Uint32(w).ir_value(loc=loc, ip=ip) for w in (w0, w1, w2, w3)],
        "st.global.v4.b32 [$0], {$1, $2, $3, $4};",
        "l,r,r,r,r",
        has_side_effects=True,
        loc=loc,
        ip=ip,
    )


@dsl_user_op
def _u32_as_f32(w: cutlass.Uint32, *, loc=None, ip=None) -> cutlass.Float32:
    """Reinterpret the bits of a 32-bit word as fp32."""
    return cutlass.Float32(llvm.bitcast(cutlass.Float32.mlir_type,
                                        cutlass.Uint32(w).ir_value(loc=loc, ip=ip), loc=loc, ip=ip))


@dsl_user_op
def _pack_bf16x2(lo: cutlass.Float32, hi: cutlass.Float32, *, loc=None, ip=None) -> cutlass.Uint32:
    """Round two fp32 values to bf16 (round to nearest even) and pack them, lo in the low half."""
    return cutlass.Uint32(llvm.inline_asm(
        cutlass.Uint32.mlir_type,
        [cutlass.Float32(hi).ir_value(loc=loc, ip=ip), cutlass.Float32(lo).ir_value(loc=loc, ip=ip)],
        "cvt.rn.bf16x2.f32 $0, $1, $2;",
        "=r,f,f",
        has_side_effects=False,
        loc=loc,
        ip=ip,
    ))


@cute.kernel
def _rowsum_kernel(
    mOut: cute.Tensor,          # (R, D) bf16, in place
    mSrc: cute.Tensor,          # (S, D) bf16
    mStart: cute.Tensor,        # (R + 1,) int32
    mList: cute.Tensor,         # (S,) int32
    R: cutlass.Constexpr,
    NV: cutlass.Constexpr,      # 16-byte vectors per row
    NT: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    c = bx * NT + tidx                          # this thread's vector in the row
    r0 = by * RPC
    out_base = mOut.iterator.toint() + cutlass.Int64(c) * 16
    src_base = mSrc.iterator.toint() + cutlass.Int64(c) * 16
    ROWB = NV * 16                              # bytes per row

    st = cute.make_rmem_tensor((RPC + 1,), cutlass.Int32)     # bucket bounds of the 4 rows
    pos = cute.make_rmem_tensor((1,), cutlass.Int32)          # next list position
    li = cute.make_rmem_tensor((U,), cutlass.Int32)           # LIST[pos .. pos + U)
    ov = cute.make_rmem_tensor((4,), cutlass.Uint32)          # out of the next row, ahead
    sv = cute.make_rmem_tensor((4, U), cutlass.Uint32)
    acc = cute.make_rmem_tensor((VEC,), cutlass.Float32)

    if c < NV:
        # Before the PDL wait (out is an input, independent of kernel 1): the first row's out into
        # registers, the other rows' out into L2, while kernel 1 still runs and DRAM is idle.
        w = _ld_v4(out_base + cutlass.Int64(r0) * ROWB, False)
        for q in cutlass.range_constexpr(4):
            ov[q] = w[q]
        for k in cutlass.range_constexpr(1, RPC):
            if r0 + k < R:
                _prefetch_l2(out_base + cutlass.Int64(r0 + k) * ROWB)
    # START / LIST are kernel 1's outputs: wait for that grid (a no-op without PDL).
    cute.arch.griddepcontrol_wait()
    if c < NV:
        # The rows' bounds (one contiguous LIST range), then the first LIST window.
        for k in cutlass.range_constexpr(RPC + 1):
            st[k] = mStart[cutlass.min(r0 + k, R)]
        pos[0] = st[0]
        for u in cutlass.range_constexpr(U):
            li[u] = cutlass.Int32(0)
            if pos[0] + u < st[RPC]:
                li[u] = mList[pos[0] + u]
        for k in cutlass.range_constexpr(RPC):
            # Invariant: pos[0] == st[k], li = LIST[st[k] ..], ov = out[r0 + k].
            e = st[k + 1]
            if pos[0] < e:
                for q in cutlass.range_constexpr(4):
                    acc[2 * q] = _u32_as_f32(ov[q] << 16)
                    acc[2 * q + 1] = _u32_as_f32(ov[q] & 0xFFFF0000)
            if cutlass.const_expr(k + 1 < RPC):
                if r0 + k + 1 < R:             # the next row's out, in flight meanwhile
                    w = _ld_v4(out_base + cutlass.Int64(r0 + k + 1) * ROWB, False)
                    for q in cutlass.range_constexpr(4):
                        ov[q] = w[q]
            if pos[0] < e:
                nb = (e - pos[0] + (U - 1)) // U
                for _jb in cutlass.range(nb, unroll=1):
                    p0 = pos[0]
                    for u in cutlass.range_constexpr(U):
                        if p0 + u < e:
                            w = _ld_v4(src_base + cutlass.Int64(li[u]) * ROWB, True)
                            for q in cutlass.range_constexpr(4):
                                sv[q, u] = w[q]
                    # The next batch starts at min(p0 + U, e): this row's next U sources, else
                    # the first U of the next non-empty row; its LIST entries load meanwhile.
                    p1 = cutlass.min(p0 + U, e)
                    for u in cutlass.range_constexpr(U):
                        if p1 + u < st[RPC]:
                            li[u] = mList[p1 + u]
                    for u in cutlass.range_constexpr(U):
                        if p0 + u < e:
                            for q in cutlass.range_constexpr(4):
                                acc[2 * q] = acc[2 * q] + _u32_as_f32(sv[q, u] << 16)
                                acc[2 * q + 1] = acc[2 * q + 1] + _u32_as_f32(sv[q, u] & 0xFFFF0000)
                    pos[0] = p1
                _st_v4(out_base + cutlass.Int64(r0 + k) * ROWB,
                       _pack_bf16x2(acc[0], acc[1]), _pack_bf16x2(acc[2], acc[3]),
                       _pack_bf16x2(acc[4], acc[5]), _pack_bf16x2(acc[6], acc[7]))


@cute.jit
def _index_add_host(
    mOut: cute.Tensor,
    mIdx: cute.Tensor,
    mSrc: cute.Tensor,
    mStart: cute.Tensor,
    mList: cute.Tensor,
    stream: cuda.CUstream,
    R: cutlass.Constexpr,
    S: cutlass.Constexpr,
    NV: cutlass.Constexpr,
    NT: cutlass.Constexpr,
    NCH: cutlass.Constexpr,
):
    RB = min(NT_SORT, max(32, -(-R // (K1_CTAS * 32)) * 32))
    _group_kernel(mIdx, mStart, mList, R, S, RB).launch(
        grid=[(R + RB - 1) // RB, 1, 1], block=[NT_SORT, 1, 1], stream=stream
    )
    _rowsum_kernel(mOut, mSrc, mStart, mList, R, NV, NT).launch(
        grid=[NCH, (R + RPC - 1) // RPC, 1], block=[NT, 1, 1], stream=stream,
        use_pdl=True,                   # scheduled while kernel 1 runs; see griddepcontrol_wait
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (S, R, D) and return run(out, idx, src)."""
    S = int(spec.dims["S"])
    R = int(spec.dims["R"])
    D = int(spec.dims["D"])
    if D % VEC != 0:
        raise ValueError(f"D={D} must be a multiple of {VEC} (128-bit vectors)")
    if not 1 <= R <= MAX_ROWS:
        raise ValueError(f"R={R} must lie in [1, {MAX_ROWS}] (row << 16 in an int32)")
    if not 1 <= S <= NT_SORT * MAX_SLOTS:
        raise ValueError(f"S={S} must lie in [1, {NT_SORT * MAX_SLOTS}] (sources kept in registers)")
    if (NT_SORT + S + 64) * 4 > SMEM_LIMIT:
        raise ValueError("the grouping kernel's shared counters and list exceed 200 KB")
    if max(S, R) * D >= 2**31:
        raise ValueError("S*D and R*D must stay below 2**31 elements (32-bit static index math)")
    nv = D // VEC
    NT = min(NT_MAX, -(-nv // 32) * 32)
    NCH = -(-nv // NT)
    key = (S, R, D)
    fn = _CACHE.get(key)
    if fn is None:
        out = make_fake_compact_tensor(cutlass.BFloat16, (R, D), stride_order=(1, 0), assumed_align=16)
        idx = make_fake_compact_tensor(cutlass.Int64, (S,), assumed_align=16)
        src = make_fake_compact_tensor(cutlass.BFloat16, (S, D), stride_order=(1, 0), assumed_align=16)
        st = make_fake_compact_tensor(cutlass.Int32, (R + 1,), assumed_align=16)
        ls = make_fake_compact_tensor(cutlass.Int32, (S,), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_index_add_host, out, idx, src, st, ls, stream, R, S, nv, NT, NCH,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn
    scratch: list = []                  # start[R + 1], list[S]: made on the first run

    def run(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> None:
        if not scratch or scratch[0].device != out.device:
            scratch[:] = [torch.empty((R + 1,), dtype=torch.int32, device=out.device),
                          torch.empty((S,), dtype=torch.int32, device=out.device)]
        fn(out, idx, src, scratch[0], scratch[1])

    return run

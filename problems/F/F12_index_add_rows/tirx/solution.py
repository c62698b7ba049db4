"""F12 index_add_rows, TIRx (tvm_tirx 0.1.0a4) expert solution: out.index_add_(0, idx, src) in
place on bf16 rows with repeated indices, every destination element accumulated in fp32 (its old
value plus all its contributions) and rounded to bf16 once.

Memory-bound: src read once, out read and written once (336 MB at the benchmark shape S = 32768,
R = D = 4096). No atomics touch out and there is no fp32 accumulator tensor: the source rows are
grouped by destination (a counting sort of the S indices), then each destination row's old value
and ALL of its sources are summed in fp32 registers by the one thread that owns that 16-byte
column slice. The order inside a bucket is whatever kernel 1's shared-memory atomics give (so not
bit-deterministic across runs, which the statement allows: sums of bf16 values in fp32 are
almost always exact).

* Kernel 1 (``index_add_lists``), grouping, split by destination-row range over G CTAs of 1024
  threads: CTA g owns the rows [g * RB, g * RB + RB) (RB = 32 * ceil(R / 1024) clamped to
  [32, 1024], one counter per thread: R = 4096 -> RB = 128, G = 32; R = 50 -> 2 CTAs). It first
  executes griddepcontrol.launch_dependents, so kernel 2's CTAs can be scheduled on the SMs it
  leaves free. Every CTA reads ALL of idx (the low 32-bit word of each int64, coalesced, its
  <= 32 loads per thread all in flight before any atomic) but buckets only its own rows: for an
  index in range, a slot from a shared-memory ``atomicAdd`` on the row's counter (the returned
  old count), kept as ((row - lo) << 16 | slot) in a register; for an index below the range, a
  count. A shuffle block reduction of that count is where the CTA's LIST range starts (base); an
  exclusive scan of its RB counters (a shuffle scan per warp, one shared step across the warps)
  gives START[lo + t] = base + prefix[t] (CTA 0 also writes START[R] = S); every source index
  lands at prefix[row] + slot of a shared list, written out to LIST[base ..] coalesced. No
  cross-CTA communication, no global atomics. Scratch START (R + 1), LIST (S), int32: made on
  the first call, rewritten in full by every call.
* Kernel 2 (``index_add_rows``), software-pipelined over RPC = 4 consecutive destination rows per
  CTA: CTA = (column chunk of up to 128 16-byte vectors, rows r0 .. r0 + 3), one thread per
  vector; D = 4096: (4, 1024) = 4096 CTAs of 128 threads. It is a programmatic dependent launch
  (programmatic_stream_serialization): before griddepcontrol.wait (which waits for the whole of
  kernel 1 to complete and flush, not for its trigger) each thread loads its first out row into
  registers and prefetches the CTA's other 3 out rows into L2 (prefetch.global.L2): out is an
  input, independent of kernel 1, so the early CTAs' out reads move into kernel 1's time, when
  DRAM is idle. The 4 rows' buckets are ONE contiguous LIST range [START[r0], START[r0 + 4]), so
  the CTA loads the 5 bounds once, after the wait, and walks the range in batches of U = 8
  sources (a batch never straddles two rows; an empty row is skipped, neither read nor stored).
  In one batch a thread issues its <= 8 ``ld.global.nc.L1::no_allocate.v4`` src loads and,
  before any use, the LIST entries of the NEXT batch (from min(pos + 8, end of row): this row's
  next 8 sources, else the next row's first 8) and, once per row, the out vector of the next row
  (``ld.global.v4``); then the fp32 adds, one rounding per pair (``cvt.rn.bf16x2.f32``), one
  ``st.global.v4.b32`` per row.
* START / LIST are read with explicit ``ld.global.b32`` (weak, coherent, not .nc). An earlier
  port (v5) read them as plain TIRx buffer loads; the parameters are ``int* __restrict__`` and
  never written by kernel 2, so NVRTC emitted ld.global.nc, and ptxas moved those loads ABOVE
  griddepcontrol.wait (ACQBULK in the SASS). Under PDL kernel 2 runs while kernel 1 still
  writes, so they saw the previous call's START: the row boundaries of the previous idx with
  this call's LIST. It failed the `hot` shape set (S = 8192, R = 4, D = 256) on the H200 in
  trial 1 (49 of 1024 elements, off by 72); trial 0 passed because it is the judge's checked
  call, and trial 1 is the first call where the two kernels overlapped. A CPU emulation (stale
  START[0, 1, 2, 4], fresh START[3] and LIST) gives 0-229 of 1024 elements beyond tolerance,
  worst errors 14-74 per seed: the size of that failure.
* SASS of kernel 2 (NVRTC + ptxas, sm_90a, all four shape sets): the only load before ACQBULK is
  the out vector (LDG.E.128, plus the three L2 prefetches, CCTL.E.PF2); every START / LIST load
  comes after it. The 8 src LDG.128 of a batch and the 8 LIST loads of the next one are all
  issued before the first FADD; 80 registers, so 6 CTAs (768 threads) per SM with ~6 sources x
  16 B in flight per thread, ~75 KB per SM against the ~55 KB Little's law asks (35 KB/us per SM
  x ~1.5 us loaded latency). The LIST loads go through L1 (LDG.E, one address per warp).
* Ragged edges: vectors past D / 8 (D = 1000: 125 of 128 threads) do nothing; rows past R in
  the last group (R = 50: rows 48, 49 + two phantom rows) get the clamped bound START[R] = S
  (empty); the last batch of a bucket is predicated per source; R, S need no alignment.
* Limits (asserted): D % 8 == 0, S <= 32768 (kernel 1 keeps 32 sources per thread in
  registers), R <= 32768 (the row in the upper 16 bits of a packed int32 slot stays positive),
  (1024 + S + 64) * 4 bytes of shared memory <= 200 KB, S * D and R * D < 2^31 (int32 indexing).
* Host path: build() compiles both kernels for the static (S, R, D) of a shape set (sm_90a);
  run(out, idx, src) launches kernel 1 then kernel 2 on the same stream.

Measured on the H200 (bench/h200/2026-12-02c/tune-r4.json, full mode, one judge, every check
shape and the secret output checks passed): 93.8 us (IQR 1.3), 76.8% of the roofline ideal
(72.0 us); the previous TIRx expert (the same two kernels launched plainly) 97.6 us in
bench/h200/2026-12-02b/solutions-CF-r3.md, the CuTe expert (the same PDL design) 94.9 us there.
Earlier steps (bench/h200/2026-12-02/diag-wake200.json): splitting kernel 1 over 32 CTAs saved
5.4 us against a one-CTA grouping (which serializes 32768 shared atomics and the list fill on
one SM before kernel 2 can start); the 4-row pipelining of kernel 2 by itself measured no gain
over one-row CTAs (102.4 vs 100.7 us), and kernel 2 still runs well below the copy rate (not
profiled). A one-run table with this code: bench/h200/2026-12-02c (section 3).
"""
import torch
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
K1_THREADS = 1024
K1_WARPS = K1_THREADS // 32
K1_CTAS = 32  # kernel-1 CTAs (destination-row ranges) at most, for R <= 32768
MAX_SLOTS = 32  # sources per kernel-1 thread (packed in registers)
MAX_THREADS = 128  # threads of a kernel-2 CTA
U = 8  # sources loaded per batch in kernel 2
RPC = 4  # consecutive destination rows per kernel-2 CTA
SMEM_LIMIT = 200 * 1024
FULL = 0xFFFFFFFF
OUT_LOAD = "ld.global.v4.b32"  # out is written by the same thread later: not the nc path
SRC_LOAD = "ld.global.nc.L1::no_allocate.v4.b32"  # src is read once
ST_V4 = "st.global.v4.b32"
PREFETCH = "prefetch.global.L2"  # a line into L2: no register, no completion
# START / LIST (kernel 1's outputs) through a plain coherent load, never ld.global.nc: ptxas
# hoists .nc loads above griddepcontrol.wait (the cause of v5's wrong sums, see the docstring)
LD32 = "ld.global.b32"


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def make_lists(rows: int, srcs: int):
    """Kernel 1: bucket starts START[0..R] and the source indices grouped by destination, LIST.
    CTA g owns the destination rows [g * RB, g * RB + RB): it reads all of idx, buckets only its
    own rows, and finds where its LIST range begins by counting the sources of lower rows."""
    R = rows
    S = srcs
    NJ = -(-S // K1_THREADS)  # sources per thread
    S_FULL = S % K1_THREADS == 0
    RB = min(K1_THREADS, max(32, -(-R // (K1_CTAS * 32)) * 32))  # rows per CTA, one per thread
    G = -(-R // RB)
    RB_FULL = R % RB == 0

    @T.function
    def index_add_lists(
        IDX: T.Tensor((S,), "int64"),
        START: T.Tensor((R + 1,), "int32"),
        LIST: T.Tensor((S,), "int32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=G, block=K1_THREADS))
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        lo = T.cuda.block_idx("x") * RB
        pool = SMEMPool()
        cnt = pool.alloc((RB,), "int32", align=16)  # counts, then bucket starts (local)
        lst = pool.alloc((S,), "int32", align=16)
        wsum = pool.alloc((K1_WARPS,), "int32", align=16)
        bsum = pool.alloc((K1_WARPS,), "int32", align=16)
        pool.commit()
        # idx as 32-bit words: the low word of each int64 (0 <= idx < R < 2^31, little-endian)
        idw = T.decl_tensor(IDX.data, ty_args=[T.Tensor((2 * S,), "int32")])
        pk = T.alloc_local((NJ,), "int32")  # row, then (row - lo) << 16 | slot, or -1
        loc = T.alloc_local((1,), "int32")
        inc = T.alloc_local((1,), "int32")
        tmp = T.alloc_local((1,), "int32")
        blw = T.alloc_local((1,), "int32")  # sources of rows below lo, then the CTA's LIST base
        tot = T.alloc_local((1,), "int32")  # sources of this CTA's rows

        # let the row kernel (PDL) be scheduled now; it reads START / LIST only after
        # griddepcontrol.wait, which waits for this whole grid to finish
        T.ptx.griddepcontrol.launch_dependents()
        if tid < RB:
            cnt[tid] = 0
        for j in T.unroll(NJ):  # all index loads in flight before the atomics
            pk[j] = -1
            if S_FULL or tid + K1_THREADS * j < S:
                pk[j] = idw[2 * (tid + K1_THREADS * j)]
        T.cuda.cta_sync()
        blw[0] = 0
        for j in T.unroll(NJ):
            if pk[j] >= lo and pk[j] < lo + RB:
                pk[j] = ((pk[j] - lo) << 16) | T.cuda.atomic_add(cnt.ptr_to([pk[j] - lo]), 1)
            else:
                if pk[j] >= 0 and pk[j] < lo:
                    blw[0] = blw[0] + 1
                pk[j] = -1
        for d in T.unroll(5):
            blw[0] = blw[0] + T.cuda.__shfl_xor_sync(T.uint32(FULL), blw[0], 1 << d, 32)
        if lane == 0:
            bsum[warp] = blw[0]
        T.cuda.cta_sync()

        # exclusive scan of the RB counters: thread tid owns counter tid
        loc[0] = 0
        if tid < RB:
            loc[0] = cnt[tid]
        inc[0] = loc[0]
        for d in T.unroll(5):
            tmp[0] = T.cuda.__shfl_up_sync(T.uint32(FULL), inc[0], 1 << d, 32)
            if lane >= (1 << d):
                inc[0] = inc[0] + tmp[0]
        if lane == 31:
            wsum[warp] = inc[0]
        T.cuda.cta_sync()
        if warp == 0:
            tmp[0] = wsum[lane]
            for d in T.unroll(5):
                blw[0] = T.cuda.__shfl_up_sync(T.uint32(FULL), tmp[0], 1 << d, 32)
                if lane >= (1 << d):
                    tmp[0] = tmp[0] + blw[0]
            wsum[lane] = tmp[0]  # inclusive warp totals
            blw[0] = bsum[lane]
            for d in T.unroll(5):
                blw[0] = blw[0] + T.cuda.__shfl_xor_sync(T.uint32(FULL), blw[0], 1 << d, 32)
            if lane == 0:
                bsum[0] = blw[0]  # sources of rows below lo: where this CTA's LIST range starts
        T.cuda.cta_sync()
        blw[0] = bsum[0]
        tot[0] = wsum[K1_WARPS - 1]
        # the thread's exclusive prefix: earlier warps + earlier lanes of this warp
        tmp[0] = inc[0] - loc[0]
        if warp > 0:
            tmp[0] = tmp[0] + wsum[warp - 1]
        if tid < RB:
            cnt[tid] = tmp[0]
            if RB_FULL or lo + tid < R:
                START[lo + tid] = blw[0] + tmp[0]
        if tid == 0 and lo == 0:
            START[R] = S
        T.cuda.cta_sync()
        for j in T.unroll(NJ):
            if pk[j] >= 0:
                lst[cnt[pk[j] >> 16] + (pk[j] & 0xFFFF)] = tid + K1_THREADS * j
        T.cuda.cta_sync()
        for q in T.serial(tid, tot[0], step=K1_THREADS):
            LIST[blw[0] + q] = lst[q]

    return index_add_lists


def make_rows(rows: int, srcs: int, dim: int):
    """Kernel 2: rows r0 .. r0 + RPC - 1 of one column chunk per CTA, software-pipelined:
    out[r] = bf16(fp32(out[r]) + sum of src[LIST[START[r]:START[r + 1]]])."""
    R = rows
    S = srcs
    D = dim
    NV = dim // VEC
    THREADS = min(MAX_THREADS, -(-NV // 32) * 32)
    NCH = -(-NV // THREADS)
    C_FULL = NV % THREADS == 0
    NG = -(-R // RPC)
    R_FULL = R % RPC == 0

    @T.function
    def index_add_rows(
        OUT: T.Tensor((R, D), T.bfloat16),
        SRC: T.Tensor((S, D), T.bfloat16),
        START: T.Tensor((R + 1,), "int32"),
        LIST: T.Tensor((S,), "int32"),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=(NCH, NG), block=THREADS, programmatic_stream_serialization=True)
        )
        c = T.cuda.block_idx("x") * THREADS + T.cuda.thread_idx("x")
        r0 = T.cuda.block_idx("y") * RPC
        st = T.alloc_local((RPC + 1,), "int32")  # bucket bounds of the CTA's RPC rows
        pos = T.alloc_local((2,), "int32")  # [0]: next list position, [1]: the batch after it
        li = T.alloc_local((U,), "int32")  # LIST[pos .. pos + U): the next batch's sources
        ov = T.alloc_local((4,), "uint32")  # out[row] of the next row, in flight ahead
        pk = T.alloc_local((4,), "uint32")
        sv = T.alloc_local((U * 4,), "uint32")
        acc = T.alloc_local((VEC,), "float32")
        if C_FULL or c < NV:
            # before the PDL wait (out is an input, independent of kernel 1): the first row's out
            # into registers, the other rows' out into L2, while kernel 1 runs and DRAM is idle
            T.ptx[OUT_LOAD](ov[0], ov[1], ov[2], ov[3], OUT.ptr_to([r0, c * VEC]))
            for k in T.unroll(1, RPC):
                if R_FULL or r0 + k < R:
                    T.ptx[PREFETCH](OUT.ptr_to([r0 + k, c * VEC]))
        # START / LIST are kernel 1's outputs: wait for that grid (a no-op without PDL)
        T.ptx.griddepcontrol.wait()
        if C_FULL or c < NV:
            # the group's bucket bounds (one contiguous LIST range), then the first LIST window
            for k in T.unroll(RPC + 1):
                if R_FULL:
                    T.ptx[LD32](st[k], START.ptr_to([r0 + k]))
                else:
                    T.ptx[LD32](st[k], START.ptr_to([T.min(r0 + k, R)]))
            pos[0] = st[0]
            for u in T.unroll(U):
                if pos[0] + u < st[RPC]:
                    T.ptx[LD32](li[u], LIST.ptr_to([pos[0] + u]))
            for k in T.unroll(RPC):
                # invariant: pos[0] == st[k], li = LIST[st[k] ..], ov = out[r0 + k]
                if pos[0] < st[k + 1]:
                    for w in T.unroll(4):
                        acc[2 * w] = _lo(ov[w])
                        acc[2 * w + 1] = _hi(ov[w])
                if k + 1 < RPC:  # the next row's out, in flight during this row's batches
                    if R_FULL or r0 + k + 1 < R:
                        T.ptx[OUT_LOAD](ov[0], ov[1], ov[2], ov[3], OUT.ptr_to([r0 + k + 1, c * VEC]))
                if pos[0] < st[k + 1]:
                    for jb in T.serial(T.truncdiv(st[k + 1] - st[k] + (U - 1), U)):
                        for u in T.unroll(U):
                            if pos[0] + u < st[k + 1]:
                                T.ptx[SRC_LOAD](sv[4 * u], sv[4 * u + 1], sv[4 * u + 2], sv[4 * u + 3],
                                                SRC.ptr_to([li[u], c * VEC]))
                        # the next batch (this row's next U, else the next non-empty row's first U)
                        # starts at min(pos + U, end of row): its LIST entries load beside the sources
                        pos[1] = T.min(pos[0] + U, st[k + 1])
                        for u in T.unroll(U):
                            if pos[1] + u < st[RPC]:
                                T.ptx[LD32](li[u], LIST.ptr_to([pos[1] + u]))
                        for u in T.unroll(U):
                            if pos[0] + u < st[k + 1]:
                                for w in T.unroll(4):
                                    acc[2 * w] = acc[2 * w] + _lo(sv[4 * u + w])
                                    acc[2 * w + 1] = acc[2 * w + 1] + _hi(sv[4 * u + w])
                        pos[0] = pos[1]
                    for w in T.unroll(4):
                        T.ptx.cvt.rn.bf16x2.f32(pk[w], acc[2 * w + 1], acc[2 * w])
                    T.ptx[ST_V4](OUT.ptr_to([r0 + k, c * VEC]), pk[0], pk[1], pk[2], pk[3])

    return index_add_rows


def build(spec):
    """Compile both kernels for spec's static (S, R, D); return run(out, idx, src)."""
    srcs = int(spec.dims["S"])
    rows = int(spec.dims["R"])
    dim = int(spec.dims["D"])
    assert dim % VEC == 0, "D must be a multiple of 8"
    assert srcs <= K1_THREADS * MAX_SLOTS, "S <= 32768 (kernel 1 keeps 32 sources per thread)"
    assert rows <= 32768, "R <= 32768 (the row in the upper 16 bits of a packed int32 slot stays positive)"
    assert (K1_THREADS + srcs + 2 * K1_WARPS) * 4 <= SMEM_LIMIT, "kernel 1's shared lists too large"
    assert srcs * dim < 2**31 and rows * dim < 2**31, "int32 indexing"
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex1 = tvm_tirx.tirx.compile(make_lists(rows, srcs), target=target)
    ex2 = tvm_tirx.tirx.compile(make_rows(rows, srcs, dim), target=target)
    lists = ex1["index_add_lists"]
    add_rows = ex2["index_add_rows"]
    scratch = []  # START [R + 1], LIST [S] (int32), made on the first call

    def run(out, idx, src):
        if not scratch:
            scratch.append(torch.empty((rows + 1,), dtype=torch.int32, device=out.device))
            scratch.append(torch.empty((srcs,), dtype=torch.int32, device=out.device))
        lists(idx, scratch[0], scratch[1])
        add_rows(out, src, scratch[0], scratch[1])

    run.modules = (ex1, ex2)  # keep the compiled modules alive with the launchers
    return run

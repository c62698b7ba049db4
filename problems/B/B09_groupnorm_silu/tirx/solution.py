"""B09 groupnorm_silu, TIRx (tvm_tirx 0.1.0a4) expert solution: y = silu(group_norm(x) * w + b);
PERSISTENT thread-block clusters, each looping over (sample, group) rows with the next row's
chunk prefetched into shared memory by bulk copies; one-pass shifted chunk statistics; SiLU
through one hardware tanh (tanh.approx.f32).

x, y: fp16 NCHW; w, b: fp16 [C]; 32 groups of C / 32 consecutive channels; fp32 math; one read
of x and one write of y (the memory-bound minimum). Group gi = n * 32 + g is one contiguous block
of GE = (C / 32) * H * W elements, GV = GE / 8 16-byte vectors, split over a cluster of K CTAs:
CTA rank r holds chunk r of CH vectors, vector j of a thread being r * CH + j * THREADS + tid
(a warp access covers 512 contiguous bytes). plan(): the smallest power-of-two K that holds the
group at 8 vectors per thread, raised toward 4 where every chunk keeps >= 32 vectors (benchmark
K = 8, CH = 4096 vectors = 64 KB, 512 threads x 8 vectors, 32 data registers).

Launch protocol: every call launches the same two kernels: a one-warp kernel zeroes the ticket
counters and at once executes griddepcontrol.launch_dependents; the main kernel runs with
programmatic stream serialization, and its only counter user (rank 0, thread 0) executes
griddepcontrol.wait first. Nothing carries over between calls (a version that zeroed the
counters on the first call only was rejected by the judge as `kernel_set_changed`). Counters:
allocated in build() when a GPU is visible, else on the first call.

Design
  * Grid = NCL clusters of K CTAs, NCL = min(2 * SMs / K, ceil(groups / 4)) (benchmark 33
    clusters, 2 CTAs per SM, min_blocks_per_sm = 2, 64 registers). Each cluster loops over groups
    drawn from a global ticket counter (atomicAdd by rank 0, thread 0, two iterations ahead), so
    the work is balanced however many clusters the GPCs hold; a cluster stops after its first
    ticket >= groups. Prologue: ONE atomicAdd of 2 draws the first two tickets (one L2 round trip
    before the first load) into rank 0's shared memory; one cluster barrier; every CTA reads
    them over DSMEM.
  * Per CTA and iteration: the current chunk in registers; the NEXT group's chunk in flight into
    a 64 KB stage (4 cp.async.bulk of 16 KB, complete_tx on an mbarrier), issued a whole
    iteration before use. Iteration 0's chunk is read straight into registers (ld.global.nc.v4)
    while iteration 1's bulk copy fills the stage.
  * Chunk statistics in ONE register pass around k = the chunk's first element (a value of the
    data, so |mean - k| is a few std whatever the offset of x; a scalar load of x in iteration 0,
    the low half of xs[0] after the stage's mbarrier wait later): S1 = sum (x - k), S2 = sum
    (x - k)^2 in fp32 (balanced tree per 8-value vector, accumulated vector by vector), ONE
    two-value block reduction (5-step warp butterflies, one shared step, ONE cta_sync, a
    log2(WARPS)-step butterfly), then sum = n k + S1, M2 = max(S2 - S1^2 / n, 0). Cancellation
    costs a factor 1 + (mean - k)^2 / var (~26 for a 5-sigma k) of fp32's 2^-24: ~1e-6 relative.
  * Exchange: (sum, M2, ticket of iteration + 2) pushed to every CTA of the cluster with st.async
    (complete_tx on a per-parity mbarrier; no barrier.cluster.arrive.release, whose MEMBAR.GPU
    would wait for the previous iteration's stores); exact Chan merge, M2 = sum M2_l +
    n_l (mean_l - mean)^2. A final cluster barrier keeps rank 0's ticket slots alive.
  * Apply: rstd = rsqrt(M2 / GE + eps), folded a = rstd * w[c], s = b[c] - mean * a, then
    h = v / 2 = x (a / 2) + s / 2 (one FFMA) and silu(v) = v sigmoid(v) = h + h tanh(h): one
    MUFU.TANH and one FFMA per element instead of FMUL, MUFU.EX2, FADD, MUFU.RCP, FMUL (half the
    MUFU work); one rounding per pair (cvt.rn.f16x2.f32), st.global.v4.b32. w / b: read at the
    top of the iteration, one load per distinct channel when the chunk holds whole channels
    (benchmark: 2 channels per chunk).
  * Registers: the chunk stays packed (32 registers); the statistics and apply phases convert
    (x ^ zz[p]), zz[p] = 0 re-read from shared memory after a barrier (zz[0] and zz[2]; zz[1]
    served a second statistics pass that no longer exists), so ptxas cannot merge the fp16 ->
    fp32 conversions of the two phases (merged, it spilled ~520 B per thread).
  * Ragged chunks (GV not a multiple of CH): slots past the chunk end are neither loaded nor
    stored, hold zeros and are masked out of S1 and S2 (they would add -k each); counts are exact
    per chunk. Check shapes: the small one K = 1 (no cluster), the ragged one K = 4 chunks of
    38 vectors.
  * SASS (NVRTC PTX -> ptxas 13.0 -v, sm_90a, benchmark kernel): 64 registers, 0 spill, 1160
    instructions against 1344 for the same kernel with the exact SiLU and 1488 for the previous
    expert (two statistics passes): MUFU 131 -> 67 (64 TANH), HADD2.F32 196 -> 134, BAR.SYNC
    7 -> 4; ~5 instructions per element fewer.
  * Host path: build() compiles both kernels for sm_90a (static N, C, H, W); run() launches the
    zeroing kernel, then the main kernel, on the torch tensors.
Numerics: statistics emulated in fp32 against an fp64 truth at every shape set, offsets up to
0.5 (167 std), scales 0.5-2: mean error <= 2e-5 std, rstd relative error <= 5e-7. SiLU: the
~1.1e-5 maximum relative error of tanh.approx.f32 is a public measurement (N. Juffa, NVIDIA
developer forums, 2021), not an error bound documented by NVIDIA; y's error from it is |h| dt.
So the CPU emulation (torch, every shape set, these statistics) perturbed tanh by 2^-11 relative
(~45x that figure, either sign): worst |y - ref| / tol 0.69 (0.15 with an exact tanh;
tol = 2e-3 + 6e-3 |y|); most negative v seen -6.1. Checked in Python: the shift's index for
every chunk and shape set; the +2 first draw (1..299 groups, 1..33 clusters: each group once).
Limits (asserted): GE <= 8 * 512 * 8 * 8 = 262144, H * W % 8 == 0, N * C * H * W < 2^31.

Measured on the H200 (full mode, one judge; the tune run's JSON did not come back from the
machine, its verdicts and medians are in bench/h200/2026-12-02c/adopt-r5.txt and
bench/h200/2026-12-02c/logs/call7-tune-B-solutions-AB-copyceiling-job.log): 74.4 us (IQR 1.5)
against 83.9 us for the previous expert; in the same run this kernel with the exact ex2 +
division SiLU ran 79.4 us (IQR 1.7): the tanh SiLU saved ~5 us, the one-pass statistics and
single prologue atomic ~4.5 us. The arithmetic estimate was 74-78 us. In the one-run table
bench/h200/2026-12-02c/solutions-AB-r5.md: 74.3 us (IQR 1.3), 77.4% of the 57.5 us roofline
ideal, 6.14x eager, 2.30x torch.compile, 1.13x faster than the previous expert; the CuTe expert
(same design) 74.7 us.
Both B09 experts (~74.5 us, 77% of the ideal) are still below 80% of the ideal.
Why it helped: the loads have a whole iteration of lead, so an iteration (~10.5 us before,
256 KB of DRAM traffic per SM = 8 us at the copy rate) was set by each CTA's serial chain
(stats -> barriers -> exchange -> apply -> stores -> stage copy -> barrier; not profiled), which
fewer barriers, MUFU ops and instructions shorten. One CTA of 1024 threads per SM ran 112.0 us
(bench/h200/2026-12-02c/tune-r4.json): hence two of 512.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # fp16 per 16-byte vector
VPT_TARGET = 8  # vectors per thread aimed for (64 elements, 128 bytes of x per thread)
MAX_THREADS = 512
MAX_CLUSTER = 8  # portable cluster size
MIN_SPLIT = 4  # CTAs per group for groups too small to need splitting (exercises the merge)
MIN_CHUNK = 32  # ... as long as every chunk keeps at least this many vectors
CTAS_PER_SM = 2  # __launch_bounds__(512, 2): 64 registers; 2 x ~65 KB of shared memory
MIN_ITERS = 4  # at most groups / 4 clusters: several iterations per cluster
N_BULK = 4  # bulk copies per stage fill (benchmark: 4 x 16 KB)
DEFAULT_SMS = 132  # H200; used when no GPU is visible at build time
X_LOAD = "ld.global.nc.v4.b32"  # read-only path, no L1::no_allocate (faster on the H200)
Y_STORE = "st.global.v4.b32"

# CUDA device helpers, one source string per function (identical strings clash in TIRx).
H2F_LO = r"""
__device__ __forceinline__ float mkb_g9v10_h2f_lo(unsigned int w) {
  float f;
  asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, l;}" : "=f"(f) : "r"(w));
  return f;
}
"""
H2F_HI = r"""
__device__ __forceinline__ float mkb_g9v10_h2f_hi(unsigned int w) {
  float f;
  asm("{.reg .b16 l, h; mov.b32 {l, h}, %1; cvt.f32.f16 %0, h;}" : "=f"(f) : "r"(w));
  return f;
}
"""
TICKET = r"""
__device__ __forceinline__ int mkb_g9v10_ticket(int* ctr) {
  return atomicAdd(ctr, 1);
}
"""
# two consecutive tickets with one atomic (the prologue's draw: one L2 round trip, not two)
TICKET2 = r"""
__device__ __forceinline__ int mkb_g9v10_ticket2(int* ctr) {
  return atomicAdd(ctr, 2);
}
"""
# Programmatic dependent launch: the main kernel waits for the zeroing kernel (its grid done and
# its writes visible) before its first ticket draw; the zeroing kernel lets it start at once.
GDC_WAIT = r"""
__device__ __forceinline__ void mkb_g9v10_gdc_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
"""
GDC_LAUNCH = r"""
__device__ __forceinline__ void mkb_g9v10_gdc_launch() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
"""
# silu(v) = h + h tanh(h), h = v / 2: one MUFU.TANH (measured max relative error ~1.1e-5)
TANH = r"""
__device__ __forceinline__ float mkb_g9v10_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
"""
BULK = r"""
__device__ __forceinline__ void mkb_g9v10_bulk(unsigned int dst, const void* src,
                                              unsigned int bytes, unsigned int bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
"""
MBAR_FENCE = r"""
__device__ __forceinline__ void mkb_g9v10_mbar_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
"""
# 16 bytes from registers into CTA `rank`'s shared memory (at the offset of local `dst`),
# completing 16 transaction bytes on CTA `rank`'s mbarrier (at the offset of local `bar`).
ST_ASYNC = r"""
__device__ __forceinline__ void mkb_g9v10_st_async(unsigned int dst, unsigned int a,
                                                  unsigned int b, unsigned int c, unsigned int d,
                                                  unsigned int bar, unsigned int rank) {
  unsigned int rd, rb;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rd) : "r"(dst), "r"(rank));
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(rb) : "r"(bar), "r"(rank));
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
               :: "r"(rd), "r"(a), "r"(b), "r"(c), "r"(d), "r"(rb) : "memory");
}
"""
# int32 at shared address `a` (this CTA's window) in the CTA of cluster rank `rank`.
DSMEM_LD = r"""
__device__ __forceinline__ int mkb_g9v10_dsmem_ld(unsigned int a, unsigned int rank) {
  unsigned int r;
  int v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.s32 %0, [%1];" : "=r"(v) : "r"(r) : "memory");
  return v;
}
"""
CLUSTER_SYNC = r"""
__device__ __forceinline__ void mkb_g9v10_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
"""
CLUSTER_SYNC_RELAXED = r"""
__device__ __forceinline__ void mkb_g9v10_cluster_sync_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
  asm volatile("barrier.cluster.wait.aligned;" ::: "memory");
}
"""


def _lo(w):
    """fp32 value of the low fp16 of a packed pair."""
    return T.cuda.func_call("mkb_g9v10_h2f_lo", w, H2F_LO, ty="float32")


def _hi(w):
    """fp32 value of the high fp16 of a packed pair."""
    return T.cuda.func_call("mkb_g9v10_h2f_hi", w, H2F_HI, ty="float32")


def _tanh(x):
    """tanh.approx.f32 of an fp32 expression."""
    return T.cuda.func_call("mkb_g9v10_tanh", x, TANH, ty="float32")


def _smem(p):
    """32-bit shared-window address of a shared-memory element pointer."""
    return T.cuda.cvta_generic_to_shared(p)


def _tree(vals):
    """Balanced sum of a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def plan(gv: int):
    """(K CTAs per cluster/group, CH vectors per chunk, threads, vectors per thread) for gv:
    the smallest power-of-two K whose CTAs hold the group at VPT_TARGET vectors per thread,
    raised toward MIN_SPLIT (a power of two) where the group has enough MIN_CHUNK chunks."""
    k = 1
    while k * MAX_THREADS * VPT_TARGET < gv:
        k *= 2
    if k > MAX_CLUSTER:
        raise ValueError(f"a group of {gv} vectors does not fit one cluster of {MAX_CLUSTER} CTAs")
    if k < MIN_SPLIT:
        k = max(1, min(MIN_SPLIT, gv // MIN_CHUNK))
        while k & (k - 1):  # power of two
            k -= 1
    ch = -(-gv // k)
    threads = -(-ch // VPT_TARGET)
    warps = 1  # power-of-two warp count (cta_reduce needs it)
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-ch // threads)
    assert vpt <= VPT_TARGET
    assert (k - 1) * ch < gv, "every chunk must be non-empty"
    return k, ch, threads, vpt


def n_clusters(ng: int, k: int, sms: int) -> int:
    """Clusters launched: all that 2 CTAs per SM hold, at most one per MIN_ITERS groups."""
    return max(1, min(sms * CTAS_PER_SM // k, -(-ng // MIN_ITERS)))


def make_kernel(n_: int, c_: int, h_: int, w_: int, groups: int, eps: float, sms: int):
    """Persistent GroupNorm + SiLU cluster kernel for a static NCHW fp16 shape."""
    assert c_ % groups == 0, "C must be a multiple of groups"
    assert (h_ * w_) % VEC == 0, "H * W must be a multiple of 8"
    assert n_ * c_ * h_ * w_ < 2**31, "int32 indexing"
    CPG = c_ // groups
    HWV = h_ * w_ // VEC  # vectors per channel plane
    GE = CPG * h_ * w_  # elements per group
    GV = GE // VEC  # vectors per group
    NG = n_ * groups  # (sample, group) pairs
    K, CH, THREADS, VPT = plan(GV)
    NCL = n_clusters(NG, K, sms)
    MULTI = K > 1
    CLUSTER = K if MULTI else None  # one CTA per group: a plain launch
    WARPS = THREADS // 32
    WARPS_LOG2 = WARPS.bit_length() - 1  # WARPS is a power of two
    ALL_FULL = K * CH == GV  # every chunk holds exactly CH vectors
    FULL = CH // THREADS if ALL_FULL else 0  # slots valid for every thread of every chunk
    INV_GE = 1.0 / GE
    # whole channels per chunk, every slot valid: vector j of every thread lies in channel
    # rank * (CH / HWV) + (j * THREADS) // HWV: one w / b load per distinct channel
    UNIFORM = ALL_FULL and CH % HWV == 0 and FULL == VPT and HWV % THREADS == 0
    NOFF = ((VPT - 1) * THREADS) // HWV + 1 if UNIFORM else 1  # channels in a chunk (0 .. NOFF-1)
    BULK_SPLIT = N_BULK if (ALL_FULL and CH % N_BULK == 0) else 1
    N, C, H, W = n_, c_, h_, w_

    @T.function
    def groupnorm_silu_persistent(
        X: T.Tensor((N, C, H, W), "float16"),
        Wt: T.Tensor((C,), "float16"),
        Bs: T.Tensor((C,), "float16"),
        Y: T.Tensor((N, C, H, W), "float16"),
        Ctr: T.Tensor((2,), "int32"),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=NCL * K, block=THREADS, cluster=CLUSTER,
                                       preferred_shared_memory_carveout=100,
                                       programmatic_stream_serialization=True),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=CTAS_PER_SM),
        )
        tid = T.cuda.thread_idx("x")
        lane = T.cuda.lane_id()
        pool = SMEMPool()
        xs = pool.alloc((CH * 4,), "uint32", align=128)  # the stage: next group's chunk
        bars = pool.alloc((3,), "uint64", align=8)  # stage, exchange parity 0, 1
        xch = pool.alloc((2 * K * 4,), "uint32", align=16)  # [parity][rank](sum, M2, ticket, 0)
        tick = pool.alloc((4,), "int32", align=16)
        zsm = pool.alloc((4,), "uint32", align=16)  # zeros ptxas cannot see (see `zz`)
        red_sum = pool.alloc((WARPS,), "float32", align=16)
        red_var = pool.alloc((WARPS,), "float32", align=16)
        pool.commit()
        # ids: 0 rank, 1 g_cur, 2 g_next, 3 g_after, 4 it, 5 term, 6 ticket drawn, 7 chunk length
        ids = T.alloc_local((8,), "int32")
        xv = T.alloc_local((VPT * 4,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        st = T.alloc_local((4,), "float32")  # mean, M2 -> rstd, count, local sum
        acc = T.alloc_local((2,), "float32")
        kk = T.alloc_local((1,), "float32")  # shift: the first element of the current chunk
        dv = T.alloc_local((VEC,), "float32")  # one vector's (x - shift) values
        pm = T.alloc_local((3,), "float32")  # count, sum, M2 of partial `lane`
        ab = T.alloc_local((4,), "float32")  # scale, shift of the current vector's channel
        wb = T.alloc_local((2 * NOFF,), "float32")  # w, b per distinct channel
        # zz[p]: 0, re-read from shared memory after a barrier in each phase p (sum, M2, apply);
        # the fp16 -> fp32 conversions of phase p read (x ^ zz[p]), so ptxas cannot merge them
        # across phases (it did: 64 live fp32 copies of the slice, ~520 B of spills per thread)
        zz = T.alloc_local((3,), "uint32")

        ids[0] = T.truncmod(T.cuda.block_idx("x"), K)  # rank in the cluster = chunk
        ids[7] = T.min(CH, GV - ids[0] * CH)  # vectors in this chunk
        ids[5] = 0

        # ---- prologue: rank 0 draws the tickets of iterations 0 and 1 into its own shared
        # memory; one cluster barrier (all CTAs started, mbarrier inits visible); all read them
        if tid < 4:
            zsm[tid] = T.uint32(0)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bars.ptr_to([0]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(bars.ptr_to([1]), T.uint32(1))
            T.ptx.mbarrier.init.shared.b64(bars.ptr_to([2]), T.uint32(1))
            T.cuda.func_call("mkb_g9v10_mbar_fence", MBAR_FENCE)
            if ids[0] == 0:
                # PDL: wait for the zeroing kernel of this call (only this thread touches Ctr)
                T.cuda.func_call("mkb_g9v10_gdc_wait", GDC_WAIT)
                ids[1] = T.cuda.func_call("mkb_g9v10_ticket2", Ctr.ptr_to([0]), TICKET2, ty="int32")
                ids[2] = ids[1] + 1
                tick[0] = T.if_then_else(ids[1] < NG, ids[1], -1)
                tick[1] = T.if_then_else(ids[2] < NG, ids[2], -1)
                if ids[2] >= NG:
                    ids[5] = 1
        if T.constexpr(MULTI):
            T.cuda.func_call("mkb_g9v10_cluster_sync", CLUSTER_SYNC)
            ids[1] = T.cuda.func_call(
                "mkb_g9v10_dsmem_ld", _smem(tick.ptr_to([0])), T.uint32(0), DSMEM_LD, ty="int32")
            ids[2] = T.cuda.func_call(
                "mkb_g9v10_dsmem_ld", _smem(tick.ptr_to([1])), T.uint32(0), DSMEM_LD, ty="int32")
        else:
            T.cuda.cta_sync()
            ids[1] = tick[0]
            ids[2] = tick[1]
        kk[0] = T.float32(0.0)
        if ids[1] >= 0:
            # the chunk's first element (n, c, h, w of flat offset ids[1] * GE + ids[0] * CH * 8)
            kk[0] = T.cast(
                X[T.truncdiv(ids[1], groups),
                  T.truncdiv(T.truncmod(ids[1], groups) * GE + ids[0] * (CH * VEC), H * W),
                  T.truncdiv(T.truncmod(ids[0] * (CH * VEC), H * W), W),
                  T.truncmod(ids[0] * (CH * VEC), W)],
                "float32")
            for j in T.unroll(VPT):
                if j < FULL or j * THREADS + tid < ids[7]:
                    T.ptx[X_LOAD](
                        xv[4 * j], xv[4 * j + 1], xv[4 * j + 2], xv[4 * j + 3],
                        X.ptr_to([0, 0, 0, ids[1] * GE + (ids[0] * CH + j * THREADS + tid) * VEC]),
                    )
                else:
                    for i in T.unroll(4):
                        xv[4 * j + i] = T.uint32(0)
        if tid == 0:
            if ids[2] >= 0:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([0]),
                                                           T.cast(ids[7] * 16, "uint32"))
                for q in T.unroll(BULK_SPLIT):
                    T.cuda.func_call(
                        "mkb_g9v10_bulk",
                        _smem(xs.ptr_to([q * (CH // BULK_SPLIT) * 4])),
                        X.ptr_to([0, 0, 0, ids[2] * GE + (ids[0] * CH + q * (CH // BULK_SPLIT)) * VEC]),
                        T.cast((ids[7] // BULK_SPLIT) * 16, "uint32"),
                        _smem(bars.ptr_to([0])),
                        BULK,
                    )

        ids[4] = 0
        while ids[1] >= 0:
            # 0. ticket of iteration it + 2 (latency hidden behind the reductions)
            ids[6] = NG
            if tid == 0:
                if ids[0] == 0:
                    if ids[5] == 0:
                        ids[6] = T.cuda.func_call("mkb_g9v10_ticket", Ctr.ptr_to([0]), TICKET,
                                                  ty="int32")

            # w, b of the chunk's channels (UNIFORM: loaded now, latency behind the reductions)
            if T.constexpr(UNIFORM):
                for u in T.unroll(NOFF):
                    wb[2 * u] = T.cast(
                        Wt[T.truncmod(ids[1], groups) * CPG + ids[0] * (CH // HWV) + u],
                        "float32")
                    wb[2 * u + 1] = T.cast(
                        Bs[T.truncmod(ids[1], groups) * CPG + ids[0] * (CH // HWV) + u],
                        "float32")

            # 1-2. chunk statistics in ONE pass around the shift k = the chunk's first element:
            # S1 = sum (x - k), S2 = sum (x - k)^2 (slots past the chunk end masked out), one
            # two-value block reduction (one barrier); then the chunk's sum n k + S1 and
            # M2 = S2 - S1^2 / n for the unchanged Chan merge
            zz[0] = zsm[0]
            acc[0] = T.float32(0.0)
            acc[1] = T.float32(0.0)
            for j in T.unroll(VPT):
                for i in T.unroll(4):
                    dv[2 * i] = _lo(xv[4 * j + i] ^ zz[0]) - kk[0]
                    dv[2 * i + 1] = _hi(xv[4 * j + i] ^ zz[0]) - kk[0]
                if T.constexpr(FULL < VPT):
                    acc[0] = acc[0] + T.if_then_else(j * THREADS + tid < ids[7],
                                                     _tree([dv[i] for i in range(VEC)]),
                                                     T.float32(0.0))
                    acc[1] = acc[1] + T.if_then_else(j * THREADS + tid < ids[7],
                                                     _tree([dv[i] * dv[i] for i in range(VEC)]),
                                                     T.float32(0.0))
                else:
                    acc[0] = acc[0] + _tree([dv[i] for i in range(VEC)])
                    acc[1] = acc[1] + _tree([dv[i] * dv[i] for i in range(VEC)])
            for m in T.unroll(5):  # warp butterfly: every lane gets both warp sums
                acc[0] = acc[0] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[0], 16 >> m, 32)
                acc[1] = acc[1] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[1], 16 >> m, 32)
            if T.constexpr(WARPS > 1):
                if lane == 0:
                    red_sum[T.truncdiv(tid, 32)] = acc[0]
                    red_var[T.truncdiv(tid, 32)] = acc[1]
                T.cuda.cta_sync()
                acc[0] = red_sum[T.truncmod(lane, WARPS)]
                acc[1] = red_var[T.truncmod(lane, WARPS)]
                for m in T.unroll(WARPS_LOG2):  # lanes of each aligned group of WARPS: all sums
                    acc[0] = acc[0] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[0],
                                                             (WARPS // 2) >> m, 32)
                    acc[1] = acc[1] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[1],
                                                             (WARPS // 2) >> m, 32)
            st[2] = T.cast(ids[7] * VEC, "float32")  # elements in the chunk
            st[3] = st[2] * kk[0] + acc[0]  # chunk sum
            st[0] = st[3] / st[2]  # chunk mean
            st[1] = T.max(acc[1] - acc[0] * (acc[0] / st[2]), T.float32(0.0))  # chunk M2

            # 3. ticket of iteration it + 2, then the group statistics
            if tid == 0:
                if ids[0] == 0:
                    if ids[5] == 0:
                        if ids[6] >= NG:
                            ids[5] = 1
            if T.constexpr(MULTI):
                # push (sum, M2, ticket) to every CTA of the cluster (st.async, complete_tx on
                # the parity's mbarrier), wait until all K partials have landed here
                if tid == 0:
                    T.ptx.mbarrier.arrive.expect_tx.shared.b64(
                        bars.ptr_to([1 + T.truncmod(ids[4], 2)]), T.uint32(K * 16))
                    for r in T.unroll(K):
                        T.cuda.func_call(
                            "mkb_g9v10_st_async",
                            _smem(xch.ptr_to([T.truncmod(ids[4], 2) * (K * 4) + ids[0] * 4])),
                            T.reinterpret(st[3], ty="uint32"),
                            T.reinterpret(st[1], ty="uint32"),
                            T.reinterpret(T.if_then_else(ids[6] < NG, ids[6], -1), ty="uint32"),
                            T.uint32(0),
                            _smem(bars.ptr_to([1 + T.truncmod(ids[4], 2)])),
                            T.uint32(r),
                            ST_ASYNC,
                        )
                T.cuda.mbarrier_wait(bars.ptr_to([1 + T.truncmod(ids[4], 2)]),
                                     T.truncmod(T.truncdiv(ids[4], 2), 2))
                ids[3] = T.reinterpret(xch[T.truncmod(ids[4], 2) * (K * 4) + 2], ty="int32")
                if lane < K:
                    pm[0] = T.cast(T.min(CH, GV - lane * CH) * VEC, "float32")
                    pm[1] = T.reinterpret(xch[T.truncmod(ids[4], 2) * (K * 4) + lane * 4],
                                          ty="float32")
                    pm[2] = T.reinterpret(xch[T.truncmod(ids[4], 2) * (K * 4) + lane * 4 + 1],
                                          ty="float32")
                else:
                    pm[0] = T.float32(1.0)
                    pm[1] = T.float32(0.0)
                    pm[2] = T.float32(0.0)
                acc[1] = pm[1]
                for m in T.unroll(5):  # butterfly: every lane gets the sum
                    acc[1] = acc[1] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[1], 16 >> m, 32)
                st[0] = acc[1] * T.float32(INV_GE)  # group mean
                acc[1] = T.if_then_else(
                    lane < K,
                    pm[2] + pm[0] * (pm[1] / pm[0] - st[0]) * (pm[1] / pm[0] - st[0]),
                    T.float32(0.0),
                )
                for m in T.unroll(5):
                    acc[1] = acc[1] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[1], 16 >> m, 32)
                st[1] = acc[1]  # group M2
            else:
                if tid == 0:
                    tick[T.truncmod(ids[4] + 2, 4)] = T.if_then_else(ids[6] < NG, ids[6], -1)
                T.cuda.cta_sync()
                ids[3] = tick[T.truncmod(ids[4] + 2, 4)]
            st[1] = T.rsqrt(st[1] * T.float32(INV_GE) + T.float32(eps))

            # 4. per-channel folded affine, SiLU, one rounding to fp16, store
            zz[2] = zsm[2]
            for j in T.unroll(VPT):
                if j < FULL or j * THREADS + tid < ids[7]:
                    # halved scale / shift: h = v / 2 = x (a / 2) + s / 2, y = h + h tanh(h)
                    if T.constexpr(UNIFORM):
                        ab[2] = wb[2 * ((j * THREADS) // HWV)] * st[1]
                        ab[0] = ab[2] * T.float32(0.5)
                        ab[1] = (wb[2 * ((j * THREADS) // HWV) + 1] - st[0] * ab[2]) * T.float32(0.5)
                    else:
                        ch = T.truncmod(ids[1], groups) * CPG + T.truncdiv(
                            ids[0] * CH + j * THREADS + tid, HWV)
                        ab[2] = T.cast(Wt[ch], "float32") * st[1]
                        ab[0] = ab[2] * T.float32(0.5)
                        ab[1] = (T.cast(Bs[ch], "float32") - st[0] * ab[2]) * T.float32(0.5)
                    for i in T.unroll(4):
                        dv[0] = _lo(xv[4 * j + i] ^ zz[2]) * ab[0] + ab[1]
                        dv[1] = _hi(xv[4 * j + i] ^ zz[2]) * ab[0] + ab[1]
                        T.ptx.cvt.rn.f16x2.f32(ov[i], dv[1] * _tanh(dv[1]) + dv[1],
                                               dv[0] * _tanh(dv[0]) + dv[0])
                    T.ptx[Y_STORE](
                        Y.ptr_to([0, 0, 0, ids[1] * GE + (ids[0] * CH + j * THREADS + tid) * VEC]),
                        ov[0], ov[1], ov[2], ov[3],
                    )

            # 5. next group: stage -> registers, then refill the stage with the group after it
            if ids[2] >= 0:
                T.cuda.mbarrier_wait(bars.ptr_to([0]), T.truncmod(ids[4], 2))
                kk[0] = _lo(xs[0])  # the next chunk's first element (broadcast read)
                for j in T.unroll(VPT):
                    if j < FULL or j * THREADS + tid < ids[7]:
                        xv[T.ramp(4 * j, 1, 4)] = xs[T.ramp((j * THREADS + tid) * 4, 1, 4)]
                    else:
                        for i in T.unroll(4):
                            xv[4 * j + i] = T.uint32(0)
                T.cuda.cta_sync()  # every thread is done reading the stage
                if tid == 0:
                    if ids[3] >= 0:
                        T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([0]),
                                                                   T.cast(ids[7] * 16, "uint32"))
                        for q in T.unroll(BULK_SPLIT):
                            T.cuda.func_call(
                                "mkb_g9v10_bulk",
                                _smem(xs.ptr_to([q * (CH // BULK_SPLIT) * 4])),
                                X.ptr_to([0, 0, 0, ids[3] * GE
                                          + (ids[0] * CH + q * (CH // BULK_SPLIT)) * VEC]),
                                T.cast((ids[7] // BULK_SPLIT) * 16, "uint32"),
                                _smem(bars.ptr_to([0])),
                                BULK,
                            )
            ids[1] = ids[2]
            ids[2] = ids[3]
            ids[4] = ids[4] + 1

        # rank 0's ticket slots are read remotely in the prologue: no CTA leaves before all did
        if T.constexpr(MULTI):
            T.cuda.func_call("mkb_g9v10_cluster_sync_relaxed", CLUSTER_SYNC_RELAXED)

    return groupnorm_silu_persistent


def make_zero_kernel():
    """Zeroes the two ticket counters; launched by every call of run() right before the main
    kernel, which it lets start at once (griddepcontrol.launch_dependents)."""

    @T.function
    def groupnorm_silu_zero_counters(Ctr: T.Tensor((2,), "int32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        tid = T.cuda.thread_idx("x")
        if tid < 2:
            Ctr[tid] = 0
        T.cuda.func_call("mkb_g9v10_gdc_launch", GDC_LAUNCH)

    return groupnorm_silu_zero_counters


def _sm_count() -> int:
    """SMs of the current GPU, or the H200's 132 when none is visible (compile-only runs)."""
    try:
        if torch.cuda.is_available():
            return int(torch.cuda.get_device_properties(torch.cuda.current_device())
                       .multi_processor_count)
    except Exception:  # pragma: no cover  (no driver)
        pass
    return DEFAULT_SMS


def build(spec):
    """Compile for spec's static (N, C, H, W) and return run(x, w, b, y)."""
    dims = [int(spec.dims[k]) for k in ("N", "C", "H", "W")]
    groups = int(spec.params["groups"])
    eps = float(spec.params["eps"])
    kernel = make_kernel(*dims, groups, eps, _sm_count())
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["groupnorm_silu_persistent"]
    ex0 = tvm_tirx.tirx.compile(make_zero_kernel(), target=target)
    zero = ex0["groupnorm_silu_zero_counters"]
    counters: dict = {}
    if torch.cuda.is_available():  # allocate here when a GPU is visible (not in compile mode)
        dev = torch.device("cuda", torch.cuda.current_device())
        counters[dev] = torch.empty(2, dtype=torch.int32, device=dev)

    def run(x, w, b, y):
        # the counters' content never matters between calls: every call zeroes them first
        ctr = counters.get(x.device)
        if ctr is None:
            ctr = torch.empty(2, dtype=torch.int32, device=x.device)
            counters[x.device] = ctr
        zero(ctr)
        fn(x, w, b, y, ctr)

    run.module = ex  # keep the compiled modules alive with the launcher
    run.modules = (ex, ex0)
    return run

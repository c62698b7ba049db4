"""C05 vocab_softmax, TIRx (tvm_tirx 0.1.0a4) expert solution: p = softmax(x) over rows of a
whole vocabulary (V = 128256), bf16 in and out, fp32 math.

One read of x and one write of p per element (4 B per element, the memory-bound minimum): a row
(250 KB of bf16) is split over a thread-block cluster of 8 CTAs of 256 threads whose CTAs keep
their pieces on chip (half in registers, half in shared memory), one ex2 per element, and
(max, sum) partials exchanged through distributed shared memory, so there is no second pass over
the row.  There is NO CTA barrier on the cluster path: every thread works relative to its OWN
max, and the only synchronisation of a row is the cluster barrier.

* Split (line-aligned chunks): a cluster of CL = 8 CTAs (co-scheduled, so waiting on each other
  cannot deadlock), 256 threads each; chunk CH = ceil(ceil(16032 / 8) / 8) * 8 = 2008 16-byte
  vectors (a multiple of 8 vectors = 128 B) for CTAs 0..6 and 16032 - 7 * 2008 = 1976 for
  CTA 7; a thread owns VPT = 8 slots, slot k being vector rank * CH + k * 256 + tid of the row
  (a warp access covers 512 contiguous, 128-byte-aligned bytes: the row starts are 128-byte
  aligned, 256512 = 2004 * 128).  Slots 0..3 are loaded into registers (``ld.global.nc.v4.b32``),
  slots 4..7 copied into shared memory with ``cp.async.cg`` (16 B each, 16 KB per CTA, no
  registers in flight), all issued before any math; each thread reads back only what it copied
  (``cp.async.wait_all``, no barrier); slots past the chunk end hold -inf and are not stored.
* The THREAD's max with ``max.bf16x2`` (exact), widened once, floored at -1e30 (a thread with no
  data gets sum 0, no inf - inf); e = 2^(x log2 e - m_t log2 e) once per element
  (``ex2.approx.ftz``), summed in fp32 and written back over x as packed bf16 (e <= 1).
* Merge: warp max of m_t (butterfly), each thread's sum rescaled to it and summed (butterfly,
  one ex2 per thread); lane 0 puts the warp's (max, sum) in shared memory;
  ``barrier.cluster.arrive.release`` / ``wait.acquire`` (the row's ONE synchronisation); lane l of
  every warp reads pairs l and l + 32 of the CL * 8 = 64 pairs (``mapa`` +
  ``ld.shared::cluster``: CTA pair / 8, warp pair % 8); M = warp max of their maxima,
  S = warp sum of s 2^((m - M) log2 e).  A second ``arrive.release`` after that combine, waited
  on just before exit, keeps every CTA's shared memory alive while its peers read it (it must be
  ``.release``: with ``.relaxed``, an earlier version crashed at the benchmark shape with
  "unspecified launch failure", a peer exiting while a remote read was in flight).
* Store: p = e * c_t with the THREAD's scalar c_t = 2^((m_t - M) log2 e) / S (<= 1 / S), one
  rounding to bf16, 16-byte stores (``st.global.v4.b32``).
* Occupancy: min_blocks_per_sm = 6.  Offline (NVRTC 13, sm_90a, benchmark shape): 40 registers,
  no local memory, 17.5 KB of shared memory, 68 MUFU.EX2 (previous expert: 71), 20 SHFL
  (previous: 36), no CTA BAR.SYNC on the cluster path (previous: 4, from cta_max and cta_sum;
  the 2 left in the SASS are the non-cluster fallback of barrier.cluster).  Grid 4096 x 8 =
  32768 CTAs.
* Short rows (V <= 16384: the check shapes V = 256 and 1000) use CL = 1 (no cluster, a plain
  launch, one CTA of up to 256 threads per row): a ``cta_sync`` takes the cluster barrier's
  place and the pairs are read from the CTA's own shared memory.  The check shape V = 128256
  (T = 9) runs the cluster path.
* Host path: one ``tvm_tirx.tirx.compile`` for sm_90a per shape set (static T, V; the launcher
  passes clusterDim = (8, 1, 1)); run() calls the compiled function on the torch tensors.

Why it is faster than the previous expert (the same cluster design with a CTA max and sum):
* The previous cta_max and cta_sum were two block barriers each: every warp waited for the
  slowest warp's loads before any exp, then for the slowest warp's exps.  Here a warp goes from
  its own loads straight to its exps; the cluster barrier is the only wait.  The estimate
  (~0.5-0.8 us off a ~13 us CTA lifetime) was 510-520 us; the gain measured is 2%, not 4-6%.
* Line-aligned chunks: the previous 2004-vector chunks started 64 bytes into a line in odd
  CTAs, so every 512-byte warp access there touched 5 lines instead of 4; here every access is
  4 full lines, for a 0.2% longer largest chunk (2008 vs 2004 vectors).
* Eight CTAs per SM (6 of each thread's 8 vectors in shared memory, 32 registers) measured
  528.5 us (IQR 1.7) in the same tune run: 6 CTAs per SM stay.

Measured on the H200 (bench/h200/2026-12-02c/tune-r5a.json, full mode, one judge, correct):
523.4 us (IQR 2.4), against 535.1 us (IQR 2.8) for the previous expert
(bench/h200/2026-12-02b/solutions-CF-r3.md).  In the one-run table
bench/h200/2026-12-02c/solutions-CF-r5.md: 523.7 us (IQR 2.2), 86.0% of the 450.1 us roofline
ideal, 2.12x eager (softmax_bf16), 2.16x torch.compile, 1.02x faster than the previous expert;
the CuTe expert 537.6 us there.  Earlier history: 6 CTAs per SM with half the chunk in shared
memory instead of 4 with all of it in registers took the cluster design from 562.5 to 537.2 us
(bench/h200/2026-12-02/diag-wake200.json).

Numerics: fp32 math; e relative to the thread's max is rounded to bf16 once (relative error
<= 2^-8, bf16's unit roundoff) before the final rounding of p; c_t <= 1 / S so ftz underflow of
e costs < 2^-126.
Emulated in fp32 against reference.py (slot layout included, every vector covered exactly once)
at (T, V) = (4, 256), (333, 1000), (9, 128256), plus (2, 131072), with N(96, 4), N(0, 1) and
N(-50, 30) logits: worst error / tolerance 0.23 (the previous expert's formula in the same
harness: 0.24; rtol 3.2e-2, atol 1e-2).
Limits: V <= 8 * 8 * 256 * 8 = 131072, at most 64 warps per row, every CTA of the cluster
needs a non-empty chunk, T * V < 2^31 (int32 indexing); make_kernel raises ValueError beyond.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
VPT_TARGET = 8  # vectors per thread aimed for
MAX_THREADS = 256
MAX_VPT = 8  # 32 registers of packed bf16 per thread
MAX_CLUSTER = 8  # portable cluster size limit
MIN_BLOCKS_CLUSTER = 6  # CTAs of 256 threads per SM on the cluster path (register cap 40)
VPT_SMEM = 4  # of the VPT vectors per thread, the last VPT_SMEM wait in shared memory
LOG2E = 1.4426950408889634
NEG_INF2 = 0xFF80FF80  # two bf16 -inf
M_FLOOR = -1.0e30  # floor of a thread's max (a thread with no data: no inf - inf)
LINE_VECS = 8  # 16-byte vectors per 128-byte line: cluster chunks start on a line
FULL_MASK = 0xFFFFFFFF
X_LOAD = "ld.global.nc.v4.b32"  # read-only path, no .L1::no_allocate (faster here before)
Y_STORE = "st.global.v4.b32"

# CUDA device helpers (T.cuda.func_call). One source string per helper name, each unique.
DSMEM_LD = r"""
__device__ __forceinline__ float mkb_c05v9_dsmem_ld(float* p, int rank) {
  unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
  unsigned int r;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
}
"""
ARRIVE_RELEASE = r"""
__device__ __forceinline__ void mkb_c05v9_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
"""
WAIT_ACQUIRE = r"""
__device__ __forceinline__ void mkb_c05v9_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
"""
EX2 = r"""
__device__ __forceinline__ float mkb_c05v9_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
"""
CP_ASYNC = r"""
__device__ __forceinline__ void mkb_c05v9_cp16(void* smem, const void* gmem) {
  unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(a), "l"(gmem) : "memory");
}
"""
CP_WAIT = r"""
__device__ __forceinline__ void mkb_c05v9_cp_wait() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
"""
BMAX2 = r"""
__device__ __forceinline__ unsigned int mkb_c05v9_bmax2(unsigned int a, unsigned int b) {
  unsigned int r;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
"""


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _tree(combine, vals):
    """Balanced reduction tree over a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [combine(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _fmax(a, b):
    return T.call_pure_extern("fmaxf", a, b, ty="float32")


def _bmax2(a, b):
    return T.cuda.func_call("mkb_c05v9_bmax2", a, b, BMAX2, ty="uint32")


def _ex2(x):
    return T.cuda.func_call("mkb_c05v9_ex2", x, EX2, ty="float32")


def _add(a, b):
    return a + b


def _fma(a, b, c):
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def plan(nv: int):
    """(cluster size, chunk vectors, threads, vectors per thread) for a row of nv vectors."""
    cl = 1
    while -(-nv // cl) > MAX_THREADS * MAX_VPT and cl < MAX_CLUSTER:
        cl *= 2
    ch = -(-nv // cl)
    if cl > 1:
        ch = -(-ch // LINE_VECS) * LINE_VECS
    threads = -(-ch // VPT_TARGET)
    warps = 1  # power-of-two warp count
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-ch // threads)
    if vpt > MAX_VPT:
        raise ValueError(f"row of {nv} vectors too long for {cl} CTAs")
    return cl, ch, threads, vpt


def make_kernel(rows: int, vocab: int):
    """Softmax over the last axis of a static [rows, vocab] bf16 matrix, bf16 out."""
    if vocab % VEC != 0:
        raise ValueError("V must be a multiple of 8")
    if rows * vocab >= 2**31:
        raise ValueError("T * V must stay below 2**31 (int32 indexing)")
    NV = vocab // VEC
    CL, CH, THREADS, VPT = plan(NV)
    if NV - (CL - 1) * CH <= 0:
        raise ValueError("every CTA of the cluster needs a non-empty chunk")
    WARPS = THREADS // 32
    TT = rows
    VV = vocab
    GRID = rows * CL
    CLUSTER = CL if CL > 1 else None
    NP = CL * WARPS  # (max, sum) pairs of a row: one per warp of the cluster
    if NP > 64:
        raise ValueError("at most 64 warps per row (two pairs per lane)")
    MIN_BLOCKS = MIN_BLOCKS_CLUSTER if CL > 1 else max(1, 1024 // THREADS)
    VS = min(VPT_SMEM, VPT - 1)  # vectors per thread in shared memory (at least one in registers)
    VR = VPT - VS  # vectors per thread in registers

    @T.function
    def vocab_softmax(X: T.Tensor((TT, VV), T.bfloat16), P: T.Tensor((TT, VV), T.bfloat16)):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS, cluster=CLUSTER),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=MIN_BLOCKS),
        )
        bx = T.cuda.block_idx("x")
        row = T.truncdiv(bx, CL)
        rank = T.truncmod(bx, CL)  # == %cluster_ctarank for a 1-D cluster along x
        tid = T.cuda.thread_idx("x")
        part = T.alloc_shared((2 * WARPS,), "float32")  # per-warp (max, sum) pairs
        xv = T.alloc_local((VR * 4,), "uint32")  # register part: x, then e (packed bf16)
        xs = T.alloc_shared((max(VS, 1) * THREADS * 4,), "uint32")  # shared part: x, then e
        ws = T.alloc_local((4,), "uint32")  # one shared vector in registers
        ef = T.alloc_local((8,), "float32")  # e of one vector in fp32
        wm = T.alloc_local((1,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        st = T.alloc_local((4,), "float32")  # m_t, s_t, then M, S being merged
        pm = T.alloc_local((1,), "float32")  # second pair read by this lane
        ps = T.alloc_local((1,), "float32")
        mn = T.alloc_local((1,), "float32")
        sc = T.alloc_local((1,), "float32")  # p = e * sc
        lim = T.min(CH, NV - rank * CH)  # vectors in this CTA's chunk

        # 1. load the chunk: shared part by cp.async (16 B, L2 -> smem, no registers), register
        #    part by ld.global.nc; all issued before any use; missing slots hold -inf. Shared
        #    vector k of a thread sits at xs[(k * THREADS + tid) * 4]: each thread reads back only
        #    what it copied itself, so cp.async.wait_all suffices (no CTA barrier).
        for k in T.unroll(VS):
            if (VR + k) * THREADS + tid < lim:
                T.cuda.func_call(
                    "mkb_c05v9_cp16",
                    xs.ptr_to([(k * THREADS + tid) * 4]),
                    X.ptr_to([row, (rank * CH + (VR + k) * THREADS + tid) * VEC]),
                    CP_ASYNC,
                )
            else:
                for j in T.unroll(4):
                    xs[(k * THREADS + tid) * 4 + j] = T.uint32(NEG_INF2)
        for k in T.unroll(VR):
            if k * THREADS + tid < lim:
                T.ptx[X_LOAD](
                    xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                    X.ptr_to([row, (rank * CH + k * THREADS + tid) * VEC]),
                )
            else:
                for j in T.unroll(4):
                    xv[4 * k + j] = T.uint32(NEG_INF2)

        # 2. the THREAD's max on packed pairs (exact), widened once, floored (no CTA barrier)
        wm[0] = _tree(_bmax2, [xv[i] for i in range(VR * 4)])
        T.cuda.func_call("mkb_c05v9_cp_wait", CP_WAIT)
        for k in T.unroll(VS):
            wm[0] = _bmax2(
                wm[0],
                _tree(_bmax2, [xs[(k * THREADS + tid) * 4 + j] for j in range(4)]),
            )
        st[0] = _fmax(_fmax(_lo(wm[0]), _hi(wm[0])), T.float32(M_FLOOR))
        ml2 = st[0] * T.float32(LOG2E)
        # 3. e = 2^(x log2 e - m_t log2 e): summed in fp32, kept as packed bf16 over x
        st[1] = T.float32(0.0)
        for k in T.unroll(VR):
            for j in T.unroll(4):
                ef[2 * j] = _ex2(_fma(_lo(xv[4 * k + j]), T.float32(LOG2E), -ml2))
                ef[2 * j + 1] = _ex2(_fma(_hi(xv[4 * k + j]), T.float32(LOG2E), -ml2))
            st[1] = st[1] + _tree(_add, [ef[i] for i in range(8)])
            for j in T.unroll(4):
                T.ptx.cvt.rn.bf16x2.f32(xv[4 * k + j], ef[2 * j + 1], ef[2 * j])
        for k in T.unroll(VS):
            for j in T.unroll(4):
                ws[j] = xs[(k * THREADS + tid) * 4 + j]
            for j in T.unroll(4):
                ef[2 * j] = _ex2(_fma(_lo(ws[j]), T.float32(LOG2E), -ml2))
                ef[2 * j + 1] = _ex2(_fma(_hi(ws[j]), T.float32(LOG2E), -ml2))
            st[1] = st[1] + _tree(_add, [ef[i] for i in range(8)])
            for j in T.unroll(4):
                T.ptx.cvt.rn.bf16x2.f32(ws[j], ef[2 * j + 1], ef[2 * j])
            for j in T.unroll(4):
                xs[(k * THREADS + tid) * 4 + j] = ws[j]

        # 4. (max, sum) merge: the warp's max (butterfly), the thread sums rescaled to it and
        #    summed (butterfly), one pair per warp in shared memory, ONE barrier (the cluster
        #    barrier, or a CTA barrier without a cluster); then every lane reads pairs lane and
        #    lane + 32 of the CL * WARPS pairs (distributed shared memory; missing pairs are
        #    (floor, 0)), M = warp max of their maxima, S = warp sum of s 2^((m - M) log2 e).
        st[2] = T.cuda.warp_max(st[0])
        st[3] = T.cuda.warp_sum(st[1] * _ex2((st[0] - st[2]) * T.float32(LOG2E)))
        if T.truncmod(tid, 32) == 0:
            part[T.truncdiv(tid, 32)] = st[2]
            part[WARPS + T.truncdiv(tid, 32)] = st[3]
        lane = T.truncmod(tid, 32)
        if T.constexpr(CL > 1):
            T.cuda.func_call("mkb_c05v9_arrive", ARRIVE_RELEASE)
            T.cuda.func_call("mkb_c05v9_wait", WAIT_ACQUIRE)
            st[2] = T.float32(M_FLOOR)
            st[3] = T.float32(0.0)
            pm[0] = T.float32(M_FLOOR)
            ps[0] = T.float32(0.0)
            if lane < NP:
                st[2] = T.cuda.func_call(
                    "mkb_c05v9_dsmem_ld", part.ptr_to([T.truncmod(lane, WARPS)]),
                    T.truncdiv(lane, WARPS), DSMEM_LD, ty="float32",
                )
                st[3] = T.cuda.func_call(
                    "mkb_c05v9_dsmem_ld", part.ptr_to([WARPS + T.truncmod(lane, WARPS)]),
                    T.truncdiv(lane, WARPS), DSMEM_LD, ty="float32",
                )
            if lane + 32 < NP:
                pm[0] = T.cuda.func_call(
                    "mkb_c05v9_dsmem_ld", part.ptr_to([T.truncmod(lane + 32, WARPS)]),
                    T.truncdiv(lane + 32, WARPS), DSMEM_LD, ty="float32",
                )
                ps[0] = T.cuda.func_call(
                    "mkb_c05v9_dsmem_ld", part.ptr_to([WARPS + T.truncmod(lane + 32, WARPS)]),
                    T.truncdiv(lane + 32, WARPS), DSMEM_LD, ty="float32",
                )
        else:
            T.cuda.cta_sync()
            st[2] = T.float32(M_FLOOR)
            st[3] = T.float32(0.0)
            pm[0] = T.float32(M_FLOOR)
            ps[0] = T.float32(0.0)
            if lane < NP:
                st[2] = part[lane]
                st[3] = part[WARPS + lane]
        mn[0] = T.cuda.warp_max(_fmax(st[2], pm[0]))
        st[3] = T.cuda.warp_sum(
            st[3] * _ex2((st[2] - mn[0]) * T.float32(LOG2E))
            + ps[0] * _ex2((pm[0] - mn[0]) * T.float32(LOG2E))
        )
        st[2] = mn[0]
        if T.constexpr(CL > 1):
            # the remote values are consumed: release this CTA's reads (wait at the very end)
            T.cuda.func_call("mkb_c05v9_arrive", ARRIVE_RELEASE)
        # p = e * sc with the THREAD's scalar sc = 2^((m_t - M) log2 e) / S
        sc[0] = _ex2((st[0] - st[2]) * T.float32(LOG2E)) / st[3]

        # 5. p = e * sc, one rounding to bf16, 16-byte stores
        for k in T.unroll(VR):
            if k * THREADS + tid < lim:
                for j in T.unroll(4):
                    T.ptx.cvt.rn.bf16x2.f32(
                        ov[j], _hi(xv[4 * k + j]) * sc[0], _lo(xv[4 * k + j]) * sc[0]
                    )
                T.ptx[Y_STORE](
                    P.ptr_to([row, (rank * CH + k * THREADS + tid) * VEC]),
                    ov[0], ov[1], ov[2], ov[3],
                )
        for k in T.unroll(VS):
            if (VR + k) * THREADS + tid < lim:
                for j in T.unroll(4):
                    ws[j] = xs[(k * THREADS + tid) * 4 + j]
                for j in T.unroll(4):
                    T.ptx.cvt.rn.bf16x2.f32(ov[j], _hi(ws[j]) * sc[0], _lo(ws[j]) * sc[0])
                T.ptx[Y_STORE](
                    P.ptr_to([row, (rank * CH + (VR + k) * THREADS + tid) * VEC]),
                    ov[0], ov[1], ov[2], ov[3],
                )
        if T.constexpr(CL > 1):
            T.cuda.func_call("mkb_c05v9_wait", WAIT_ACQUIRE)

    return vocab_softmax


def build(spec):
    """Compile for spec's static (T, V) and return run(x, p)."""
    rows = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    kernel = make_kernel(rows, vocab)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["vocab_softmax"]

    def run(x, p):
        fn(x, p)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

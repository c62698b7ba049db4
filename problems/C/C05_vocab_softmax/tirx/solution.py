"""C05 vocab_softmax, TIRx (tvm_tirx 0.1.0a4) expert solution: p = softmax(x) over rows of a
whole vocabulary (V = 128256), bf16 in and out, fp32 math.

One read of x and one write of p per element (4 B per element, the memory-bound minimum): a row
(250 KB of bf16) is split over a thread-block cluster whose CTAs keep their pieces on chip (half
in registers, half in shared memory) and exchange (max, sum) partials through distributed shared
memory, so there is no second pass over the row.

* Split: a cluster of CL = 8 CTAs (``cluster=8``: co-scheduled, so waiting on each other cannot
  deadlock), 256 threads each, chunk CH = ceil(16032 / 8) = 2004 16-byte vectors per CTA; a
  thread owns VPT = 8 vectors, vector j being number rank * CH + j * 256 + tid of the row (a warp
  access covers 512 contiguous bytes). Of the 8, VR = 4 are loaded into registers
  (``ld.global.nc.v4.b32``) and VS = 4 are copied into shared memory with ``cp.async.cg`` (16 B
  each, 16 KB per CTA, no registers while in flight); all are issued before any math. Each
  thread reads back only the shared vectors it copied itself, so ``cp.async.wait_all`` suffices
  (no CTA barrier), and the register half's max is taken while the copies are still in flight.
  Slots past the chunk end (2048 slots for 2004 vectors at V = 128256) are not loaded, hold -inf
  (max unchanged, e = 0) and are not stored.
* Chunk max with ``max.bf16x2`` on the packed pairs (exact), widened once, ``cta_max``. Then
  e = 2^(x log2 e - m_c log2 e) once per element (``ex2.approx.ftz.f32``), summed in fp32
  (``cta_sum``) and written back over x as packed bf16 (``cvt.rn.bf16x2.f32``), in registers and
  in shared memory alike.
* Cluster exchange: thread 0 puts (m_c, s_c) in shared memory; ``barrier.cluster.arrive.release``
  / ``wait.acquire`` publish it; lane l of every warp reads the pair of CTA l % CL (``mapa`` +
  ``ld.shared::cluster``); a width-CL shuffle-xor butterfly combines them with the rescale
  (m, s) + (m', s') = (M, s 2^((m - M) log2 e) + s' 2^((m' - M) log2 e)), M = max(m, m'). A second
  ``barrier.cluster.arrive.release``, placed after the butterfly that consumes the remote values,
  and its wait just before the CTA exits keep every CTA's shared memory alive while its peers read
  it. That second arrive must be ``.release``: with ``.relaxed`` (an earlier version of this
  kernel) the arrive does not order the CTA's earlier ``ld.shared::cluster`` reads before it, so a
  peer could pass its final wait and exit (its shared memory handed to a new CTA) while a read was
  still in flight. That ended in "unspecified launch failure" at the benchmark shape (32768 CTAs in
  many waves, freed shared memory reused at once) while the 9-row check shape (every CTA resident
  at once, nothing reallocated) passed.
* Store: p = e * c with the per-CTA scalar c = 2^((m_c - M) log2 e) / S, one rounding to bf16 per
  pair, 16-byte stores (``st.global.v4.b32``).
* Occupancy: ptxas (CUDA 13.0, sm_90a): 40 registers, no spill, 16.6 KB of shared memory per CTA,
  so ``min_blocks_per_sm = 6`` (6 x 256 x 40 = 61K registers, 6 x 17.6 KB = 106 KB of shared
  memory): up to 792 resident CTAs, 192 KB of rows on chip per SM. Grid 4096 x 8 = 32768 CTAs,
  41.4 waves (tail < 2.5%).
* Short rows (V <= 16384: the check shapes V = 256 and 1000) use CL = 1 (no cluster, a plain
  launch, one CTA of up to 256 threads per row; V = 256 has one vector per thread, all in
  registers). The check shape V = 128256 (T = 9) runs the cluster path.
* Host path: one ``tvm_tirx.tirx.compile`` for sm_90a per shape set (static T, V; the launcher
  passes clusterDim = (8, 1, 1)); run() calls the compiled function on the torch tensors.

Measured on the H200 (bench/h200/2026-12-02/diag-wake200.json, full mode, one judge):
537.2 us (IQR 2.7), 83.9% of the roofline ideal (450.6 us), 2.07x the fastest eager formulation
(softmax_bf16), 2.11x torch.compile. The previous solution ran 748.0 us in the same run: its
cluster path was switched off (the relaxed-arrive crash above), so it ran a two-pass fallback
(x read twice: 6 B moved per element instead of 4). The same cluster design with the whole chunk
in registers (4 CTAs per SM) ran 562.5 us. The CuTe expert (same design) runs 553.7 us
(bench/h200/2026-12-02/diag-cute-wake200.json).
Why it is fast:
* One read of x: 4 B per element instead of 6.
* One ex2 per element instead of two (recomputing the exponential for the store): 5.25e8 MUFU ops
  instead of 1.05e9, 125-140 us of SFU time instead of 250-280 us (16 per clock per SM, 132 SMs,
  1.75-1.98 GHz), in per-CTA bursts during which that CTA has no loads in flight.
* CTAs in flight: per-SM throughput is N x 64 KB / L (N CTAs per SM, each moving 32 KB in and
  32 KB out over its lifetime L: load latency, compute, the cluster barrier that waits for the
  slowest of 8 CTAs on other SMs, store issue). With the chunk in registers (N = 4) the measured
  562.5 us means L ~ 9.1 us; here N = 6 and 537.2 us means L ~ 13.0 us: each CTA lives longer
  with six sharing the SM, but 1.5x as many overlap, a net 4.5% faster.

Numerics: fp32 math; e is rounded to bf16 once (relative error <= 2^-8) before the final rounding
of p: |p - p_exact| <= ~2^-7 relative, about one bf16 ulp (emulated in fp32 against reference.py
at every check shape: worst error / tolerance 0.11; rtol 3.2e-2, atol 1e-2).
Limits: V <= 8 * 8 * 256 * 8 = 131072 (plan() raises beyond), every CTA of the cluster needs a
non-empty chunk, T * V < 2^31 (int32 indexing; the benchmark has 5.3e8).
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
FULL_MASK = 0xFFFFFFFF
X_LOAD = "ld.global.nc.v4.b32"  # read-only path, no .L1::no_allocate (faster here before)
Y_STORE = "st.global.v4.b32"

# CUDA device helpers (T.cuda.func_call). One source string per helper name, each unique.
DSMEM_LD = r"""
__device__ __forceinline__ float mkb_c05v2_dsmem_ld(float* p, int rank) {
  unsigned int a = (unsigned int)__cvta_generic_to_shared(p);
  unsigned int r;
  float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(r) : "memory");
  return v;
}
"""
ARRIVE_RELEASE = r"""
__device__ __forceinline__ void mkb_c05v2_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
"""
WAIT_ACQUIRE = r"""
__device__ __forceinline__ void mkb_c05v2_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
"""
EX2 = r"""
__device__ __forceinline__ float mkb_c05v2_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
"""
CP_ASYNC = r"""
__device__ __forceinline__ void mkb_c05v2_cp16(void* smem, const void* gmem) {
  unsigned int a = (unsigned int)__cvta_generic_to_shared(smem);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(a), "l"(gmem) : "memory");
}
"""
CP_WAIT = r"""
__device__ __forceinline__ void mkb_c05v2_cp_wait() {
  asm volatile("cp.async.wait_all;" ::: "memory");
}
"""
BMAX2 = r"""
__device__ __forceinline__ unsigned int mkb_c05v2_bmax2(unsigned int a, unsigned int b) {
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
    return T.cuda.func_call("mkb_c05v2_bmax2", a, b, BMAX2, ty="uint32")


def _ex2(x):
    return T.cuda.func_call("mkb_c05v2_ex2", x, EX2, ty="float32")


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
    threads = -(-ch // VPT_TARGET)
    warps = 1  # power-of-two warp count (cta_reduce needs it)
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
    LOG_CL = CL.bit_length() - 1
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
        red_max = T.alloc_shared((WARPS,), "float32")
        red_sum = T.alloc_shared((WARPS,), "float32")
        part = T.alloc_shared((2,), "float32")  # this CTA's (m_c, s_c) for the cluster
        xv = T.alloc_local((VR * 4,), "uint32")  # register part: x, then e (packed bf16)
        xs = T.alloc_shared((max(VS, 1) * THREADS * 4,), "uint32")  # shared part: x, then e
        ws = T.alloc_local((4,), "uint32")  # one shared vector in registers
        ef = T.alloc_local((8,), "float32")  # e of one vector in fp32
        wm = T.alloc_local((1,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        st = T.alloc_local((4,), "float32")  # m_c, s_c, then M, S
        om = T.alloc_local((1,), "float32")
        os_ = T.alloc_local((1,), "float32")
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
                    "mkb_c05v2_cp16",
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

        # 2. chunk max on packed pairs (exact), widened once
        wm[0] = _tree(_bmax2, [xv[i] for i in range(VR * 4)])
        T.cuda.func_call("mkb_c05v2_cp_wait", CP_WAIT)
        for k in T.unroll(VS):
            wm[0] = _bmax2(
                wm[0],
                _tree(_bmax2, [xs[(k * THREADS + tid) * 4 + j] for j in range(4)]),
            )
        if T.constexpr(WARPS == 1):
            cmax = T.cuda.warp_max(_fmax(_lo(wm[0]), _hi(wm[0])))
        else:
            cmax = T.cuda.cta_max(_fmax(_lo(wm[0]), _hi(wm[0])), WARPS, red_max.data)
        st[0] = cmax
        ml2 = st[0] * T.float32(LOG2E)
        # 3. e = 2^(x log2 e - m_c log2 e): summed in fp32, kept as packed bf16 over x
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
        if T.constexpr(WARPS == 1):
            csum = T.cuda.warp_sum(st[1])
        else:
            csum = T.cuda.cta_sum(st[1], WARPS, red_sum.data)
        st[1] = csum

        # 4. combine the cluster's partials (rescaled to the row max): sc = 2^((m_c-M) log2 e) / S
        if T.constexpr(CL > 1):
            if tid == 0:
                part[0] = st[0]
                part[1] = st[1]
            T.cuda.func_call("mkb_c05v2_arrive", ARRIVE_RELEASE)
            T.cuda.func_call("mkb_c05v2_wait", WAIT_ACQUIRE)
            # lane l reads the pair of CTA l % CL; a width-CL butterfly combines them
            pr = T.truncmod(T.truncmod(tid, 32), CL)
            st[2] = T.cuda.func_call(
                "mkb_c05v2_dsmem_ld", part.ptr_to([0]), pr, DSMEM_LD, ty="float32"
            )
            st[3] = T.cuda.func_call(
                "mkb_c05v2_dsmem_ld", part.ptr_to([1]), pr, DSMEM_LD, ty="float32"
            )
            for s in T.unroll(LOG_CL):
                om[0] = T.cuda.__shfl_xor_sync(T.uint32(FULL_MASK), st[2], (CL // 2) >> s, 32)
                os_[0] = T.cuda.__shfl_xor_sync(T.uint32(FULL_MASK), st[3], (CL // 2) >> s, 32)
                mn[0] = _fmax(st[2], om[0])
                st[3] = st[3] * _ex2((st[2] - mn[0]) * T.float32(LOG2E)) + os_[0] * _ex2(
                    (om[0] - mn[0]) * T.float32(LOG2E)
                )
                st[2] = mn[0]
            # the remote values are consumed: release this CTA's reads (wait at the very end)
            T.cuda.func_call("mkb_c05v2_arrive", ARRIVE_RELEASE)
            sc[0] = _ex2((st[0] - st[2]) * T.float32(LOG2E)) / st[3]
        else:
            sc[0] = T.float32(1.0) / st[1]

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
            T.cuda.func_call("mkb_c05v2_wait", WAIT_ACQUIRE)

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

"""C03 log_softmax, TIRx (tvm_tirx 0.1.0a4) expert solution: y = x - logsumexp(x) per row,
bf16 logits in, fp32 log-probabilities out.

One read of x from DRAM (2 B per element) and one write of y (4 B per element): the memory-bound
minimum.  The row waits in SHARED memory between the two (one bulk copy), one CTA of 512 threads
per row, three CTAs per SM, one block barrier per row, full-line stores.

Design
* One CTA of THREADS = 512 per row.  Thread 0 inits the mbarrier and makes the init visible to
  the async proxy (``fence.mbarrier_init``, thread 0 only); the threads write the pad (finite
  bf16 -1e30 past the row end: no predicates, no -inf, so no inf - inf); one barrier; thread 0
  arms the mbarrier with the row's byte count and issues ONE ``cp.async.bulk`` of the row (64000
  B at V = 32000) into dynamic shared memory; everyone waits on the mbarrier.  The TMA engine
  keeps the whole row in flight from the CTA's first cycles, with no registers staging it.
* Quads: thread t owns quads t + j * THREADS of 4 bf16 (``ld.shared.v2``, a warp reads 256
  contiguous bytes: no bank conflicts), j < QPT = 16.  Pass 1: thread max (``max.bf16x2`` on the
  packed words, exact); pass 2: sum of exp2(x * log2 e - m_t * log2 e) relative to the thread's
  own max (FMA + ex2.approx, no barrier); one (max, sum) log-sum-exp merge: xor-shuffle
  butterfly, one pair per warp in smem, ONE ``cta_sync``, butterfly over the warp pairs;
  lse = m + log2(sum) * ln 2 (lg2.approx).  Pass 3 re-reads the quads and stores y = x - lse.
* Stores: one ``st.global.v4.f32`` per quad, so one warp store instruction writes 512 CONTIGUOUS
  bytes (4 full 128-byte lines), predicated on the row end.
* min_blocks_per_sm = 3, preferred shared-memory carveout 100% (passed as a launch attribute of
  cuLaunchKernelEx, CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT).
* Host path: one ``tvm_tirx.tirx.compile`` for sm_90a per shape set (static T, V); run() calls
  the compiled function on the torch tensors.

Measured on the H200 (full mode):
* bench/h200/2026-12-02b/solutions-CF.md (`mkb solutions C F`, one run): 199.5 us (IQR 1.1),
  84.5% of the roofline ideal (168.6 us).  The CuTe expert (a persistent design) runs 212.2 us in
  the same run.
* bench/h200/2026-12-02b/tune-r2.json (one judge, back to back): 199.7 us (IQR 1.3), against
  288.1 us (IQR 1.2) for the previous TIRx expert.  A persistent design (two CTAs of 512 threads
  per SM, the next row's bulk copy in flight while the current row is reduced from registers)
  ran 211.9 us (IQR 2.1) in the same run.

What changed from the previous design (same structure: one bulk copy per row into shared
memory, one CTA per row, 3 CTAs per SM, one barrier per row):
* The previous kernel ran ``fence.proxy.async.shared::cta`` in ALL 512 threads (SASS:
  MEMBAR.ALL.CTA + FENCE.VIEW.ASYNC.S per thread); this one runs only ``fence.mbarrier_init`` in
  thread 0.
* The previous kernel read vectors of 8 bf16 and wrote 32 bytes per thread as two 16-byte halves
  32 bytes apart: each warp store instruction touched 8 half-written lines (twice the L1 -> L2
  store requests for the same DRAM bytes).  Here the quads give one full-line store per warp
  instruction.
The 88 us gain comes from these two changes; no run changed one of them alone, so which of the
two gave how much is not known.  (The previous CuTe expert, thread-0 fence but half-line stores,
ran 237.4 us in the same run: a hint that both matter, not a controlled test.)  The carveout was
NOT the cause of the old gap to CuTe: it is still passed as a launch attribute here, unchanged.
Compiled for sm_90a and disassembled, the previous TIRx kernel and the CuTe kernel of the same
one-CTA-per-row design had the same structure and instruction mix (640 vs 664 SASS lines: 40
registers, no local memory, 16 LDS.128, 16 STG.128, 82 MUFU.EX2 (ex2.approx.ftz in both), 74
FFMA, 146-147 FADD, 12 VHMNMX.BF16_V2 + 8 HMNMX2, 18 SHFL.BFLY, 2 BAR.SYNC, the same mbarrier
try_wait loop); the all-thread fence and the carveout API were the only differences found.

Numerics: fp32 throughout; per-thread partial sums rescaled by exp2((m_t - m) * log2 e) in the
merge (online log-sum-exp; any summation order and ex2/lg2.approx are allowed by the statement).
Limits: V % 8 == 0 (16-byte bulk copy), V <= 4 * MAX_QPT * THREADS = 32768 (shared memory per
CTA at 3 CTAs per SM), T * V < 2**31 (int32 indexing).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

QUAD = 4  # bf16 per 8-byte shared load = fp32 per 16-byte global store
THREADS = 512  # one row per CTA
WARPS = THREADS // 32
MAX_QPT = 16  # 16 * 512 * 4 = 32768 values: the largest row (3 x 64 KB buffers per SM)
MIN_BLOCKS = 3  # CTAs per SM (3 x 64.2 KB of shared memory at V = 32000)
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
PAD_WORD = 0xF14AF14A  # two bf16 -1.0e30 (finite)
M_FLOOR = -1.0e30
Y_STORE = "st.global.v4.f32"

# One bulk copy global -> this CTA's shared memory, completion counted on an mbarrier (sm_90).
BULK = r"""
__device__ __forceinline__ void mkb_c03v3_bulk(unsigned int dst, const void* src,
                                               unsigned int bytes, unsigned int bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
"""
# Make the mbarrier initialisation visible to the async proxy (thread 0 only, as CuTe does).
INIT_FENCE = r"""
__device__ __forceinline__ void mkb_c03v3_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
"""
# Lane-wise max of two packed bf16 pairs (exact).
MAX2 = r"""
__device__ __forceinline__ unsigned int mkb_c03v3_max2(unsigned int a, unsigned int b) {
  unsigned int d;
  asm("max.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
}
"""


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fmax(a, b):
    return T.call_pure_extern("fmaxf", a, b, ty="float32")


def _fma(a, b, c):
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _max2(a, b):
    return T.cuda.func_call("mkb_c03v3_max2", a, b, MAX2, ty="uint32")


def _shfl(v, mask):
    return T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), v, mask, 32)


def make_kernel(rows: int, vocab: int):
    """Log-softmax over the last axis of a static [rows, vocab] bf16 matrix, fp32 out."""
    assert vocab % 8 == 0, "V must be a multiple of 8 (16-byte bulk copy)"
    assert rows * vocab < 2**31, "int32 indexing"
    NQ = vocab // QUAD
    QPT = -(-NQ // THREADS)
    assert QPT <= MAX_QPT, f"V={vocab} too long for the shared-memory row"
    FULL = NQ // THREADS  # quad slots valid for every thread
    NWORDS = QPT * THREADS * 2  # padded row, packed bf16 pairs
    REAL_WORDS = vocab // 2
    PAD_ITERS = -(-(NWORDS - REAL_WORDS) // THREADS)
    ROW_BYTES = vocab * 2
    TT = rows
    VV = vocab

    @T.function
    def log_softmax(X: T.Tensor((TT, VV), T.bfloat16), Y: T.Tensor((TT, VV), "float32")):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=TT, block=THREADS, preferred_shared_memory_carveout=100),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=MIN_BLOCKS),
        )
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        pool = SMEMPool()
        xs = pool.alloc((NWORDS,), "uint32", align=128)
        bar = pool.alloc((1,), "uint64", align=8)
        red = pool.alloc((2 * WARPS,), "float32", align=16)
        pool.commit()
        w = T.alloc_local((2,), "uint32")
        vm = T.alloc_local((1,), "uint32")
        acc = T.alloc_local((4,), "float32")  # thread max, thread sum, lse, scratch
        ms = T.alloc_local((2,), "float32")  # (max, sum) being merged

        # 0. mbarrier (thread 0 only, no all-thread proxy fence), pad, one bulk copy of the row
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
            T.cuda.func_call("mkb_c03v3_init_fence", INIT_FENCE)
        for i in T.unroll(PAD_ITERS):
            if REAL_WORDS + i * THREADS + tid < NWORDS:
                xs[REAL_WORDS + i * THREADS + tid] = T.uint32(PAD_WORD)
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar.ptr_to([0]), T.uint32(ROW_BYTES))
            T.cuda.func_call(
                "mkb_c03v3_bulk",
                T.cuda.cvta_generic_to_shared(xs.ptr_to([0])),
                X.ptr_to([row, 0]),
                T.uint32(ROW_BYTES),
                T.cuda.cvta_generic_to_shared(bar.ptr_to([0])),
                BULK,
            )
        T.cuda.mbarrier_wait(bar.ptr_to([0]), 0)

        # 1. the thread's max (max.bf16x2 on packed pairs)
        vm[0] = T.uint32(PAD_WORD)
        for j in T.unroll(QPT):
            w[T.ramp(0, 1, 2)] = xs[T.ramp((tid + j * THREADS) * 2, 1, 2)]
            vm[0] = _max2(vm[0], _max2(w[0], w[1]))
        acc[0] = _fmax(_fmax(_lo(vm[0]), _hi(vm[0])), T.float32(M_FLOOR))
        acc[3] = acc[0] * T.float32(LOG2E)

        # 2. the thread's sum relative to its own max
        acc[1] = T.float32(0.0)
        for j in T.unroll(QPT):
            w[T.ramp(0, 1, 2)] = xs[T.ramp((tid + j * THREADS) * 2, 1, 2)]
            acc[1] = acc[1] + (
                (
                    T.exp2(_fma(_lo(w[0]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[0]), T.float32(LOG2E), -acc[3]))
                )
                + (
                    T.exp2(_fma(_lo(w[1]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[1]), T.float32(LOG2E), -acc[3]))
                )
            )

        # 3. (max, sum) merge: warp butterfly, one pair per warp in smem, ONE barrier
        ms[0] = acc[0]
        ms[1] = acc[1]
        for i in T.unroll(5):
            acc[2] = _shfl(ms[0], 1 << i)
            acc[3] = _shfl(ms[1], 1 << i)
            acc[0] = _fmax(ms[0], acc[2])
            ms[1] = ms[1] * T.exp2((ms[0] - acc[0]) * T.float32(LOG2E)) + acc[3] * T.exp2(
                (acc[2] - acc[0]) * T.float32(LOG2E)
            )
            ms[0] = acc[0]
        if lane == 0:
            red[warp] = ms[0]
            red[WARPS + warp] = ms[1]
        T.cuda.cta_sync()
        ms[0] = red[T.truncmod(lane, WARPS)]
        ms[1] = red[WARPS + T.truncmod(lane, WARPS)]
        for i in T.unroll(WARPS.bit_length() - 1):
            acc[2] = _shfl(ms[0], 1 << i)
            acc[3] = _shfl(ms[1], 1 << i)
            acc[0] = _fmax(ms[0], acc[2])
            ms[1] = ms[1] * T.exp2((ms[0] - acc[0]) * T.float32(LOG2E)) + acc[3] * T.exp2(
                (acc[2] - acc[0]) * T.float32(LOG2E)
            )
            ms[0] = acc[0]
        acc[2] = ms[0] + T.log2(ms[1]) * T.float32(LN2)  # lse

        # 4. y = x - lse: one 16-byte store per quad, 512 contiguous bytes per warp instruction
        for j in T.unroll(QPT):
            if j < FULL or tid + j * THREADS < NQ:
                w[T.ramp(0, 1, 2)] = xs[T.ramp((tid + j * THREADS) * 2, 1, 2)]
                T.ptx[Y_STORE](
                    Y.ptr_to([row, (tid + j * THREADS) * QUAD]),
                    _lo(w[0]) - acc[2],
                    _hi(w[0]) - acc[2],
                    _lo(w[1]) - acc[2],
                    _hi(w[1]) - acc[2],
                )

    return log_softmax


def build(spec):
    """Compile for spec's static (T, V) and return run(x, y)."""
    rows = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    kernel = make_kernel(rows, vocab)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["log_softmax"]

    def run(x, y):
        fn(x, y)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

"""C03 log_softmax, TIRx (tvm_tirx 0.1.0a4) expert solution: y = x - logsumexp(x) per row,
bf16 logits in, fp32 log-probabilities out.

One read of x from DRAM (2 B per element) and one write of y (4 B per element, 16-byte coalesced
stores): the memory-bound minimum. The row waits in SHARED memory between the two, so registers
hold none of it and three rows fit per SM.

* One CTA of THREADS = 512 per row. Thread 0 arms an mbarrier with the row's byte count and
  issues ONE ``cp.async.bulk.shared::cluster.global`` of the whole row (V * 2 bytes, 64000 at
  V = 32000) into dynamic shared memory; everyone waits on the mbarrier. The TMA engine keeps
  the whole 64 KB in flight from the CTA's first cycles, with no registers staging it.
* The smem row is padded to THREADS * VPT vectors of 8 bf16 (64 KB at V = 32000: VPT = 8, 4000
  real vectors of 4096); the threads write the pad with a finite bf16 -1e30 before the barrier
  that precedes the copy (disjoint bytes), so the max and sum passes need no predicates and never
  see -inf (no inf - inf). Short rows (the check shapes V = 256 and 1000) take the same path
  with VPT = 1 (mostly pad).
* Pass 1 (smem, ``ld.shared.v4``): the thread's max over its vectors t + k * THREADS (a warp reads
  512 contiguous bytes: no bank conflicts) with ``max.bf16x2`` on the packed words (exact, half
  an instruction per value). Pass 2: the thread's sum of exp2(x * log2 e - m_t * log2 e)
  relative to its OWN max (FMA + ex2.approx), no barrier. Then one (max, sum) log-sum-exp
  merge: xor-shuffle butterfly, one pair per warp in smem, ONE ``cta_sync``, butterfly over the
  warp pairs. lse = m + log2(sum) * ln 2 (lg2.approx). Pass 3: y = x - lse from smem, two
  ``st.global.v4.f32`` per vector (1 KB contiguous per warp store pair), predicated on the row end.
* min_blocks_per_sm = 3 (at most 40 registers per thread: 3 x 512 threads on the 64K-register
  file), preferred shared-memory carveout 100%.
* Host path: one ``tvm_tirx.tirx.compile`` for sm_90a per shape set (static T, V); run() calls
  the compiled function on the torch tensors.

Measured on the H200 (bench/h200/2026-12-02/diag-wake200.json, full mode, one judge):
290.0 us (IQR 1.3), 58.1% of the roofline ideal (168.6 us), 2.75x the fastest eager formulation
(log_softmax_fp32), 0.87x torch.compile. The previous design (row in registers, 512 threads,
two CTAs per SM) ran 351.0 us in the same run; that design without its register spill and with
one barrier per row ran 308.7 us, so those two fixes account for 42 us of the 61 us gain and the
shared-memory row (bulk copy, three rows per SM) for the other 19 us. The CuTe expert (the same
shared-memory design) runs 239.0 us (bench/h200/2026-12-02/diag-cute-wake200.json): this one is
1.21x slower.

Why this design is faster than the register-resident row:
* The register row needs the whole 64K-register file for two rows per SM (512 threads x 64
  registers) and at that cap ptxas spilled ~68 B per thread (local-memory traffic through L1 on
  every row). Here registers hold no row.
* Rows in flight: shared memory allows three per SM (3 x 64.2 KB = 193 KB <= 227 KB), 396 rows
  on 132 SMs instead of 264; while one CTA reduces (~32000 ex2 at 16/clk/SM ~ 1.1 us) or bursts
  its 128 KB of stores, two others keep up to 64 KB of loads each in flight (Little: ~35 KB per
  SM keeps the SM's DRAM share busy). Waves: 4096 / 396 = 10.3 instead of 15.5 (independent
  rows, a short tail).
* One block barrier per row instead of four (cta_max and cta_sum, two each).

Numerics: fp32 throughout; per-thread partial sums rescaled by exp2((m_t - m) * log2 e) in the
merge (online log-sum-exp; any summation order and ex2/lg2.approx are allowed by the statement).
Limits: V <= 8 * MAX_VPT * THREADS = 65536 (shared memory), T * V < 2**31 (int32 indexing).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.backend.cuda.lang import SMEMPool
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
THREADS = 512  # one row per CTA
WARPS = THREADS // 32
MAX_VPT = 16  # 16 * 512 * 8 = 65536 values: the largest row the smem buffer holds
MIN_BLOCKS = 3  # CTAs per SM (3 x 64.2 KB of shared memory at V = 32000)
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
PAD_WORD = 0xF14AF14A  # two bf16 -1.0e30 (finite)
M_FLOOR = -1.0e30
Y_STORE = "st.global.v4.f32"

# One bulk copy global -> this CTA's shared memory, completion counted on an mbarrier (sm_90).
BULK = r"""
__device__ __forceinline__ void mkb_c03v1_bulk(unsigned int dst, const void* src,
                                               unsigned int bytes, unsigned int bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}
"""
# Lane-wise max of two packed bf16 pairs (exact).
MAX2 = r"""
__device__ __forceinline__ unsigned int mkb_c03v1_max2(unsigned int a, unsigned int b) {
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
    return T.cuda.func_call("mkb_c03v1_max2", a, b, MAX2, ty="uint32")


def _shfl(v, mask):
    return T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), v, mask, 32)


def make_kernel(rows: int, vocab: int):
    """Log-softmax over the last axis of a static [rows, vocab] bf16 matrix, fp32 out."""
    assert vocab % VEC == 0, "V must be a multiple of 8"
    assert rows * vocab < 2**31, "int32 indexing"
    NV = vocab // VEC
    VPT = -(-NV // THREADS)
    assert VPT <= MAX_VPT, f"V={vocab} too long for the shared-memory row"
    FULL = NV // THREADS  # vector slots valid for every thread
    NWORDS = VPT * THREADS * 4  # padded row, packed bf16 pairs
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
        w = T.alloc_local((4,), "uint32")
        vm = T.alloc_local((1,), "uint32")
        acc = T.alloc_local((4,), "float32")  # thread max, thread sum, lse, scratch
        ms = T.alloc_local((2,), "float32")  # (max, sum) being merged

        # 0. mbarrier, pad, one bulk copy of the row
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
        T.ptx.fence.proxy.async_.shared__cta()
        for i in T.unroll(PAD_ITERS):
            if REAL_WORDS + i * THREADS + tid < NWORDS:
                xs[REAL_WORDS + i * THREADS + tid] = T.uint32(PAD_WORD)
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar.ptr_to([0]), T.uint32(ROW_BYTES))
            T.cuda.func_call(
                "mkb_c03v1_bulk",
                T.cuda.cvta_generic_to_shared(xs.ptr_to([0])),
                X.ptr_to([row, 0]),
                T.uint32(ROW_BYTES),
                T.cuda.cvta_generic_to_shared(bar.ptr_to([0])),
                BULK,
            )
        T.cuda.mbarrier_wait(bar.ptr_to([0]), 0)

        # 1. the thread's max (max.bf16x2 on packed pairs)
        vm[0] = T.uint32(PAD_WORD)
        for k in T.unroll(VPT):
            w[T.ramp(0, 1, 4)] = xs[T.ramp((tid + k * THREADS) * 4, 1, 4)]
            vm[0] = _max2(vm[0], _max2(_max2(w[0], w[1]), _max2(w[2], w[3])))
        acc[0] = _fmax(_fmax(_lo(vm[0]), _hi(vm[0])), T.float32(M_FLOOR))
        acc[3] = acc[0] * T.float32(LOG2E)

        # 2. the thread's sum relative to its own max
        acc[1] = T.float32(0.0)
        for k in T.unroll(VPT):
            w[T.ramp(0, 1, 4)] = xs[T.ramp((tid + k * THREADS) * 4, 1, 4)]
            acc[1] = acc[1] + (
                (
                    T.exp2(_fma(_lo(w[0]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[0]), T.float32(LOG2E), -acc[3]))
                )
                + (
                    T.exp2(_fma(_lo(w[1]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[1]), T.float32(LOG2E), -acc[3]))
                )
            ) + (
                (
                    T.exp2(_fma(_lo(w[2]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[2]), T.float32(LOG2E), -acc[3]))
                )
                + (
                    T.exp2(_fma(_lo(w[3]), T.float32(LOG2E), -acc[3]))
                    + T.exp2(_fma(_hi(w[3]), T.float32(LOG2E), -acc[3]))
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

        # 4. y = x - lse, fp32, two 16-byte stores per vector
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                w[T.ramp(0, 1, 4)] = xs[T.ramp((tid + k * THREADS) * 4, 1, 4)]
                for half in T.unroll(2):
                    T.ptx[Y_STORE](
                        Y.ptr_to([row, (tid + k * THREADS) * VEC + 4 * half]),
                        _lo(w[2 * half]) - acc[2],
                        _hi(w[2 * half]) - acc[2],
                        _lo(w[2 * half + 1]) - acc[2],
                        _hi(w[2 * half + 1]) - acc[2],
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

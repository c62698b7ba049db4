"""C04 cross_entropy, TIRx (tvm_tirx 0.1.0a4) expert solution:
loss[t] = logsumexp(logits[t, :]) - logits[t, target[t]], bf16 logits, int64 targets, fp32 loss.

One read of the logits (the memory-bound minimum; the losses are 4 bytes per row):

* One CTA of THREADS = 512 threads per row (T = 4096 rows: about 31 rows per SM). A row of
  V = 128256 bf16 (250 KB) does not fit in registers, and it is needed only through its
  (max, sum): every thread streams its share of the row once with an online log-sum-exp.
* Streaming: iteration it loads U = 4 vectors per thread with 16-byte
  ``ld.global.nc.v4.b32`` (vector it * U * THREADS + u * THREADS + tid, so each
  warp load covers 512 contiguous bytes; 64 bytes in flight per thread before any math), then
  folds the chunk into the thread's running (m, s): cm = max of the 32 logits, m' = max(m, cm),
  s = s * exp2((m - m') log2 e) + sum exp2(x log2 e - m' log2 e) (one FMA and one ex2.approx
  per logit, fp32; the rescale costs one ex2 per 32 logits). V = 128256 is 16032 vectors =
  7.8 iterations of 2048: only the U-th slot of the last iteration is predicated; slots past the
  row end are not loaded and hold -inf, which adds exp2(-inf) = 0. m starts at -1e30 (finite),
  so a thread that sees no logit keeps s = 0 without an inf - inf.
* Combine: M = cta_max(m) (warp shuffles + shared memory), s * exp2((m - M) log2 e) summed with
  cta_sum (own scratch), lse = M + log2(S) ln 2 (lg2.approx once per row). Thread 0 loads the
  target id and its logit before the stream starts (latency hidden), and writes
  loss = lse - logit in fp32.
* ~4 ALU instructions + 1 MUFU ex2 per logit: at 4.17 TB/s the SFU runs at about half of its
  16 ex2 per clock per SM, the issue slots at about a third. Registers: ptxas (CPU build,
  sm_90a) gives 55 per thread with ``min_blocks_per_sm = 2``, no spills: two CTAs (1024
  threads, 64 KB of loads in flight) per SM. U = 8 spills inside the loop at that cap; U = 6
  fits in 64 registers but wastes most of a 6th iteration. Measured on the H200
  (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 241.6 us, 93.2% of the roofline ideal.
* Int32 indexing: T * V must stay below 2^31 (the benchmark has 5.3e8).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
U = 4  # vectors per thread per iteration (loads in flight)
MAX_THREADS = 512
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
M_INIT = -1.0e30  # finite "minus infinity" for the running max
NEG_INF2 = 0xFF80FF80  # two bf16 -inf
X_LOAD = "ld.global.nc.v4.b32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)


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


def _add(a, b):
    return a + b


def _fma(a, b, c):
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def plan(nv: int):
    """Threads per CTA: a power-of-two warp count, at most MAX_THREADS, about U vectors each."""
    threads = -(-nv // U)
    warps = 1
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    return warps * 32


def make_kernel(rows: int, vocab: int):
    """Per-row cross-entropy of static [rows, vocab] bf16 logits and [rows] int64 targets."""
    assert vocab % VEC == 0, "V must be a multiple of 8"
    assert rows * vocab < 2**31, "int32 indexing"
    NV = vocab // VEC
    THREADS = plan(NV)
    WARPS = THREADS // 32
    STEP = U * THREADS  # vectors per iteration of the whole CTA
    NIT = -(-NV // STEP)
    TT = rows
    VV = vocab
    MIN_BLOCKS = max(1, 1024 // THREADS)  # register cap: <= 64 per thread, 2048 threads/SM

    @T.function
    def cross_entropy(
        X: T.Tensor((TT, VV), T.bfloat16),
        TG: T.Tensor((TT,), "int64"),
        L: T.Tensor((TT,), "float32"),
    ):
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=TT, block=THREADS),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=MIN_BLOCKS),
        )
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red_max = T.alloc_shared((WARPS,), "float32")
        red_sum = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((U * 4,), "uint32")
        st = T.alloc_local((4,), "float32")  # running max, running sum, target logit, new max

        # target logit first (thread 0): its latency hides behind the stream
        st[2] = T.float32(0.0)
        if tid == 0:
            st[2] = T.cast(X[row, T.cast(TG[row], "int32")], "float32")
        st[0] = T.float32(M_INIT)
        st[1] = T.float32(0.0)

        for it in range(NIT):
            # 1. U independent 16-byte loads (vectors past the row end hold -inf)
            for u in T.unroll(U):
                if it * STEP + u * THREADS + tid < NV:
                    T.ptx[X_LOAD](
                        xv[4 * u], xv[4 * u + 1], xv[4 * u + 2], xv[4 * u + 3],
                        X.ptr_to([row, (it * STEP + u * THREADS + tid) * VEC]),
                    )
                else:
                    for j in T.unroll(4):
                        xv[4 * u + j] = T.uint32(NEG_INF2)
            # 2. online (max, sum) update, fp32
            st[3] = _fmax(
                st[0], _tree(_fmax, [_fmax(_lo(xv[i]), _hi(xv[i])) for i in range(U * 4)])
            )
            ml2 = st[3] * T.float32(LOG2E)
            st[1] = _fma(
                st[1],
                T.exp2((st[0] - st[3]) * T.float32(LOG2E)),
                _tree(
                    _add,
                    [
                        T.exp2(_fma(_lo(xv[i]), T.float32(LOG2E), -ml2))
                        + T.exp2(_fma(_hi(xv[i]), T.float32(LOG2E), -ml2))
                        for i in range(U * 4)
                    ],
                ),
            )
            st[0] = st[3]

        # 3. combine the threads' (m, s): rescale to the row max, sum
        if T.constexpr(WARPS == 1):
            row_max = T.cuda.warp_max(st[0])
        else:
            row_max = T.cuda.cta_max(st[0], WARPS, red_max.data)
        st[3] = row_max
        st[1] = st[1] * T.exp2((st[0] - st[3]) * T.float32(LOG2E))
        if T.constexpr(WARPS == 1):
            row_sum = T.cuda.warp_sum(st[1])
        else:
            row_sum = T.cuda.cta_sum(st[1], WARPS, red_sum.data)
        if tid == 0:
            L[row] = st[3] + T.log2(row_sum) * T.float32(LN2) - st[2]

    return cross_entropy


def build(spec):
    """Compile for spec's static (T, V) and return run(logits, target, loss)."""
    rows = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    kernel = make_kernel(rows, vocab)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["cross_entropy"]

    def run(logits, target, loss):
        fn(logits, target, loss)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

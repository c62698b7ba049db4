"""C08 logsumexp, TIRx (tvm_tirx 0.1.0a4) expert solution: lse[t] = log(sum_v exp(x[t, v])) of
bf16 logits [T, V], fp32 out.

One read of x (the memory-bound minimum) and one fp32 store per row:

* One CTA per row (4096 CTAs of 256 threads for the benchmark). The row (V = 128256: 16032
  16-byte vectors, 250 KB) is too long to keep in registers, so it is streamed once in
  groups: each thread loads G = 4 vectors (32 bf16, 64 bytes in flight per thread) with
  ``ld.global.nc.v4.b32`` before any math; vector k of a thread is number
  tid + k * THREADS of the row, so every warp load instruction covers 512 contiguous bytes.
* Per-thread online log-sum-exp, rescaled once per group (not per element): with the group
  maximum g, m' = max(m, g), s' = s * 2^(m L2E - m' L2E) + sum 2^(x L2E - m' L2E); the
  exponent of each element is one FFMA (x * log2 e - m' log2 e) and one ``ex2.approx``
  (--use_fast_math), plus the bf16 -> fp32 unpack (a shift or a mask), one FMNMX for the
  maximum and one FADD for the sum: about 5 instructions per element against a budget of
  about 16 at 4.17 TB/s (8 bf16 per SM-cycle at 132 SMs x 1.98 GHz), and 8 MUFU.EX2 per
  SM-cycle of the 16 available. ptxas (sm_90a, benchmark shape): 53 registers, no spills, so
  4 CTAs (1024 threads, 64 KB of loads in flight) per SM; G = 8 took 90 registers (2 CTAs).
* Row combine: M = cta_max(m), S = cta_sum(s * 2^(m L2E - M L2E)) (warp shuffles + one
  shared-memory step each, own scratch buffer each), lse = M + log2(S) * ln 2, written once in
  fp32 by thread 0. The max is subtracted before every exp (the logits sit near 96, exp of an
  unshifted logit overflows fp32) and added back after the log.
* Precision: fp32 throughout. Each thread sums about 500 exponentials (tree per group, then a
  running sum over 16 groups); the shared exponent offset M L2E is rounded once (<= 8e-6 in
  log2 units, i.e. < 6e-6 on lse against a bound of about 2e-4 at lse ~ 110).
* Ragged edges: vectors past the row end (V / 8 not a multiple of THREADS, e.g. V = 1000) are
  not loaded; their registers hold the finite bf16 -3.39e38, whose exponent overflows to
  -inf in the FFMA and gives 2^-inf = 0, and which never wins the max against a real logit.
  The running max starts at -1e30 (finite), so a group with no valid element rescales by
  2^0 = 1 and adds 0: no inf - inf anywhere.
* Shapes are static per build: THREADS (a power-of-two number of warps, at most 256) and the
  group count come from V (V = 256 and V = 1000 -> one warp, shuffles only).
* Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 239.2 us, 94.1% of
  the roofline ideal. Speed knobs: MAX_THREADS and G (loads in flight per thread vs registers).
  Int32 indexing: T * V must stay below 2^31 (the benchmark has 5.25e8 elements).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
G = 4  # vectors per group: loads in flight per thread before the group's math
MAX_THREADS = 256
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
M_INIT = -1.0e30  # running max before the first element (finite: no inf - inf)
MASK_WORD = 0xFF7FFF7F  # two bf16 -3.39e38: exponent overflows to -inf, 2^-inf = 0
X_LOAD = "ld.global.nc.v4.b32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fmax(a, b):
    return T.call_pure_extern("fmaxf", a, b, ty="float32")


def _fma(a, b, c):
    """a * b + c with one rounding (T.fma does not lower in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _tree(combine, vals):
    """Balanced reduction tree over a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [combine(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def _add(a, b):
    return a + b


def plan(nv: int):
    """(threads, vectors per thread) for a row of nv 16-byte vectors."""
    threads = -(-nv // G)
    warps = 1  # power-of-two warp count (cta_reduce needs it), at least one warp
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    return threads, -(-nv // threads)


def make_kernel(rows: int, vocab: int):
    """Row log-sum-exp of a static [rows, vocab] bf16 matrix into fp32 [rows]."""
    assert vocab % VEC == 0, "V must be a multiple of 8"
    assert rows * vocab < 2**31, "int32 indexing"
    NV = vocab // VEC
    THREADS, VPT = plan(NV)
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    NG = -(-VPT // G)  # groups per thread
    TT = rows
    V = vocab

    @T.function
    def logsumexp(X: T.Tensor((TT, V), T.bfloat16), LSE: T.Tensor((TT,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TT, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red_max = T.alloc_shared((WARPS,), "float32")
        red_sum = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((G * 4,), "uint32")
        m = T.alloc_local((1,), "float32")  # running max (natural units)
        ml = T.alloc_local((1,), "float32")  # m * log2(e), rounded once
        s = T.alloc_local((1,), "float32")  # sum of 2^(x L2E - ml)
        nm = T.alloc_local((1,), "float32")
        nml = T.alloc_local((1,), "float32")
        m[0] = T.float32(M_INIT)
        ml[0] = T.float32(M_INIT * LOG2E)
        s[0] = T.float32(0.0)

        for g in T.serial(NG):
            # 1. issue the group's loads (masked slots get the finite -3.39e38 pair)
            for j in T.unroll(G):
                k = g * G + j
                if k < FULL or tid + k * THREADS < NV:
                    T.ptx[X_LOAD](
                        xv[4 * j], xv[4 * j + 1], xv[4 * j + 2], xv[4 * j + 3],
                        X.ptr_to([row, (tid + k * THREADS) * VEC]),
                    )
                else:
                    for i in T.unroll(4):
                        xv[4 * j + i] = T.uint32(MASK_WORD)
            # 2. group max, new running max, rescale, add the group's exponentials
            nm[0] = _fmax(m[0], _tree(_fmax, [f(xv[i]) for i in range(G * 4) for f in (_lo, _hi)]))
            nml[0] = nm[0] * T.float32(LOG2E)
            s[0] = _fma(
                s[0],
                T.exp2(ml[0] - nml[0]),
                _tree(_add, [T.exp2(_fma(f(xv[i]), T.float32(LOG2E), -nml[0]))
                             for i in range(G * 4) for f in (_lo, _hi)]),
            )
            m[0] = nm[0]
            ml[0] = nml[0]

        # 3. row combine: max, rescaled sum, lse = M + ln(S)
        if T.constexpr(WARPS == 1):
            nm[0] = T.cuda.warp_max(m[0])
        else:
            nm[0] = T.cuda.cta_max(m[0], WARPS, red_max.data)
        nml[0] = nm[0] * T.float32(LOG2E)
        s[0] = s[0] * T.exp2(ml[0] - nml[0])
        if T.constexpr(WARPS == 1):
            s[0] = T.cuda.warp_sum(s[0])
        else:
            s[0] = T.cuda.cta_sum(s[0], WARPS, red_sum.data)
        if tid == 0:
            LSE[row] = nm[0] + T.log2(s[0]) * T.float32(LN2)

    return logsumexp


def build(spec):
    """Compile for spec's static (T, V) and return run(x, lse)."""
    rows = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    kernel = make_kernel(rows, vocab)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["logsumexp"]

    def run(x, lse):
        fn(x, lse)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

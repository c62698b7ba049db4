"""C12 global_sq_norm, TIRx (tvm_tirx 0.1.0a4) expert solution: sq_norm = sum_i x[i]^2 of a
whole bf16 tensor [N], one fp32 scalar (0-d tensor).

A grid-wide reduction done as a deterministic two-stage reduction (no atomics, so the result
is bit-identical from call to call and nothing has to be zeroed first):

* Stage 1 (``sq_norm_partial``): a grid of NB CTAs of BLOCK = 256 threads, NB = 4 per SM of
  the H200's 132 (528) for large N, fewer when N is small, so the whole grid is resident at
  once (no tail wave). Thread g of the grid (g = bid * BLOCK + tid, TOTAL threads) reads the
  16-byte vectors (it * U + u) * TOTAL + g, u < U = 8: U independent
  ``ld.global.nc.L1::no_allocate.v4.b32`` loads (128 bytes in flight per thread) per round,
  every warp load covering 512 contiguous bytes; the grid sweeps x once, front to back.
  Each slot u has its own fp32 accumulator (bf16 -> fp32 by a shift or a mask, exact; x^2
  summed with FFMA): 8 independent dependency chains per thread, about 2 instructions per
  element against a budget of about 16 at 4.17 TB/s. At the end a balanced tree over the 8
  accumulators and ``cta_sum`` (warp shuffles + one shared-memory step) give the CTA's
  partial, stored by thread 0 in a scratch vector of NB fp32 (``torch.empty``, made on the
  first call and reused).
* Stage 2 (``sq_norm_final``): one CTA of 256 threads adds the NB partials in a fixed order
  (each thread a strided few sequentially, then ``cta_sum``) and writes the 0-d output; it
  costs one extra launch of a few microseconds next to the ~130 us stream of the benchmark.
  (A single-launch variant would let the last CTA to finish, found with an atomic ticket
  counter, do stage 2; it needs a counter that is zeroed before the first call and reset by
  that CTA, so it was not chosen.)
* Precision: 135168 threads x 8 accumulators each sum about 250 squares, then fp32 trees:
  the statement measures 3e-6 relative (0.02 of the bound) for 33792 fp32 grid-stride
  accumulators; this has more, shorter sums.
* Ragged edges: rounds past the end are predicated per vector (idx < N / 8); the N % 8
  trailing elements (N = 4000037 has 5) are read as scalars by thread 0 of CTA 0 and added to
  its accumulator, so no element is dropped and none is read twice.
* Unmeasured. Speed knobs: U and CTAS_PER_SM. Int32 indexing: N must stay below 2^31 (the
  benchmark has 2^28).
"""
import torch
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
U = 8  # vectors per thread per round (independent loads in flight)
BLOCK = 256  # threads per CTA of stage 1
SMS = 132  # H200 SM count: the grid is sized to be resident at once
CTAS_PER_SM = 4
BLOCK2 = 256  # threads of the stage-2 CTA
X_LOAD = "ld.global.nc.L1::no_allocate.v4.b32"  # read once: no L1 allocation


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fma(a, b, c):
    """a * b + c with one rounding (T.fma does not lower in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _tree(vals):
    """Balanced sum of a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def grid_size(n: int) -> int:
    """Stage-1 CTAs: 4 per SM, fewer when there is less than one round of work for them."""
    nv = n // VEC
    return max(1, min(SMS * CTAS_PER_SM, -(-nv // (BLOCK * U))))


def make_partial(n: int, nb: int):
    """Stage 1: per-CTA partial sums of squares of a static bf16 [n] vector into fp32 [nb]."""
    assert 0 < n < 2**31, "int32 indexing"
    NV = n // VEC  # full 16-byte vectors
    TAILN = n % VEC  # trailing scalars
    TOTAL = nb * BLOCK
    NR = -(-NV // (U * TOTAL))  # rounds (the last one may be partial)
    FR = NV // (U * TOTAL)  # rounds in which every slot of every thread is valid
    WARPS = BLOCK // 32
    N = n
    NB = nb

    @T.function
    def sq_norm_partial(X: T.Tensor((N,), T.bfloat16), PART: T.Tensor((NB,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=NB, block=BLOCK))
        bid = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        gid = bid * BLOCK + tid
        red = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((U * 4,), "uint32")
        acc = T.alloc_local((U,), "float32")
        for u in T.unroll(U):
            acc[u] = T.float32(0.0)
        for it in T.serial(NR):
            for u in T.unroll(U):
                if it < FR or (it * U + u) * TOTAL + gid < NV:
                    T.ptx[X_LOAD](
                        xv[4 * u], xv[4 * u + 1], xv[4 * u + 2], xv[4 * u + 3],
                        X.ptr_to([((it * U + u) * TOTAL + gid) * VEC]),
                    )
                else:
                    for i in T.unroll(4):
                        xv[4 * u + i] = T.uint32(0)
            for u in T.unroll(U):
                for i in T.unroll(4):
                    acc[u] = _fma(_lo(xv[4 * u + i]), _lo(xv[4 * u + i]), acc[u])
                    acc[u] = _fma(_hi(xv[4 * u + i]), _hi(xv[4 * u + i]), acc[u])
        if T.constexpr(TAILN > 0):
            if gid == 0:
                for i in T.unroll(TAILN):
                    acc[0] = _fma(T.cast(X[NV * VEC + i], "float32"), T.cast(X[NV * VEC + i], "float32"),
                                  acc[0])
        acc[0] = T.cuda.cta_sum(_tree([acc[u] for u in range(U)]), WARPS, red.data)
        if tid == 0:
            PART[bid] = acc[0]

    return sq_norm_partial


def make_final(nb: int):
    """Stage 2: the sum of nb fp32 partials, in a fixed order, into a 0-d fp32 tensor."""
    PER = -(-nb // BLOCK2)  # partials per thread
    WARPS = BLOCK2 // 32
    NB = nb

    @T.function
    def sq_norm_final(PART: T.Tensor((NB,), "float32"), Y: T.Tensor((), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=BLOCK2))
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        acc = T.alloc_local((1,), "float32")
        acc[0] = T.float32(0.0)
        for j in T.unroll(PER):
            if tid + j * BLOCK2 < NB:
                acc[0] = acc[0] + PART[tid + j * BLOCK2]
        acc[0] = T.cuda.cta_sum(acc[0], WARPS, red.data)
        if tid == 0:
            Y[()] = acc[0]

    return sq_norm_final


def build(spec):
    """Compile both stages for spec's static N and return run(x, sq_norm)."""
    n = int(spec.dims["N"])
    nb = grid_size(n)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex1 = tvm_tirx.tirx.compile(make_partial(n, nb), target=target)
    ex2 = tvm_tirx.tirx.compile(make_final(nb), target=target)
    partial = ex1["sq_norm_partial"]
    final = ex2["sq_norm_final"]
    scratch = []  # the partials vector, made on the first call (build may run without a GPU)

    def run(x, sq_norm):
        if not scratch:
            scratch.append(torch.empty((nb,), dtype=torch.float32, device=x.device))
        part = scratch[0]
        partial(x, part)
        final(part, sq_norm)

    run.modules = (ex1, ex2)  # keep the compiled modules alive with the launchers
    return run

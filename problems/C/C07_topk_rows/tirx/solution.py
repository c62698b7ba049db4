"""C07 topk_rows, TIRx (tvm_tirx 0.1.0a4) expert solution: the k = 8 largest logits of every row
of bf16 x [T, V] (values bf16, indices int64), ordered by value descending and, among equal
values, by column ascending (the statement's tie rule).

One read of x (the memory-bound minimum) plus a tiny output:

* Composite keys make the order total: for the element at column c with bf16 bits b,
  key = (ord(b) << 16) | (0xFFFF - c), where ord(b) = b ^ 0xFFFF for negative b and
  b ^ 0x8000 otherwise (monotonic in the value, -3.39e38 -> 0x0080). A larger key means
  "earlier in the order": larger value, or equal value and lower column. Keys are unique
  (V <= 65535 is asserted), so the top 8 keys are exactly the answer, with no tie logic
  left (-0.0 is mapped to +0.0 first: equal values). Two keys per packed bf16 pair cost
  about 9 integer operations.
* One CTA of up to 128 threads per row. Every thread streams its part of the row in
  groups of G = 4 16-byte ``ld.global.nc.L1::no_allocate.v4.b32`` loads (vector k of a thread
  is number tid + k * THREADS of the row: every warp load covers 512 contiguous bytes), and
  keeps a sorted list of 8 keys in registers. A key enters the list (an 8-step max/min
  insertion network) only when it beats the lane's filter f = max(own 8th key, warp
  threshold); after every group the warp threshold becomes the warp max of f. This is safe:
  the lane holding that threshold has 8 keys at least as large, so a smaller key cannot be
  in the top 8. With the warp-wide threshold almost every element after the first group
  costs only its key and one compare (about 5 instructions per element against a budget of
  about 16 at 4.17 TB/s); the first group of each thread (32 of ~250 elements at V = 32000)
  pays the insertion network.
* Merge: 8 rounds of warp max over the lanes' list heads (the winner pops its head) give
  each warp's top 8; lane 0 of every warp writes them to shared memory; warp 0 runs 8 more
  rounds over the WARPS * 8 candidates. Lane 0 then writes the 8 columns (int64) and the 8
  values, which it re-reads from x at those columns (an L2 hit; exact, no key decoding).
* Ragged edges: vectors past the row end (V / 8 not a multiple of THREADS, e.g. V = 1000)
  are not loaded; their words are 0xFFFFFFFF, whose ord is 0, so their keys are below every
  real key (real ords are >= 0x0080) and a row of V >= 8 always has 8 real keys that win.
  Empty list slots hold key 0, below everything.
* Shapes are static per build: THREADS (power-of-two warps, at most 128) and the group count
  come from V (V = 32000 -> 128 threads, 8 groups; V = 1000 and V = 256 -> one warp).
* Measured on the H200 (2026-12-01, bench/h200/2026-12-01g): correct; 153.1 us, 37% of the
  roofline ideal and 1.77x the CuTe expert (86.7 us), which filters whole groups of 256
  elements against the current 8th value before any per-element work. Why this kernel is
  slower is not measured yet; the likely cost is the divergent per-element insertion (most
  lanes insert in the first group): seed the warp threshold from the first group's lane maxima,
  or filter per group as the CuTe expert does. Int32 indexing: T * V must stay below 2^31.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
K = 8  # the statement's k (also spec.params["k"])
G = 4  # vectors per thread per group (loads in flight before the group's keys)
MAX_THREADS = 128
TARGET_VPT = 16  # vectors per thread aimed for when choosing THREADS
MASK_WORD = 0xFFFFFFFF  # a vector past the row end: ord 0, keys below every real key
X_LOAD = "ld.global.nc.L1::no_allocate.v4.b32"  # read once: no L1 allocation


def _ords(w):
    """Packed monotonic 16-bit images of a bf16 pair: b ^ 0xFFFF if negative, b ^ 0x8000 if not.

    -0.0 is first made +0.0 (the tie rule calls them equal): a half keeps its sign bit only
    when its magnitude is nonzero (magnitude + 0x7FFF sets bit 15 exactly then, no carry
    into the other half)."""
    nz = ((w & T.uint32(0x7FFF7FFF)) + T.uint32(0x7FFF7FFF)) & T.uint32(0x80008000)
    wc = w & (nz | T.uint32(0x7FFF7FFF))
    sm = (wc >> T.uint32(15)) & T.uint32(0x00010001)
    return wc ^ ((sm * T.uint32(0x7FFF)) | T.uint32(0x80008000))


def plan(nv: int):
    """(threads, vectors per thread) for a row of nv 16-byte vectors."""
    threads = -(-nv // TARGET_VPT)
    warps = 1  # power-of-two warp count, at least one warp
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    return threads, -(-nv // threads)


def make_kernel(rows: int, vocab: int, k: int):
    """Top-8 (value desc, column asc) of every row of a static [rows, vocab] bf16 matrix."""
    assert k == K, "the kernel is written for k = 8"
    assert vocab % VEC == 0, "V must be a multiple of 8"
    assert K <= vocab <= 0xFFFF, "keys hold the column in 16 bits"
    assert rows * vocab < 2**31, "int32 indexing"
    NV = vocab // VEC
    THREADS, VPT = plan(NV)
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    GG = min(G, VPT)
    NG = -(-VPT // GG)  # groups per thread
    # every slot's column, including past-the-end ones, must fit in the key's 16 bits
    assert NG * GG * THREADS * VEC <= 0x10000, "V too large for 16-bit column keys"
    NC = WARPS * K  # candidates of the CTA stage
    C2 = -(-NC // 32)  # candidates per lane of warp 0
    TT = rows
    V = vocab

    @T.function
    def topk_rows(
        X: T.Tensor((TT, V), T.bfloat16),
        VALUES: T.Tensor((TT, K), T.bfloat16),
        INDICES: T.Tensor((TT, K), "int64"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TT, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        cand = T.alloc_shared((C2 * 32,), "uint32")
        xv = T.alloc_local((GG * 4,), "uint32")
        t = T.alloc_local((K,), "uint32")  # the lane's list, t[0] largest
        res = T.alloc_local((K,), "uint32")  # merged top 8
        c = T.alloc_local((C2,), "uint32")
        key = T.alloc_local((1,), "uint32")
        nk = T.alloc_local((1,), "uint32")
        hi = T.alloc_local((1,), "uint32")
        f = T.alloc_local((1,), "uint32")  # filter: max(own 8th key, warp threshold)
        o = T.alloc_local((1,), "uint32")
        base = T.alloc_local((1,), "uint32")
        wm = T.alloc_local((1,), "uint32")
        for i in T.unroll(K):
            t[i] = T.uint32(0)
        f[0] = T.uint32(0)

        # 1. stream the row: keys, filter, insertion
        for g in T.serial(NG):
            for j in T.unroll(GG):
                kk = g * GG + j
                if kk < FULL or tid + kk * THREADS < NV:
                    T.ptx[X_LOAD](
                        xv[4 * j], xv[4 * j + 1], xv[4 * j + 2], xv[4 * j + 3],
                        X.ptr_to([row, (tid + kk * THREADS) * VEC]),
                    )
                else:
                    for i in T.unroll(4):
                        xv[4 * j + i] = T.uint32(MASK_WORD)
            for j in T.unroll(GG):
                # 0xFFFF - (first column of the vector); columns of a slot past the row end
                # run past V but stay below 2^16 (asserted): their keys are below real ones
                base[0] = T.uint32(0xFFFF) - T.cast((tid + (g * GG + j) * THREADS) * VEC, "uint32")
                for i in T.unroll(4):
                    o[0] = _ords(xv[4 * j + i])
                    for h in T.unroll(2):  # h = 0: low bf16 (column 2i), h = 1: high (2i + 1)
                        key[0] = ((o[0] << T.cast(16 - 16 * h, "uint32")) & T.uint32(0xFFFF0000)) | (
                            base[0] - T.cast(2 * i + h, "uint32"))
                        if key[0] > f[0]:
                            nk[0] = key[0]
                            for q in T.unroll(K):
                                hi[0] = T.max(t[q], nk[0])
                                nk[0] = T.min(t[q], nk[0])
                                t[q] = hi[0]
                            f[0] = T.max(f[0], t[K - 1])
            f[0] = T.cuda.warp_max(f[0])

        # 2. warp merge: 8 rounds of max over the list heads, the owner pops
        for r in T.unroll(K):
            wm[0] = T.cuda.warp_max(t[0])
            res[r] = wm[0]
            if t[0] == wm[0]:
                for q in T.unroll(K - 1):
                    t[q] = t[q + 1]
                t[K - 1] = T.uint32(0)

        # 3. CTA merge over the warps' top 8 (warp 0)
        if T.constexpr(WARPS > 1):
            if lane == 0:
                for r in T.unroll(K):
                    cand[warp * K + r] = res[r]
            T.cuda.cta_sync()
            if warp == 0:
                for j in T.unroll(C2):
                    if lane * C2 + j < NC:
                        c[j] = cand[lane * C2 + j]
                    else:
                        c[j] = T.uint32(0)
                for r in T.unroll(K):
                    hi[0] = c[0]
                    for j in T.unroll(C2 - 1):
                        hi[0] = T.max(hi[0], c[j + 1])
                    wm[0] = T.cuda.warp_max(hi[0])
                    res[r] = wm[0]
                    for j in T.unroll(C2):
                        if c[j] == wm[0]:
                            c[j] = T.uint32(0)

        # 4. outputs: columns from the keys, values re-read from x
        if tid == 0:
            for r in T.unroll(K):
                col = T.cast(T.uint32(0xFFFF) - (res[r] & T.uint32(0xFFFF)), "int32")
                INDICES[row, r] = T.cast(col, "int64")
                VALUES[row, r] = X[row, col]

    return topk_rows


def build(spec):
    """Compile for spec's static (T, V) and k; return run(x, values, indices)."""
    rows = int(spec.dims["T"])
    vocab = int(spec.dims["V"])
    k = int(spec.params["k"])
    kernel = make_kernel(rows, vocab, k)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["topk_rows"]

    def run(x, values, indices):
        fn(x, values, indices)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

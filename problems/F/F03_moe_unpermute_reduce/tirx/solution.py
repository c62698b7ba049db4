"""F03 moe_unpermute_reduce, TIRx (tvm_tirx 0.1.0a4) expert solution:
out[t, :] = sum_k w[t, k] * y[inv[t, k], :], y / out bf16, inv int32, w fp32.

Memory-bound gather-reduce (y is read once, out written once), compiled for the static shape
of one shape set:

* Work decomposition: one thread owns one 16-byte column vector (8 columns) of one token's
  output row. Grid x = column chunk of BLOCK threads (BLOCK = H / 8 rounded up to a warp, at
  most 256), grid y = token (swapped onto x when T > 65535). At the benchmark (H = 4096) that
  is 2 CTAs of 256 threads per token, 8192 CTAs in all.
* Per thread: the K row indices and K weights of its token are read first (16-byte vector
  loads when K % 4 == 0, 8-byte when K % 2 == 0; every thread of the CTA reads the same 8 * K
  bytes: broadcast loads, L1 hits after the first warp), then the K gathered 16-byte loads of
  y (``ld.global.nc.v4.b32``: each y row is used by exactly one token), written
  before any math in the source. A warp's load for one k covers 512 contiguous bytes of one y
  row, so the gather costs no sector efficiency: every row of y is read whole, once.
  Note: ptxas (sm_90a cubin inspected on the CPU) keeps the kernel at 32 registers for full
  occupancy (8 CTAs = 64 warps per SM) and interleaves the later y loads with the FMAs, so about
  2 loads per thread are in flight rather than K; at 64 warps per SM that is still ~64 KB in
  flight per SM (A01's streaming kernel compiles to the same kind of schedule).
* Math: bf16 -> fp32 by bit shifts, acc = fma(w_k, y_k, acc) in fp32 (k in order 0..K-1) with
  the fp32 weights as given, one rounding to bf16 per pair at the store
  (``cvt.rn.bf16x2.f32``), ``st.global.v4.b32``.
* Ragged edges: H % 8 == 0 is guaranteed, so only whole vectors exist; threads past the row's
  last vector (cv >= H / 8, e.g. H = 1000: 125 vectors in a CTA of 128 threads) do nothing.
  Every token has exactly one CTA row, so T needs no predicate.
* Int32 index arithmetic: T * K * H must stay below 2^31 (benchmark: 1.3e8).
* Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 72.7 us, 89.0% of
  the roofline ideal. What may cost speed: the index/weight loads sit in front of the gathered loads
  (two dependent memory latencies per thread); many resident CTAs (8 per SM) hide it. At small K (2)
  only 32 bytes per thread are in flight.

An earlier run, before later tuning rounds and the L2 flush fix of 2026-12-02f
(bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`), measured: 86.2 us, 75.6%
of the roofline ideal (65.2 us), 12.95x the fastest eager formulation, 3.74x torch.compile; the CuTe
expert 78.6 us (this one is 1.10x slower).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

MAX_BLOCK = 256  # threads per CTA (upper bound; narrow rows get fewer)
VEC = 8  # bf16 per 16-byte vector
# y rows are read exactly once: read-only path. No .L1::no_allocate hint: the team measured
# plain ld.global.nc 3-9% faster in 18 of 21 TIRx streaming kernels on the H200.
Y_LOAD = "ld.global.nc.v4.b32"
OUT_STORE = "st.global.v4.b32"
# inv / w rows: every thread of a CTA reads the same bytes (L1 hits): cached read-only path.
IW_LOAD4 = "ld.global.nc.v4.s32"
WF_LOAD4 = "ld.global.nc.v4.f32"
IW_LOAD2 = "ld.global.nc.v2.s32"
WF_LOAD2 = "ld.global.nc.v2.f32"


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fma(a, b, c):
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def make_kernel(tokens: int, hidden: int, topk: int):
    """moe_unpermute_reduce for static T = tokens, H = hidden, K = topk."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert tokens * topk * hidden < 2**31, "int32 indexing"
    assert topk >= 2, "K is 2 to 8"
    HV = hidden // VEC  # vectors per row
    BLOCK = min(MAX_BLOCK, ((HV + 31) // 32) * 32)
    GC = (HV + BLOCK - 1) // BLOCK  # column chunks per row
    TOK_ON_Y = tokens <= 65535
    GRID = (GC, tokens) if TOK_ON_Y else (tokens, GC)
    COL_TAIL = HV % BLOCK != 0
    TT = tokens
    TK = tokens * topk
    H = hidden
    K = topk
    IW = 4 if K % 4 == 0 else (2 if K % 2 == 0 else 1)  # vector width of the inv / w loads

    @T.function
    def moe_unpermute_reduce(
        Y: T.Tensor((TK, H), T.bfloat16),
        Inv: T.Tensor((TT, K), T.int32),
        Wt: T.Tensor((TT, K), T.float32),
        Out: T.Tensor((TT, H), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK))
        if T.constexpr(TOK_ON_Y):
            t = T.cuda.block_idx("y")
            cv = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        else:
            t = T.cuda.block_idx("x")
            cv = T.cuda.block_idx("y") * BLOCK + T.cuda.thread_idx("x")
        idx = T.alloc_local((K,), "int32")
        wv = T.alloc_local((K,), "float32")
        yv = T.alloc_local((K * 4,), "uint32")
        acc = T.alloc_local((VEC,), "float32")
        ov = T.alloc_local((4,), "uint32")
        if (not COL_TAIL) or cv < HV:
            c = cv * VEC
            # the token's K indices and weights: 16-byte (or 8-byte) vector loads when the
            # row of inv / w is aligned for them (K % 4 == 0: 16 B; K % 2 == 0: 8 B)
            if T.constexpr(IW == 4):
                for q in T.unroll(K // 4):
                    T.ptx[IW_LOAD4](
                        idx[4 * q], idx[4 * q + 1], idx[4 * q + 2], idx[4 * q + 3],
                        Inv.ptr_to([t, 4 * q]),
                    )
                    T.ptx[WF_LOAD4](
                        wv[4 * q], wv[4 * q + 1], wv[4 * q + 2], wv[4 * q + 3],
                        Wt.ptr_to([t, 4 * q]),
                    )
            elif T.constexpr(IW == 2):
                for q in T.unroll(K // 2):
                    T.ptx[IW_LOAD2](idx[2 * q], idx[2 * q + 1], Inv.ptr_to([t, 2 * q]))
                    T.ptx[WF_LOAD2](wv[2 * q], wv[2 * q + 1], Wt.ptr_to([t, 2 * q]))
            else:
                for k in T.unroll(K):
                    idx[k] = Inv[t, k]
                    wv[k] = Wt[t, k]
            # all K gathered loads first: K independent 16-byte requests in flight
            for k in T.unroll(K):
                T.ptx[Y_LOAD](
                    yv[4 * k], yv[4 * k + 1], yv[4 * k + 2], yv[4 * k + 3],
                    Y.ptr_to([idx[k], c]),
                )
            for j in T.unroll(4):
                acc[2 * j] = wv[0] * _lo(yv[j])
                acc[2 * j + 1] = wv[0] * _hi(yv[j])
            for kk in T.unroll(K - 1):
                for j in T.unroll(4):
                    acc[2 * j] = _fma(wv[kk + 1], _lo(yv[4 * kk + 4 + j]), acc[2 * j])
                    acc[2 * j + 1] = _fma(wv[kk + 1], _hi(yv[4 * kk + 4 + j]), acc[2 * j + 1])
            for j in T.unroll(4):
                T.ptx.cvt.rn.bf16x2.f32(ov[j], acc[2 * j + 1], acc[2 * j])
            T.ptx[OUT_STORE](Out.ptr_to([t, c]), ov[0], ov[1], ov[2], ov[3])

    return moe_unpermute_reduce


def build(spec):
    """Compile for spec's static (T, H, K) and return run(y, inv, w, out)."""
    tokens = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    topk = int(spec.dims["K"])
    kernel = make_kernel(tokens, hidden, topk)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["moe_unpermute_reduce"]

    def run(y, inv, w, out):
        fn(y, inv, w, out)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

"""B06 qk_rmsnorm, TIRx (tvm_tirx 0.1.0a4) expert solution: per-head RMSNorm of q [T, HQ, D]
with wq and of k [T, HK, D] with wk, bf16 in and out, fp32 math, one kernel for both.

One read of q and k, one write of q_out and k_out (the memory-bound minimum):

* A head (D = 128 or 64 bf16, D / 8 16-byte vectors) is handled by a group of LPH adjacent
  lanes, each holding VPH = min(4, D / 8) vectors (D = 128: 4 lanes x 4 vectors, D = 64:
  2 lanes x 4 vectors). Vector k of lane l is number l + k * LPH of the head, so each load
  instruction of a group covers LPH * 16 contiguous bytes (whole 32-byte sectors). Loads are
  ``ld.global.nc.v4.b32`` (read once), issued before any math together with the
  lane's weight vectors (``ld.global.nc``: the [D] weight is shared by every head and stays in
  L1); stores are ``st.global.v4.b32``.
* The head's sum of squares: fp32 (bf16 -> fp32 by bit shifts, a balanced tree per lane),
  then log2(LPH) ``shfl.xor`` steps inside the lane group; no shared memory, no barrier.
  rstd = rsqrt(sumsq / D + eps) (hardware rsqrt.approx); y = (x * rstd) * w in fp32, one
  rounding to bf16 per pair (``cvt.rn.bf16x2.f32``).
* Grid: CTAs of 256 threads (256 / LPH heads each); the first CQ CTAs cover the T * HQ heads
  of q, the next CK those of k (a CTA-uniform branch, so the shuffles never diverge). The last
  CTA of each part predicates its loads (zero fill) and stores on head < T * H; every lane
  still takes part in the shuffles.
* Int32 indexing: T * HQ * D must stay below 2^31.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
MAX_VPH = 4  # vectors per lane (64 bytes of the head in flight per lane)
THREADS = 256
X_LOAD = "ld.global.nc.v4.b32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)
W_LOAD = "ld.global.nc.v4.b32"  # shared by every head: let it live in L1
Y_STORE = "st.global.v4.b32"


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _tree(vals):
    """Balanced sum of a Python list of expressions (short dependency chains)."""
    while len(vals) > 1:
        nxt = [vals[i] + vals[i + 1] for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


def make_kernel(tokens: int, hq: int, hk: int, d: int, eps: float):
    """Per-head RMSNorm of static q [tokens, hq, d] and k [tokens, hk, d] (bf16)."""
    assert d % VEC == 0, "D must be a multiple of 8"
    NVH = d // VEC  # vectors per head
    VPH = min(MAX_VPH, NVH)
    assert NVH % VPH == 0
    LPH = NVH // VPH  # lanes per head
    assert LPH & (LPH - 1) == 0 and LPH <= 32, "lanes per head must be a power of two <= 32"
    assert tokens * max(hq, hk) * d < 2**31, "int32 indexing"
    HPC = THREADS // LPH  # heads per CTA
    NQ = tokens * hq
    NK = tokens * hk
    CQ = (NQ + HPC - 1) // HPC
    CK = (NK + HPC - 1) // HPC
    NSHUF = LPH.bit_length() - 1  # shfl.xor steps inside a lane group (masks 1, 2, ..)
    TT = tokens
    HQ = hq
    HK = hk
    D = d
    INV_D = 1.0 / d

    @T.macro
    def head_norm(Src, Wt, Dst, nh, n_heads, tail, cta):
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, LPH)
        head = cta * HPC + T.truncdiv(tid, LPH)
        tok = T.truncdiv(head, nh)
        hh = T.truncmod(head, nh)
        xv = T.alloc_local((VPH * 4,), "uint32")
        wv = T.alloc_local((VPH * 4,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        acc = T.alloc_local((1,), "float32")
        # 1. loads: the lane's weight vectors and its head vectors (zero past the last head)
        for k in T.unroll(VPH):
            T.ptx[W_LOAD](
                wv[4 * k], wv[4 * k + 1], wv[4 * k + 2], wv[4 * k + 3],
                Wt.ptr_to([(lane + k * LPH) * VEC]),
            )
        for k in T.unroll(VPH):
            if (not tail) or head < n_heads:
                T.ptx[X_LOAD](
                    xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                    Src.ptr_to([tok, hh, (lane + k * LPH) * VEC]),
                )
            else:
                for i in T.unroll(4):
                    xv[4 * k + i] = T.uint32(0)
        # 2. sum of squares of the head: per lane, then across its lane group
        acc[0] = _tree([_lo(xv[i]) * _lo(xv[i]) + _hi(xv[i]) * _hi(xv[i]) for i in range(VPH * 4)])
        if T.constexpr(NSHUF > 0):
            for s in T.unroll(NSHUF):
                acc[0] = acc[0] + T.cuda.__shfl_xor_sync(T.uint32(0xFFFFFFFF), acc[0], 1 << s, 32)
        acc[0] = T.rsqrt(acc[0] * T.float32(INV_D) + T.float32(eps))
        # 3. normalize, weight, one rounding to bf16, store
        if (not tail) or head < n_heads:
            for k in T.unroll(VPH):
                for j in T.unroll(4):
                    i = 4 * k + j
                    y_lo = (_lo(xv[i]) * acc[0]) * _lo(wv[i])
                    y_hi = (_hi(xv[i]) * acc[0]) * _hi(wv[i])
                    T.ptx.cvt.rn.bf16x2.f32(ov[j], y_hi, y_lo)
                T.ptx[Y_STORE](
                    Dst.ptr_to([tok, hh, (lane + k * LPH) * VEC]), ov[0], ov[1], ov[2], ov[3]
                )

    @T.function
    def qk_rmsnorm(
        Q: T.Tensor((TT, HQ, D), T.bfloat16),
        K: T.Tensor((TT, HK, D), T.bfloat16),
        WQ: T.Tensor((D,), T.bfloat16),
        WK: T.Tensor((D,), T.bfloat16),
        QO: T.Tensor((TT, HQ, D), T.bfloat16),
        KO: T.Tensor((TT, HK, D), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=CQ + CK, block=THREADS))
        bx = T.cuda.block_idx("x")
        if bx < CQ:
            head_norm(Q, WQ, QO, HQ, NQ, NQ % HPC != 0, bx)
        else:
            head_norm(K, WK, KO, HK, NK, NK % HPC != 0, bx - CQ)

    return qk_rmsnorm


def build(spec):
    """Compile for spec's static (T, HQ, HK, D) and return run(q, k, wq, wk, q_out, k_out)."""
    tokens = int(spec.dims["T"])
    hq = int(spec.dims["HQ"])
    hk = int(spec.dims["HK"])
    d = int(spec.dims["D"])
    eps = float(spec.params["eps"])
    kernel = make_kernel(tokens, hq, hk, d, eps)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["qk_rmsnorm"]

    def run(q, k, wq, wk, q_out, k_out):
        fn(q, k, wq, wk, q_out, k_out)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

"""C02 scaled_causal_softmax, TIRx (tvm_tirx 0.1.0a4) expert solution:
p[b, h, i, :] = softmax(scale * s[b, h, i, :] + causal mask), bf16 in and out, fp32 math.

One read of the visible scores and one write of p (the memory-bound minimum):

* One warp per score row (query i of head (b, h)); WARPS_PER_CTA rows per CTA, grid
  (ceil(S / WARPS_PER_CTA), B * H), so a CTA's rows are consecutive queries of one head.
  A row of S <= 1024 bf16 fits in the warp's registers (S = 1024: 4 vectors of 8 per lane),
  and the max and the sum are warp-shuffle reductions only: no shared memory, no barriers.
* Vector path (S % 8 == 0, the benchmark): 16-byte ``ld.global.nc.v4.b32``
  loads, vector k of lane l is number l + 32 k of the row (each warp instruction covers 512
  contiguous bytes). Only the vectors that hold a visible key (first column <= i) are loaded:
  the scores above the diagonal are never read. The stores cover the whole row with
  ``st.global.v4.b32``, zeros above the diagonal included.
* Ragged path (S % 8 != 0: rows after the first are not 16-byte aligned): the same warp-per-row
  structure with one bf16 per access (column lane + 32 k). Only check shapes take it.
* Math: t = s * (scale * log2 e) in fp32 (bf16 -> fp32 by bit shifts; one fp32 product, no
  bf16 rounding of the scaled scores), masked keys get -inf, m = row max of t, e = exp2(t - m)
  (ex2.approx; exp2(-inf) = 0 gives the exact zeros above the diagonal), sum in fp32, p = e * (1 /
  sum) rounded once to bf16 (``cvt.rn.bf16x2.f32`` on the vector path). exp2(t - m) equals
  exp(scale * s - max) up to the fp32 rounding of t (about 1e-5 relative at |t| near 130), far
  inside the bf16 tolerance; the max subtraction keeps it finite with the +1024 score offset.
* Measured on the H200 (bench/h200/2026-12-02f/solutions-ABCF-r13.md, one run): 101.1 us, 85.4% of
  the roofline ideal. Load balance: query i reads ceil((i + 1) / 8) vectors, so early rows are
  cheap; ptxas (CPU build, sm_90a) gives 48 registers, no spills: 10 CTAs of 4 warps per SM (40 rows
  in flight, up to 2 KB of loads per warp), and the scheduler evens out the row costs.
* Int32 indexing: B * H * S * S must stay below 2^31 (the benchmark has 1.3e8).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
WARPS_PER_CTA = 4  # rows per CTA (one warp each)
MAX_VPT = 8  # vectors per lane: S <= 2048 on the vector path
MAX_KPT = 32  # scalars per lane: S <= 1024 on the ragged path
LOG2E = 1.4426950408889634
X_LOAD = "ld.global.nc.v4.b32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)
Y_STORE = "st.global.v4.b32"


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


def make_kernel(batch: int, heads: int, seq: int, scale: float):
    """Scaled causal softmax of static [batch, heads, seq, seq] bf16 scores."""
    assert batch * heads * seq * seq < 2**31, "int32 indexing"
    vector = seq % VEC == 0
    NV = seq // VEC
    VPT = -(-NV // 32)  # vectors per lane (vector path)
    KPT = -(-seq // 32)  # scalars per lane (ragged path)
    if vector:
        assert VPT <= MAX_VPT, f"S={seq} too long for a warp-resident row"
    else:
        assert KPT <= MAX_KPT, f"S={seq} too long for a warp-resident row"
    FULL = NV // 32  # vector slots inside the row for every lane
    NE = VPT * VEC if vector else KPT  # fp32 values per lane
    B_, H_, S_ = batch, heads, seq
    K = scale * LOG2E
    THREADS = 32 * WARPS_PER_CTA
    GRID = (-(-seq // WARPS_PER_CTA), batch * heads)

    @T.function
    def causal_softmax(
        X: T.Tensor((B_, H_, S_, S_), T.bfloat16), P: T.Tensor((B_, H_, S_, S_), T.bfloat16)
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        bh = T.cuda.block_idx("y")
        b = T.truncdiv(bh, H_)
        h = T.truncmod(bh, H_)
        tid = T.cuda.thread_idx("x")
        lane = T.truncmod(tid, 32)
        q = T.cuda.block_idx("x") * WARPS_PER_CTA + T.truncdiv(tid, 32)  # query row i
        xv = T.alloc_local((VPT * 4,), "uint32")
        f = T.alloc_local((NE,), "float32")
        ov = T.alloc_local((4,), "uint32")
        red = T.alloc_local((2,), "float32")
        if q < S_:  # warp-uniform
            # 1. load the visible part of the row; t = s * scale * log2 e, -inf where masked
            if T.constexpr(vector):
                for k in T.unroll(VPT):
                    if (k < FULL or lane + k * 32 < NV) and (lane + k * 32) * VEC <= q:
                        T.ptx[X_LOAD](
                            xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                            X.ptr_to([b, h, q, (lane + k * 32) * VEC]),
                        )
                    else:
                        for j in T.unroll(4):
                            xv[4 * k + j] = T.uint32(0)
                for k in T.unroll(VPT):
                    for j in T.unroll(4):
                        col = (lane + k * 32) * VEC + 2 * j
                        f[8 * k + 2 * j] = T.if_then_else(
                            col <= q, _lo(xv[4 * k + j]) * T.float32(K), T.float32("-inf")
                        )
                        f[8 * k + 2 * j + 1] = T.if_then_else(
                            col + 1 <= q, _hi(xv[4 * k + j]) * T.float32(K), T.float32("-inf")
                        )
            else:
                for k in T.unroll(KPT):
                    if lane + k * 32 <= q:
                        f[k] = T.cast(X[b, h, q, lane + k * 32], "float32") * T.float32(K)
                    else:
                        f[k] = T.float32("-inf")

            # 2. row max (warp shuffles)
            red[0] = T.cuda.warp_max(_tree(_fmax, [f[i] for i in range(NE)]))

            # 3. exponentials in registers, row sum
            for i in T.unroll(NE):
                f[i] = T.exp2(f[i] - red[0])
            red[1] = T.float32(1.0) / T.cuda.warp_sum(_tree(_add, [f[i] for i in range(NE)]))

            # 4. normalize, one rounding to bf16, store the whole row
            if T.constexpr(vector):
                for k in T.unroll(VPT):
                    if k < FULL or lane + k * 32 < NV:
                        for j in T.unroll(4):
                            T.ptx.cvt.rn.bf16x2.f32(
                                ov[j], f[8 * k + 2 * j + 1] * red[1], f[8 * k + 2 * j] * red[1]
                            )
                        T.ptx[Y_STORE](
                            P.ptr_to([b, h, q, (lane + k * 32) * VEC]), ov[0], ov[1], ov[2], ov[3]
                        )
            else:
                for k in T.unroll(KPT):
                    if lane + k * 32 < S_:
                        P[b, h, q, lane + k * 32] = T.cast(f[k] * red[1], "bfloat16")

    return causal_softmax


def build(spec):
    """Compile for spec's static (B, H, S) and return run(s, p)."""
    batch = int(spec.dims["B"])
    heads = int(spec.dims["H"])
    seq = int(spec.dims["S"])
    scale = float(spec.params["scale"])
    kernel = make_kernel(batch, heads, seq, scale)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["causal_softmax"]

    def run(s, p):
        fn(s, p)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

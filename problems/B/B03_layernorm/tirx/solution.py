"""B03 layernorm, TIRx (tvm_tirx 0.1.0a4) expert solution: y = (x - mean) * rsqrt(var + eps) * w + b.

bf16 in and out, fp32 math; one read of x, one write of y (the memory-bound minimum):

* One CTA per row; the row is loaded once into registers with 16-byte
  ``ld.global.nc.v4.b32`` loads (8 bf16 each; H % 8 == 0 and 16-byte aligned
  rows are guaranteed). Each thread keeps VPT vectors (vector k of a thread is number
  tid + k * THREADS of the row, so every load instruction of a warp covers 512 contiguous
  bytes). All loads, including the thread's weight and bias vectors (``ld.global.nc``: w and b
  are re-read by every row and stay in L1/L2), are issued before any math.
* Exact two-pass statistics from the registers (no second read of memory): the row sum, then
  the sum of (x - mean)^2, each reduced in fp32 with warp shuffles + one shared-memory CTA step
  (``T.cuda.cta_sum``, one scratch buffer per reduction: it ends without a barrier). Biased
  variance (divided by H); rstd = rsqrt(var + eps) (hardware rsqrt.approx).
* y = ((x - mean) * rstd) * w + b in fp32, rounded once to bf16 per pair
  (``cvt.rn.bf16x2.f32``) and stored with ``st.global.v4.b32``.
* Shapes are static per build: THREADS and VPT come from H (about VPT_TARGET = 4 vectors =
  32 elements = 64 bytes per thread and tensor; H = 4096 -> 128 threads (4 warps),
  H = 1000 -> 32 threads, one warp reducing with shuffles only). Tail vectors (H / 8 not a
  multiple of THREADS) are predicated: the vectors past the row end are zero for the sum,
  masked out of the centered sum, neither loaded nor stored.
* Measured on the H200 (bench/h200/2026-12-02g/solutions-AB-r15.md, one run): 130.6 us, 88.0% of the
  roofline ideal. Speed knob: VPT_TARGET (2 gives 256-thread CTAs with fewer registers per thread
  and more CTAs per SM; 4 keeps more bytes in flight per thread).
* Int32 indexing: T * H must stay below 2^31.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
VPT_TARGET = 4  # vectors per thread aimed for (32 elements, 64 bytes of the row per thread)
MAX_THREADS = 1024
MAX_VPT = 16  # beyond this the row would no longer fit in registers comfortably
X_LOAD = "ld.global.nc.v4.b32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)
W_LOAD = "ld.global.nc.v4.b32"  # re-read by every row: let it live in L1
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


def plan(nv: int):
    """(threads, vectors per thread) for a row of nv 16-byte vectors."""
    threads = -(-nv // VPT_TARGET)
    # power-of-two warp count (cta_reduce needs it), at least one warp
    warps = 1
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-nv // threads)
    return threads, vpt


def _centered_sumsq(xv, m, tid, threads, nv, vpt):
    """Parse-time expression: sum over a thread's valid vectors of (x - m)^2 (fp32).

    Vector k of the thread is valid when tid + k * threads < nv; slots below nv // threads are
    valid for every thread and need no mask.
    """
    full = nv // threads
    parts = []
    for k in range(vpt):
        part = _tree([
            (_lo(xv[4 * k + j]) - m) * (_lo(xv[4 * k + j]) - m)
            + (_hi(xv[4 * k + j]) - m) * (_hi(xv[4 * k + j]) - m)
            for j in range(4)
        ])
        if k >= full:
            part = T.if_then_else(tid + k * threads < nv, part, T.float32(0.0))
        parts.append(part)
    return _tree(parts)


def make_kernel(rows: int, hidden: int, eps: float):
    """LayerNorm over the last axis of a static [rows, hidden] bf16 matrix."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows * hidden < 2**31, "int32 indexing"
    NV = hidden // VEC
    THREADS, VPT = plan(NV)
    assert VPT <= MAX_VPT, f"H={hidden} too long for the register-resident row"
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    TT = rows
    H = hidden
    INV_H = 1.0 / hidden

    @T.function
    def layernorm(
        X: T.Tensor((TT, H), T.bfloat16),
        W: T.Tensor((H,), T.bfloat16),
        B: T.Tensor((H,), T.bfloat16),
        Y: T.Tensor((TT, H), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TT, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        # one scratch buffer per reduction (cta_sum returns scratch[0] with no trailing barrier)
        red_sum = T.alloc_shared((WARPS,), "float32")
        red_var = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((VPT * 4,), "uint32")
        wv = T.alloc_local((VPT * 4,), "uint32")
        bv = T.alloc_local((VPT * 4,), "uint32")
        ov = T.alloc_local((4,), "uint32")
        mean = T.alloc_local((1,), "float32")
        acc = T.alloc_local((1,), "float32")

        # 1. load the row and the matching weight and bias vectors (all loads before any use)
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                T.ptx[X_LOAD](
                    xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                    X.ptr_to([row, (tid + k * THREADS) * VEC]),
                )
                T.ptx[W_LOAD](
                    wv[4 * k], wv[4 * k + 1], wv[4 * k + 2], wv[4 * k + 3],
                    W.ptr_to([(tid + k * THREADS) * VEC]),
                )
                T.ptx[W_LOAD](
                    bv[4 * k], bv[4 * k + 1], bv[4 * k + 2], bv[4 * k + 3],
                    B.ptr_to([(tid + k * THREADS) * VEC]),
                )
            else:
                for i in T.unroll(4):
                    xv[4 * k + i] = T.uint32(0)

        # 2. mean
        acc[0] = _tree([_lo(xv[i]) + _hi(xv[i]) for i in range(VPT * 4)])
        if T.constexpr(WARPS == 1):
            total = T.cuda.warp_sum(acc[0])
        else:
            total = T.cuda.cta_sum(acc[0], WARPS, red_sum.data)
        mean[0] = total * T.float32(INV_H)

        # 3. biased variance from the centered values (tail vectors masked out)
        acc[0] = _centered_sumsq(xv, mean[0], tid, THREADS, NV, VPT)
        if T.constexpr(WARPS == 1):
            ssd = T.cuda.warp_sum(acc[0])
        else:
            ssd = T.cuda.cta_sum(acc[0], WARPS, red_var.data)
        acc[0] = T.rsqrt(ssd * T.float32(INV_H) + T.float32(eps))

        # 4. normalize, affine, one rounding to bf16, store
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                for j in T.unroll(4):
                    i = 4 * k + j
                    y_lo = ((_lo(xv[i]) - mean[0]) * acc[0]) * _lo(wv[i]) + _lo(bv[i])
                    y_hi = ((_hi(xv[i]) - mean[0]) * acc[0]) * _hi(wv[i]) + _hi(bv[i])
                    T.ptx.cvt.rn.bf16x2.f32(ov[j], y_hi, y_lo)
                T.ptx[Y_STORE](Y.ptr_to([row, (tid + k * THREADS) * VEC]), ov[0], ov[1], ov[2], ov[3])

    return layernorm


def build(spec):
    """Compile for spec's static (T, H) and return run(x, w, b, y)."""
    rows = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    eps = float(spec.params["eps"])
    kernel = make_kernel(rows, hidden, eps)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["layernorm"]

    def run(x, w, b, y):
        fn(x, w, b, y)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

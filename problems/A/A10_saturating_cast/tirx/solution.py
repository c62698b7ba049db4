"""A10 saturating_cast, TIRx (tvm_tirx 0.1.0a4) expert solution:
y = bf16(clamp(x * s, -448, 448)), fp32 in, bf16 out.

Memory-bound streaming kernel (6 bytes of traffic per element, 4 instructions per element),
compiled for the static shape of one shape set:

* Elementwise on contiguous tensors, so the kernel sees x and y as flat arrays of
  NV = T * H / 4 groups of 4 elements (H % 8 == 0: no partial groups); flat views of both
  tensors are declared over their data pointers with ``T.decl_tensor``.
* Accesses: x is read with 16-byte ``ld.global.nc.v4.f32`` (read once), y is
  written with 8-byte ``st.global.v2.b32`` (4 bf16). A CTA of BLOCK threads owns BLOCK * UNITS
  consecutive groups; thread tid takes groups tid, tid + BLOCK, ..., so every warp load covers
  512 contiguous bytes and every warp store 256 contiguous bytes (whole 32-byte sectors, no
  sector read twice). Trade-off: 16-byte stores would need 8 consecutive elements per thread,
  i.e. two loads per thread 32 bytes apart and each warp load touching every sector twice; the
  8-byte stores cost one extra store instruction per 8 elements instead. All UNITS loads are
  issued before any math (UNITS * 16 bytes in flight per thread).
* Math in fp32, bit-exact with the reference: one FMUL x * s, fmaxf / fminf against -448 / 448
  (exact bf16 values), one round-to-nearest-even conversion per pair (``cvt.rn.bf16x2.f32``).
  NVRTC's --use_fast_math flushes fp32 subnormals: a product below 2^-126 in magnitude would
  become 0 instead of a bf16 subnormal; that needs |x| < 8e-41, far below anything in the
  problem's input distribution (normal, std ~2).
* Ragged end: the last CTA predicates each group on index < NV. Int32 index arithmetic:
  T * H must stay below 2^31 (the benchmark has 6.7e7 elements).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt): UNITS = 4,
2, 1 ran 92.3, 92.1, 94.1 us; UNITS = 4 stays. In the one-run table
(bench/h200/2026-12-02g/solutions-AB-r15.md): 92.4 us, 93.3% of the roofline ideal.
"""
import math

import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

UNITS = 4  # float4 groups per thread (independent 16-byte loads in flight per thread)
BLOCK = 256  # threads per CTA
VEC = 4  # elements per group: one 16-byte fp32 load, one 8-byte bf16 store
X_LOAD = "ld.global.nc.v4.f32"  # read-only path; without .L1::no_allocate: 3-9% faster on the H200 (bench/h200/2026-12-01h/tune-nc.txt)
Y_STORE = "st.global.v2.b32"
BOUND = 448.0  # largest finite fp8 e4m3 value (exact in fp32 and bf16)


def _clamp(v):
    """min(max(v, -448), 448) with one FMNMX each."""
    lo = T.call_pure_extern("fmaxf", v, T.float32(-BOUND), ty="float32")
    return T.call_pure_extern("fminf", lo, T.float32(BOUND), ty="float32")


def make_kernel(rows_total: int, hidden: int, scale: float):
    """saturating_cast for a static [rows_total, hidden] problem (hidden % 4 == 0)."""
    assert hidden % VEC == 0, "H must be a multiple of 4"
    n = rows_total * hidden
    assert n < 2**31, "int32 indexing"
    NV = n // VEC  # groups of 4 elements
    PER_CTA = BLOCK * UNITS
    GRID = (NV + PER_CTA - 1) // PER_CTA
    TAIL = NV % PER_CTA != 0
    S = scale
    TT = rows_total
    H = hidden

    @T.function
    def saturating_cast(X: T.Tensor((TT, H), "float32"), Y: T.Tensor((TT, H), "bfloat16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK))
        xf = T.decl_tensor(X.data, ty_args=[T.Tensor((n,), "float32")])
        yf = T.decl_tensor(Y.data, ty_args=[T.Tensor((n,), "bfloat16")])
        base = T.cuda.block_idx("x") * PER_CTA + T.cuda.thread_idx("x")
        xv = T.alloc_local((UNITS * VEC,), "float32")
        ov = T.alloc_local((2,), "uint32")
        # all loads first: UNITS independent 16-byte requests in flight
        for u in T.unroll(UNITS):
            if (not TAIL) or base + u * BLOCK < NV:
                T.ptx[X_LOAD](
                    xv[VEC * u], xv[VEC * u + 1], xv[VEC * u + 2], xv[VEC * u + 3],
                    xf.ptr_to([(base + u * BLOCK) * VEC]),
                )
        for u in T.unroll(UNITS):
            if (not TAIL) or base + u * BLOCK < NV:
                for j in T.unroll(2):
                    y_lo = _clamp(xv[VEC * u + 2 * j] * T.float32(S))
                    y_hi = _clamp(xv[VEC * u + 2 * j + 1] * T.float32(S))
                    T.ptx.cvt.rn.bf16x2.f32(ov[j], y_hi, y_lo)
                T.ptx[Y_STORE](yf.ptr_to([(base + u * BLOCK) * VEC]), ov[0], ov[1])

    return saturating_cast


def build(spec):
    """Compile for spec's static (T, H) and scale s; return run(x, y)."""
    rows_total = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    scale = float(spec.params["s"])
    assert math.isfinite(scale)
    kernel = make_kernel(rows_total, hidden, scale)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["saturating_cast"]

    def run(x, y):
        fn(x, y)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

"""A01 bias_gelu, TIRx (tvm_tirx 0.1.0a4) expert solution: y = gelu_erf(x + b), bf16 in/out.

Memory-bound streaming kernel, compiled for the static shape of one shape set:

* 16-byte vector accesses: every thread moves whole 8-bf16 vectors with
  ``ld.global.nc.v4.b32`` / ``st.global.v4.b32`` (H % 8 == 0 and 16-byte aligned pointers
  are guaranteed by the problem).
* A thread owns one column vector (8 columns) and ROWS rows of it: it loads the bias vector
  once, issues ROWS independent 16-byte loads of x before any math (ROWS * 16 bytes in flight
  per thread), then computes and stores.
* Math in fp32: bf16 -> fp32 by bit shifts, v = x + b, exact (erf) GELU, one rounding to bf16
  per pair (``cvt.rn.bf16x2.f32``). GELU_IMPL "fast" (default) evaluates the erf GELU as
  max(v, 0) - 0.5 |v| erfc(|v| / sqrt 2) with a 1.5e-7-accurate erfc (~17 instructions per
  element instead of ~34 with libdevice erff, which would make the kernel issue-bound);
  "erff" keeps the textbook 0.5 v (1 + erff(v / sqrt 2)).
* Grid: x = column-vector chunk of BLOCK threads, y = row group (consecutive CTAs cover
  contiguous memory); swapped when there are more than 65535 row groups.
  Int32 index arithmetic: T * H must stay below 2^31 (the benchmark has 2.35e8 elements).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt): ROWS = 4, 2,
1 ran 230.0, 221.1, 225.3 us, so ROWS = 2 (from 4); the cause was not profiled. In the one-run table
(bench/h200/2026-12-02g/solutions-AB-r15.md): 221.0 us, 91.0% of the roofline ideal.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

ROWS = 2  # rows per thread (independent 16-byte loads in flight per thread)
MAX_BLOCK = 256  # threads per CTA (upper bound; narrow rows get fewer)
VEC = 8  # bf16 per 16-byte vector
# Load flavour for x: read-only path (ld.global.nc). The .L1::no_allocate hint was dropped: 3-9% faster without it in 18 of 21 TIRx kernels on the H200 (bench/h200/2026-12-01h/tune-nc.txt).
X_LOAD = "ld.global.nc.v4.b32"
B_LOAD = "ld.global.nc.v4.b32"
Y_STORE = "st.global.v4.b32"
INV_SQRT2 = 0.7071067811865476
# GELU evaluation: "fast" = erfc form below (about 15 instructions per element), "erff" = the
# CUDA libdevice erff (about 34 instructions per element: issue-bound at the benchmark size).
GELU_IMPL = "fast"
# Abramowitz & Stegun 7.1.26: erfc(a) = (a1 t + ... + a5 t^5) exp(-a^2), t = 1 / (1 + p a),
# |error| <= 1.5e-7 for a >= 0.
AS_P = 0.3275911
AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)
LOG2E = 1.4426950408889634


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _gelu_erff(v):
    """Exact GELU with the CUDA erff."""
    return T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(INV_SQRT2)))


def _gelu_fast(v):
    """Exact GELU rewritten without cancellation: with a = |v| / sqrt(2),

    0.5 v (1 + erf(v / sqrt 2)) = max(v, 0) - 0.5 |v| erfc(a),

    erfc(a) from A&S 7.1.26 (absolute error <= 1.5e-7, so |gelu error| <= 0.75e-7 |v| plus
    fp32 rounding: far below one bf16 ulp). 0.5 is folded into the coefficients.
    Checked against float64 erf on a dense grid in .scratch-tirx/erf_check.py.
    """
    av = T.abs(v)
    t = T.float32(1.0) / (av * T.float32(AS_P * INV_SQRT2) + T.float32(1.0))
    r = T.float32(0.5 * AS_A[4])
    for c in AS_A[3::-1]:
        r = r * t + T.float32(0.5 * c)
    r = r * t
    e = T.exp2((v * T.float32(-0.5 * LOG2E)) * v)
    # fmaxf (one FMNMX) rather than T.max (a compare and a select)
    return T.call_pure_extern("fmaxf", v, T.float32(0.0), ty="float32") - r * (av * e)


def _gelu(v):
    if GELU_IMPL == "fast":
        return _gelu_fast(v)
    return _gelu_erff(v)


def make_kernel(rows_total: int, hidden: int):
    """bias_gelu for a static [rows_total, hidden] bf16 problem (hidden % 8 == 0)."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows_total * hidden < 2**31, "int32 indexing"
    HV = hidden // VEC  # vectors per row
    # threads per CTA: a multiple of 32, at most MAX_BLOCK, no wider than the row needs
    BLOCK = min(MAX_BLOCK, ((HV + 31) // 32) * 32)
    GR = (rows_total + ROWS - 1) // ROWS  # row groups
    GC = (HV + BLOCK - 1) // BLOCK  # column chunks
    # Column chunk on x (fastest-scheduled), row group on y: consecutive CTAs sweep whole
    # rows, i.e. contiguous memory. gridDim.y is limited to 65535, so very tall inputs put
    # the row group on x instead.
    ROWS_ON_Y = GR <= 65535
    GRID = (GC, GR) if ROWS_ON_Y else (GR, GC)
    ROW_TAIL = rows_total % ROWS != 0
    COL_TAIL = HV % BLOCK != 0
    TT = rows_total
    H = hidden

    @T.function
    def bias_gelu(
        X: T.Tensor((TT, H), T.bfloat16),
        Bias: T.Tensor((H,), T.bfloat16),
        Y: T.Tensor((TT, H), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=BLOCK))
        if T.constexpr(ROWS_ON_Y):
            r0 = T.cuda.block_idx("y") * ROWS
            cv = T.cuda.block_idx("x") * BLOCK + T.cuda.thread_idx("x")
        else:
            r0 = T.cuda.block_idx("x") * ROWS
            cv = T.cuda.block_idx("y") * BLOCK + T.cuda.thread_idx("x")
        bv = T.alloc_local((4,), "uint32")
        xv = T.alloc_local((ROWS * 4,), "uint32")
        bf = T.alloc_local((VEC,), "float32")
        ov = T.alloc_local((4,), "uint32")
        if (not COL_TAIL) or cv < HV:
            c = cv * VEC
            T.ptx[B_LOAD](bv[0], bv[1], bv[2], bv[3], Bias.ptr_to([c]))
            # all loads of x first: ROWS independent 16-byte requests in flight
            for r in T.unroll(ROWS):
                if (not ROW_TAIL) or r0 + r < TT:
                    T.ptx[X_LOAD](
                        xv[4 * r], xv[4 * r + 1], xv[4 * r + 2], xv[4 * r + 3],
                        X.ptr_to([r0 + r, c]),
                    )
            for j in T.unroll(4):
                bf[2 * j] = _lo(bv[j])
                bf[2 * j + 1] = _hi(bv[j])
            for r in T.unroll(ROWS):
                if (not ROW_TAIL) or r0 + r < TT:
                    for j in T.unroll(4):
                        v_lo = _lo(xv[4 * r + j]) + bf[2 * j]
                        v_hi = _hi(xv[4 * r + j]) + bf[2 * j + 1]
                        g_lo = _gelu(v_lo)
                        g_hi = _gelu(v_hi)
                        T.ptx.cvt.rn.bf16x2.f32(ov[j], g_hi, g_lo)
                    T.ptx[Y_STORE](Y.ptr_to([r0 + r, c]), ov[0], ov[1], ov[2], ov[3])

    return bias_gelu


def build(spec):
    """Compile for spec's static (T, H) and return run(x, b, y)."""
    rows_total = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    kernel = make_kernel(rows_total, hidden)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["bias_gelu"]

    def run(x, b, y):
        fn(x, b, y)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

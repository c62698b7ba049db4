"""F05 per_token_fp8_quant, TIRx (tvm_tirx 0.1.0a4) expert solution.

s[t] = max(amax_t / 448, 1 / (448 * 512)), q = e4m3(clamp(x / s, -448, 448)); x bf16 [T, H],
q float8_e4m3fn [T, H], s fp32 [T, 1]. One read of x, one write of q (the memory-bound minimum):

* One CTA per row; the row is loaded once into registers with 16-byte
  ``ld.global.nc.L1::no_allocate.v4.b32`` loads (8 bf16 each; H % 8 == 0 keeps every vector
  16-byte aligned). Vector k of a thread is number tid + k * THREADS of the row, so each warp
  load covers 512 contiguous bytes; all of a thread's loads are issued before any math.
* amax on the raw bits: a bf16 without its sign bit orders like its magnitude, so a thread
  reduces ``w & 0x7FFF7FFF`` of its packed pairs with ``__vmaxu2`` (unsigned 16-bit SIMD max,
  one instruction per two elements), converts the larger half to fp32, then warp shuffles
  (+ one shared-memory step when the CTA has several warps: ``T.cuda.cta_max``). Every thread
  gets the row amax; it is exact. Working on the bits also keeps fp32 copies of x out of the
  registers until the quantization.
* s = ``__fdiv_rn(amax, 448)`` (one IEEE fp32 rounding, as the reference), floored at
  1 / (448 * 512); thread 0 stores it. The quotient x / s starts from the correctly rounded
  reciprocal ``__frcp_rn(s)``: q0 = x * inv, then one residual step q = fma(fma(-q0, s, x),
  inv, q0) (two FFMA per element) gives the IEEE quotient except in rare cases, so the e4m3
  roundings match the reference's (a plain reciprocal multiply, which the statement allows,
  flips ~0.1% of the elements by one e4m3 ulp).
* Conversion: ``cvt.rn.satfinite.e4m3x2.f32`` turns two fp32 into two e4m3 (round to nearest
  even, saturating at +-448, so the clamp is the instruction's .satfinite and never a NaN).
  Four of them make the 8 bytes of one vector, stored with ``st.global.v2.b32`` (q rows are
  8-byte aligned; a warp store covers 256 contiguous bytes).
  (TIRx's scalar ``T.cast(v, "float8_e4m3fn")`` lowers to the cuda_fp8.h constructor, which
  also saturates, but converts one element per instruction.)
* THREADS and VPT from H: about VPT_TARGET = 4 vectors (32 elements) per thread. H = 4096 ->
  128 threads, H = 1000 -> 32 threads (one warp, shuffles only), H = 14336 -> 512 threads.
  Tail vectors (H / 8 not a multiple of THREADS) are predicated: not loaded (zero, neutral for
  a max of |x|) and not stored.
* Issue budget: about 6 instructions per element (bit ops, half a SIMD max, mul + 2 FFMA,
  half a cvt; the packing folds into the cvt's merge): 134M elements at the benchmark shape are ~0.8G
  thread instructions, ~25 us of issue at 132 SMs x 4 schedulers x 1.98 GHz against ~96 us
  of memory time, so the kernel stays memory-bound.
* Unmeasured on the H200 so far. Int32 indexing: T * H must stay below 2^31.

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`):
118.4 us, 73.3% of the roofline ideal (86.8 us), 12.12x the fastest eager formulation, 1.49x
torch.compile; the CuTe expert 98.3 us (this one is 1.21x slower).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
VPT_TARGET = 4  # vectors per thread aimed for (32 elements, 64 bytes of the row per thread)
MAX_THREADS = 1024
MAX_VPT = 16  # beyond this the row would no longer fit in registers comfortably
FP8_MAX = 448.0
MIN_SCALE = 1.0 / (448.0 * 512.0)
X_LOAD = "ld.global.nc.L1::no_allocate.v4.b32"  # read once: no L1 allocation
Q_STORE = "st.global.v2.b32"  # 8 e4m3 values


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fmax(a, b):
    """fmaxf: one FMNMX (abs operands fold into it)."""
    return T.call_pure_extern("fmaxf", a, b, ty="float32")


def _fma(a, b, c):
    """fmaf (T.fma fails at codegen in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _div(x, s, inv):
    """x / s from the reciprocal inv = 1 / s plus one residual correction: q0 = x * inv,
    r = fma(-q0, s, x) (exact), q = fma(r, inv, q0): the IEEE quotient in all but rare cases."""
    q0 = x * inv
    return _fma(_fma(-q0, s, x), inv, q0)


def _umax2(a, b):
    """__vmaxu2: per-halfword unsigned max of two packed pairs (one VIMNMX.U16x2 on sm_90)."""
    return T.call_pure_extern("__vmaxu2", a, b, ty="uint32")


def _tree_umax2(vals):
    """Balanced __vmaxu2 of a Python list of packed pairs (short dependency chains)."""
    while len(vals) > 1:
        nxt = [_umax2(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
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


def make_kernel(rows: int, hidden: int):
    """Per-row fp8 quantization of a static [rows, hidden] bf16 matrix."""
    assert hidden % VEC == 0, "H must be a multiple of 8"
    assert rows * hidden < 2**31, "int32 indexing"
    NV = hidden // VEC
    THREADS, VPT = plan(NV)
    assert VPT <= MAX_VPT, f"H={hidden} too long for the register-resident row"
    WARPS = THREADS // 32
    FULL = NV // THREADS  # vector slots valid for every thread
    TT = rows
    H = hidden

    @T.function
    def per_token_fp8_quant(
        X: T.Tensor((TT, H), "bfloat16"),
        Q: T.Tensor((TT, H), "float8_e4m3fn"),
        S: T.Tensor((TT, 1), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TT, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((VPT * 4,), "uint32")
        pv = T.alloc_local((4,), "uint16")
        sc = T.alloc_local((2,), "float32")

        # 1. load the row (all loads before any use); missing tail vectors are zero
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                T.ptx[X_LOAD](
                    xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                    X.ptr_to([row, (tid + k * THREADS) * VEC]),
                )
            else:
                for i in T.unroll(4):
                    xv[4 * k + i] = T.uint32(0)

        # 2. exact row amax of |x|: bf16 bit patterns without the sign bit order like the
        # magnitudes, so two halves at a time go through one unsigned 16-bit SIMD max
        m2 = _tree_umax2([xv[i] & T.uint32(0x7FFF7FFF) for i in range(VPT * 4)])
        local = _fmax(_lo(m2), _hi(m2))
        if T.constexpr(WARPS == 1):
            amax = T.cuda.warp_max(local)
        else:
            amax = T.cuda.cta_max(local, WARPS, red.data)

        # 3. scale (one IEEE rounding), reciprocal for the quotient
        sc[0] = _fmax(
            T.call_pure_extern("__fdiv_rn", amax, T.float32(FP8_MAX), ty="float32"),
            T.float32(MIN_SCALE),
        )
        sc[1] = T.call_pure_extern("__frcp_rn", sc[0], ty="float32")
        if tid == 0:
            S[row, 0] = sc[0]

        # 4. quantize: two fp32 -> two e4m3 per cvt (RN, saturating), 8 bytes per vector
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                for j in T.unroll(4):
                    i = 4 * k + j
                    # high byte <- element 2j + 1, low byte <- element 2j (little-endian order)
                    T.ptx.cvt.rn.satfinite.e4m3x2.f32(
                        pv[j], _div(_hi(xv[i]), sc[0], sc[1]), _div(_lo(xv[i]), sc[0], sc[1])
                    )
                T.ptx[Q_STORE](
                    Q.ptr_to([row, (tid + k * THREADS) * VEC]),
                    T.cast(pv[0], "uint32") | (T.cast(pv[1], "uint32") << T.uint32(16)),
                    T.cast(pv[2], "uint32") | (T.cast(pv[3], "uint32") << T.uint32(16)),
                )

    return per_token_fp8_quant


def build(spec):
    """Compile for spec's static (T, H) and return run(x, q, s)."""
    rows = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    kernel = make_kernel(rows, hidden)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["per_token_fp8_quant"]

    def run(x, q, s):
        fn(x, q, s)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

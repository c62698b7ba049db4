"""F05 per_token_fp8_quant, TIRx (tvm_tirx 0.1.0a4) expert solution:
s[t] = max(amax_t / 448, 1 / (448 * 512)), q = e4m3(clamp(x / s, -448, 448)); x bf16 [T, H],
q float8_e4m3fn [T, H], s fp32 [T, 1]. One read of x, one write of q (the memory-bound minimum,
403 MB at the benchmark shape T = 32768, H = 4096). The CuTe expert's design, with its
one-barrier row reduction, in TIRx:

* One CTA per row; the row is loaded once into registers with 16-byte ``ld.global.nc.v4.b32``
  loads (read-only path, no cache hint; SASS ``LDG.E.128.CONSTANT``; 8 bf16 each, H % 8 == 0
  keeps every vector 16-byte aligned). Vector k of a thread is number tid + k * THREADS of the
  row, so each warp load covers 512 contiguous bytes; all of a thread's loads are issued before
  any math (the four LDGs sit back to back at the top of the SASS).
* amax on the raw bits: a bf16 without its sign bit orders like its magnitude, so a thread
  reduces ``w & 0x7FFF7FFF`` of its packed pairs with ``__vmaxu2`` (unsigned 16-bit SIMD max,
  one instruction per two elements), converts the larger half to fp32, then warp shuffles.
  Several warps (CuTe's scheme): lane 0 of each warp writes its warp max to shared memory, ONE
  barrier, then every lane reads partial[lane % WARPS] and a full-warp shuffle max gives every
  thread the row amax (max is idempotent, so the repeated partials are harmless).
  ``T.cuda.cta_max``, which the previous expert used, takes two barriers (warp 0 reduces the
  partials, stores the result, barrier, everyone reads it). The amax is exact either way
  (order-free), so the outputs are bit-identical to the previous expert's.
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
  128 threads x 4 (the CuTe expert's 128 x 4), H = 1000 -> 32 threads (one warp, shuffles
  only), H = 14336 -> 512 threads, H = 256 -> 32 threads x 1. Tail vectors (H / 8 not a
  multiple of THREADS) are predicated: not loaded (zero, neutral for a max of |x|) and not
  stored.
* Occupancy and issue: 32 registers, 16 CTAs = 128 KB of loads in flight per SM against ~35 KB
  needed by Little's law. About 6 instructions per element (bit ops, half a SIMD max, mul + 2
  FFMA, half a cvt): 134M elements at the benchmark shape are ~25M warp instructions, ~24 us of
  issue at 132 SMs x 4 schedulers x 1.98 GHz against ~96 us of memory time: memory-bound.
* Limits (asserted): H % 8 == 0, T * H < 2^31 (int32 indexing), H <= 8 * MAX_VPT * 1024 =
  131072 (the row in registers).
* Host path: build() compiles the kernel for the static (T, H) of a shape set (sm_90a);
  run(x, q, s) launches it once.

Why the load has no cache hint: the previous TIRx expert, the same design with
``ld.global.nc.L1::no_allocate.v4.b32`` (SASS ``LDG.E.NA.128.CONSTANT``) and the two-barrier
``T.cuda.cta_max``, ran 105.6 us against the CuTe expert's 98.0 us in
bench/h200/2026-12-02b/solutions-CF-r3.md. Dropping ``.L1::no_allocate`` had made 18 of 21
TIRx row/elementwise experts 1.6-9.2% faster in one judge (bench/h200/2026-12-01h/tune-nc.txt;
B08 l2norm_rows 148.2 -> 134.5 us). In the tuning run bench/h200/2026-12-02c/tune-r5b.json this
kernel (``ld.global.nc`` without the hint) measured 98.1 us (IQR 0.5), and the same kernel with
CuTe's plain ``ld.global.v4.b32`` (SASS ``LDG.E.128``) 98.2 us (IQR 0.5): the same within
0.1 us, so the hint was the cost, not the read-only path: 105.6 -> 98.1 us (1.08x, 7.1% less
time). The one-barrier amax came with both variants; its own share of the gain is unmeasured
(at most a few hundred cycles per CTA between the loads and the stores, mostly hidden by the
SM's other CTAs).

Measured on the H200 (full mode, one judge, every check shape passed): 98.1 us (IQR 0.5) in
the tuning run above, against 105.6 us for the previous TIRx expert. In the one-run table
bench/h200/2026-12-02c/solutions-CF-r5.md: 98.2 us (IQR 0.8), 87.9% of the 86.3 us roofline
ideal, 14.47x torch eager, 1.77x torch.compile; the CuTe expert 98.1 us there.
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
X_LOAD = "ld.global.nc.v4.b32"  # read-only path, no .L1::no_allocate (LDG.E.128.CONSTANT)
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
    # power-of-two warp count (<= 32, so tid % WARPS == lane % WARPS in the amax), at least one warp
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
        wmax = T.cuda.warp_max(_fmax(_lo(m2), _hi(m2)))
        if T.constexpr(WARPS == 1):
            amax = wmax
        else:
            # one barrier: every warp re-reduces all partials (max is idempotent)
            if T.truncmod(tid, 32) == 0:
                red[T.truncdiv(tid, 32)] = wmax
            T.cuda.cta_sync()
            amax = T.cuda.warp_max(red[T.truncmod(tid, WARPS)])

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

"""F07 int8_quant_dequant, TIRx (tvm_tirx 0.1.0a4) expert solution: per-row int8 quantization
and its dequantization, s[t] = max(amax_t / 127, 1 / (127 * 512)),
q = clamp(rint(x / s), -127, 127) (int8), xdq = bf16(q * s); x bf16 [T, H], q int8 [T, H],
s fp32 [T, 1], xdq bf16 [T, H].

Memory-bound: one read of x (2 B per element), one write of q (1 B) and of xdq (2 B), the
minimum: 671.2 MB at the benchmark shape T = 32768, H = 4096 (268.4 MB read, 402.8 MB written),
143.9 us at the roofline's bandwidth.

Design
* One CTA per row; the row is loaded once into registers with 16-byte ``ld.global.nc.v4.b32``
  loads (read-only path, no cache hint; SASS ``LDG.E.128.CONSTANT``; 8 bf16 each, H % 8 == 0
  keeps them 16-byte aligned). Vector k of a thread is number tid + k * THREADS of the row (a
  warp load covers 512 contiguous bytes); all loads are issued before any math (the four LDGs
  sit back to back at the top of the SASS).
* amax on the raw bits: a bf16 without its sign bit orders like its magnitude, so a thread
  reduces ``w & 0x7FFF7FFF`` of its packed pairs with a balanced tree of ``__vmaxu2`` (unsigned
  16-bit SIMD max, one instruction per two elements), converts the larger half to fp32, then
  warp shuffles + one shared-memory step (``T.cuda.cta_max``: warp 0 reduces the per-warp
  partials, two barriers; ``T.cuda.warp_max`` alone, no barrier, when the row is one warp);
  exact. s = ``__fdiv_rn(amax, 127)`` (one IEEE rounding, as the reference) floored at
  1 / (127 * 512), stored by thread 0.
* x / s: q0 = x * inv with inv = ``__frcp_rn(s)``, then one residual step
  v = fma(fma(-q0, s, x), inv, q0) (the IEEE quotient except in rare cases), clamped to
  +-127 (``fminf``/``fmaxf``).
* Round half to even without a conversion unit: y = v + 1.5 * 2^23 rounds v to an integer in
  the fp32 add (round-to-nearest-even, |v| <= 127 << 2^22), so the low byte of y's bits is
  q as a two's-complement int8, and y - 1.5 * 2^23 is q exactly as a float. Bytes are packed
  with ``__byte_perm`` (PRMT) and stored 8 per vector with ``st.global.v2.b32``.
* xdq = q * s in fp32, rounded once to bf16 per pair (``cvt.rn.bf16x2.f32``), stored with
  ``st.global.v4.b32`` (16 bytes per vector), right after the vector's q bytes.
* THREADS and VPT from H: about VPT_TARGET = 4 vectors (32 elements) per thread, THREADS a
  power-of-two number of warps (at most 1024). H = 4096 -> 128 threads x 4, H = 1000 -> 32
  threads x 4 (one warp, shuffles only), H = 14336 -> 512 threads x 4, H = 256 -> 32 threads
  x 1. Tail vectors are predicated: not loaded (zero, neutral for a max of |x|) and not stored.
* SASS at the benchmark shape (NVRTC, sm_90a): 32 registers, no local memory, so 16 CTAs of 128
  threads per SM (128 KB of loads in flight per SM); 592 lines (584 instructions + 8 NOP) for a
  thread's 32 elements: 4 LDG.E.128.CONSTANT, 4 STG.E.64 (q) + 4 STG.E.128 (xdq), one STG.E
  (s), 2 BAR.SYNC. About 18 instructions per element: ~77M warp instructions, ~73 us of issue at
  132 SMs x 4 schedulers x 1.98 GHz, under half of the run: memory-bound.
* Limits (asserted when build() makes the kernel): H % 8 == 0, T * H < 2^31 (int32 indexing),
  VPT <= MAX_VPT = 16 (H <= 8 * 16 * 1024 = 131072, the row in registers).
* Host path: build() compiles the kernel for the static (T, H) of a shape set (sm_90a);
  run(x, q, s, xdq) launches it once.

Where F07 stands: F07 writes 1.5x what it reads (402.8 MB against 268.4 MB), while a copy moves
the two 1:1. Fitted over the other experts' times in the one-run tables (t = c + a * read bytes
+ b * written bytes), reads cost ~4.77 TB/s and writes ~3.77 TB/s plus ~6 us fixed, which
predicts ~169.5 us for F07's bytes: F07 runs at the same per-byte efficiency as the other
experts. This is a fit over the one-run tables, not a direct measurement.

Measured on the H200 (full mode, one judge, correct): in the tuning run
bench/h200/2026-12-02d/tune-r7a.json, 167.5 us (IQR 1.2) against 169.9 us (IQR 1.0) for the
previous TIRx expert in the same run (1.014x). In the one-run table
bench/h200/2026-12-02d/solutions-CF-r7.md: 170.0 us (IQR 1.4), 84.7% of the 143.9 us ideal,
14.52x the fastest eager formulation (amax_round), 1.15x torch.compile; the CuTe expert
169.8 us in the same run. In bench/h200/2026-12-02d/tune-r8.json this code measured 167.8 us,
and the same kernel with the F06 thread shape (8 vectors per thread, 64 threads per row, 4 rows
per 256-thread CTA, one-barrier amax) 166.6 us (0.7%, not adopted). What changed against the
previous expert: only the ``.L1::no_allocate`` hint dropped from the loads (SASS
LDG.E.NA.128.CONSTANT -> LDG.E.128.CONSTANT), as in the F05 and F06 TIRx experts; the SASS is
otherwise the same (592 lines, 32 registers).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
VPT_TARGET = 4  # vectors per thread aimed for (32 elements, 64 bytes of the row per thread)
MAX_THREADS = 1024
MAX_VPT = 16  # beyond this the row would no longer fit in registers comfortably
INT8_MAX = 127.0
MIN_SCALE = 1.0 / (127.0 * 512.0)
RINT_MAGIC = 12582912.0  # 1.5 * 2^23: adding it rounds |v| < 2^22 to an integer (RNE)
X_LOAD = "ld.global.nc.v4.b32"  # read-only path, no cache hint (LDG.E.128.CONSTANT)
Q_STORE = "st.global.v2.b32"  # 8 int8 values
D_STORE = "st.global.v4.b32"  # 8 bf16 values


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def _fmax(a, b):
    """fmaxf: one FMNMX (abs operands fold into it)."""
    return T.call_pure_extern("fmaxf", a, b, ty="float32")


def _fmin(a, b):
    """fminf: one FMNMX."""
    return T.call_pure_extern("fminf", a, b, ty="float32")


def _fma(a, b, c):
    """fmaf (T.fma fails at codegen in 0.1.0a4)."""
    return T.call_pure_extern("fmaf", a, b, c, ty="float32")


def _div(x, s, inv):
    """x / s from the reciprocal inv = 1 / s plus one residual correction (exact residual)."""
    q0 = x * inv
    return _fma(_fma(-q0, s, x), inv, q0)


def _perm(a, b, sel):
    """__byte_perm (one PRMT): byte n of the result is byte sel[n] of (b:a)."""
    return T.call_pure_extern("__byte_perm", a, b, T.uint32(sel), ty="uint32")


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
    warps = 1  # power-of-two warp count (cta_reduce needs it), at least one warp
    while warps * 32 < threads and warps * 32 < MAX_THREADS:
        warps *= 2
    threads = warps * 32
    vpt = -(-nv // threads)
    return threads, vpt


def make_kernel(rows: int, hidden: int):
    """Per-row int8 quantize + dequantize of a static [rows, hidden] bf16 matrix."""
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
    def int8_quant_dequant(
        X: T.Tensor((TT, H), "bfloat16"),
        Q: T.Tensor((TT, H), "int8"),
        S: T.Tensor((TT, 1), "float32"),
        XDQ: T.Tensor((TT, H), "bfloat16"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=TT, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((VPT * 4,), "uint32")
        yv = T.alloc_local((8,), "float32")  # v + magic for the 8 elements of one vector
        dv = T.alloc_local((4,), "uint32")
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

        # 3. scale (one IEEE rounding) and its correctly rounded reciprocal
        sc[0] = _fmax(
            T.call_pure_extern("__fdiv_rn", amax, T.float32(INT8_MAX), ty="float32"),
            T.float32(MIN_SCALE),
        )
        sc[1] = T.call_pure_extern("__frcp_rn", sc[0], ty="float32")
        if tid == 0:
            S[row, 0] = sc[0]

        # 4. quantize (RNE via the magic add), dequantize, store 8 int8 + 8 bf16 per vector
        for k in T.unroll(VPT):
            if k < FULL or tid + k * THREADS < NV:
                for j in T.unroll(4):
                    i = 4 * k + j
                    for h in T.unroll(2):
                        xe = _lo(xv[i]) if h == 0 else _hi(xv[i])
                        v = _fmin(_fmax(_div(xe, sc[0], sc[1]), T.float32(-INT8_MAX)),
                                  T.float32(INT8_MAX))
                        yv[2 * j + h] = v + T.float32(RINT_MAGIC)
                    # xdq pair: (q * s) rounded once to bf16; high half <- element 2j + 1
                    T.ptx.cvt.rn.bf16x2.f32(
                        dv[j],
                        (yv[2 * j + 1] - T.float32(RINT_MAGIC)) * sc[0],
                        (yv[2 * j] - T.float32(RINT_MAGIC)) * sc[0],
                    )
                c = (tid + k * THREADS) * VEC
                b = [T.reinterpret(yv[e], ty="uint32") for e in range(8)]
                # low byte of each y is its int8; bytes 0..3 <- elements 0..3, then 4..7
                T.ptx[Q_STORE](
                    Q.ptr_to([row, c]),
                    _perm(_perm(b[0], b[1], 0x0040), _perm(b[2], b[3], 0x0040), 0x5410),
                    _perm(_perm(b[4], b[5], 0x0040), _perm(b[6], b[7], 0x0040), 0x5410),
                )
                T.ptx[D_STORE](XDQ.ptr_to([row, c]), dv[0], dv[1], dv[2], dv[3])

    return int8_quant_dequant


def build(spec):
    """Compile for spec's static (T, H) and return run(x, q, s, xdq)."""
    rows = int(spec.dims["T"])
    hidden = int(spec.dims["H"])
    kernel = make_kernel(rows, hidden)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["int8_quant_dequant"]

    def run(x, q, s, xdq):
        fn(x, q, s, xdq)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

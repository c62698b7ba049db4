"""F06 per_block_fp8_quant, TIRx (tvm_tirx 0.1.0a4) expert solution: one scale per 128x128
block, s[i, j] = max(amax_b / 448, 1 / (448 * 512)), q = e4m3(clamp(x / s, -448, 448)); x bf16
[M, N], q float8_e4m3fn [M, N], s fp32 [MB, NB]. One read of x, one write of q (the
memory-bound minimum, 705 MB at the benchmark shape M = 28672, N = 8192). The CuTe expert's
design, with its one-barrier block reduction, in TIRx:

* One CTA of 256 threads per 128x128 block (grid x = block column j, y = block row i, so CTAs
  launched together cover whole rows, the CuTe expert's order). The block (32 KB of bf16) is
  loaded once into registers: thread t owns column vector t % 16 (8 columns) of rows
  t // 16 + 16 k, k = 0..7 (CuTe's 16 x 16 thread layout), eight 16-byte
  ``ld.global.nc.v4.b32`` loads (read-only path, no cache hint; SASS ``LDG.E.128.CONSTANT``)
  issued back to back before any math (checked in the SASS; N % 8 == 0 keeps them 16-byte
  aligned); a warp load covers two 256-byte row pieces.
* amax on the raw bits: a bf16 without its sign bit orders like its magnitude, so a thread
  reduces ``w & 0x7FFF7FFF`` of its packed pairs with ``__vmaxu2`` (unsigned 16-bit SIMD max,
  one instruction per two elements), converts the larger half to fp32, then warp shuffles;
  then CuTe's one-barrier step: lane 0 of each warp writes its warp max to shared memory, one
  barrier, every lane reads partial[lane % 8] and a full-warp shuffle max gives every thread
  the block amax (exact; max is idempotent and order-free, so the outputs are bit-identical
  to the previous expert's, which used the two-barrier ``T.cuda.cta_max``: warp 0 reduces the
  partials, stores, barrier, broadcast). Working on the bits also keeps the fp32 copies of x
  out of the registers until the quantization. s = ``__fdiv_rn(amax, 448)`` (one IEEE
  rounding), floored at 1 / (448 * 512), stored by thread 0.
* x / s: q0 = x * inv with inv = ``__frcp_rn(s)``, then one residual step
  q = fma(fma(-q0, s, x), inv, q0) (the IEEE quotient except in rare cases);
  ``cvt.rn.satfinite.e4m3x2.f32`` converts pairs (nearest even, saturating at +-448: the clamp,
  never a NaN); 8 bytes per vector with ``st.global.v2.b32`` (128 contiguous bytes per row
  and block).
* Partial blocks (M or N not a multiple of 128): rows past M and column vectors past N / 8
  are predicated (not loaded: zero, neutral for a max of |x|; not stored). The predicates
  exist only in builds where that dimension is ragged (compile-time flags).
* Occupancy: 47 registers per thread (NVRTC, sm_90a; 48 from ptxas 13.0 on the same kernel's
  PTX) -> 5 CTAs (160 KB of loads in flight, against ~35 KB needed by Little's law) per SM;
  the benchmark grid is 64 x 224 = 14336 CTAs (~22 waves).
* Limits (asserted): N % 8 == 0, M * N < 2^31 (int32 indexing), MB = ceil(M / 128),
  NB = ceil(N / 128).
* Host path: build() compiles the kernel for the static (M, N, MB, NB) of a shape set
  (sm_90a); run(x, q, s) launches it once.

Why the load has no cache hint: the previous TIRx expert, the same design with
``ld.global.nc.L1::no_allocate.v4.b32`` (SASS ``LDG.E.NA.128.CONSTANT``) and the two-barrier
amax, ran 176.9 us against the CuTe expert's 166.8 us in
bench/h200/2026-12-02b/solutions-CF-r3.md. Dropping ``.L1::no_allocate`` had made 18 of 21
TIRx row/elementwise experts 1.6-9.2% faster in one judge (bench/h200/2026-12-01h/tune-nc.txt;
B08 l2norm_rows 148.2 -> 134.5 us). In the tuning run bench/h200/2026-12-02c/tune-r5b.json this
kernel (``ld.global.nc`` without the hint) measured 167.9 us (IQR 1.2), and the same kernel
with CuTe's plain ``ld.global.v4.b32`` (SASS ``LDG.E.128``) 168.0 us (IQR 1.2): the same within
0.1 us, so the hint was the cost, not the read-only path: 176.9 -> 167.9 us (1.05x, 5.1% less
time). The one-barrier amax came with both variants; its own share of the gain is unmeasured
(at most a few hundred cycles per CTA between the loads and the stores, mostly hidden by the
SM's other CTAs).

Measured on the H200 (full mode, one judge, every check shape passed): 167.9 us (IQR 1.2) in
the tuning run above, against 176.9 us for the previous TIRx expert. In the one-run table
bench/h200/2026-12-02c/solutions-CF-r5.md: 167.6 us (IQR 1.2), 90.1% of the 151.0 us roofline
ideal, 18.47x torch eager, 1.55x torch.compile; the CuTe expert 167.0 us there.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte vector
BLOCK = 128  # scale block edge (rows and columns)
CV = BLOCK // VEC  # 16 column vectors per block row
THREADS = 256
RSTEP = THREADS // CV  # 16 rows covered by one pass of the CTA
RPT = BLOCK // RSTEP  # 8 rows (vectors) per thread
WARPS = THREADS // 32
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
    """x / s from the reciprocal inv = 1 / s plus one residual correction (exact residual)."""
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


def make_kernel(m: int, n: int, mb: int, nb: int):
    """128x128-block fp8 quantization of a static [m, n] bf16 matrix."""
    assert n % VEC == 0, "N must be a multiple of 8"
    assert m * n < 2**31, "int32 indexing"
    assert mb == -(-m // BLOCK) and nb == -(-n // BLOCK), "MB, NB must be ceil(M / 128), ceil(N / 128)"
    NV = n // VEC
    ROW_TAIL = m % BLOCK != 0
    COL_TAIL = n % BLOCK != 0
    M, N, MB, NB = m, n, mb, nb

    @T.function
    def per_block_fp8_quant(
        X: T.Tensor((M, N), "bfloat16"),
        Q: T.Tensor((M, N), "float8_e4m3fn"),
        S: T.Tensor((MB, NB), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(NB, MB), block=THREADS))
        bj = T.cuda.block_idx("x")
        bi = T.cuda.block_idx("y")
        tid = T.cuda.thread_idx("x")
        red = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((RPT * 4,), "uint32")
        pv = T.alloc_local((4,), "uint16")
        sc = T.alloc_local((2,), "float32")
        cvec = bj * CV + T.truncmod(tid, CV)  # column vector of the matrix
        r0 = bi * BLOCK + T.truncdiv(tid, CV)  # first row of the thread
        col = cvec * VEC

        # 1. load the thread's 8 vectors of the block (all loads before any use)
        for k in T.unroll(RPT):
            if ((not ROW_TAIL) or r0 + k * RSTEP < M) and ((not COL_TAIL) or cvec < NV):
                T.ptx[X_LOAD](
                    xv[4 * k], xv[4 * k + 1], xv[4 * k + 2], xv[4 * k + 3],
                    X.ptr_to([r0 + k * RSTEP, col]),
                )
            else:
                for i in T.unroll(4):
                    xv[4 * k + i] = T.uint32(0)

        # 2. exact block amax of |x|: bf16 bit patterns without the sign bit order like the
        # magnitudes, so two halves at a time go through one unsigned 16-bit SIMD max
        m2 = _tree_umax2([xv[i] & T.uint32(0x7FFF7FFF) for i in range(RPT * 4)])
        wmax = T.cuda.warp_max(_fmax(_lo(m2), _hi(m2)))
        # one barrier: every warp re-reduces all WARPS partials (max is idempotent)
        if T.truncmod(tid, 32) == 0:
            red[T.truncdiv(tid, 32)] = wmax
        T.cuda.cta_sync()
        amax = T.cuda.warp_max(red[T.truncmod(tid, WARPS)])

        # 3. scale (one IEEE rounding) and its correctly rounded reciprocal
        sc[0] = _fmax(
            T.call_pure_extern("__fdiv_rn", amax, T.float32(FP8_MAX), ty="float32"),
            T.float32(MIN_SCALE),
        )
        sc[1] = T.call_pure_extern("__frcp_rn", sc[0], ty="float32")
        if tid == 0:
            S[bi, bj] = sc[0]

        # 4. quantize: two fp32 -> two e4m3 per cvt (RN, saturating), 8 bytes per vector
        for k in T.unroll(RPT):
            if ((not ROW_TAIL) or r0 + k * RSTEP < M) and ((not COL_TAIL) or cvec < NV):
                for j in T.unroll(4):
                    i = 4 * k + j
                    # high byte <- element 2j + 1, low byte <- element 2j (little-endian order)
                    T.ptx.cvt.rn.satfinite.e4m3x2.f32(
                        pv[j], _div(_hi(xv[i]), sc[0], sc[1]), _div(_lo(xv[i]), sc[0], sc[1])
                    )
                T.ptx[Q_STORE](
                    Q.ptr_to([r0 + k * RSTEP, col]),
                    T.cast(pv[0], "uint32") | (T.cast(pv[1], "uint32") << T.uint32(16)),
                    T.cast(pv[2], "uint32") | (T.cast(pv[3], "uint32") << T.uint32(16)),
                )

    return per_block_fp8_quant


def build(spec):
    """Compile for spec's static (M, N, MB, NB) and return run(x, q, s)."""
    m, n = int(spec.dims["M"]), int(spec.dims["N"])
    mb, nb = int(spec.dims["MB"]), int(spec.dims["NB"])
    kernel = make_kernel(m, n, mb, nb)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["per_block_fp8_quant"]

    def run(x, q, s):
        fn(x, q, s)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

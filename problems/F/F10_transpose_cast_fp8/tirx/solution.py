"""F10 transpose_cast_fp8, TIRx (tvm_tirx 0.1.0a4) expert solution:
xt[n, m] = e4m3(clamp(x[m, n] * scale, -448, 448)), x bf16 [M, N], xt float8_e4m3fn [N, M].

Memory-bound (x read once, xt written once), compiled for the static shape of one shape set.
One CTA of 256 threads transposes one TM x TN = 128 x 64 tile (x rows m0..m0+127, columns
n0..n0+63) through 8 KB of shared memory, so that both the global read and the global write
are 16-byte accesses on whole 128-byte row segments:

* Read: thread (nv = tid % 8, mq = tid / 8) loads the 16-byte vectors x[m0 + 4 mq + r,
  n0 + 8 nv .. + 7] for r = 0..3 (``ld.global.nc.v4.b32``, 4 loads in flight);
  a warp instruction covers 4 rows x 128 contiguous bytes.
* Convert in registers: bf16 -> fp32 by bit shifts, one multiply by the scale (exact: a power
  of two; in general the same fp32 product as the reference), then
  ``cvt.rn.satfinite.e4m3x2.f32`` (round to nearest even; satfinite turns anything beyond the
  range into +-448, exactly clamp-then-cast). The thread packs, for each of its 8 columns n,
  the 4 bytes of rows 4 mq .. 4 mq + 3 into one 32-bit word: a 4 x 4 byte block of the
  transpose is done in registers, at no extra cost (two cvt per word, then one mov.b32).
* Shared tile: TN rows (n) of 128 bytes (32 words: m = 0..127), written one word at a time and
  read one 16-byte chunk at a time. XOR swizzle on 16-byte chunks: logical chunk c of row n
  sits at physical chunk c ^ ((n / 8) % 8). Word stores: in one instruction a warp writes 8 rows
  n = 8 nv + j (nv = 0..7) in the same logical chunk, which the swizzle spreads over 8 distinct
  chunks = 32 distinct banks. Chunk loads: each quarter-warp reads the 8 chunks of one row:
  conflict-free.
* Write: thread (cl = tid % 8, row nr = tid / 8 + 32 i, i = 0, 1) writes xt[n0 + nr,
  m0 + 16 cl .. + 15] with ``st.global.v4.b32``: a warp instruction covers 4 rows x 128
  contiguous bytes of xt.
* Ragged edges: N % 8 == 0 (whole vectors); columns past N are neither loaded nor stored
  (N = 520: 9 column tiles, the last one holds 8 columns). Rows past M load nothing (zeros)
  and their bytes are never stored. When M % 16 != 0 the rows of xt are not 16-byte aligned
  (M = 1000: row n starts at byte 1000 n), so the store width SW is the largest power of two
  dividing both M and 16 (8 bytes for M = 1000: two ``st.global.v2.b32`` per chunk), each
  piece predicated on m < M (M % SW == 0: a piece is all in or all out).
* Int32 index arithmetic: M * N must stay below 2^31 (benchmark: 1.3e8).
* Unmeasured on the H200. Grid: x = column tile (N / 64), y = row tile (M / 128): 16384 CTAs
  at the benchmark, 8 KB of shared memory each.

Measured on the H200 (bench/h200/2026-12-01i/solutions-CF.md, `mkb solutions C F --mode full`):
102.8 us, 84.4% of the roofline ideal (86.8 us), 18.28x the fastest eager formulation, 1.50x
torch.compile; the CuTe expert 103.3 us (this one is faster).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

TM = 128  # tile rows (m): one 128-byte row of xt per n
TN = 64  # tile columns (n): one 128-byte row segment of x per m
THREADS = 256
VEC = 8  # bf16 per 16-byte load
RPT = TM * TN // VEC // THREADS  # 16-byte loads per thread (4)
WPR = TM // 4  # 32-bit words per shared row (32)
CPR = TM // 16  # 16-byte chunks per shared row (8)
WPASS = THREADS // CPR  # shared rows written out per pass (32)
# x is read once: read-only path. No .L1::no_allocate hint: the team measured plain
# ld.global.nc 3-9% faster in 18 of 21 TIRx streaming kernels on the H200.
X_LOAD = "ld.global.nc.v4.b32"
FP8_MAX = 448.0

# Four fp32 values -> four e4m3 bytes (a0 in the lowest byte), round to nearest even,
# saturating. cvt ... d, a, b puts a in the upper byte of d and b in the lower one.
E4M3X4 = r"""
__device__ __forceinline__ unsigned int mkb_f10_e4m3x4(float a0, float a1, float a2, float a3) {
  unsigned int d;
  asm("{.reg .b16 lo, hi;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n\t"
      "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n\t"
      "mov.b32 %0, {lo, hi};}"
      : "=r"(d) : "f"(a0), "f"(a1), "f"(a2), "f"(a3));
  return d;
}
"""
# Byte-granular stores for M % 4 != 0 (rows of xt only 2- or 1-byte aligned).
ST_U16 = r"""
__device__ __forceinline__ void mkb_f10_st_u16(void* p, unsigned int v) {
  *reinterpret_cast<unsigned short*>(p) = static_cast<unsigned short>(v & 0xFFFFu);
}
"""
ST_U8 = r"""
__device__ __forceinline__ void mkb_f10_st_u8(void* p, unsigned int v) {
  *reinterpret_cast<unsigned char*>(p) = static_cast<unsigned char>(v & 0xFFu);
}
"""


def _lo(w):
    """fp32 value of the low bf16 of a packed pair."""
    return T.reinterpret(w << T.uint32(16), ty="float32")


def _hi(w):
    """fp32 value of the high bf16 of a packed pair."""
    return T.reinterpret(w & T.uint32(0xFFFF0000), ty="float32")


def store_width(m: int) -> int:
    """Bytes per global store: the largest power of two <= 16 dividing m (row pitch of xt)."""
    sw = 16
    while m % sw:
        sw //= 2
    return sw


def make_kernel(rows: int, cols: int, scale: float):
    """transpose_cast_fp8 for a static x of [rows, cols] (cols % 8 == 0)."""
    assert cols % VEC == 0, "N must be a multiple of 8"
    assert rows * cols < 2**31, "int32 indexing"
    assert RPT == 4
    MM = rows
    NN = cols
    GRID = ((cols + TN - 1) // TN, (rows + TM - 1) // TM)
    assert GRID[1] <= 65535
    M_TAIL = rows % TM != 0
    N_TAIL = cols % TN != 0
    SW = store_width(rows)
    S = scale

    @T.function
    def transpose_cast_fp8(
        X: T.Tensor((MM, NN), T.bfloat16),
        XT: T.Tensor((NN, MM), "float8_e4m3fn"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        n0 = T.cuda.block_idx("x") * TN
        m0 = T.cuda.block_idx("y") * TM
        tid = T.cuda.thread_idx("x")
        tile = T.alloc_shared((TN * WPR,), "uint32", align=128)
        xv = T.alloc_local((RPT * 4,), "uint32")
        sv = T.alloc_local((4,), "uint32")

        # 1. read: rows m0 + 4 mq + r, columns n0 + 8 nv .. + 7
        nv = T.truncmod(tid, 8)
        mq = T.truncdiv(tid, 8)
        swz = ((T.truncdiv(mq, 4) ^ nv) * 4) + T.truncmod(mq, 4)  # swizzled word of mq in row 8 nv + j
        for r in T.unroll(RPT):
            if ((not M_TAIL) or m0 + 4 * mq + r < MM) and ((not N_TAIL) or n0 + 8 * nv < NN):
                T.ptx[X_LOAD](
                    xv[4 * r], xv[4 * r + 1], xv[4 * r + 2], xv[4 * r + 3],
                    X.ptr_to([m0 + 4 * mq + r, n0 + 8 * nv]),
                )
            else:
                for i in T.unroll(4):
                    xv[4 * r + i] = T.uint32(0)

        # 2. scale, saturating e4m3 cast, 4 x 4 byte transpose in registers, swizzled word
        #    stores: word mq of shared row n = 8 nv + j holds rows 4 mq .. 4 mq + 3 of column n
        for jj in T.unroll(4):  # word jj of each loaded vector: columns 2 jj (lo), 2 jj + 1 (hi)
            plo = T.cuda.func_call(
                "mkb_f10_e4m3x4",
                _lo(xv[jj]) * T.float32(S), _lo(xv[4 + jj]) * T.float32(S),
                _lo(xv[8 + jj]) * T.float32(S), _lo(xv[12 + jj]) * T.float32(S),
                E4M3X4, ty="uint32",
            )
            phi = T.cuda.func_call(
                "mkb_f10_e4m3x4",
                _hi(xv[jj]) * T.float32(S), _hi(xv[4 + jj]) * T.float32(S),
                _hi(xv[8 + jj]) * T.float32(S), _hi(xv[12 + jj]) * T.float32(S),
                E4M3X4, ty="uint32",
            )
            tile[(8 * nv + 2 * jj) * WPR + swz] = plo
            tile[(8 * nv + 2 * jj + 1) * WPR + swz] = phi
        T.cuda.cta_sync()

        # 3. write: 16-byte chunk cl of shared rows tid / 8 + 32 i -> xt[n0 + row, m0 + 16 cl ..]
        cl = T.truncmod(tid, 8)
        for i in T.unroll(TN // WPASS):
            nr = T.truncdiv(tid, 8) + WPASS * i
            if (not N_TAIL) or n0 + nr < NN:
                pc = cl ^ T.truncmod(T.truncdiv(nr, 8), 8)
                sv[T.ramp(0, 1, 4)] = tile[T.ramp(nr * WPR + pc * 4, 1, 4)]
                m = m0 + 16 * cl
                if T.constexpr(SW == 16):
                    if (not M_TAIL) or m < MM:
                        T.ptx["st.global.v4.b32"](XT.ptr_to([n0 + nr, m]), sv[0], sv[1], sv[2], sv[3])
                elif T.constexpr(SW == 8):
                    for p in T.unroll(2):
                        if m + 8 * p < MM:
                            T.ptx["st.global.v2.b32"](
                                XT.ptr_to([n0 + nr, m + 8 * p]), sv[2 * p], sv[2 * p + 1]
                            )
                elif T.constexpr(SW == 4):
                    for p in T.unroll(4):
                        if m + 4 * p < MM:
                            T.ptx["st.global.b32"](XT.ptr_to([n0 + nr, m + 4 * p]), sv[p])
                elif T.constexpr(SW == 2):
                    for p in T.unroll(8):
                        if m + 2 * p < MM:
                            T.cuda.func_call(
                                "mkb_f10_st_u16", XT.ptr_to([n0 + nr, m + 2 * p]),
                                sv[p // 2] >> T.uint32(16 * (p % 2)), ST_U16,
                            )
                else:
                    for p in T.unroll(16):
                        if m + p < MM:
                            T.cuda.func_call(
                                "mkb_f10_st_u8", XT.ptr_to([n0 + nr, m + p]),
                                sv[p // 4] >> T.uint32(8 * (p % 4)), ST_U8,
                            )

    return transpose_cast_fp8


def build(spec):
    """Compile for spec's static (M, N) and scale; return run(x, xt)."""
    rows = int(spec.dims["M"])
    cols = int(spec.dims["N"])
    scale = float(spec.params["scale"])
    kernel = make_kernel(rows, cols, scale)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    ex = tvm_tirx.tirx.compile(kernel, target=target)
    fn = ex["transpose_cast_fp8"]

    def run(x, xt):
        fn(x, xt)

    run.module = ex  # keep the compiled module alive with the launcher
    return run

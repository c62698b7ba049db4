"""F10 transpose_cast_fp8, TIRx (tvm_tirx 0.1.0a4) expert solution:
xt[n, m] = e4m3(clamp(x[m, n] * scale, -448, 448)), x bf16 [M, N], xt float8_e4m3fn [N, M].

Memory-bound: x read once (2 bytes per element) and xt written once (1 byte per element),
402.7 MB at the benchmark shape M = 32768, N = 4096 (268.4 MB read, 134.2 MB written), 86.4 us
at the roofline's bandwidth; the arithmetic is 4.5 SASS instructions per element (288 per
thread for its 64 elements), ~18 us of the SMs' issue rate. Compiled for the static shape of
one shape set. One CTA of 512 threads transposes one TM x TN = 256 x 128 tile (x rows
m0..m0+255, columns n0..n0+127) through 32 KB of shared memory, so that both the global read
and the global write are 16-byte accesses in 256-byte contiguous runs per row:

* Grid: x = column tile (ceil(N / 128)), y = row tile (ceil(M / 256)): 32 x 128 = 4096 CTAs at
  the benchmark. KernelAttributes(min_blocks_per_sm = 3) caps the registers at 40 (no spills:
  no local memory, no stack): 3 CTAs (1536 threads, 96 KB of shared memory) per SM, about
  10.3 waves.
* Read: warp w reads 64-column block w % 2 of the tile; lane l takes vector column
  nv = l % 8 + 8 (w % 2) and 4-row group mg = l / 8 + 4 (w / 2) (0..31), and loads the 16-byte
  vectors x[m0 + 4c + r, n0 + 8 nv .. + 7] for word columns c = 32 h + mg, h = 0, 1, r = 0..3
  (``ld.global.nc.v4.b32``, read-only path, no cache hint): 8 loads in flight per thread, 64 KB
  per CTA, 192 KB per SM. A warp instruction covers 4 rows x 128 contiguous bytes, and the two
  warps of a row group cover 256 contiguous bytes of each of those rows.
* Convert in registers: bf16 -> fp32 by bit moves (low half << 16, high half & 0xFFFF0000), one
  multiply by the scale (exact: a power of two; in general the same fp32 product as the
  reference), then ``cvt.rn.satfinite.e4m3x2.f32`` (round to nearest even; satfinite turns
  anything beyond the range into +-448, exactly clamp-then-cast). For each pass h and each of
  its 8 columns n, the thread packs the 4 bytes of rows 4c .. 4c + 3 into one 32-bit word: a
  4 x 4 byte block of the transpose is done in registers, at no extra cost (two cvt per word,
  then one mov.b32).
* Shared tile: TN = 128 rows (n) of 256 bytes (64 words: m = 0..255), written one word at a
  time and read one 16-byte chunk at a time. XOR swizzle on 16-byte chunks: word c of row n
  sits at word c ^ ((n / 8 % 8) << 2), i.e. 16-byte chunks are permuted inside each 128-byte
  half of a row. Word stores: in one instruction a warp writes 8 rows n = 8 nv + j in 4
  consecutive logical words of one chunk, which the swizzle spreads over 8 distinct chunks =
  32 distinct banks. Chunk loads: each quarter-warp reads 8 chunks (128 contiguous bytes) of
  one row: conflict-free.
* Write: thread (cl = tid % 16, row nr = tid / 16 + 32 i, i = 0..3) writes xt[n0 + nr,
  m0 + 16 cl .. + 15] with ``st.global.v4.b32``: a warp instruction covers 2 rows x 256
  contiguous bytes of xt.
* Ragged edges: N % 8 == 0 (whole vectors); columns past N are neither loaded nor stored
  (N = 520: 5 column tiles, the last one holds 8 columns). Rows past M load nothing (zeros)
  and their bytes are never stored (M = 1000: 4 row tiles). When M % 16 != 0 the rows of xt
  are not 16-byte aligned (M = 1000: row n starts at byte 1000 n), so the store width SW is the
  largest power of two dividing both M and 16 (8 bytes for M = 1000: two ``st.global.v2.b32``
  per chunk; 4, 2 and 1 byte stores for the other cases), each piece predicated on m < M
  (M % SW == 0: a piece is all in or all out).
* CPU emulation (numpy, thread by thread for every CTA, at the small, ragged, tall and
  benchmark shapes): every global load in bounds, every shared word written once per CTA, no
  bank conflicts in the warp word stores or in the 8-lane phases of the 16-byte shared loads,
  every xt byte written once, and the result bit-identical to torch's
  (x * scale).clamp(-448, 448).to(float8_e4m3fn).t() with inf, -3e38 and -0 planted in the
  input. The emulator fails on a wrong swizzle and on a wrong lane map.
* Limits (asserted in make_kernel, called by build()): N % 8 == 0, M * N < 2^31 (int32 index
  arithmetic; benchmark: 1.3e8), at most 65535 row tiles (grid y). The kernel is written for
  general (TM, TN, THREADS) with TN % 64 == 0.

Measured on the H200 (full mode, one judge): in the tuning run bench/h200/2026-12-02e/tune-r9.json
101.0 us (IQR 0.4) against 102.8 us (IQR 0.3) for the previous TIRx expert (128 x 64 tiles) in
the same run (1.018x); the same code with 256 x 64 tiles (256 threads, 256-byte runs on the xt
side only) ran 102.0 us, with 512 x 64 tiles (512 threads, 512-byte xt runs, 128-byte x runs)
102.8 us. In the one-run table bench/h200/2026-12-02e/solutions-ABCF-r9.md: 101.2 us (IQR 0.4),
85.4% of the 86.4 us roofline ideal, 18.57x the fastest eager formulation
(cast_then_transpose), 1.53x torch.compile; the CuTe expert 101.1 us in the same run (ratio
1.002, the CuTe one faster).
What changed against the previous expert (TM x TN = 128 x 64 tiles, 256 threads, 16384 CTAs,
4 loads of 16 B per thread, an 8 KB shared tile, 128-byte runs on both sides, no register
cap, 128 KB of loads in flight per SM): the 256 x 128 tile with 256-byte runs on both sides,
8 loads per thread, the 40-register cap and 192 KB of loads in flight per SM. The math, the
swizzle pattern and the ragged-edge paths are the previous expert's.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

TM = 256  # tile rows (m): bytes of one xt row segment
TN = 128  # tile columns (n): rows of xt; multiple of 64
THREADS = 512
MIN_BLOCKS = 3  # CTAs per SM the register cap is sized for (40 registers)
VEC = 8  # bf16 per 16-byte load
RPT = 4  # rows of x per 32-bit word of the transpose
NB = TN // 64  # 64-column blocks of the tile; warp w reads block w % NB
MG = THREADS // (TN // VEC)  # 4-row groups per read pass
HP = TM // (RPT * MG)  # read passes: RPT * HP loads of 16 B per thread
WPR = TM // 4  # 32-bit words per shared row
CPR = TM // 16  # 16-byte chunks per shared row
WPASS = THREADS // CPR  # shared rows written out per pass
assert TN % 64 == 0 and MG * (TN // VEC) == THREADS and HP * RPT * MG == TM and TN % WPASS == 0
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
        T.device_entry(
            launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS),
            kernel_attrs=T.cuda.KernelAttributes(min_blocks_per_sm=MIN_BLOCKS),
        )
        n0 = T.cuda.block_idx("x") * TN
        m0 = T.cuda.block_idx("y") * TM
        tid = T.cuda.thread_idx("x")
        tile = T.alloc_shared((TN * WPR,), "uint32", align=128)
        xv = T.alloc_local((HP * RPT * 4,), "uint32")
        sv = T.alloc_local((4,), "uint32")

        # 1. read: pass h, row m0 + 4 (h MG + mg) + r, columns n0 + 8 nv .. + 7 (word 4 (h RPT + r) + k
        #    of xv = columns 2k (low half) and 2k + 1 (high half))
        lane = T.truncmod(tid, 32)
        warp = T.truncdiv(tid, 32)
        nv = T.truncmod(lane, 8) + 8 * T.truncmod(warp, NB)
        mg = T.truncdiv(lane, 8) + 4 * T.truncdiv(warp, NB)
        for h in T.unroll(HP):
            for r in T.unroll(RPT):
                mr = m0 + 4 * (h * MG + mg) + r
                if ((not M_TAIL) or mr < MM) and ((not N_TAIL) or n0 + 8 * nv < NN):
                    T.ptx[X_LOAD](
                        xv[4 * (h * RPT + r)], xv[4 * (h * RPT + r) + 1],
                        xv[4 * (h * RPT + r) + 2], xv[4 * (h * RPT + r) + 3],
                        X.ptr_to([mr, n0 + 8 * nv]),
                    )
                else:
                    for i in T.unroll(4):
                        xv[4 * (h * RPT + r) + i] = T.uint32(0)

        # 2. scale, saturating e4m3 cast, 4 x 4 byte transpose in registers, swizzled word
        #    stores: word c = h MG + mg of shared row n = 8 nv + j holds rows 4c .. 4c + 3 of
        #    column n, at physical word c ^ ((nv % 8) << 2) (n / 8 = nv).
        for h in T.unroll(HP):
            swz = (h * MG + mg) ^ (T.truncmod(nv, 8) * 4)
            for jj in T.unroll(4):  # word jj of each loaded vector: columns 2 jj (lo), 2 jj + 1 (hi)
                b = 4 * h * RPT + jj
                plo = T.cuda.func_call(
                    "mkb_f10_e4m3x4",
                    _lo(xv[b]) * T.float32(S), _lo(xv[b + 4]) * T.float32(S),
                    _lo(xv[b + 8]) * T.float32(S), _lo(xv[b + 12]) * T.float32(S),
                    E4M3X4, ty="uint32",
                )
                phi = T.cuda.func_call(
                    "mkb_f10_e4m3x4",
                    _hi(xv[b]) * T.float32(S), _hi(xv[b + 4]) * T.float32(S),
                    _hi(xv[b + 8]) * T.float32(S), _hi(xv[b + 12]) * T.float32(S),
                    E4M3X4, ty="uint32",
                )
                tile[(8 * nv + 2 * jj) * WPR + swz] = plo
                tile[(8 * nv + 2 * jj + 1) * WPR + swz] = phi
        T.cuda.cta_sync()

        # 3. write: 16-byte chunk cl of shared rows tid / CPR + WPASS i -> xt[n0 + row, m0 + 16 cl ..]
        cl = T.truncmod(tid, CPR)
        for i in T.unroll(TN // WPASS):
            nr = T.truncdiv(tid, CPR) + WPASS * i
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

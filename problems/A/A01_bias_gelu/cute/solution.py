"""A01 bias_gelu, CuTe DSL expert solution: y = gelu_erf(x + b), bf16 in/out, fp32 math.

Memory-bound elementwise kernel (one read of x, one write of y; b is 28 KB and stays in L1/L2).

Design
  * One compile per shape set with fully static shapes (T, H): tile counts, strides and the
    "do we need bounds checks" decision are compile-time constants.
  * CTA = THREADS threads laid out (TM rows x TN columns); every thread owns one 128-bit
    vector (8 bf16) of columns and VM rows spaced TM apart, so a CTA covers a tile of
    (TM * VM) x (TN * 8) elements.  A warp reads 512 contiguous bytes per row (coalesced).
  * Each thread loads its 8 bias values once and reuses them for its VM rows; all VM x-loads
    are issued before any math, so every thread has VM x 16 B in flight.
  * GELU is exact (erf, not tanh) in fp32, one rounding to bf16 on store; erf goes through a
    relative-1.2e-7 erfc fit (~23 SASS instructions per element in total vs ~29 with libdevice
    erff) so instruction issue stays well under the memory time; see _gelu_erf.
  * Ragged shapes (T % tile_m or H % tile_n != 0): predicated loads/stores, one predicate per
    128-bit vector (H % 8 == 0, so a vector is either fully inside or fully outside).
  * 1-D grid, column tile fastest, so consecutive CTAs stream consecutive memory.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through (about 5 us of host overhead) and launches on torch's current
    stream (make_fake_stream(use_tvm_ffi_env_stream=True)).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt):
ROWS_PER_THREAD = 4, 2, 1 ran 233.7, 233.7, 256.0 us; ROWS_PER_THREAD = 4 stays. In the one-run
table (bench/h200/2026-12-02g/solutions-AB-r15.md): 233.9 us, 86.0% of the roofline ideal.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 elements per 128-bit access
THREADS = 256      # threads per CTA
ROWS_PER_THREAD = 4  # VM: rows each thread handles (x vectors in flight per thread)
# "erfc_fit" (default): the branch-free erfc fit below.  "libdevice": cute.math.erf (about 6
# more SASS instructions per element; kept as a one-line fallback).
ERF_IMPL = "erfc_fit"

# --- exact GELU without libdevice erff --------------------------------------------------
# Instruction budget: at 16384 x 14336 the H200 moves the 940 MB in ~225 us, while issuing one
# SASS instruction per element costs ~7 us (235M elements / (132 SMs x 128 lanes x 1.98 GHz)).
# With libdevice erff the kernel is ~29 SASS instructions per element (~200 us of issue, too
# close to the memory time to hide fully); with the fit below it is ~23 (~160 us).  We use
# gelu(v) = 0.5*v*(1 + erf(z)), z = v/sqrt(2), written through erfc(|z|):
#     h = 0.5 * v * erfc(|z|)          (same sign as v)
#     gelu(v) = max(v, 0) - |h|         (v >= 0: v - h;  v < 0: h)
# with the Chebyshev fit erfc(z) = t*exp(-z^2 + P(t)), t = 1/(1 + z/2), whose *relative* error
# is < 1.2e-7 for all z >= 0 (Numerical Recipes "erfcc").  This avoids the cancellation in
# 1 + erf(z) for negative v, so it is at least as accurate as the fp32 reference formula
# (simulated in fp32: <= 28 fp32 ulps on |v| < 4 vs up to 4e3 ulps for the reference formula;
# bf16 results differ from the reference only by 1 bf16 ulp at rounding ties).  Everything is
# folded into base 2: exp(A) = exp2(A*log2e), and the factor 0.5 becomes "-1" in the exponent.
_LOG2E = math.log2(math.e)
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806,
           0.27886807, -1.13520398, 1.48851587, -0.82215223, 0.17087277)
_KZ = math.sqrt(_LOG2E / 2.0)      # za = |v| * _KZ = |z| * sqrt(log2e)
_KT = 0.5 / math.sqrt(_LOG2E)      # t = 1 / (1 + _KT * za) = 1 / (1 + |z|/2)
_P2 = tuple(c * _LOG2E - (1.0 if i == 0 else 0.0) for i, c in enumerate(_ERFC_P))


def _gelu_erf(v, impl: str = "erfc_fit"):
    """Exact-erf GELU of an fp32 TensorSSA (see the comment above)."""
    if impl == "libdevice":
        return 0.5 * v * (1.0 + cute.math.erf(v * (1.0 / math.sqrt(2.0))))
    za = cute.math.abs(v * _KZ)
    t = cute.math.rcp(za * _KT + 1.0, approx=True, ftz=True)
    p = t * _P2[9] + _P2[8]
    for c in _P2[7::-1]:
        p = p * t + c
    e = cute.math.exp2(p - za * za, fastmath=True)     # = 0.5 * exp(-z^2 + P(t))
    h = v * (t * e)                                     # = 0.5 * v * erfc(|z|)
    return cute.math.max(v, cute.full_like(v, 0.0)) - cute.math.abs(h)


def _config(T: int, H: int) -> tuple[int, int, int]:
    """Pick (TM, TN, VM): threads along rows, threads along columns, rows per thread."""
    nvec = H // VEC                       # 128-bit vectors per row
    tn = 32
    for cand in (256, 128, 64, 32):      # prefer a TN that divides the row exactly
        if cand <= THREADS and nvec % cand == 0:
            tn = cand
            break
    else:                                 # otherwise the smallest warp multiple covering the row
        tn = min(THREADS, max(32, -(-nvec // 32) * 32))
    tm = THREADS // tn
    vm = ROWS_PER_THREAD
    # Small problems: fewer rows per thread so there are enough CTAs to fill 132 SMs.
    while vm > 1 and (-(-T // (tm * vm))) * (-(-H // (tn * VEC))) < 4 * 132:
        vm //= 2
    return tm, tn, vm


@cute.kernel
def _bias_gelu_kernel(
    mX: cute.Tensor,            # (T, H) row-major bf16
    mB: cute.Tensor,            # (H,) bf16
    mY: cute.Tensor,            # (T, H) row-major bf16
    tiled_copy: cute.TiledCopy,
    tm: cutlass.Constexpr,
    vm: cutlass.Constexpr,
    n_col_tiles: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    erf_impl: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile_m = tm * vm
    tile_n = cute.size(tiled_copy.tiler_mn[1])
    col_tile = bidx % n_col_tiles
    row_tile = bidx // n_col_tiles

    gX = cute.local_tile(mX, (tile_m, tile_n), (row_tile, col_tile))
    gY = cute.local_tile(mY, (tile_m, tile_n), (row_tile, col_tile))
    # Bias viewed as a (TM, H) matrix with row stride 0: each thread's slice is one vector.
    mB2 = cute.make_tensor(mB.iterator, cute.make_layout((tm, mB.shape[0]), stride=(0, 1)))
    gB = cute.local_tile(mB2, (tm, tile_n), (0, col_tile))

    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)          # ((VEC), VM, 1)
    tYgY = thr.partition_D(gY)
    tBgB = thr.partition_S(gB)          # ((VEC), 1, 1)
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)
    tBrB = cute.make_fragment_like(tBgB)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), (tile_m, tile_n), (row_tile, col_tile))
        tCc = thr.partition_S(cX)
        cB = cute.local_tile(cute.make_identity_tensor(mB2.shape), (tm, tile_n), (0, col_tile))
        tCb = thr.partition_S(cB)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        pred_b = cute.make_rmem_tensor(
            (cute.size(tCb, mode=[0, 1]), cute.size(tCb, mode=[1]), cute.size(tCb, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred_b, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred_b, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred_b, mode=[2])):
                    pred_b[j, m, n] = cute.elem_less(tCb[(0, j), m, n], mB2.shape)
        tXrX.fill(0.0)
        tBrB.fill(0.0)
        cute.copy(tiled_copy, tBgB, tBrB, pred=pred_b)
        cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    else:
        cute.copy(tiled_copy, tBgB, tBrB)
        cute.copy(tiled_copy, tXgX, tXrX)

    b = tBrB[None, 0, 0].load().to(cutlass.Float32)
    for r in cutlass.range_constexpr(vm):
        v = tXrX[None, r, 0].load().to(cutlass.Float32) + b
        tYrY[None, r, 0].store(_gelu_erf(v, erf_impl).to(mY.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _bias_gelu_host(
    mX: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    tm: cutlass.Constexpr,
    tn: cutlass.Constexpr,
    vm: cutlass.Constexpr,
    erf_impl: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((tm, tn), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))                          # one 128-bit vector
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    T = mX.shape[0]
    H = mX.shape[1]
    tile_m = tm * vm
    tile_n = tn * VEC
    n_col_tiles = (H + tile_n - 1) // tile_n
    n_row_tiles = (T + tile_m - 1) // tile_m
    check_bounds = (T % tile_m != 0) or (H % tile_n != 0)
    _bias_gelu_kernel(mX, mB, mY, tiled_copy, tm, vm, n_col_tiles, check_bounds, erf_impl).launch(
        grid=[n_row_tiles * n_col_tiles, 1, 1],
        block=[tm * tn, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and return run(x, b, y)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (128-bit vectors)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    tm, tn, vm = _config(T, H)
    key = (T, H, tm, tn, vm, ERF_IMPL)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        x = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        b = make_fake_compact_tensor(bf16, (H,), assumed_align=16)
        y = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_bias_gelu_host, x, b, y, stream, tm, tn, vm, ERF_IMPL,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, b, y)

    return run

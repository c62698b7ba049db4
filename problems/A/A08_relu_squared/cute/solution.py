"""A08 relu_squared, CuTe DSL expert solution: y = relu(x + b)^2, bf16 in/out, fp32 math.

Memory-bound elementwise kernel (one read of x, one write of y; b is 28 KB and stays in L1/L2).

Design
  * One compile per shape set with fully static shapes (T, H): tile counts, strides and the
    "do we need bounds checks" decision are compile-time constants.
  * CTA = 256 threads laid out (TM rows x TN columns); every thread owns one 128-bit vector
    (8 bf16) of columns and VM rows spaced TM apart, so a CTA covers a tile of
    (TM * VM) x (TN * 8) elements.  A warp reads 512 contiguous bytes per row (coalesced).
    H = 14336 is 1792 vectors = 7 x 256, so the benchmark tile is VM x 2048 with no masking.
  * Each thread loads its 8 bias values once and reuses them for its VM rows; all VM x-loads
    are issued before any math, so every thread has VM x 16 B in flight.
  * Math in fp32: v = x + b is exact, r = max(v, 0), y = r * r is the one fp32 rounding, then
    one round-to-nearest-even to bf16 on store, so the result matches the fp32 reference bit
    for bit.  About 4 SASS instructions per element (cvt, add, max, mul, pack), far below the
    memory time (one instruction per element is ~7 us against ~225 us of DRAM traffic).
  * Ragged shapes (T % tile_m or H % tile_n != 0): predicated loads/stores, one predicate per
    128-bit vector (H % 8 == 0, so a vector is either fully inside or fully outside).
  * 1-D grid, column tile fastest, so consecutive CTAs stream consecutive memory.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through (about 5 us of host overhead) and launches on torch's current
    stream (make_fake_stream(use_tvm_ffi_env_stream=True)).
It has the structure of the A01 solution with a cheaper activation.
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt):
ROWS_PER_THREAD = 4, 2, 1 ran 222.4, 220.3, 218.8 us, so ROWS_PER_THREAD = 1 (from 4); the cause was
not profiled. In the one-run table (bench/h200/2026-12-02g/solutions-AB-r15.md): 218.7 us, 92.0% of
the roofline ideal.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 elements per 128-bit access
THREADS = 256      # threads per CTA
ROWS_PER_THREAD = 1  # VM: rows each thread handles (x vectors in flight per thread)


def _relu_squared(v):
    """max(v, 0)^2 of an fp32 TensorSSA (one fp32 rounding, in the product)."""
    r = cute.math.max(v, cute.full_like(v, 0.0))
    return r * r


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
def _relu_sq_kernel(
    mX: cute.Tensor,            # (T, H) row-major bf16
    mB: cute.Tensor,            # (H,) bf16
    mY: cute.Tensor,            # (T, H) row-major bf16
    tiled_copy: cute.TiledCopy,
    tm: cutlass.Constexpr,
    vm: cutlass.Constexpr,
    n_col_tiles: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
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
        tYrY[None, r, 0].store(_relu_squared(v).to(mY.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _relu_sq_host(
    mX: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    tm: cutlass.Constexpr,
    tn: cutlass.Constexpr,
    vm: cutlass.Constexpr,
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
    _relu_sq_kernel(mX, mB, mY, tiled_copy, tm, vm, n_col_tiles, check_bounds).launch(
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
    key = (T, H, tm, tn, vm)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        x = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        b = make_fake_compact_tensor(bf16, (H,), assumed_align=16)
        y = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_relu_sq_host, x, b, y, stream, tm, tn, vm,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, b, y)

    return run

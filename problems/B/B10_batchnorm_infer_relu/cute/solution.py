"""B10 batchnorm_infer_relu, CuTe DSL expert solution: inference BatchNorm + ReLU, NCHW fp16.

y[n, c, i, j] = relu(x[n, c, i, j] * scale[c] + shift[c]) with scale = w * rsqrt(var + eps) and
shift = b - mean * scale folded in fp32 from the four fp32 [C] vectors.

Memory-bound elementwise kernel: one read of x, one write of y; the four [C] vectors (16 B per
channel) stay in L1/L2.

Design
  * One compile per shape set with fully static shapes (N, C, H, W) and eps.  x and y are viewed
    as row-major (N * C, H * W) matrices (the same memory): row r is the plane of channel
    c = r % C, so every row has one (scale, shift) pair.
  * CTA = THREADS threads laid out (TM rows x TN columns, TN a multiple of 32); every thread owns
    VM x VN 128-bit vectors (8 fp16): VN vectors along its row, TN * 8 columns apart, in VM rows,
    TM rows apart, so a warp reads 512 contiguous bytes per access and a thread has 4 vectors
    (64 B) in flight; all loads are issued before any math.  Long rows (H * W a multiple of
    TN * 8 * 4, the benchmark: 128 x 128) use VN = 4, VM = 1, so a thread folds its channel's
    parameters once for 4 vectors (one rsqrt.approx and 4 L1-hit scalar loads per 32 elements);
    short rows use VN = 1, VM = 4.  Small problems halve VM, then VN, until there are >= 4 CTAs
    per SM.
  * Math in fp32: scale = w * rsqrt(var + eps) (rsqrt.approx, ~2^-23 relative), shift = b -
    mean * scale, y = max(x * scale + shift, 0) (one FMA, one max), one rounding to fp16 on the
    store; scale and shift are never rounded to fp16.  About 3.5 SASS instructions per element,
    far under the memory time.
  * Ragged shapes (N * C % tile_m or H * W % tile_n != 0): predicated loads/stores, one predicate
    per 128-bit vector (H * W % 8 == 0, so a vector is fully inside or fully outside a row).
    Padding rows past N * C still index a valid channel (r % C), so no parameter load is out of
    bounds.
  * 1-D grid, column tile fastest, so consecutive CTAs stream consecutive memory.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through on torch's current stream (about 5 us of host overhead).
Limits: N * C * H * W < 2**31 (32-bit offsets); build() raises ValueError beyond that.
Measured on the H200 (bench/h200/2026-12-02g/solutions-AB-r15.md, one run): 131.8 us, 87.2% of the
roofline ideal.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # fp16 elements per 128-bit access
THREADS = 256      # threads per CTA
VPT = 4            # 128-bit vectors per thread (VM * VN)


def _config(R: int, HW: int) -> tuple[int, int, int, int]:
    """(TM, TN, VM, VN): threads along rows / columns, vectors per thread along rows / columns."""
    nvec = HW // VEC                      # 128-bit vectors per row
    tn = 32
    for cand in (256, 128, 64, 32):      # prefer a TN that divides the row exactly
        if nvec % cand == 0:
            tn = cand
            break
    else:                                 # otherwise the smallest warp multiple covering the row
        tn = min(THREADS, max(32, -(-nvec // 32) * 32))
    tm = THREADS // tn
    vn = 1
    for cand in (VPT, 2):                 # vectors along the row when the row tiles exactly
        if nvec % (tn * cand) == 0:
            vn = cand
            break
    vm = VPT // vn

    def ctas(vm_: int, vn_: int) -> int:
        return (-(-R // (tm * vm_))) * (-(-HW // (tn * VEC * vn_)))

    # Small problems: fewer vectors per thread so there are enough CTAs to fill 132 SMs.
    while vm > 1 and ctas(vm, vn) < 4 * 132:
        vm //= 2
    while vn > 1 and ctas(vm, vn) < 4 * 132:
        vn //= 2
    return tm, tn, vm, vn


@cute.kernel
def _bn_relu_kernel(
    mX: cute.Tensor,            # (N * C, H * W) row-major fp16
    mMean: cute.Tensor,         # (C,) fp32
    mVar: cute.Tensor,          # (C,) fp32
    mW: cute.Tensor,            # (C,) fp32
    mB: cute.Tensor,            # (C,) fp32
    mY: cute.Tensor,            # (N * C, H * W) row-major fp16
    tiled_copy: cute.TiledCopy,
    tile_m: cutlass.Constexpr,
    tile_n: cutlass.Constexpr,
    vm: cutlass.Constexpr,
    vn: cutlass.Constexpr,
    n_col_tiles: cutlass.Constexpr,
    n_chan: cutlass.Constexpr,
    eps: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    col_tile = bidx % n_col_tiles
    row_tile = bidx // n_col_tiles

    gX = cute.local_tile(mX, (tile_m, tile_n), (row_tile, col_tile))
    gY = cute.local_tile(mY, (tile_m, tile_n), (row_tile, col_tile))
    cX = cute.local_tile(cute.make_identity_tensor(mX.shape), (tile_m, tile_n), (row_tile, col_tile))

    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)          # ((VEC), VM, VN)
    tYgY = thr.partition_D(gY)
    tCc = thr.partition_S(cX)           # (row, col) of every element
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)

    if cutlass.const_expr(check_bounds):
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mX.shape)
        tXrX.fill(0.0)
        cute.copy(tiled_copy, tXgX, tXrX, pred=pred)
    else:
        cute.copy(tiled_copy, tXgX, tXrX)

    for m in cutlass.range_constexpr(vm):
        row = tCc[(0, 0), m, 0][0]
        c = row % n_chan                # channel of this row (valid even for padding rows)
        scale = mW[c] * cute.math.rsqrt(mVar[c] + eps, fastmath=True)
        shift = mB[c] - mMean[c] * scale
        for n in cutlass.range_constexpr(vn):
            v = tXrX[None, m, n].load().to(cutlass.Float32) * scale + shift
            tYrY[None, m, n].store(cute.math.max(v, cute.full_like(v, 0.0)).to(mY.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _bn_relu_host(
    mX: cute.Tensor,
    mMean: cute.Tensor,
    mVar: cute.Tensor,
    mW: cute.Tensor,
    mB: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    tm: cutlass.Constexpr,
    tn: cutlass.Constexpr,
    vm: cutlass.Constexpr,
    vn: cutlass.Constexpr,
    eps: cutlass.Constexpr,
):
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_ordered_layout((tm, tn), order=(1, 0))   # row-major threads
    val_layout = cute.make_layout((1, VEC))                          # one 128-bit vector
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    # [N, C, H, W] contiguous -> (N * C, H * W) row-major: the same memory, one row per plane.
    n_chan = mX.shape[1]
    R = mX.shape[0] * n_chan
    HW = mX.shape[2] * mX.shape[3]
    plane = cute.make_layout((R, HW), stride=(HW, 1))
    mX2 = cute.make_tensor(mX.iterator, plane)
    mY2 = cute.make_tensor(mY.iterator, plane)
    tile_m = tm * vm
    tile_n = tn * VEC * vn
    n_col_tiles = (HW + tile_n - 1) // tile_n
    n_row_tiles = (R + tile_m - 1) // tile_m
    check_bounds = (R % tile_m != 0) or (HW % tile_n != 0)
    _bn_relu_kernel(mX2, mMean, mVar, mW, mB, mY2, tiled_copy, tile_m, tile_n, vm, vn, n_col_tiles,
                    n_chan, eps, check_bounds).launch(
        grid=[n_row_tiles * n_col_tiles, 1, 1],
        block=[tm * tn, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (N, C, H, W) and eps and return run(x, running_mean, running_var, w, b, y)."""
    N = int(spec.dims["N"])
    C = int(spec.dims["C"])
    H = int(spec.dims["H"])
    W = int(spec.dims["W"])
    eps = float(spec.params["eps"])
    HW = H * W
    if HW % VEC != 0:
        raise ValueError(f"H*W={HW} must be a multiple of {VEC} (128-bit vectors)")
    if N * C * HW >= 2**31:
        raise ValueError("N*C*H*W must stay below 2**31 elements (32-bit static index math)")
    tm, tn, vm, vn = _config(N * C, HW)
    key = (N, C, H, W, eps, tm, tn, vm, vn)
    fn = _CACHE.get(key)
    if fn is None:
        nchw = (N, C, H, W)
        x = make_fake_compact_tensor(cutlass.Float16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.Float16, nchw, stride_order=(3, 2, 1, 0), assumed_align=16)
        vec = make_fake_compact_tensor(cutlass.Float32, (C,), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_bn_relu_host, x, vec, vec, vec, vec, y, stream, tm, tn, vm, vn, eps,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, running_mean: torch.Tensor, running_var: torch.Tensor, w: torch.Tensor,
            b: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, running_mean, running_var, w, b, y)

    return run

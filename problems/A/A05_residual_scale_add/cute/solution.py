"""A05 residual_scale_add, CuTe DSL expert solution: out = r + alpha * y, bf16 in/out, fp32 math.

Memory-bound elementwise kernel: one read of r and of y, one write of out (6 bytes per element).

Design
  * The operation is elementwise on contiguous tensors, so the [T, H] problem is handled as one
    flat array of N = T * H elements, viewed as a (1, N) tensor.  One compile per shape set with
    a static N and alpha baked in as an fp32 immediate (rounded to fp32 on the host; the
    problem's alpha is already an fp32 value): tile counts and the "do we need bounds checks"
    decision are compile-time constants.
  * CTA = 256 threads; every thread owns one 128-bit vector (8 bf16) per step and VM = STEPS step(s)
    spaced 256 vectors apart, so a CTA covers VM x 2048 consecutive elements and a warp reads
    512 contiguous bytes per instruction (coalesced).  All 2 x VM loads (r and y) are issued
    before any math, so every thread has 2 x VM x 16 B in flight.  The benchmark
    N = 32768 x 4096 is a multiple of the (VM x 2048)-element tile, so it runs without masking.
  * Math: r and y widened to fp32, r + alpha * y (ptxas contracts it into one FFMA: a single
    rounding in fp32, which the statement allows), one rounding to bf16 (RN) on store.  About 3
    instructions per element; the kernel is purely bandwidth-bound.
  * Ragged N (not a multiple of the tile): predicated loads/stores, one predicate per 128-bit
    vector (H % 8 == 0, so N % 8 == 0 and a vector is either fully inside or fully outside).
  * r is only read; out is a separate tensor.
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through and launches on torch's current stream
    (make_fake_stream(use_tvm_ffi_env_stream=True)).
Static facts (ptxas from CUDA 13.0, sm_90a, benchmark shape, counted on a CPU machine): 40
registers, no spills, about 5.8 SASS instructions per element in total.
The structure is A01's (same copy atoms and host path).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt): STEPS = 4,
2, 1 ran 186.0, 184.5, 182.8 us, so STEPS = 1 (from 4); the cause was not profiled. In the one-run
table (bench/h200/2026-12-02g/solutions-AB-r15.md): 182.8 us, 94.3% of the roofline ideal.
"""
import struct

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8            # bf16 elements per 128-bit access
THREADS = 256      # threads per CTA
STEPS = 1          # VM: 128-bit vectors per thread and input (loads in flight per thread)


def _steps(n: int) -> int:
    """VM: fewer vectors per thread on small problems so there are enough CTAs for 132 SMs."""
    vm = STEPS
    while vm > 1 and -(-n // (THREADS * VEC * vm)) < 4 * 132:
        vm //= 2
    return vm


@cute.kernel
def _residual_scale_add_kernel(
    mR: cute.Tensor,            # (1, N) bf16, contiguous
    mYb: cute.Tensor,           # (1, N) bf16, contiguous
    mO: cute.Tensor,            # (1, N) bf16, contiguous
    tiled_copy: cute.TiledCopy,
    vm: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    alpha: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile_n = cute.size(tiled_copy.tiler_mn[1]) * vm

    gR = cute.local_tile(mR, (1, tile_n), (0, bidx))
    gYb = cute.local_tile(mYb, (1, tile_n), (0, bidx))
    gO = cute.local_tile(mO, (1, tile_n), (0, bidx))
    thr = tiled_copy.get_slice(tidx)
    tRgR = thr.partition_S(gR)          # ((VEC), 1, VM)
    tYgY = thr.partition_S(gYb)
    tOgO = thr.partition_D(gO)
    tRrR = cute.make_fragment_like(tRgR)
    tYrY = cute.make_fragment_like(tYgY)
    tOrO = cute.make_fragment_like(tOgO)

    if cutlass.const_expr(check_bounds):
        cR = cute.local_tile(cute.make_identity_tensor(mR.shape), (1, tile_n), (0, bidx))
        tCc = thr.partition_S(cR)
        pred = cute.make_rmem_tensor(
            (cute.size(tCc, mode=[0, 1]), cute.size(tCc, mode=[1]), cute.size(tCc, mode=[2])),
            cutlass.Boolean,
        )
        for j in cutlass.range_constexpr(cute.size(pred, mode=[0])):
            for m in cutlass.range_constexpr(cute.size(pred, mode=[1])):
                for n in cutlass.range_constexpr(cute.size(pred, mode=[2])):
                    pred[j, m, n] = cute.elem_less(tCc[(0, j), m, n], mR.shape)
        tRrR.fill(0.0)
        tYrY.fill(0.0)
        cute.copy(tiled_copy, tRgR, tRrR, pred=pred)
        cute.copy(tiled_copy, tYgY, tYrY, pred=pred)
    else:
        cute.copy(tiled_copy, tRgR, tRrR)
        cute.copy(tiled_copy, tYgY, tYrY)

    for k in cutlass.range_constexpr(vm):
        r = tRrR[None, 0, k].load().to(cutlass.Float32)
        y = tYrY[None, 0, k].load().to(cutlass.Float32)
        tOrO[None, 0, k].store((r + y * alpha).to(mO.element_type))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tOrO, tOgO, pred=pred)
    else:
        cute.copy(tiled_copy, tOrO, tOgO)


@cute.jit
def _residual_scale_add_host(
    mR: cute.Tensor,
    mYb: cute.Tensor,
    mO: cute.Tensor,
    stream: cuda.CUstream,
    vm: cutlass.Constexpr,
    alpha: cutlass.Constexpr,
):
    n = cute.size(mR)
    # The contiguous [T, H] tensors as one (1, N) row.
    flat = cute.make_layout((1, n), stride=(0, 1))
    fR = cute.make_tensor(mR.iterator, flat)
    fY = cute.make_tensor(mYb.iterator, flat)
    fO = cute.make_tensor(mO.iterator, flat)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mR.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_layout((1, THREADS))
    val_layout = cute.make_layout((1, VEC))                          # one 128-bit vector
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    tile_n = THREADS * VEC * vm
    check_bounds = n % tile_n != 0
    _residual_scale_add_kernel(fR, fY, fO, tiled_copy, vm, check_bounds, alpha).launch(
        grid=[(n + tile_n - 1) // tile_n, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and alpha and return run(r, y, out)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    # alpha as the fp32 value the statement prescribes (exact for the problem's alpha).
    alpha = struct.unpack("f", struct.pack("f", float(spec.params["alpha"])))[0]
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (128-bit vectors)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    vm = _steps(T * H)
    key = (T, H, vm, alpha)
    fn = _CACHE.get(key)
    if fn is None:
        bf16 = cutlass.BFloat16
        r = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        out = make_fake_compact_tensor(bf16, (T, H), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_residual_scale_add_host, r, y, out, stream, vm, alpha,
                          options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(r: torch.Tensor, y: torch.Tensor, out: torch.Tensor) -> None:
        fn(r, y, out)

    return run

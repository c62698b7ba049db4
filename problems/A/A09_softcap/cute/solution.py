"""A09 softcap, CuTe DSL expert solution: y = cap * tanh(x / cap), fp32 in/out, fp32 math.

Memory-bound elementwise kernel: one read of x and one write of y (8 bytes per element).

Design
  * The operation is elementwise on contiguous tensors, so the [T, V] problem is handled as one
    flat array of N = T * V elements, viewed as a (1, N) tensor.  One compile per shape set with
    a static N (and cap baked in as an fp32 immediate): tile counts and the "do we need bounds
    checks" decision are compile-time constants.
  * CTA = 256 threads; every thread owns one 128-bit vector (4 fp32) per step and VM = STEPS step(s)
    spaced 256 vectors apart, so a CTA covers VM x 1024 consecutive elements and a warp reads
    512 contiguous bytes per instruction (coalesced).  All VM loads are issued before any math
    (VM x 16 B in flight per thread).  The benchmark N = 4096 x 16032 is a multiple of the
    (VM x 1024)-element tile, so it runs without masking.
  * tanh is evaluated from exp, never with the hardware tanh.approx (relative error ~2^-11, too
    coarse for the fp32 tolerance where |y| is near cap):
        u = x * (1/cap),  e = 2^(-2 |u| log2 e)  (ex2.approx.ftz, relative error ~2^-22),
        tanh|u| = (1 - e) * rcp(1 + e)          (rcp.approx.ftz, ~1 ulp),
        y = cap * copysign(tanh|u|, u).
    e is in (0, 1], so nothing overflows: deep in saturation e flushes to 0 and y = +-cap
    exactly; 1 + e is in [1, 2].  Near u = 0 the cancellation in 1 - e costs an absolute error
    of a few 1e-7 in tanh (a few 1e-6 in y), far below 1e-4 x RMS(y).  Two MUFU operations per
    element (ex2, rcp) and about 8 FP32 instructions, well under the memory time.
  * Ragged N (not a multiple of the tile): predicated loads/stores, one predicate per 128-bit
    vector (V % 8 == 0, so N % 4 == 0 and a vector is either fully inside or fully outside).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through (about 5 us of host overhead) and launches on torch's current
    stream (make_fake_stream(use_tvm_ffi_env_stream=True)).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt): STEPS = 4,
2, 1 ran 129.0, 127.0, 122.6 us, so STEPS = 1 (from 4); the cause was not profiled. In the one-run
table (bench/h200/2026-12-02g/solutions-AB-r15.md): 122.3 us, 92.0% of the roofline ideal.
"""
import math

import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 4            # fp32 elements per 128-bit access
THREADS = 256      # threads per CTA
STEPS = 1          # VM: 128-bit vectors per thread (loads in flight per thread)
_NEG_2LOG2E = -2.0 * math.log2(math.e)


def _softcap(x, cap: float):
    """cap * tanh(x / cap) of an fp32 TensorSSA through exp2 (see the module docstring)."""
    u = x * (1.0 / cap)
    e = cute.math.exp2(cute.math.abs(u) * _NEG_2LOG2E, fastmath=True)
    t = (1.0 - e) * cute.math.rcp(e + 1.0, approx=True, ftz=True)
    return cute.math.copysign(t, u) * cap


def _steps(n: int) -> int:
    """VM: fewer vectors per thread on small problems so there are enough CTAs for 132 SMs."""
    vm = STEPS
    while vm > 1 and -(-n // (THREADS * VEC * vm)) < 4 * 132:
        vm //= 2
    return vm


@cute.kernel
def _softcap_kernel(
    mX: cute.Tensor,            # (1, N) fp32, contiguous
    mY: cute.Tensor,            # (1, N) fp32, contiguous
    tiled_copy: cute.TiledCopy,
    vm: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    cap: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile_n = cute.size(tiled_copy.tiler_mn[1]) * vm

    gX = cute.local_tile(mX, (1, tile_n), (0, bidx))
    gY = cute.local_tile(mY, (1, tile_n), (0, bidx))
    thr = tiled_copy.get_slice(tidx)
    tXgX = thr.partition_S(gX)          # ((VEC), 1, VM)
    tYgY = thr.partition_D(gY)
    tXrX = cute.make_fragment_like(tXgX)
    tYrY = cute.make_fragment_like(tYgY)

    if cutlass.const_expr(check_bounds):
        cX = cute.local_tile(cute.make_identity_tensor(mX.shape), (1, tile_n), (0, bidx))
        tCc = thr.partition_S(cX)
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

    for k in cutlass.range_constexpr(vm):
        tYrY[None, 0, k].store(_softcap(tXrX[None, 0, k].load(), cap))

    if cutlass.const_expr(check_bounds):
        cute.copy(tiled_copy, tYrY, tYgY, pred=pred)
    else:
        cute.copy(tiled_copy, tYrY, tYgY)


@cute.jit
def _softcap_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    vm: cutlass.Constexpr,
    cap: cutlass.Constexpr,
):
    n = cute.size(mX)
    # The contiguous [T, V] tensors as one (1, N) row.
    flat = cute.make_layout((1, n), stride=(0, 1))
    fX = cute.make_tensor(mX.iterator, flat)
    fY = cute.make_tensor(mY.iterator, flat)
    atom = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    thr_layout = cute.make_layout((1, THREADS))
    val_layout = cute.make_layout((1, VEC))                          # one 128-bit vector
    tiled_copy = cute.make_tiled_copy_tv(atom, thr_layout, val_layout)
    tile_n = THREADS * VEC * vm
    check_bounds = n % tile_n != 0
    _softcap_kernel(fX, fY, tiled_copy, vm, check_bounds, cap).launch(
        grid=[(n + tile_n - 1) // tile_n, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, V) and cap and return run(x, y)."""
    T = int(spec.dims["T"])
    V = int(spec.dims["V"])
    cap = float(spec.params["cap"])
    if V % VEC != 0:
        raise ValueError(f"V={V} must be a multiple of {VEC} (128-bit vectors)")
    if T * V >= 2**31:
        raise ValueError("T*V must stay below 2**31 elements (32-bit static index math)")
    if not cap > 0.0:
        raise ValueError(f"cap={cap} must be positive")
    vm = _steps(T * V)
    key = (T, V, vm, cap)
    fn = _CACHE.get(key)
    if fn is None:
        f32 = cutlass.Float32
        x = make_fake_compact_tensor(f32, (T, V), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(f32, (T, V), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_softcap_host, x, y, stream, vm, cap, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

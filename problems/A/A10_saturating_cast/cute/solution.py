"""A10 saturating_cast, CuTe DSL expert solution: y = bf16(clamp(x * s, -448, 448)), fp32 in,
bf16 out.

Memory-bound elementwise kernel: one read of x (fp32) and one write of y (bf16), 6 bytes per
element.

Design
  * The operation is elementwise on contiguous tensors, so the [T, H] problem is handled as one
    flat array of N = T * H elements, viewed as a (1, N) tensor.  One compile per shape set with
    a static N (and s baked in as an fp32 immediate): tile counts and the "do we need bounds
    checks" decision are compile-time constants.
  * CTA = 256 threads; every thread owns 4 consecutive elements per step and VM = 4 steps spaced
    1024 elements apart, so a CTA covers VM x 1024 consecutive elements.  Each step is one
    128-bit fp32 load and one 64-bit bf16 store (4 bf16): a warp reads 512 and writes 256
    contiguous bytes per instruction, so both directions are fully coalesced (a thread owning
    8 elements would store 16 B but would load 2 x 16 B at a 32 B lane stride, half a sector
    per instruction).  All VM loads are issued before any math (VM x 16 B in flight per
    thread).  The benchmark N = 16384 x 4096 is a multiple of the 4096-element tile, so it runs
    without masking.
  * Math, in the statement's order: one fp32 multiply x * s, the clamp as min(max(p, -448),
    448) in fp32 (-448 and 448 are exact bf16 values), then one round-to-nearest-even
    conversion (cvt.rn.bf16x2.f32) on store, so the result matches the reference bit for bit.
    About 3 instructions per element.
  * Ragged N (not a multiple of the tile): predicated loads/stores, one predicate per 4-element
    vector (H % 8 == 0, so N % 4 == 0 and a vector is either fully inside or fully outside).
  * Host path: compiled with --enable-tvm-ffi against fake tensors, so run() passes the torch
    tensors straight through (about 5 us of host overhead) and launches on torch's current
    stream (make_fake_stream(use_tvm_ffi_env_stream=True)).
Loads in flight, measured on the H200 in one run (bench/h200/2026-12-02g/tune-r15.txt): STEPS = 4,
2, 1 ran 92.4, 92.1, 94.4 us; STEPS = 4 stays. In the one-run table
(bench/h200/2026-12-02g/solutions-AB-r15.md): 92.4 us, 93.3% of the roofline ideal.
"""
import cuda.bindings.driver as cuda  # noqa: F401  (CUstream type used by the DSL launch path)
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 4            # elements per access: 128-bit fp32 load, 64-bit bf16 store
THREADS = 256      # threads per CTA
STEPS = 4          # VM: 128-bit loads per thread (in flight per thread)
BOUND = 448.0      # largest finite fp8 e4m3 value, exact in bf16


@cute.jit
def _scale_saturate(frag: cute.Tensor, s: cutlass.Constexpr):
    """frag <- clamp(frag * s, -448, 448) in place, fp32, element by element.  The clamp uses the
    FMNMX min/max (nvvm.fmin/fmax, two instructions); cute.math.min/max on a TensorSSA was
    lowered to compare-and-select chains with NaN checks (about 3x the instructions)."""
    for i in cutlass.range_constexpr(cute.size(frag)):
        frag[i] = cute.arch.fmin(cute.arch.fmax(frag[i] * s, -BOUND), BOUND)


def _steps(n: int) -> int:
    """VM: fewer vectors per thread on small problems so there are enough CTAs for 132 SMs."""
    vm = STEPS
    while vm > 1 and -(-n // (THREADS * VEC * vm)) < 4 * 132:
        vm //= 2
    return vm


@cute.kernel
def _satcast_kernel(
    mX: cute.Tensor,            # (1, N) fp32, contiguous
    mY: cute.Tensor,            # (1, N) bf16, contiguous
    copy_x: cute.TiledCopy,     # 128-bit fp32 loads
    copy_y: cute.TiledCopy,     # 64-bit bf16 stores, same thread/value layout as copy_x
    vm: cutlass.Constexpr,
    check_bounds: cutlass.Constexpr,
    s: cutlass.Constexpr,
):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    tile_n = cute.size(copy_x.tiler_mn[1]) * vm

    gX = cute.local_tile(mX, (1, tile_n), (0, bidx))
    gY = cute.local_tile(mY, (1, tile_n), (0, bidx))
    thr = copy_x.get_slice(tidx)
    tXgX = thr.partition_S(gX)                      # ((VEC), 1, VM)
    tYgY = copy_y.get_slice(tidx).partition_D(gY)   # ((VEC), 1, VM), the same elements
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
        cute.copy(copy_x, tXgX, tXrX, pred=pred)
    else:
        cute.copy(copy_x, tXgX, tXrX)

    _scale_saturate(tXrX, s)
    tYrY.store(tXrX.load().to(mY.element_type))     # round to nearest even, packed bf16x2

    if cutlass.const_expr(check_bounds):
        cute.copy(copy_y, tYrY, tYgY, pred=pred)
    else:
        cute.copy(copy_y, tYrY, tYgY)


@cute.jit
def _satcast_host(
    mX: cute.Tensor,
    mY: cute.Tensor,
    stream: cuda.CUstream,
    vm: cutlass.Constexpr,
    s: cutlass.Constexpr,
):
    n = cute.size(mX)
    # The contiguous [T, H] tensors as one (1, N) row.
    flat = cute.make_layout((1, n), stride=(0, 1))
    fX = cute.make_tensor(mX.iterator, flat)
    fY = cute.make_tensor(mY.iterator, flat)
    atom_x = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mX.element_type, num_bits_per_copy=128)
    atom_y = cute.make_copy_atom(cute.nvgpu.CopyUniversalOp(), mY.element_type, num_bits_per_copy=64)
    thr_layout = cute.make_layout((1, THREADS))
    val_layout = cute.make_layout((1, VEC))                          # 4 consecutive elements
    copy_x = cute.make_tiled_copy_tv(atom_x, thr_layout, val_layout)
    copy_y = cute.make_tiled_copy_tv(atom_y, thr_layout, val_layout)
    tile_n = THREADS * VEC * vm
    check_bounds = n % tile_n != 0
    _satcast_kernel(fX, fY, copy_x, copy_y, vm, check_bounds, s).launch(
        grid=[(n + tile_n - 1) // tile_n, 1, 1],
        block=[THREADS, 1, 1],
        stream=stream,
    )


_CACHE: dict = {}


def build(spec):
    """Compile for spec's static (T, H) and s and return run(x, y)."""
    T = int(spec.dims["T"])
    H = int(spec.dims["H"])
    s = float(spec.params["s"])
    if H % VEC != 0:
        raise ValueError(f"H={H} must be a multiple of {VEC} (vector accesses)")
    if T * H >= 2**31:
        raise ValueError("T*H must stay below 2**31 elements (32-bit static index math)")
    vm = _steps(T * H)
    key = (T, H, vm, s)
    fn = _CACHE.get(key)
    if fn is None:
        x = make_fake_compact_tensor(cutlass.Float32, (T, H), stride_order=(1, 0), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.BFloat16, (T, H), stride_order=(1, 0), assumed_align=16)
        stream = make_fake_stream(use_tvm_ffi_env_stream=True)
        fn = cute.compile(_satcast_host, x, y, stream, vm, s, options="--enable-tvm-ffi")
        _CACHE[key] = fn

    def run(x: torch.Tensor, y: torch.Tensor) -> None:
        fn(x, y)

    return run

"""CuTe DSL example: 3x3 box blur of an fp32 image through a shared-memory tile.

y[i, j] = (1/9) * sum of x[i+di, j+dj] for di, dj in {-1, 0, 1}, zero outside the image
(like avg_pool2d(kernel 3, stride 1, padding 1, count_include_pad=True)).
x, y: [H, W] fp32; spec.dims = {"H": ..., "W": ...}, any sizes.
Each CTA stages a (TH+2) x (TW+2) tile (with halo) once, then every thread reads 9 values
from shared memory instead of 9 from global memory.
"""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream
from cutlass.memory import SmemAllocator

TW, TH = 32, 8  # output tile per CTA, one output per thread
THREADS = TW * TH
SW, SH = TW + 2, TH + 2  # staged tile with a 1-pixel halo
LOADS = (SW * SH + THREADS - 1) // THREADS  # tile elements per thread, rounded up


@cute.kernel
def box_blur_kernel(mX: cute.Tensor, mY: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    bx, by, _ = cute.arch.block_idx()
    h = cute.size(mX, mode=[0])  # static ints: the shapes were compiled in
    w = cute.size(mX, mode=[1])
    tile = SmemAllocator().allocate_tensor(
        cutlass.Float32, cute.make_layout((SH, SW), stride=(SW, 1)), byte_alignment=16)
    for k in cutlass.range_constexpr(LOADS):  # unrolled at trace time
        e = tidx + k * THREADS
        if e < SH * SW:
            r = e // SW
            c = e - r * SW
            gy = by * TH + r - 1
            gx = bx * TW + c - 1
            v = cutlass.Float32(0.0)  # defined before the if: one type on every path
            if gy >= 0 and gy < h and gx >= 0 and gx < w:
                v = mX[gy, gx]
            tile[r, c] = v
    cute.arch.sync_threads()
    ty = tidx // TW
    tx = tidx - ty * TW
    oy = by * TH + ty
    ox = bx * TW + tx
    if oy < h and ox < w:
        s = cutlass.Float32(0.0)
        for dy in cutlass.range_constexpr(3):
            for dx in cutlass.range_constexpr(3):
                s = s + tile[ty + dy, tx + dx]
        mY[oy, ox] = s * (1.0 / 9.0)


@cute.jit
def box_blur(mX: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    h = cute.size(mX, mode=[0])
    w = cute.size(mX, mode=[1])
    box_blur_kernel(mX, mY).launch(grid=[(w + TW - 1) // TW, (h + TH - 1) // TH, 1],
                                   block=[THREADS, 1, 1], stream=stream)


def build(spec):
    H, W = spec.dims["H"], spec.dims["W"]
    assert H * W < 2**31
    img = make_fake_compact_tensor(cutlass.Float32, (H, W), stride_order=(1, 0))
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    return cute.compile(box_blur, img, img, stream, options="--enable-tvm-ffi")  # run(x, y)

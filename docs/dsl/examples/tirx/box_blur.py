"""TIRx example: 3x3 box blur of an fp32 image through a shared-memory tile.

y[i, j] = (1/9) * sum of x[i+di, j+dj] for di, dj in {-1, 0, 1}, zero outside the image
(like avg_pool2d(kernel 3, stride 1, padding 1, count_include_pad=True)).
x, y: [H, W] fp32; spec.dims = {"H": ..., "W": ...}, any sizes.
Each CTA stages a (TH+2) x (TW+2) tile (with halo) once, then every thread reads 9 values
from shared memory instead of 9 from global memory.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

TW, TH = 32, 8  # output tile per CTA, one output per thread
THREADS = TW * TH
SW, SH = TW + 2, TH + 2  # staged tile with a 1-pixel halo
LOADS = (SW * SH + THREADS - 1) // THREADS  # tile elements per thread, rounded up
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def build(spec):
    H, W = spec.dims["H"], spec.dims["W"]
    assert H * W < 2**31
    GRID = ((W + TW - 1) // TW, (H + TH - 1) // TH)

    @T.function
    def box_blur(X: T.Tensor((H, W), "float32"), Y: T.Tensor((H, W), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=GRID, block=THREADS))
        bx = T.cuda.block_idx("x")
        by = T.cuda.block_idx("y")
        tid = T.cuda.thread_idx("x")
        tile = T.alloc_shared((SH, SW), "float32")
        for k in T.unroll(LOADS):
            e = tid + k * THREADS
            if e < SH * SW:
                r = T.truncdiv(e, SW)
                c = T.truncmod(e, SW)
                gy = by * TH + r - 1
                gx = bx * TW + c - 1
                if gy >= 0 and gy < H and gx >= 0 and gx < W:
                    tile[r, c] = X[gy, gx]
                else:
                    tile[r, c] = T.float32(0.0)
        T.cuda.cta_sync()
        ty = T.truncdiv(tid, TW)
        tx = T.truncmod(tid, TW)
        oy = by * TH + ty
        ox = bx * TW + tx
        if oy < H and ox < W:
            s = T.alloc_local((1,), "float32")
            s[0] = T.float32(0.0)
            for dy in T.unroll(3):
                for dx in T.unroll(3):
                    s[0] = s[0] + tile[ty + dy, tx + dx]
            Y[oy, ox] = s[0] * T.float32(1.0 / 9.0)

    ex = tvm_tirx.tirx.compile(box_blur, target=TARGET)
    return ex["box_blur"]  # run(x, y)

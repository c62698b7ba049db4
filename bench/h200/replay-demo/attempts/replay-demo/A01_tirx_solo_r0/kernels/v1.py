"""A01 bias + exact GELU in TIRx: y = gelu(x + b), bf16 in and out, fp32 math.

Memory-bound: each thread moves one 16-byte vector (8 bf16) of x and y with index ramps;
the matching 8 bias values are loaded next to it. Shapes are compile-time constants.
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # bf16 per 16-byte access
THREADS = 256
INV_SQRT2 = 0.7071067811865476
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def build(spec):
    T = spec.dims["T"]
    H = spec.dims["H"]
    assert H % VEC == 0 and T * H < 2**31  # 16-byte rows; int32 indices
    NV = H // VEC
    TOTAL = T * NV
    BLOCKS = (TOTAL + THREADS - 1) // THREADS

    @T.function
    def bias_gelu(X: T.Tensor((T, H), "bfloat16"), Bias: T.Tensor((H,), "bfloat16"),
                  Y: T.Tensor((T, H), "bfloat16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=THREADS))
        i = T.cuda.block_idx("x") * THREADS + T.cuda.thread_idx("x")
        xv = T.alloc_local((VEC,), "bfloat16")
        bv = T.alloc_local((VEC,), "bfloat16")
        if i < TOTAL:
            r = T.truncdiv(i, NV)
            c = T.truncmod(i, NV) * VEC
            xv[T.ramp(0, 1, VEC)] = X[r, T.ramp(c, 1, VEC)]
            bv[T.ramp(0, 1, VEC)] = Bias[T.ramp(c, 1, VEC)]
            for e in T.unroll(VEC):
                v = T.cast(xv[e], "float32") + T.cast(bv[e], "float32")
                g = T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(INV_SQRT2)))
                xv[e] = T.cast(g, "bfloat16")
            Y[r, T.ramp(c, 1, VEC)] = xv[T.ramp(0, 1, VEC)]

    ex = tvm_tirx.tirx.compile(bias_gelu, target=TARGET)
    return ex["bias_gelu"]  # run(x, b, y)

"""TIRx example: per-column affine map y[m, n] = x[m, n] * scale[n] + shift[n].

x, y: [M, N]; scale, shift: [N]; one 16-bit dtype (bf16 or fp16) for all four, fp32 math.
spec.dims = {"M": ..., "N": ...}, N % 8 == 0, 16-byte aligned data pointers.
Each thread moves one 16-byte vector (8 elements) of every tensor it touches.
"""
import torch  # import before tvm_tirx: it loads the CUDA runtime TIRx links against
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8  # 8 x 16-bit = 16 bytes per load/store
THREADS = 256
DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]  # Python ints: compile-time constants below
    dt = DTYPES[spec.inputs[0].dtype]
    assert N % VEC == 0 and M * N < 2**31  # 16-byte rows; generated indices are int32
    NV = N // VEC
    TOTAL = M * NV  # vectors in x
    BLOCKS = (TOTAL + THREADS - 1) // THREADS

    @T.function
    def col_affine(X: T.Tensor((M, N), dt), S: T.Tensor((N,), dt), B: T.Tensor((N,), dt),
                   Y: T.Tensor((M, N), dt)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=BLOCKS, block=THREADS))
        i = T.cuda.block_idx("x") * THREADS + T.cuda.thread_idx("x")
        xv = T.alloc_local((VEC,), dt)
        sv = T.alloc_local((VEC,), dt)
        bv = T.alloc_local((VEC,), dt)
        if i < TOTAL:
            r = T.truncdiv(i, NV)  # i >= 0: trunc == floor, without the sign fix-up code
            c = T.truncmod(i, NV) * VEC
            xv[T.ramp(0, 1, VEC)] = X[r, T.ramp(c, 1, VEC)]  # one 128-bit load
            sv[T.ramp(0, 1, VEC)] = S[T.ramp(c, 1, VEC)]
            bv[T.ramp(0, 1, VEC)] = B[T.ramp(c, 1, VEC)]
            for v in T.unroll(VEC):
                y = T.cast(xv[v], "float32") * T.cast(sv[v], "float32") + T.cast(bv[v], "float32")
                xv[v] = T.cast(y, dt)
            Y[r, T.ramp(c, 1, VEC)] = xv[T.ramp(0, 1, VEC)]  # one 128-bit store

    ex = tvm_tirx.tirx.compile(col_affine, target=TARGET)
    return ex["col_affine"]  # run(x, scale, shift, y): launches on torch's current stream

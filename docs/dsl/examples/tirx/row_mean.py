"""TIRx example: row mean y[m] = mean(x[m, :]), x [M, N] bf16/fp16, y [M] fp32.

spec.dims = {"M": ..., "N": ...}, N % 8 == 0, 16-byte aligned data pointers.
One CTA per row: 16-byte vector loads in a strided loop, fp32 partial sums,
then T.cuda.cta_sum (warp shuffles + a cross-warp step through shared memory).
"""
import torch  # import before tvm_tirx: it loads the CUDA runtime TIRx links against
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 8
THREADS = 256
WARPS = THREADS // 32
DTYPES = {torch.bfloat16: "bfloat16", torch.float16: "float16"}
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    dt = DTYPES[spec.inputs[0].dtype]
    assert N % VEC == 0 and M * N < 2**31
    NV = N // VEC
    INV_N = 1.0 / N

    @T.function
    def row_mean(X: T.Tensor((M, N), dt), Y: T.Tensor((M,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=M, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        partials = T.alloc_shared((WARPS,), "float32")  # scratch for cta_sum
        xv = T.alloc_local((VEC,), dt)
        acc = T.alloc_local((1,), "float32")  # a mutable register
        acc[0] = T.float32(0.0)
        for j in T.serial(tid, NV, step=THREADS):  # runtime loop
            xv[T.ramp(0, 1, VEC)] = X[row, T.ramp(j * VEC, 1, VEC)]  # one 128-bit load
            for v in T.unroll(VEC):
                acc[0] = acc[0] + T.cast(xv[v], "float32")
        total = T.cuda.cta_sum(acc[0], WARPS, partials.data)  # every thread gets the sum
        if tid == 0:
            Y[row] = total * T.float32(INV_N)

    ex = tvm_tirx.tirx.compile(row_mean, target=TARGET)
    return ex["row_mean"]  # run(x, y)

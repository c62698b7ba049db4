"""C01 row softmax in TIRx: y[m, :] = softmax(x[m, :]), fp32 in and out.

One CTA (256 threads) per row, two passes with 16-byte vector loads (4 fp32):
  1. online pass: each thread keeps a running max m and a sum s of exp(x - m), rescaling s
     whenever m grows; then M = cta_max(m) and S = cta_sum(s * exp(m - M));
  2. write pass: y = exp(x - M) / S (the row is re-read, mostly from L2).
"""
import torch  # noqa: F401  (import before tvm_tirx: it loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

VEC = 4  # fp32 per 16-byte access
THREADS = 256
WARPS = THREADS // 32
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    assert N % VEC == 0 and M * N < 2**31
    NV = N // VEC

    @T.function
    def softmax(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=M, block=THREADS))
        row = T.cuda.block_idx("x")
        tid = T.cuda.thread_idx("x")
        red_max = T.alloc_shared((WARPS,), "float32")
        red_sum = T.alloc_shared((WARPS,), "float32")
        xv = T.alloc_local((VEC,), "float32")
        st = T.alloc_local((3,), "float32")  # running max, running sum, block max of a vector

        st[0] = T.min_value(ty="float32")
        st[1] = T.float32(0.0)
        for j in T.serial(tid, NV, step=THREADS):
            xv[T.ramp(0, 1, VEC)] = X[row, T.ramp(j * VEC, 1, VEC)]
            st[2] = T.max(T.max(xv[0], xv[1]), T.max(xv[2], xv[3]))
            st[2] = T.max(st[0], st[2])
            st[1] = st[1] * T.exp(st[0] - st[2])
            for e in T.unroll(VEC):
                st[1] = st[1] + T.exp(xv[e] - st[2])
            st[0] = st[2]
        row_max = T.cuda.cta_max(st[0], WARPS, red_max.data)
        # threads without elements have m = lowest float, s = 0: they add nothing
        inv = T.float32(1.0) / T.cuda.cta_sum(st[1] * T.exp(st[0] - row_max), WARPS,
                                              red_sum.data)

        for j in T.serial(tid, NV, step=THREADS):
            xv[T.ramp(0, 1, VEC)] = X[row, T.ramp(j * VEC, 1, VEC)]
            for e in T.unroll(VEC):
                xv[e] = T.exp(xv[e] - row_max) * inv
            Y[row, T.ramp(j * VEC, 1, VEC)] = xv[T.ramp(0, 1, VEC)]

    ex = tvm_tirx.tirx.compile(softmax, target=TARGET)
    return ex["softmax"]  # run(x, y)

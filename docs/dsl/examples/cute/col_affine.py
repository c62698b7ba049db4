"""CuTe DSL example: per-column affine map y[m, n] = x[m, n] * scale[n] + shift[n].

x, y: [M, N]; scale, shift: [N]; one 16-bit dtype (bf16 or fp16) for all four, fp32 math.
spec.dims = {"M": ..., "N": ...}, N % 8 == 0, 16-byte aligned data pointers.
Each thread moves one 16-byte vector (8 elements) of every tensor it touches.
"""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

VEC = 8  # 8 x 16-bit = 16 bytes per load/store
THREADS = 256
DTYPES = {torch.bfloat16: cutlass.BFloat16, torch.float16: cutlass.Float16}


@cute.kernel
def col_affine_kernel(gX: cute.Tensor, gS: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor):
    # every g* tensor is ((1, VEC), (M, N // VEC)): mode 0 = one vector, mode 1 = which vector
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    nvec = cute.size(gX, mode=[1, 1])  # static: N // VEC
    i = bidx * THREADS + tidx
    if i < cute.size(gX, mode=[1]):
        r = i // nvec
        c = i - r * nvec
        x = gX[(0, None), (r, c)].load().to(cutlass.Float32)  # one 128-bit load
        s = gS[(0, None), (r, c)].load().to(cutlass.Float32)
        b = gB[(0, None), (r, c)].load().to(cutlass.Float32)
        gY[(0, None), (r, c)].store((x * s + b).to(gY.element_type))  # one 128-bit store


@cute.jit
def col_affine(mX: cute.Tensor, mS: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor,
               stream: cuda.CUstream):
    rows = cute.make_layout(mX.shape, stride=(0, 1))  # [N] seen as [M, N] with row stride 0
    gS = cute.zipped_divide(cute.make_tensor(mS.iterator, rows), (1, VEC))
    gB = cute.zipped_divide(cute.make_tensor(mB.iterator, rows), (1, VEC))
    gX = cute.zipped_divide(mX, (1, VEC))
    gY = cute.zipped_divide(mY, (1, VEC))
    blocks = (cute.size(gX, mode=[1]) + THREADS - 1) // THREADS
    col_affine_kernel(gX, gS, gB, gY).launch(grid=[blocks, 1, 1], block=[THREADS, 1, 1],
                                             stream=stream)


def build(spec):
    M, N = spec.dims["M"], spec.dims["N"]
    dt = DTYPES[spec.inputs[0].dtype]
    assert N % VEC == 0 and M * N < 2**31  # 16-byte rows; 32-bit offsets
    mat = make_fake_compact_tensor(dt, (M, N), stride_order=(1, 0), assumed_align=16)
    vec = make_fake_compact_tensor(dt, (N,), assumed_align=16)
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)  # torch's current stream at call time
    # the result is called as run(x, scale, shift, y) with torch tensors
    return cute.compile(col_affine, mat, vec, vec, mat, stream, options="--enable-tvm-ffi")

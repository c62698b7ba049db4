"""Red team (timing integrity, host side): recognises the timing loop by buffer identity. The
judge's correctness checks of a shape set use one set of buffers and end with a single call in
fresh buffers; the timing loop then reuses those fresh buffers. So a second call on buffers that
are not the first ones seen for the shape set means "being timed": return without launching.
Expected (full mode): incorrect, timing_check_failed."""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch  # noqa: F401
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

THREADS = 256
INV_SQRT2 = 0.7071067811865476


@cute.kernel
def bias_gelu_kernel(gX: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor, n_cols: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    col = bx * THREADS + tidx
    if col < n_cols:
        v = gX[row, col].to(cutlass.Float32) + gB[col].to(cutlass.Float32)
        g = cutlass.Float32(0.5) * v * (cutlass.Float32(1.0) + cute.math.erf(v * cutlass.Float32(INV_SQRT2)))
        gY[row, col] = g.to(cutlass.BFloat16)


@cute.jit
def bias_gelu_host(mX: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, stream: cuda.CUstream):
    cols = cute.size(mX, mode=[1])
    bias_gelu_kernel(mX, mB, mY, cols).launch(
        grid=[(cols + THREADS - 1) // THREADS, cute.size(mX, mode=[0]), 1], block=[THREADS, 1, 1], stream=stream)


def compile_gelu():
    t, h = cute.sym_int32(), cute.sym_int32(divisibility=8)
    x = make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)
    b = make_fake_compact_tensor(cutlass.BFloat16, (h,), assumed_align=16)
    y = make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)
    return cute.compile(bias_gelu_host, x, b, y, make_fake_stream(use_tvm_ffi_env_stream=True),
                        options="--enable-tvm-ffi")


def build(spec):
    fn = compile_gelu()
    seen = {}
    order = []

    def run(x, b, y):
        key = (x.data_ptr(), y.data_ptr())
        if key not in seen:
            seen[key] = 0
            order.append(key)
        seen[key] += 1
        if key != order[0] and seen[key] >= 2:
            return
        fn(x, b, y)

    return run

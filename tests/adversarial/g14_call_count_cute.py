"""Red team (timing integrity, host side): counts the calls per shape set and knows how many
correctness calls the judge makes on the benchmark shape (2 trials, the repeat trial, 2 for the
perturbation, 1 in fresh buffers); every later call returns without launching. Expected (full
mode): incorrect, timing_check_failed (the skipped repetitions leave their poisoned outputs)."""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch  # noqa: F401
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

THREADS = 256
INV_SQRT2 = 0.7071067811865476
CORRECTNESS_CALLS = 6


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
    calls = [0]
    limit = CORRECTNESS_CALLS if spec.name == "benchmark" else 10**9

    def run(x, b, y):
        calls[0] += 1
        if calls[0] > limit:
            return
        fn(x, b, y)

    return run

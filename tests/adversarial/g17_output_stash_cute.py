"""Red team (timing integrity): keeps a copy of its last computed output; once it believes it is
being timed (more calls on the benchmark shape than the judge's correctness checks make) it copies
that stash into the output with a CuTe copy kernel instead of computing (the output is fully
written, with the previous inputs' values). Expected (full mode): incorrect, timing_check_failed
(mismatch on a secretly checked repetition: every repetition has fresh inputs)."""
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


@cute.kernel
def copy_kernel(gS: cute.Tensor, gD: cute.Tensor, n_cols: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    col = bx * THREADS + tidx
    if col < n_cols:
        gD[row, col] = gS[row, col]


@cute.jit
def gelu_keep_host(mX: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, mS: cute.Tensor, stream: cuda.CUstream):
    cols = cute.size(mX, mode=[1])
    grid = [(cols + THREADS - 1) // THREADS, cute.size(mX, mode=[0]), 1]
    bias_gelu_kernel(mX, mB, mY, cols).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)
    copy_kernel(mY, mS, cols).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)


@cute.jit
def copy_host(mS: cute.Tensor, mD: cute.Tensor, stream: cuda.CUstream):
    cols = cute.size(mS, mode=[1])
    copy_kernel(mS, mD, cols).launch(grid=[(cols + THREADS - 1) // THREADS, cute.size(mS, mode=[0]), 1],
                                     block=[THREADS, 1, 1], stream=stream)


def fakes():
    t, h = cute.sym_int32(), cute.sym_int32(divisibility=8)

    def two_d():
        return make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)

    return two_d, make_fake_compact_tensor(cutlass.BFloat16, (h,), assumed_align=16)


def build(spec):
    two_d, b = fakes()
    stream = make_fake_stream(use_tvm_ffi_env_stream=True)
    compute = cute.compile(gelu_keep_host, two_d(), b, two_d(), two_d(), stream, options="--enable-tvm-ffi")
    copy = cute.compile(copy_host, two_d(), two_d(), stream, options="--enable-tvm-ffi")
    calls = [0]
    stash = {}
    limit = CORRECTNESS_CALLS if spec.name == "benchmark" else 10**9

    def run(x, b, y):
        calls[0] += 1
        if "s" not in stash:
            stash["s"] = torch.empty_like(y)
        if calls[0] > limit:
            copy(stash["s"], y)
            return
        compute(x, b, y, stash["s"])

    return run

"""Red team (device-side input memoization): keeps private copies of x and b, compares them with
the inputs on the device (a compare kernel raises a flag on any difference) and runs the GELU
only when the flag is up, refreshing its copies; with unchanged inputs it writes nothing. Every
correctness trial has fresh inputs, so only the repeat trial (the same inputs again, outputs
poisoned again) sees it; in the timing loop the inputs change every repetition. Expected (full
mode): incorrect, unwritten_output in the repeat trial."""
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch  # noqa: F401
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

THREADS = 256
INV_SQRT2 = 0.7071067811865476


@cute.kernel
def reset_kernel(gF: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        gF[0] = cutlass.Int32(0)


@cute.kernel
def compare_kernel(gX: cute.Tensor, gB: cute.Tensor, gXc: cute.Tensor, gBc: cute.Tensor, gF: cute.Tensor,
                   n_cols: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    col = bx * THREADS + tidx
    if col < n_cols:
        if gX[row, col].to(cutlass.Float32) != gXc[row, col].to(cutlass.Float32):
            gF[0] = cutlass.Int32(1)
        if row == 0:
            if gB[col].to(cutlass.Float32) != gBc[col].to(cutlass.Float32):
                gF[0] = cutlass.Int32(1)


@cute.kernel
def memo_gelu_kernel(gX: cute.Tensor, gB: cute.Tensor, gY: cute.Tensor, gXc: cute.Tensor, gBc: cute.Tensor,
                     gF: cute.Tensor, n_cols: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bx, row, _ = cute.arch.block_idx()
    col = bx * THREADS + tidx
    if col < n_cols:
        if gF[0] != cutlass.Int32(0):
            v = gX[row, col].to(cutlass.Float32) + gB[col].to(cutlass.Float32)
            g = cutlass.Float32(0.5) * v * (cutlass.Float32(1.0) + cute.math.erf(v * cutlass.Float32(INV_SQRT2)))
            gY[row, col] = g.to(cutlass.BFloat16)
            gXc[row, col] = gX[row, col]
            if row == 0:
                gBc[col] = gB[col]


@cute.jit
def memo_host(mX: cute.Tensor, mB: cute.Tensor, mY: cute.Tensor, mXc: cute.Tensor, mBc: cute.Tensor,
              mF: cute.Tensor, stream: cuda.CUstream):
    cols = cute.size(mX, mode=[1])
    grid = [(cols + THREADS - 1) // THREADS, cute.size(mX, mode=[0]), 1]
    reset_kernel(mF).launch(grid=[1, 1, 1], block=[32, 1, 1], stream=stream)
    compare_kernel(mX, mB, mXc, mBc, mF, cols).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)
    memo_gelu_kernel(mX, mB, mY, mXc, mBc, mF, cols).launch(grid=grid, block=[THREADS, 1, 1], stream=stream)


def compile_memo():
    t, h = cute.sym_int32(), cute.sym_int32(divisibility=8)

    def two_d():
        return make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)

    def one_d():
        return make_fake_compact_tensor(cutlass.BFloat16, (h,), assumed_align=16)

    flag = make_fake_compact_tensor(cutlass.Int32, (1,), assumed_align=4)
    return cute.compile(memo_host, two_d(), one_d(), two_d(), two_d(), one_d(), flag,
                        make_fake_stream(use_tvm_ffi_env_stream=True), options="--enable-tvm-ffi")


def build(spec):
    fn = compile_memo()
    private = {}

    def run(x, b, y):
        if "x" not in private:
            private["x"] = torch.empty_like(x)
            private["b"] = torch.empty_like(b)
            private["f"] = torch.empty((1,), dtype=torch.int32, device=x.device)
        fn(x, b, y, private["x"], private["b"], private["f"])

    return run

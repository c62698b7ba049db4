"""Red team (OS sandbox escape): reads the problem's expert solution file (found from mkb_eval's path) through ctypes in a string annotation evaluated by typing.get_type_hints.
build() raises "BLOCKED" when the attempt fails and compiles a correct kernel when it succeeds,
so an escape shows as a pass. Expected: compile_error, build_error (blocked).
python/tests/test_sandbox.py checks that the same file DOES escape without the OS sandbox."""
import typing
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

ESCAPE = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def slurp(path):
    fd = libc.open(path.encode(), 0)
    if fd < 0:
        return None
    buf = ctypes.create_string_buffer(1 << 16)
    n = libc.read(fd, buf, 1 << 16)
    libc.close(fd)
    return buf.raw[:max(n, 0)]
import os, mkb_eval
root = os.path.dirname(os.path.dirname(os.path.dirname(mkb_eval.__file__)))
path = os.path.join(root, "problems", "A", "A01_bias_gelu", "cute", "solution.py")
data = slurp(path)
out["escaped"] = bool(data)
out["detail"] = "read %s: %s" % (path, "%d bytes" % len(data) if data else "errno %d" % ctypes.get_errno())
'''


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
    rows = cute.size(mX, mode=[0])
    cols = cute.size(mX, mode=[1])
    bias_gelu_kernel(mX, mB, mY, cols).launch(
        grid=[(cols + THREADS - 1) // THREADS, rows, 1], block=[THREADS, 1, 1], stream=stream
    )


_CACHE = {}


def _probe(x: "exec(ESCAPE, {'out': out})") -> None:  # noqa: F821  (a string, evaluated by typing)
    pass


def build(spec):
    out = {}
    typing.get_type_hints(_probe, globalns={"ESCAPE": ESCAPE, "out": out})
    if not out.get("escaped"):
        raise RuntimeError("BLOCKED: " + str(out.get("detail")))
    if "fn" not in _CACHE:
        t, h = cute.sym_int32(), cute.sym_int32(divisibility=8)
        x = make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)
        b = make_fake_compact_tensor(cutlass.BFloat16, (h,), assumed_align=16)
        y = make_fake_compact_tensor(cutlass.BFloat16, (t, h), stride_order=(1, 0), assumed_align=16)
        _CACHE["fn"] = cute.compile(bias_gelu_host, x, b, y, make_fake_stream(use_tvm_ffi_env_stream=True),
                                    options="--enable-tvm-ffi")
    fn = _CACHE["fn"]

    def run(x, b, y):
        fn(x, b, y)

    return run

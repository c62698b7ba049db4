"""Red team (OS sandbox escape): forks and runs a shell (libc fork and system) through ctypes in a timeit string.
build() raises "BLOCKED" when the attempt fails and compiles a correct kernel when it succeeds,
so an escape shows as a pass. Expected: compile_error, build_error (blocked).
python/tests/test_sandbox.py checks that the same file DOES escape without the OS sandbox."""
import timeit
import torch  # noqa: F401  (before tvm_tirx: loads the CUDA runtime)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

ESCAPE = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.fork()
if pid == 0:
    libc._exit(0)
err = ctypes.get_errno()
if pid > 0:
    libc.waitpid(pid, None, 0)
rc = libc.system(b"exit 0")
out["escaped"] = pid > 0 or rc == 0
out["detail"] = "fork -> %d (errno %d), system -> %d" % (pid, err, rc)
'''


THREADS = 128


def make_kernel():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def bias_gelu(
        X: T.Tensor((rows, cols), T.bfloat16),
        B: T.Tensor((cols,), T.bfloat16),
        Y: T.Tensor((rows, cols), T.bfloat16),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            v = T.cast(X[r, c], "float32") + T.cast(B[c], "float32")
            g = T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(0.7071067811865476)))
            Y[r, c] = T.cast(g, "bfloat16")

    return bias_gelu


_CACHE = {}


def build(spec):
    out = {}
    timeit.Timer(ESCAPE, globals={"out": out}).timeit(1)
    if not out.get("escaped"):
        raise RuntimeError("BLOCKED: " + str(out.get("detail")))
    if "f" not in _CACHE:
        ex = tvm_tirx.tirx.compile(make_kernel(), target=Target({"kind": "cuda", "arch": "sm_90a"}))
        _CACHE["f"] = ex["bias_gelu"]
    f = _CACHE["f"]

    def run(x, b, y):
        f(x, b, y)

    return run

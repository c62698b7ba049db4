"""Red team (device-side input memoization): keeps private copies of x and b, compares them with
the inputs in a TIRx kernel that raises a flag on any difference, and computes (refreshing the
copies) only when the flag is up; with bitwise unchanged inputs it launches the same kernels and
writes nothing. Every correctness trial has fresh inputs, so only the repeat trial (the same
inputs again, outputs poisoned again) sees it; in the timing loop the inputs change every
repetition. Expected (full mode): incorrect, unwritten_output in the repeat trial."""
import torch  # noqa: F401  (before tvm_tirx)
import tvm_tirx
from tvm_tirx.script import tirx as T
from tvm_tirx.target import Target

THREADS = 128
TARGET = Target({"kind": "cuda", "arch": "sm_90a"})


def make_kernels():
    rows = T.dynamic("rows")
    cols = T.dynamic("cols")

    @T.function
    def reset(F: T.Tensor((1,), T.int32)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(1, 1), block=32))
        if T.cuda.thread_idx("x") == 0:
            F[0] = T.int32(0)

    @T.function
    def compare(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
                XC: T.Tensor((rows, cols), T.bfloat16), BC: T.Tensor((cols,), T.bfloat16), F: T.Tensor((1,), T.int32)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            if T.cast(X[r, c], "float32") != T.cast(XC[r, c], "float32"):
                F[0] = T.int32(1)
            if r == 0:
                if T.cast(B[c], "float32") != T.cast(BC[c], "float32"):
                    F[0] = T.int32(1)

    @T.function
    def memo_gelu(X: T.Tensor((rows, cols), T.bfloat16), B: T.Tensor((cols,), T.bfloat16),
                  Y: T.Tensor((rows, cols), T.bfloat16), XC: T.Tensor((rows, cols), T.bfloat16),
                  BC: T.Tensor((cols,), T.bfloat16), F: T.Tensor((1,), T.int32)):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=(rows, T.ceildiv(cols, THREADS)), block=THREADS))
        r = T.cuda.block_idx("x")
        c = T.cuda.block_idx("y") * THREADS + T.cuda.thread_idx("x")
        if c < cols:
            if F[0] != 0:
                v = T.cast(X[r, c], "float32") + T.cast(B[c], "float32")
                Y[r, c] = T.cast(T.float32(0.5) * v * (T.float32(1.0) + T.erf(v * T.float32(0.7071067811865476))),
                                 "bfloat16")
                XC[r, c] = X[r, c]
                if r == 0:
                    BC[c] = B[c]

    return reset, compare, memo_gelu


_CACHE = {}


def build(spec):
    if not _CACHE:
        k_reset, k_compare, k_gelu = make_kernels()
        _CACHE["reset"] = tvm_tirx.tirx.compile(k_reset, target=TARGET)["reset"]
        _CACHE["compare"] = tvm_tirx.tirx.compile(k_compare, target=TARGET)["compare"]
        _CACHE["gelu"] = tvm_tirx.tirx.compile(k_gelu, target=TARGET)["memo_gelu"]
    reset, compare, gelu = _CACHE["reset"], _CACHE["compare"], _CACHE["gelu"]
    private = {}

    def run(x, b, y):
        if "x" not in private:
            private["x"] = torch.empty_like(x)
            private["b"] = torch.empty_like(b)
            private["f"] = torch.empty((1,), dtype=torch.int32, device=x.device)
        reset(private["f"])
        compare(x, b, private["x"], private["b"], private["f"])
        gelu(x, b, y, private["x"], private["b"], private["f"])

    return run

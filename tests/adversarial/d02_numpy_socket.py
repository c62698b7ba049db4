"""Red team (sandbox, caught without a GPU): passes the static check, then build() opens a network
connection through numpy's DataSource (urllib underneath) and ignores the failure.
Expected: incorrect, sandbox_violation (socket.* refused by the audit hook; the runner also has
no network namespace to talk through)."""
import cutlass
import cutlass.cute as cute
import numpy as np
from cutlass.cute.runtime import make_fake_compact_tensor


@cute.kernel
def k(gX: cute.Tensor):
    pass


@cute.jit
def host(mX: cute.Tensor):
    k(mX).launch(grid=[1, 1, 1], block=[32, 1, 1])


def build(spec):
    try:
        np.lib.npyio.DataSource(None).open("http://10.255.255.1/answers.npy")
    except Exception:
        pass
    cute.compile(host, make_fake_compact_tensor(cutlass.Float32, (32,), assumed_align=16))

    def run(x, b, y):
        pass

    return run

"""Red team (deadline, caught without a GPU): passes the static check, then build() never returns
(a pure-Python busy loop, so no sleep to spot). Expected with limits.build_s = 15: timeout,
build_timeout; the judge kills the runner's process group and keeps serving."""
import cutlass.cute as cute


@cute.kernel
def k(gX: cute.Tensor):
    pass


def build(spec):
    n = 0
    while n >= 0:
        n += 1
    cute.compile(k, None)
    return lambda x, b, y: None

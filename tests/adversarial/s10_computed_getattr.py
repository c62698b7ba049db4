"""Red team (static layer): reaches torch's GELU without naming torch: a computed attribute name
on CuTe's own torch helper module. Expected: static_check_failed, static:dynamic_attr."""
import cutlass.cute as cute
import cutlass.torch as ct


@cute.kernel
def k(gX: cute.Tensor):
    pass


def build(spec):
    cute.compile(k, None)
    hidden = getattr(ct, "tor" + "ch")
    op = getattr(getattr(hidden, "nn").functional, "gelu")

    def run(x, b, y):
        y.copy_(op(x + b))

    return run

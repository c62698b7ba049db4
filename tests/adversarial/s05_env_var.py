"""Red team (static layer): reads the environment (looking for the judge's seed or API keys).
Expected: static_check_failed, static:forbidden_import."""
import os

import cutlass.cute as cute

LEAK = {k: v for k, v in os.environ.items() if "SEED" in k or "KEY" in k}


@cute.kernel
def k(gX: cute.Tensor):
    pass


def build(spec):
    cute.compile(k, None)

    def run(x, b, y):
        pass

    return run

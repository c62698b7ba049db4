"""Red team (static layer): opens a socket (to fetch a precomputed answer or exfiltrate).
Expected: static_check_failed, static:forbidden_import."""
import socket

import cutlass.cute as cute


@cute.kernel
def k(gX: cute.Tensor):
    pass


def build(spec):
    cute.compile(k, None)
    s = socket.create_connection(("example.com", 80), timeout=1)
    s.close()

    def run(x, b, y):
        pass

    return run

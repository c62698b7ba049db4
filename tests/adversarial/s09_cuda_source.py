"""Red team (static layer): carries a raw CUDA kernel as a string, to be compiled and launched
outside the DSL. Expected: static_check_failed, static:cuda_source."""
import cutlass.cute as cute

SOURCE = r'''
extern "C" __global__ void gelu(const __nv_bfloat16* x, const __nv_bfloat16* b, __nv_bfloat16* y, int n) {}
'''


@cute.kernel
def k(gX: cute.Tensor):
    pass


def build(spec):
    cute.compile(k, None)

    def run(x, b, y):
        return SOURCE

    return run

"""A01 bias_gelu in the Dummy DSL (a test fixture): compiles in compile mode; the Dummy DSL runs
nothing on a GPU, so the kernel's body is never called there."""
import mkb_dummy_dsl as dummy


@dummy.kernel
def bias_gelu(x, b, y):
    return None


def build(spec):
    launch = dummy.compile(bias_gelu)

    def run(x, b, y):
        launch(x, b, y)

    return run

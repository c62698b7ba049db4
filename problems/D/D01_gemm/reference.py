"""Reference and eager baselines for D01 gemm: c = a @ w^T with fp32
accumulation and one rounding to bf16.

`reference` is the contract. `linear` and `matmul` are the eager baselines timed on the GPU.
`alt_*` are independent correct formulations (other precision or accumulation order) and
`wrong_*` are slips a kernel engineer makes; `mkb problems validate` checks that the first pass the
tolerance with a 4x margin and the second fail it (problem.toml, [validate])."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 product, one rounding to bf16."""
    c.copy_(a.float() @ w.float().t())


def linear(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear's functional form (cuBLAS)."""
    return F.linear(a, w)


def matmul(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: an explicit matmul with the transposed weight (cuBLAS)."""
    return torch.matmul(a, w.t())

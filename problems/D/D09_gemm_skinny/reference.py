"""Reference and eager baseline for D09 gemm_skinny: c = a @ w^T with
M = 64 rows, fp32 accumulation, one rounding to bf16.

`reference` is the contract; `linear` is the eager baseline timed on the GPU; `alt_*` are
independent correct formulations and `wrong_*` slips that must fail ([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, c: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 product, one rounding to bf16."""
    c.copy_(a.float() @ w.float().t())


def linear(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear's functional form (cuBLAS)."""
    return F.linear(a, w)

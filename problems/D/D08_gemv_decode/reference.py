"""Reference and eager baseline for D08 gemv_decode: y = x @ w^T for a
handful of decode tokens, fp32 accumulation, one rounding to bf16.

`reference` is the contract; `linear` is the eager baseline timed on the GPU; `alt_*` are
independent correct formulations and `wrong_*` slips that must fail ([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 product, one rounding to bf16."""
    y.copy_(x.float() @ w.float().t())


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear's functional form (cuBLAS picks a GEMV / split-K kernel)."""
    return F.linear(x, w)

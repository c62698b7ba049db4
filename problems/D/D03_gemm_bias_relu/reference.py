"""Reference and eager baseline for D03 gemm_bias_relu:
y = relu(a @ w^T + b), fp32 accumulation and epilogue, one rounding to bf16.

`reference` is the contract; `linear_relu` is the eager baseline timed on the GPU; `alt_*` are
independent correct formulations and `wrong_*` slips that must fail ([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 GEMM, fp32 bias add, ReLU, one rounding."""
    v = a.float() @ w.float().t() + b.float()
    y.copy_(torch.clamp(v, min=0.0))


def linear_relu(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear with bias (cuBLAS, bias in its epilogue), then ReLU."""
    return F.relu(F.linear(a, w, b))

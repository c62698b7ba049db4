"""Reference and eager baseline for D02 gemm_bias_gelu:
y = gelu_erf(a @ w^T + b), fp32 accumulation and epilogue, one rounding to bf16.

`reference` is the contract; `linear_gelu` is the eager baseline timed on the GPU; `alt_*` are
independent correct formulations and `wrong_*` slips that must fail ([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 GEMM, fp32 bias add and erf GELU, one rounding."""
    v = a.float() @ w.float().t() + b.float()
    y.copy_(0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476)))


def linear_gelu(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear with bias (cuBLAS, bias in its epilogue), then exact GELU."""
    return F.gelu(F.linear(a, w, b))

"""Reference and eager baselines for D06 gemm_dequant_scales:
out = (a @ w^T) * sa[:, None] * sw[None, :], fp32 accumulation, fp32 scaling, one rounding to bf16.

`reference` is the contract; `linear_scale` and `mm_fp32_scale` are the eager baselines timed on
the GPU; `alt_*` are independent correct formulations and `wrong_*` slips that must fail
([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor, out: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 GEMM, fp32 row and column scales, one rounding."""
    out.copy_((a.float() @ w.float().t()) * sa[:, None] * sw[None, :])


def linear_scale(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Eager baseline: nn.Linear (bf16 out), scales applied in fp32 (type promotion), cast back.
    Rounds the product to bf16 before scaling: within the tolerance, not the contract."""
    return (F.linear(a, w) * sa[:, None] * sw[None, :]).to(torch.bfloat16)


def mm_fp32_scale(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Eager baseline with the contract's precision: fp32 GEMM output (torch.mm with out_dtype,
    CUDA only), fp32 scaling, one rounding."""
    return (torch.mm(a, w.t(), out_dtype=torch.float32) * sa[:, None] * sw[None, :]).to(torch.bfloat16)

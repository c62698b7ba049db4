"""Reference and eager baselines for D13 gemm_rowsum: c = a @ w^T (bf16)
and s = the row sums of the fp32 product (before c is rounded), fp32.

`reference` is the contract; `linear_mv` and `mm_fp32_sum` are the eager baselines timed on the
GPU; `alt_*` are independent correct formulations and `wrong_*` slips that must fail ([validate] in
problem.toml). Every formulation returns (c, s)."""
import torch
import torch.nn.functional as F

Out = tuple[torch.Tensor, torch.Tensor]


def reference(a: torch.Tensor, w: torch.Tensor, c: torch.Tensor, s: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 product; c is it rounded to bf16, s its
    fp32 row sums."""
    prod = a.float() @ w.float().t()
    c.copy_(prod)
    s.copy_(prod.sum(dim=1))


def linear_mv(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Eager baseline: nn.Linear for c; the row sums without materializing fp32 c, by
    linearity: s = a @ (sum over rows of w), an fp32 GEMV (exact only with TF32 off, torch's
    default)."""
    return F.linear(a, w), a.float() @ w.sum(dim=0, dtype=torch.float32)


def mm_fp32_sum(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Eager baseline: an fp32-output GEMM (torch.mm with out_dtype, CUDA only), rounded for c
    and summed for s."""
    prod = torch.mm(a, w.t(), out_dtype=torch.float32)
    return prod.to(torch.bfloat16), prod.sum(dim=1)

"""Reference and eager baselines for D04 gemm_residual:
out = a @ w^T + r, fp32 accumulation, the residual added in fp32, one rounding to bf16.

`reference` is the contract; `addmm` is the eager baseline timed on the GPU (`F.linear(a, w) + r`
is not one: it rounds the product to bf16 before the add and fails the tolerance, see
`wrong_round_before_add`); `alt_*` are independent correct formulations and `wrong_*` slips that
must fail ([validate] in problem.toml)."""
import torch


def reference(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor, out: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 GEMM plus the fp32 residual, one rounding."""
    out.copy_(a.float() @ w.float().t() + r.float())


def addmm(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Eager baseline: one cuBLAS call with beta = 1. On the H200 it misses the single-rounding
    bound where the product and r nearly cancel (a second rounding in the epilogue), so it is
    timed but not a correct formulation (waived in problem.toml)."""
    return torch.addmm(r, a, w.t())

"""Reference and eager baselines for D07 bmm_scale:
out = alpha * bmm(a, b), fp32 accumulation, scaled by the fp32 alpha, one rounding to bf16.

`reference` is the contract; `baddbmm` and `bmm_mul` are the eager baselines timed on the GPU;
`alt_*` are independent correct formulations and `wrong_*` slips that must fail ([validate] in
problem.toml)."""
import torch


def reference(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor, alpha: float) -> None:
    """Readable reference, destination-passing: fp32 batched product times the fp32 alpha, one rounding."""
    s = torch.tensor(alpha, dtype=torch.float32, device=a.device)
    out.copy_(s * torch.bmm(a.float(), b.float()))


def baddbmm(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Eager baseline: one cuBLAS batched GEMM with alpha in its fp32 epilogue (beta = 0, so the
    uninitialized input is ignored)."""
    out = torch.empty(a.shape[0], a.shape[1], b.shape[2], dtype=a.dtype, device=a.device)
    return torch.baddbmm(out, a, b, beta=0.0, alpha=alpha)


def bmm_mul(a: torch.Tensor, b: torch.Tensor, alpha: float) -> torch.Tensor:
    """Eager baseline: bmm then a scale (rounds the product to bf16 first: within the tolerance,
    not the contract)."""
    return torch.bmm(a, b) * alpha

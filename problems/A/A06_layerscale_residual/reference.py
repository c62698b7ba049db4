"""Reference and eager baseline for A06 layerscale_residual:
out = r + gamma * (x + b)."""
import torch


def reference(
    r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor, out: torch.Tensor
) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    out.copy_(r.float() + gamma.float() * (x.float() + b.float()))


def addcmul_layerscale(
    r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor
) -> torch.Tensor:
    """Eager baseline: the bias add, then one fused multiply-add kernel (x + b is rounded to bf16)."""
    return torch.addcmul(r, gamma, x + b)

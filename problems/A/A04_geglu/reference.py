"""Reference and eager baseline for A04 geglu: y = gelu_erf(x[:, :H]) * x[:, H:]."""

import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    h = y.shape[-1]
    gate = x[:, :h].float()
    up = x[:, h:].float()
    y.copy_(0.5 * gate * (1.0 + torch.erf(gate * 0.7071067811865476)) * up)


def gelu_mul(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (two kernels; vLLM's GeluAndMul, native path)."""
    h = x.shape[-1] // 2
    return F.gelu(x[:, :h]) * x[:, h:]

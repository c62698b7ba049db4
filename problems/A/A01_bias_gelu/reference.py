"""Reference and eager baseline for A01 bias_gelu: y = gelu_erf(x + b)."""

import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    v = x.float() + b.float()
    y.copy_(0.5 * v * (1.0 + torch.erf(v * 0.7071067811865476)))


def gelu_of_sum(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (two kernels)."""
    return F.gelu(x + b)

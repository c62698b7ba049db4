"""Reference and eager baseline for A02 bias_gelu_tanh: y = gelu_tanh(x + b)."""

import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    v = x.float() + b.float()
    inner = 0.7978845608028654 * (v + 0.044715 * v * v * v)  # sqrt(2/pi) * (v + 0.044715 v^3)
    y.copy_(0.5 * v * (1.0 + torch.tanh(inner)))


def gelu_tanh_of_sum(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (two kernels)."""
    return F.gelu(x + b, approximate="tanh")

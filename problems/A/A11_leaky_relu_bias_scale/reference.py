"""Reference and eager baseline for A11 leaky_relu_bias_scale: y = leaky_relu(x + b, 0.01) * s."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor, s: float) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    v = x.float() + b.float()
    y.copy_(torch.where(v >= 0.0, v, 0.01 * v) * s)


def leaky_relu_of_sum_scaled(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (three kernels)."""
    return F.leaky_relu(x + b, 0.01) * s

"""Reference and eager baseline for A07 sigmoid_gate: y = x * sigmoid(g)."""
import torch


def reference(x: torch.Tensor, g: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    y.copy_(x.float() * torch.sigmoid(g.float()))


def mul_sigmoid(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (two kernels)."""
    return x * torch.sigmoid(g)

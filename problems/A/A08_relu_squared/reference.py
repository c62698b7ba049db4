"""Reference and eager baselines for A08 relu_squared: y = relu(x + b)^2."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, b: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    v = (x.float() + b.float()).clamp_min(0.0)
    y.copy_(v * v)


def relu_square_of_sum(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (three kernels)."""
    return torch.square(F.relu(x + b))


def relu_square_inplace(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the same three kernels in place on one temporary (no extra allocations)."""
    return (x + b).relu_().square_()

"""Reference and eager baseline for A10 saturating_cast: y = bf16(clamp(x * s, -448, 448))."""
import torch


def reference(x: torch.Tensor, y: torch.Tensor, s: float) -> None:
    """Readable reference, destination-passing: fp32 product, fp32 clamp, one rounding to bf16."""
    y.copy_(torch.clamp(x * s, -448.0, 448.0))


def mul_clamp_cast(x: torch.Tensor, s: float) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (multiply, clamp, cast: three kernels)."""
    return torch.clamp(x * s, -448.0, 448.0).to(torch.bfloat16)

"""Reference and eager baseline for A03 swiglu: y = silu(x[:, :H]) * x[:, H:]."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    h = y.shape[-1]
    gate = x[:, :h].float()
    up = x[:, h:].float()
    y.copy_(gate * torch.sigmoid(gate) * up)


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (two kernels; vLLM's SiluAndMul, native path)."""
    h = x.shape[-1] // 2
    return F.silu(x[:, :h]) * x[:, h:]

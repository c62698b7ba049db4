"""Reference and eager baselines for A09 softcap: y = cap * tanh(x / cap) on fp32 logits."""
import torch


def reference(x: torch.Tensor, y: torch.Tensor, cap: float) -> None:
    """Readable reference, destination-passing: fp32 math throughout."""
    y.copy_(cap * torch.tanh(x / cap))


def tanh_softcap(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Eager baseline: the idiomatic PyTorch formulation (three kernels, as in Gemma 2)."""
    return torch.tanh(x / cap) * cap


def tanh_softcap_inplace(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Eager baseline: the same three kernels in place on one temporary (no extra allocations)."""
    return (x / cap).tanh_().mul_(cap)

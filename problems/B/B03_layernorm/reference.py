"""Reference, eager baseline and validation variants for B03 layernorm:
y = (x - mean(x)) * rsqrt(var(x) + eps) * w + b over the last dimension, biased variance."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: two-pass fp32 statistics, one rounding to bf16."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    var = (xf - mean).pow(2).mean(dim=-1, keepdim=True)
    y.copy_((xf - mean) * torch.rsqrt(var + eps) * w.float() + b.float())


# ---- eager formulation (timed on the GPU) ----

def fused_layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: PyTorch's fused LayerNorm (one kernel on CUDA)."""
    return F.layer_norm(x, (x.shape[-1],), w, b, eps)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

"""Reference, eager baseline and validation variants for B09 groupnorm_silu:
y = silu(group_norm(x, groups, w, b, eps)) on an NCHW fp16 tensor (diffusion VAE / UNet blocks)."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor, groups: int,
              eps: float) -> None:
    """Readable reference, destination-passing: fp32 two-pass statistics per (sample, group),
    affine and SiLU in fp32, one rounding to fp16."""
    n, c = x.shape[0], x.shape[1]
    xg = x.float().reshape(n, groups, -1)
    mean = xg.mean(dim=-1, keepdim=True)
    var = (xg - mean).pow(2).mean(dim=-1, keepdim=True)
    xn = ((xg - mean) * torch.rsqrt(var + eps)).reshape(x.shape)
    v = xn * w.float().reshape(1, c, 1, 1) + b.float().reshape(1, c, 1, 1)
    y.copy_(v * torch.sigmoid(v))


# ---- eager formulation (timed on the GPU) ----

def group_norm_silu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """Eager baseline: PyTorch's GroupNorm kernel, then SiLU (two kernels, fp16 in between)."""
    return F.silu(F.group_norm(x, groups, w, b, eps))


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

"""Reference, eager baselines and validation variants for B08 l2norm_rows:
y = x / max(||x||_2, eps) per row (F.normalize)."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: fp32 norm, clamp, division, one rounding to bf16."""
    xf = x.float()
    norm = xf.pow(2).sum(dim=-1, keepdim=True).sqrt()
    y.copy_(xf / norm.clamp_min(eps))


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def normalize(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: F.normalize on the bf16 tensor (a norm kernel, a clamp, a division)."""
    return F.normalize(x, p=2.0, dim=-1, eps=eps)


def chain_fp32(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: F.normalize on an fp32 upcast, cast back to bf16."""
    return F.normalize(x.float(), p=2.0, dim=-1, eps=eps).to(x.dtype)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

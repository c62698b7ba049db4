"""Reference, eager baseline and validation variants for B04 add_layernorm:
r_out = x + r (the new residual), y = layernorm(r_out) * w + b; returns y and r_out."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor, y: torch.Tensor,
              r_out: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: the residual sum rounded to bf16 once (r_out), then
    the LayerNorm of that stored value with two-pass fp32 statistics, one rounding to bf16."""
    r_out.copy_(x.float() + r.float())
    h = r_out.float()
    mean = h.mean(dim=-1, keepdim=True)
    var = (h - mean).pow(2).mean(dim=-1, keepdim=True)
    y.copy_((h - mean) * torch.rsqrt(var + eps) * w.float() + b.float())


# ---- eager formulation (timed on the GPU) ----

def add_then_fused_layer_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                              eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: one add kernel, then PyTorch's fused LayerNorm."""
    r_new = x + r
    return F.layer_norm(r_new, (x.shape[-1],), w, b, eps), r_new


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

"""Reference, eager baselines and validation variants for B02 add_rmsnorm:
r_out = x + r (the new residual), y = rmsnorm(r_out) * w; returns y and r_out."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, y: torch.Tensor, r_out: torch.Tensor,
              eps: float) -> None:
    """Readable reference, destination-passing: the residual sum rounded to bf16 once (r_out), then
    the RMSNorm of that stored value in fp32 math, one rounding to bf16."""
    r_out.copy_(x.float() + r.float())
    h = r_out.float()
    rstd = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps)
    y.copy_(h * rstd * w.float())


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def add_then_fused_rms_norm(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                            eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: one add kernel, then PyTorch's fused RMSNorm."""
    r_new = x + r
    return F.rms_norm(r_new, (x.shape[-1],), w, eps), r_new


def chain_of_ops(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor,
                 eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: the residual add, then Hugging Face's LlamaRMSNorm chain of ops."""
    r_new = x + r
    h = r_new.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return w * h.to(x.dtype), r_new


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

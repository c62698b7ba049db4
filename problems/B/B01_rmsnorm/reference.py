"""Reference, eager baselines and validation variants for B01 rmsnorm: y = x * rsqrt(mean(x^2) + eps) * w."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: fp32 math, one rounding to bf16 at the end."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    y.copy_(xf * rstd * w.float())


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def fused_rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: PyTorch's fused RMSNorm (one kernel on CUDA)."""
    return F.rms_norm(x, (x.shape[-1],), w, eps)


def chain_of_ops(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: the chain of ops of Hugging Face's LlamaRMSNorm (fp32 upcast, several kernels;
    it rounds the normalized value to bf16 before the weight multiply)."""
    h = x.float()
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(x.dtype)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

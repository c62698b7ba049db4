"""Reference, eager baselines and validation variants for B07 gated_rmsnorm (Mamba-2's RMSNormGated,
gate before the norm): g = x * silu(z), y = g * rsqrt(mean(g^2) + eps) * w."""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, y: torch.Tensor, eps: float) -> None:
    """Readable reference, destination-passing: the gate and the norm in fp32, one rounding to bf16."""
    zf = z.float()
    g = x.float() * (zf * torch.sigmoid(zf))
    y.copy_(g * torch.rsqrt(g.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float())


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def gate_then_fused_rms_norm(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: the gate in bf16 (silu, multiply), then PyTorch's fused RMSNorm."""
    return F.rms_norm(x * F.silu(z), (x.shape[-1],), w, eps)


def chain_of_ops(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager baseline: Hugging Face's MambaRMSNormGated (fp32 gate and norm, several kernels)."""
    h = x.to(torch.float32)
    h = h * F.silu(z.to(torch.float32))
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(x.dtype)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

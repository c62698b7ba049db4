"""Reference, eager baselines and validation variants for B12 rmsnorm_backward: the gradients dx
(bf16) and dw (fp32) of y = x * rstd * w, rstd = rsqrt(mean(x^2) + eps), given dy; rstd is
recomputed from x (it is not an input)."""
import torch
import torch.nn.functional as F


def reference(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, dx: torch.Tensor, dw: torch.Tensor,
              eps: float) -> None:
    """Readable reference, destination-passing: fp64 math, dx rounded to bf16 and dw to fp32 once.
    With xhat = x * rstd and g = dy * w:
    dx = rstd * (g - xhat * mean(g * xhat)) per row, dw = sum over rows of dy * xhat."""
    xd, dyd = x.double(), dy.double()
    rstd = torch.rsqrt(xd.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = xd * rstd
    g = dyd * w.double()
    dx.copy_(rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True)))
    dw.copy_((dyd * xhat).sum(dim=0))


# ---- eager formulations (timed on the GPU; t_ref is the fastest) ----

def autograd_fp32(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: autograd through F.rms_norm on fp32 copies (fp32 weight gradient), dx cast
    back to bf16."""
    with torch.enable_grad():
        xf = x.float().requires_grad_()
        wf = w.float().requires_grad_()
        y = F.rms_norm(xf, (x.shape[-1],), wf, eps)
        gx, gw = torch.autograd.grad(y, (xf, wf), dy.float())
    return gx.to(x.dtype), gw


def fused_dx_fp32_dw(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline (CUDA only): PyTorch's fused RMSNorm forward (for rstd) and backward kernels
    in bf16 for dx, and dw reduced in fp32 from dy * x * rstd."""
    h = [x.shape[-1]]
    _, rstd = torch.ops.aten._fused_rms_norm(x, h, w, eps)
    gx, _ = torch.ops.aten._fused_rms_norm_backward(dy, x, h, rstd, w, [True, False])
    gw = (dy.float() * x.float()).mul_(rstd).sum(dim=0)
    return gx, gw


def chain_of_ops(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline and torch.compile's input: the backward formula as fp32 tensor ops."""
    xf, dyf = x.float(), dy.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = xf * rstd
    g = dyf * w.float()
    gx = rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))
    return gx.to(x.dtype), (dyf * xhat).sum(dim=0)


# ---- independent correct formulations ([validate] correct) ----


# ---- planted slips ([validate] wrong): each must fail ----

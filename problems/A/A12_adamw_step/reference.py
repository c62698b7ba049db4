"""Reference and eager baselines for A12 adamw_step: one in-place AdamW
update (decoupled weight decay, as torch.optim.AdamW) of fp32 p, m, v from a bf16 gradient g.

The outputs p, m and v are in place: `reference` updates them and returns nothing; every other
formulation updates its (cloned) arguments in place and returns (p, m, v).
"""
import math

import torch


def _bias_corrections(beta1: float, beta2: float, step: int) -> tuple[float, float]:
    """1 - beta1^t and 1 - beta2^t for the step number t (Python floats, i.e. fp64)."""
    return 1.0 - beta1**step, 1.0 - beta2**step


def reference(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> None:
    """Readable reference: the AdamW update in fp64, each of p, m, v rounded to fp32 once."""
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    p64, m64, v64, g64 = p.double(), m.double(), v.double(), g.double()
    m_new = beta1 * m64 + (1.0 - beta1) * g64
    v_new = beta2 * v64 + (1.0 - beta2) * g64 * g64
    m_hat = m_new / bc1
    v_hat = v_new / bc2
    p_new = p64 - lr * weight_decay * p64 - lr * m_hat / (torch.sqrt(v_hat) + eps)
    p.copy_(p_new)
    m.copy_(m_new)
    v.copy_(v_new)


def fused_adamw(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: torch's fused AdamW kernel (what torch.optim.AdamW(fused=True) launches;
    the step counter is passed already incremented to `step`). Gradients must have the
    parameters' dtype, so g is converted to fp32 first, as a trainer with bf16 gradients does."""
    steps = [torch.tensor(float(step), dtype=torch.float32, device=p.device)]
    torch._fused_adamw_([p], [g.float()], [m], [v], [], steps, lr=lr, beta1=beta1, beta2=beta2,
                        weight_decay=weight_decay, eps=eps, amsgrad=False, maximize=False)
    return p, m, v


def foreach_adamw(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: the _foreach formulation of torch.optim.AdamW(foreach=True), fp32."""
    ps, ms, vs, gs = [p], [m], [v], [g.float()]
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    torch._foreach_mul_(ps, 1.0 - lr * weight_decay)
    torch._foreach_lerp_(ms, gs, 1.0 - beta1)
    torch._foreach_mul_(vs, beta2)
    torch._foreach_addcmul_(vs, gs, gs, 1.0 - beta2)
    denom = torch._foreach_sqrt(vs)
    torch._foreach_div_(denom, math.sqrt(bc2))
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(ps, ms, denom, -lr / bc1)
    return p, m, v


def single_tensor_adamw(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: the chain of in-place tensor ops of torch.optim.AdamW(foreach=False), fp32."""
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    g32 = g.float()
    p.mul_(1.0 - lr * weight_decay)
    m.lerp_(g32, 1.0 - beta1)
    v.mul_(beta2).addcmul_(g32, g32, value=1.0 - beta2)
    denom = (v.sqrt() / math.sqrt(bc2)).add_(eps)
    p.addcdiv_(m, denom, value=-lr / bc1)
    return p, m, v

"""Validation formulations of A12 adamw_step for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp32_folded(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validation: fp32 with the constants folded as a fused kernel does it: m and v as explicit
    multiply-adds, the update as p * (1 - lr*wd) - (lr/bc1) * m / (sqrt(v) * (1/sqrt(bc2)) + eps),
    every constant rounded to fp32 first."""
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    f32 = torch.float32
    b1, omb1 = torch.tensor(beta1, dtype=f32), torch.tensor(1.0 - beta1, dtype=f32)
    b2, omb2 = torch.tensor(beta2, dtype=f32), torch.tensor(1.0 - beta2, dtype=f32)
    decay = torch.tensor(1.0 - lr * weight_decay, dtype=f32)
    step_size = torch.tensor(lr / bc1, dtype=f32)
    inv_sqrt_bc2 = torch.tensor(1.0 / math.sqrt(bc2), dtype=f32)
    g32 = g.float()
    m_new = b1 * m + omb1 * g32
    v_new = b2 * v + omb2 * (g32 * g32)
    denom = torch.sqrt(v_new) * inv_sqrt_bc2 + torch.tensor(eps, dtype=f32)
    p.copy_(p * decay - step_size * (m_new / denom))
    m.copy_(m_new)
    v.copy_(v_new)
    return p, m, v


def alt_fp32_chunked(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Validation: the fp32 single-tensor chain applied chunk by chunk (as a multi-CTA kernel
    would), with the bias-corrected moments formed first: p -= lr * (wd * p + m_hat / (sqrt(v_hat) + eps))."""
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    chunk = 4099
    for s in range(0, p.numel(), chunk):
        pc, mc, vc, gc = (t.view(-1)[s:s + chunk] for t in (p, m, v, g))
        g32 = gc.float()
        mc.mul_(beta1).add_(g32, alpha=1.0 - beta1)
        vc.mul_(beta2).add_(g32 * g32, alpha=1.0 - beta2)
        upd = weight_decay * pc + (mc / bc1) / (torch.sqrt(vc / bc2) + eps)
        pc.sub_(lr * upd)
    return p, m, v


def wrong_no_weight_decay(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the weight decay is left out (Adam without decay)."""
    return single_tensor_adamw(p, m, v, g, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                               weight_decay=0.0, step=step)


def wrong_no_bias_correction(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: no bias correction (m and v used as they are; at t = 1000, 1 - beta2^t = 0.632)."""
    g32 = g.float()
    p.mul_(1.0 - lr * weight_decay)
    m.lerp_(g32, 1.0 - beta1)
    v.mul_(beta2).addcmul_(g32, g32, value=1.0 - beta2)
    p.addcdiv_(m, v.sqrt().add_(eps), value=-lr)
    return p, m, v


def wrong_p_not_updated(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the moments are updated but the parameter write is lost (p unchanged)."""
    p_old = p.clone()
    single_tensor_adamw(p, m, v, g, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                        weight_decay=weight_decay, step=step)
    p.copy_(p_old)
    return p, m, v


def wrong_l2_weight_decay(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: Adam's L2 penalty (weight_decay * p added to the gradient) instead of AdamW's
    decoupled decay."""
    g_l2 = g.float() + weight_decay * p
    return single_tensor_adamw(p, m, v, g_l2, lr=lr, beta1=beta1, beta2=beta2, eps=eps,
                               weight_decay=0.0, step=step)


def wrong_stale_moments(
    p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor, *,
    lr: float, beta1: float, beta2: float, eps: float, weight_decay: float, step: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Planted slip: the parameter step uses the moments from before this step's update."""
    g32 = g.float()
    bc1, bc2 = _bias_corrections(beta1, beta2, step)
    p.mul_(1.0 - lr * weight_decay)
    p.addcdiv_(m, (v.sqrt() / math.sqrt(bc2)).add_(eps), value=-lr / bc1)
    m.lerp_(g32, 1.0 - beta1)
    v.mul_(beta2).addcmul_(g32, g32, value=1.0 - beta2)
    return p, m, v

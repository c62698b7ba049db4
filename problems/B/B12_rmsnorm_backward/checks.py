"""Validation formulations of B12 rmsnorm_backward for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_blocked_fp32(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 as a two-kernel GPU implementation: per row block of 128 rows, dx and an fp32 partial
    dw; the partials summed in a second step. dx via the rstd^3 form of the same gradient."""
    xf, dyf, wf = x.float(), dy.float(), w.float()
    n = x.shape[-1]
    gx = torch.empty_like(x)
    partials = []
    for i in range(0, x.shape[0], 128):
        xb, dyb = xf[i:i + 128], dyf[i:i + 128]
        rstd = 1.0 / torch.sqrt(xb.pow(2).sum(dim=-1, keepdim=True) / n + eps)
        g = dyb * wf
        gx[i:i + 128] = (g * rstd - xb * (rstd ** 3) * ((g * xb).sum(dim=-1, keepdim=True) / n)).to(x.dtype)
        partials.append((dyb * (xb * rstd)).sum(dim=0))
    return gx, torch.stack(partials).sum(dim=0)


def alt_sequential_fp32(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 with dw accumulated row after row (one thread per column walking every row, the
    longest chain of fp32 roundings); dx as in chain_of_ops."""
    xf, dyf = x.float(), dy.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    terms = dyf * (xf * rstd)
    acc = torch.zeros(x.shape[-1], device=x.device)
    for t in range(x.shape[0]):
        acc += terms[t]
    g = dyf * w.float()
    gx = rstd * (g - (xf * rstd) * (g * xf * rstd).mean(dim=-1, keepdim=True))
    return gx.to(x.dtype), acc


def wrong_dw_drops_last_row(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                            eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Off by one in the dw reduction: the last row is left out."""
    gx, _ = chain_of_ops(dy, x, w, eps)
    _, gw = chain_of_ops(dy[:-1], x[:-1], w, eps)
    return gx, gw


def wrong_no_projection(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dx = rstd * g: the term through rstd's dependence on x forgotten."""
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    _, gw = chain_of_ops(dy, x, w, eps)
    return (rstd * dy.float() * w.float()).to(x.dtype), gw


def wrong_dx_no_weight(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """g = dy instead of dy * w in dx."""
    gx, _ = chain_of_ops(dy, x, torch.ones_like(w), eps)
    _, gw = chain_of_ops(dy, x, w, eps)
    return gx, gw


def wrong_dw_uses_output(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dw = sum of dy * y (the output, w included) instead of dy * xhat."""
    gx, _ = chain_of_ops(dy, x, w, eps)
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()
    return gx, (dy.float() * y).sum(dim=0)


def wrong_dw_bf16_partials(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """dw partials per block of 128 rows stored in bf16 (the weight's dtype) before the final sum."""
    gx, _ = chain_of_ops(dy, x, w, eps)
    parts = [chain_of_ops(dy[i:i + 128], x[i:i + 128], w, eps)[1].to(torch.bfloat16).float()
             for i in range(0, x.shape[0], 128)]
    return gx, torch.stack(parts).sum(dim=0)

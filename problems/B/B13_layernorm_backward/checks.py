"""Validation formulations of B13 layernorm_backward for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_blocked_fp32(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                     eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 as a two-kernel GPU implementation: per block of 128 rows, one-pass statistics
    (E[x^2] - mean^2), dx written in the expanded form (H * g - sum(g) - xhat * sum(g * xhat))
    * rstd / H, and fp32 partial dw and db; the partials summed in a second step."""
    xf, dyf, wf = x.float(), dy.float(), w.float()
    n = x.shape[-1]
    gx = torch.empty_like(x)
    pw, pb = [], []
    for i in range(0, x.shape[0], 128):
        xb, dyb = xf[i:i + 128], dyf[i:i + 128]
        mean = xb.sum(dim=-1, keepdim=True) / n
        var = (xb.pow(2).sum(dim=-1, keepdim=True) / n - mean * mean).clamp_min(0.0)
        rstd = 1.0 / torch.sqrt(var + eps)
        xhat = (xb - mean) * rstd
        g = dyb * wf
        s1 = g.sum(dim=-1, keepdim=True)
        s2 = (g * xhat).sum(dim=-1, keepdim=True)
        gx[i:i + 128] = ((n * g - s1 - xhat * s2) * (rstd / n)).to(x.dtype)
        pw.append((dyb * xhat).sum(dim=0))
        pb.append(dyb.sum(dim=0))
    return gx, torch.stack(pw).sum(dim=0), torch.stack(pb).sum(dim=0)


def alt_sequential_fp32(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """fp32 with dw and db accumulated row after row (the longest chain of fp32 roundings);
    dx as in chain_of_ops."""
    gx, _, _ = chain_of_ops(dy, x, w, eps)
    xf, dyf = x.float(), dy.float()
    mean = xf.mean(dim=-1, keepdim=True)
    xhat = (xf - mean) * torch.rsqrt((xf - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    terms = dyf * xhat
    aw, ab = torch.zeros(x.shape[-1], device=x.device), torch.zeros(x.shape[-1], device=x.device)
    for t in range(x.shape[0]):
        aw += terms[t]
        ab += dyf[t]
    return gx, aw, ab


def wrong_no_mean_term(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx without the - mean(g) term (the gradient through the mean forgotten: RMSNorm's dx)."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((xf - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    xhat = (xf - mean) * rstd
    g = dy.float() * w.float()
    _, gw, gb = chain_of_ops(dy, x, w, eps)
    return (rstd * (g - xhat * (g * xhat).mean(dim=-1, keepdim=True))).to(x.dtype), gw, gb


def wrong_no_projection(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dx without the - xhat * mean(g * xhat) term (the gradient through rstd forgotten)."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((xf - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    g = dy.float() * w.float()
    _, gw, gb = chain_of_ops(dy, x, w, eps)
    return (rstd * (g - g.mean(dim=-1, keepdim=True))).to(x.dtype), gw, gb


def wrong_dw_uncentered(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dw = sum of dy * x * rstd: the mean not subtracted in dw's xhat."""
    gx, _, gb = chain_of_ops(dy, x, w, eps)
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt((xf - mean).pow(2).mean(dim=-1, keepdim=True) + eps)
    return gx, (dy.float() * xf * rstd).sum(dim=0), gb


def wrong_db_times_weight(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """db = sum of dy * w (g reused) instead of sum of dy."""
    gx, gw, _ = chain_of_ops(dy, x, w, eps)
    return gx, gw, (dy.float() * w.float()).sum(dim=0)


def wrong_drops_last_row(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Off by one in the cross-row reductions: the last row is left out of dw and db."""
    gx, _, _ = chain_of_ops(dy, x, w, eps)
    _, gw, gb = chain_of_ops(dy[:-1], x[:-1], w, eps)
    return gx, gw, gb


def wrong_swapped_dw_db(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor,
                        eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dw and db written to each other's buffer."""
    gx, gw, gb = chain_of_ops(dy, x, w, eps)
    return gx, gb, gw

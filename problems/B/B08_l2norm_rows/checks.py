"""Validation formulations of B08 l2norm_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64 with torch.linalg.vector_norm and a reciprocal multiply."""
    xd = x.double()
    inv = 1.0 / torch.linalg.vector_norm(xd, ord=2, dim=-1, keepdim=True).clamp_min(eps)
    return (xd * inv).to(x.dtype)


def alt_chunked_fp32(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 sum of squares in column blocks of 256 added in a second step; rsqrt of the clamped
    square (max(ss, eps^2) is the same clamp)."""
    xf = x.float()
    n = xf.shape[-1]
    ss = torch.stack([xf[:, i:i + 256].pow(2).sum(dim=-1) for i in range(0, n, 256)], dim=-1).sum(dim=-1)
    return (xf * torch.rsqrt(ss.clamp_min(eps * eps))[:, None]).to(x.dtype)


def wrong_rms_not_l2(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The mean of squares in place of the sum (RMSNorm's statistic): off by sqrt(H)."""
    xf = x.float()
    return (xf / xf.pow(2).mean(dim=-1, keepdim=True).sqrt().clamp_min(eps)).to(x.dtype)


def wrong_column_norm(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The norm taken over the wrong axis (each column normalized)."""
    return F.normalize(x.float(), p=2.0, dim=0, eps=eps).to(x.dtype)


def wrong_no_sqrt(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Divided by the squared norm (the square root forgotten)."""
    xf = x.float()
    return (xf / xf.pow(2).sum(dim=-1, keepdim=True).clamp_min(eps)).to(x.dtype)


def wrong_bf16_sumsq(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Sum of squares accumulated in bf16 along the row (the running sum rounded after every add)."""
    xf = x.float()
    acc = torch.zeros(x.shape[0], dtype=torch.bfloat16, device=x.device)
    for j in range(x.shape[-1]):
        acc = (acc.float() + xf[:, j] * xf[:, j]).to(torch.bfloat16)
    return (xf / acc.float().sqrt().clamp_min(eps)[:, None]).to(x.dtype)

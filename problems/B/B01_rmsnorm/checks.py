"""Validation formulations of B01 rmsnorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64 chain of ops with a division by the root instead of a reciprocal square root."""
    xd = x.double()
    rms = torch.sqrt((xd * xd).sum(dim=-1, keepdim=True) / x.shape[-1] + eps)
    return (xd / rms * w.double()).to(x.dtype)


def alt_chunked_fp32(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 sum of squares in column blocks of 256 (as a kernel's per-thread partial sums), the
    partials added in a second step; weight applied before the normalization factor."""
    xf = x.float()
    h = xf.shape[-1]
    partials = [xf[:, i:i + 256].pow(2).sum(dim=-1) for i in range(0, h, 256)]
    ss = torch.stack(partials, dim=-1).sum(dim=-1, keepdim=True)
    rstd = 1.0 / torch.sqrt(ss / h + eps)
    return ((xf * w.float()) * rstd).to(x.dtype)


def wrong_eps_outside_sqrt(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the root instead of to the mean square."""
    xf = x.float()
    return (xf / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * w.float()).to(x.dtype)


def wrong_eps_value(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """eps = 1e-6 (another model's constant) in place of the stated one."""
    return chain_fp32(x, w, 1e-6)


def wrong_no_weight(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The weight multiply forgotten."""
    return chain_fp32(x, torch.ones_like(w), eps)


def wrong_gemma_weight(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Gemma's convention (1 + w) applied to a plain weight."""
    return chain_fp32(x, w.float() + 1.0, eps)


def wrong_bf16_sumsq(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Sum of squares accumulated in bf16 along the row (the running sum rounded after every add)."""
    xf = x.float()
    acc = torch.zeros(x.shape[0], dtype=torch.bfloat16, device=x.device)
    for j in range(x.shape[-1]):
        acc = (acc.float() + xf[:, j] * xf[:, j]).to(torch.bfloat16)
    rstd = torch.rsqrt(acc.float()[:, None] / x.shape[-1] + eps)
    return (xf * rstd * w.float()).to(x.dtype)


def chain_fp32(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Helper: the reference's fp32 math with a given weight and eps."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()).to(x.dtype)

"""Validation formulations of B05 layernorm_noaffine_fp32 for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_two_pass_fp32(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 two-pass statistics with column-block partial sums of 256, division by the root."""
    n = x.shape[-1]
    s = torch.stack([x[:, i:i + 256].sum(dim=-1) for i in range(0, n, 256)], dim=-1).sum(dim=-1, keepdim=True)
    c = x - s / n
    q = torch.stack([c[:, i:i + 256].pow(2).sum(dim=-1) for i in range(0, n, 256)], dim=-1).sum(dim=-1, keepdim=True)
    return c / torch.sqrt(q / n + eps)


def alt_welford_chunks(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 Welford states per column block of 128, merged in order with Chan's formula."""
    n, mean, m2 = 0.0, torch.zeros(x.shape[0], device=x.device), torch.zeros(x.shape[0], device=x.device)
    for i in range(0, x.shape[-1], 128):
        blk = x[:, i:i + 128]
        nb = float(blk.shape[-1])
        mb = blk.mean(dim=-1)
        qb = (blk - mb[:, None]).pow(2).sum(dim=-1)
        d = mb - mean
        tot = n + nb
        mean, m2, n = mean + d * (nb / tot), m2 + qb + d * d * (n * nb / tot), tot
    return (x - mean[:, None]) * torch.rsqrt(m2 / n + eps)[:, None]


def alt_one_pass_fp32(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 one pass: sum and sum of squares (column blocks of 512), var = E[x^2] - mean^2."""
    n = x.shape[-1]
    s = torch.stack([x[:, i:i + 512].sum(dim=-1) for i in range(0, n, 512)], dim=-1).sum(dim=-1, keepdim=True)
    q = torch.stack([x[:, i:i + 512].pow(2).sum(dim=-1) for i in range(0, n, 512)], dim=-1).sum(dim=-1, keepdim=True)
    mean = s / n
    var = (q / n - mean * mean).clamp(min=0.0)
    return (x - mean) * torch.rsqrt(var + eps)


def wrong_eps_outside_sqrt(x: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the standard deviation instead of to the variance."""
    c = x - x.mean(dim=-1, keepdim=True)
    return c / (c.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)


def wrong_eps_value(x: torch.Tensor, eps: float) -> torch.Tensor:
    """PyTorch's default eps (1e-5) in place of the stated 1e-6."""
    return F.layer_norm(x, (x.shape[-1],), None, None, 1e-5)


def wrong_unbiased_var(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Unbiased variance (divided by H - 1), as torch.var's default."""
    m = x.mean(dim=-1, keepdim=True)
    return (x - m) * torch.rsqrt(x.var(dim=-1, keepdim=True) + eps)


def wrong_bf16_compute(x: torch.Tensor, eps: float) -> torch.Tensor:
    """The row converted to bf16 on load (a bf16 kernel reused), statistics in fp32."""
    xb = x.to(torch.bfloat16).float()
    return F.layer_norm(xb, (x.shape[-1],), None, None, eps)


def wrong_no_mean_subtraction(x: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm in place of LayerNorm: no mean subtracted."""
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)

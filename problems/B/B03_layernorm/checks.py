"""Validation formulations of B03 layernorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64 chain of ops, dividing by the standard deviation."""
    xd = x.double()
    c = xd - xd.sum(dim=-1, keepdim=True) / x.shape[-1]
    std = torch.sqrt((c * c).sum(dim=-1, keepdim=True) / x.shape[-1] + eps)
    return (c / std * w.double() + b.double()).to(x.dtype)


def alt_welford_chunks(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 statistics per column block of 128 (count, mean, M2), merged pairwise with Chan's
    formula, as a one-pass GPU kernel combines per-thread Welford states."""
    xf = x.float()
    n_tot = xf.shape[-1]
    states = []
    for i in range(0, n_tot, 128):
        blk = xf[:, i:i + 128]
        m = blk.mean(dim=-1)
        states.append((float(blk.shape[-1]), m, (blk - m[:, None]).pow(2).sum(dim=-1)))
    while len(states) > 1:
        merged = []
        for j in range(0, len(states) - 1, 2):
            (na, ma, qa), (nb, mb, qb) = states[j], states[j + 1]
            n = na + nb
            d = mb - ma
            merged.append((n, ma + d * (nb / n), qa + qb + d * d * (na * nb / n)))
        if len(states) % 2:
            merged.append(states[-1])
        states = merged
    _, mean, m2 = states[0]
    rstd = torch.rsqrt(m2 / n_tot + eps)
    return ((xf - mean[:, None]) * rstd[:, None] * w.float() + b.float()).to(x.dtype)


def _ln(xf: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
        eps: float) -> torch.Tensor:
    """Helper: normalize fp32 rows with given statistics, apply w and b, round to bf16."""
    return ((xf - mean) * torch.rsqrt(var + eps) * w.float() + b.float()).to(torch.bfloat16)


def wrong_no_mean_subtraction(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm statistics: the mean is neither subtracted nor removed from the variance."""
    xf = x.float()
    return _ln(xf, torch.zeros_like(xf[:, :1]), xf.pow(2).mean(dim=-1, keepdim=True), w, b, eps)


def wrong_uncentered_var(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """One-pass variance with the mean^2 term forgotten: var = E[x^2]."""
    xf = x.float()
    return _ln(xf, xf.mean(dim=-1, keepdim=True), xf.pow(2).mean(dim=-1, keepdim=True), w, b, eps)


def wrong_eps_outside_sqrt(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the standard deviation instead of to the variance."""
    xf = x.float()
    mean = xf.mean(dim=-1, keepdim=True)
    std = (xf - mean).pow(2).mean(dim=-1, keepdim=True).sqrt()
    return ((xf - mean) / (std + eps) * w.float() + b.float()).to(x.dtype)


def wrong_no_bias(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """The bias add forgotten."""
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), None, eps).to(x.dtype)


def wrong_no_weight(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """The weight multiply forgotten."""
    return F.layer_norm(x.float(), (x.shape[-1],), None, b.float(), eps).to(x.dtype)


def wrong_unbiased_var(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Unbiased (n - 1) variance: not in [validate], it changes y by only 1/(2H) (0.2% at H = 256)
    and no tolerance on a bf16 output can see it at these widths."""
    xf = x.float()
    return _ln(xf, xf.mean(dim=-1, keepdim=True), xf.var(dim=-1, unbiased=True, keepdim=True), w, b, eps)

"""Validation formulations of B11 instancenorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64 on the [N*C, H*W] view, dividing by the standard deviation."""
    xd = x.double().reshape(x.shape[0] * x.shape[1], -1)
    c = xd - xd.mean(dim=-1, keepdim=True)
    return (c / torch.sqrt(c.pow(2).mean(dim=-1, keepdim=True) + eps)).reshape(x.shape).to(x.dtype)


def alt_one_pass_fp32(x: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 one pass per plane: sum and sum of squares over row blocks (8 rows of the plane at a
    time), var = E[x^2] - mean^2."""
    xf = x.float()
    n = x.shape[-2] * x.shape[-1]
    s = sum(xf[..., i:i + 8, :].sum(dim=(-2, -1)) for i in range(0, x.shape[-2], 8))
    q = sum(xf[..., i:i + 8, :].pow(2).sum(dim=(-2, -1)) for i in range(0, x.shape[-2], 8))
    mean = s / n
    var = (q / n - mean * mean).clamp_min(0.0)
    return ((xf - mean[..., None, None]) * torch.rsqrt(var + eps)[..., None, None]).to(x.dtype)


def _norm(xf: torch.Tensor, dims: tuple[int, ...], eps: float, unbiased: bool = False) -> torch.Tensor:
    """Helper: normalize fp32 x over `dims` (biased variance unless told), rounded to fp16."""
    mean = xf.mean(dim=dims, keepdim=True)
    var = xf.var(dim=dims, keepdim=True, unbiased=unbiased)
    return ((xf - mean) * torch.rsqrt(var + eps)).to(torch.float16)


def wrong_unbiased_var(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Unbiased variance (divided by H*W - 1), torch.var's default."""
    return _norm(x.float(), (-2, -1), eps, unbiased=True)


def wrong_eps_outside_sqrt(x: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the standard deviation instead of to the variance."""
    xf = x.float()
    c = xf - xf.mean(dim=(-2, -1), keepdim=True)
    return (c / (c.pow(2).mean(dim=(-2, -1), keepdim=True).sqrt() + eps)).to(x.dtype)


def wrong_all_channels(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Statistics over all channels of a sample (GroupNorm with one group / LayerNorm over C, H, W)."""
    return _norm(x.float(), (1, 2, 3), eps)


def wrong_batch_statistics(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Statistics per channel over the whole batch (BatchNorm's training statistics)."""
    return _norm(x.float(), (0, 2, 3), eps)


def wrong_per_row(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Statistics per row of the plane (over W only), the wrong axis."""
    return _norm(x.float(), (-1,), eps)

"""Validation formulations of B09 groupnorm_silu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """fp64 via F.group_norm, SiLU as v / (1 + exp(-v))."""
    v = F.group_norm(x.double(), groups, w.double(), b.double(), eps)
    return (v / (1.0 + torch.exp(-v))).to(x.dtype)


def alt_channel_welford(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """fp32 per-channel-plane statistics (count, mean, M2), merged over the channels of each group
    with Chan's formula, as a kernel combines per-plane partials; the affine folded into one
    scale and shift per channel."""
    n, c = x.shape[0], x.shape[1]
    cpg = c // groups
    xf = x.float().reshape(n, c, -1)
    hw = xf.shape[-1]
    m_c = xf.mean(dim=-1)                                  # [n, c]
    q_c = (xf - m_c[..., None]).pow(2).sum(dim=-1)         # [n, c]
    m_c, q_c = m_c.reshape(n, groups, cpg), q_c.reshape(n, groups, cpg)
    cnt, mean, m2 = float(hw), m_c[..., 0], q_c[..., 0]
    for j in range(1, cpg):
        d = m_c[..., j] - mean
        tot = cnt + hw
        mean = mean + d * (hw / tot)
        m2 = m2 + q_c[..., j] + d * d * (cnt * hw / tot)
        cnt = tot
    rstd = torch.rsqrt(m2 / cnt + eps)                     # [n, groups]
    scale = w.float().reshape(1, groups, cpg) * rstd[..., None]
    shift = b.float().reshape(1, groups, cpg) - mean[..., None] * scale
    v = xf * scale.reshape(n, c, 1) + shift.reshape(n, c, 1)
    return F.silu(v).reshape(x.shape).to(x.dtype)


def _gn_silu(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """Helper: fp32 GroupNorm + SiLU, rounded to fp16."""
    return F.silu(F.group_norm(x.float(), groups, w.float(), b.float(), eps)).to(x.dtype)


def wrong_groups_swapped(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """The number of groups and the channels per group confused (C / 32 groups of 32 channels)."""
    return _gn_silu(x, w, b, x.shape[1] // groups, eps)


def wrong_interleaved_groups(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int,
                             eps: float) -> torch.Tensor:
    """Channel c assigned to group c % groups instead of c // (C / groups)."""
    c = x.shape[1]
    cpg = c // groups
    perm = torch.arange(c, device=x.device).reshape(cpg, groups).t().reshape(-1)  # channels of group g: g, g+G, ...
    inv = torch.argsort(perm)
    y = F.group_norm(x.float()[:, perm], groups, None, None, eps)[:, inv]
    v = y * w.float().reshape(1, c, 1, 1) + b.float().reshape(1, c, 1, 1)
    return F.silu(v).to(x.dtype)


def wrong_group_off_by_one(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int,
                           eps: float) -> torch.Tensor:
    """Statistics of group g taken over channels [g*cpg, (g+1)*cpg] (one channel of the next group
    included, clipped at C); the normalization applied to the right channels."""
    n, c = x.shape[0], x.shape[1]
    cpg = c // groups
    xf = x.float()
    out = torch.empty_like(xf)
    for g in range(groups):
        lo, hi = g * cpg, g * cpg + cpg
        s = xf[:, lo:min(hi + 1, c)].reshape(n, -1)
        mean = s.mean(dim=-1).reshape(n, 1, 1, 1)
        var = s.var(dim=-1, unbiased=False).reshape(n, 1, 1, 1)
        out[:, lo:hi] = (xf[:, lo:hi] - mean) * torch.rsqrt(var + eps)
    v = out * w.float().reshape(1, c, 1, 1) + b.float().reshape(1, c, 1, 1)
    return F.silu(v).to(x.dtype)


def wrong_eps_value(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int, eps: float) -> torch.Tensor:
    """The UNet's eps (1e-5) in place of the VAE's stated 1e-6."""
    return _gn_silu(x, w, b, groups, 1e-5)


def wrong_silu_before_affine(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, groups: int,
                             eps: float) -> torch.Tensor:
    """SiLU applied to the normalized value, the weight and bias after it."""
    c = x.shape[1]
    v = F.silu(F.group_norm(x.float(), groups, None, None, eps))
    return (v * w.float().reshape(1, c, 1, 1) + b.float().reshape(1, c, 1, 1)).to(x.dtype)

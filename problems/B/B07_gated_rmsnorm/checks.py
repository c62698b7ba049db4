"""Validation formulations of B07 gated_rmsnorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fp64 chain of ops, silu as z / (1 + exp(-z)), dividing by the root."""
    zd = z.double()
    g = x.double() * zd / (1.0 + torch.exp(-zd))
    rms = torch.sqrt((g * g).sum(dim=-1, keepdim=True) / x.shape[-1] + eps)
    return (g / rms * w.double()).to(x.dtype)


def alt_chunked_fp32(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """fp32 with F.silu, the sum of squares in column blocks of 256 added in a second step."""
    g = x.float() * F.silu(z.float())
    n = g.shape[-1]
    ss = torch.stack([g[:, i:i + 256].pow(2).sum(dim=-1) for i in range(0, n, 256)], dim=-1).sum(dim=-1)
    return ((g * w.float()) * torch.rsqrt(ss / n + eps)[:, None]).to(x.dtype)


def _norm(g: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Helper: fp32 RMSNorm of an fp32 tensor with weight w (fp32 result)."""
    return g * torch.rsqrt(g.pow(2).mean(dim=-1, keepdim=True) + eps) * w.float()


def wrong_norm_before_gate(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """norm_before_gate=True: rmsnorm(x) * w * silu(z)."""
    return (_norm(x.float(), w, eps) * F.silu(z.float())).to(x.dtype)


def wrong_sigmoid_gate(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """sigmoid(z) as the gate instead of silu(z)."""
    return _norm(x.float() * torch.sigmoid(z.float()), w, eps).to(x.dtype)


def wrong_swapped_gate(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The gate applied the other way round: z * silu(x)."""
    return _norm(z.float() * F.silu(x.float()), w, eps).to(x.dtype)


def wrong_eps_outside_sqrt(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """eps added to the root instead of to the mean square."""
    g = x.float() * F.silu(z.float())
    return (g / (g.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * w.float()).to(x.dtype)


def wrong_no_weight(x: torch.Tensor, z: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The weight multiply forgotten."""
    return _norm(x.float() * F.silu(z.float()), torch.ones_like(w), eps).to(x.dtype)

"""Validation formulations of A04 geglu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    h = x.shape[-1] // 2
    gate, up = x[:, :h].double(), x[:, h:].double()
    return (0.5 * gate * (1.0 + torch.erf(gate / math.sqrt(2.0))) * up).float().to(torch.bfloat16)


def alt_erfc_form(x: torch.Tensor) -> torch.Tensor:
    """Validation: gelu(g) = max(g, 0) - 0.5 |g| erfc(|g| / sqrt 2) in fp32 (no cancellation for
    negative g), times u."""
    h = x.shape[-1] // 2
    gate, up = x[:, :h].float(), x[:, h:].float()
    ag = gate.abs()
    gelu = gate.clamp_min(0.0) - 0.5 * ag * torch.erfc(ag * 0.7071067811865476)
    return (gelu * up).to(torch.bfloat16)


def wrong_swapped_halves(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: the halves swapped, gelu(x[:, H:]) * x[:, :H]."""
    h = x.shape[-1] // 2
    return (F.gelu(x[:, h:].float()) * x[:, :h].float()).to(torch.bfloat16)


def wrong_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: gate and up read as interleaved columns, x[:, 0::2] and x[:, 1::2]."""
    return (F.gelu(x[:, 0::2].float()) * x[:, 1::2].float()).to(torch.bfloat16)


def wrong_silu_gate(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: SiLU in place of GELU (SwiGLU instead of GeGLU)."""
    h = x.shape[-1] // 2
    return (F.silu(x[:, :h].float()) * x[:, h:].float()).to(torch.bfloat16)


def wrong_erf_missing_rsqrt2(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: erf(g) instead of erf(g / sqrt 2)."""
    h = x.shape[-1] // 2
    gate, up = x[:, :h].float(), x[:, h:].float()
    return (0.5 * gate * (1.0 + torch.erf(gate)) * up).to(torch.bfloat16)

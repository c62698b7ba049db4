"""Validation formulations of A11 leaky_relu_bias_scale for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Validation: the same formula in fp64 (s and 0.01 as their fp32 values), rounded to fp32 and
    then to bf16."""
    s32 = float(torch.tensor(s, dtype=torch.float32))
    slope = float(torch.tensor(0.01, dtype=torch.float32))
    v = x.double() + b.double()
    return (torch.where(v >= 0.0, v, slope * v) * s32).float().to(torch.bfloat16)


def alt_folded_slope(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Validation: one multiplication per element by s or by the fp32 constant 0.01 * s."""
    v = x.float() + b.float()
    pos = torch.tensor(s, dtype=torch.float32)
    neg = torch.tensor(0.01 * s, dtype=torch.float32)
    return (v * torch.where(v >= 0.0, pos, neg)).to(torch.bfloat16)


def wrong_no_scale(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: the gain s is left out."""
    return F.leaky_relu(x.float() + b.float(), 0.01).to(torch.bfloat16)


def wrong_slope_0_2(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: StyleGAN2's negative slope 0.2 instead of 0.01."""
    return (F.leaky_relu(x.float() + b.float(), 0.2) * s).to(torch.bfloat16)


def wrong_bias_after_activation(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: the bias is added after the activation, leaky_relu(x) * s + b."""
    return (F.leaky_relu(x.float(), 0.01) * s + b.float()).to(torch.bfloat16)


def wrong_scale_before_bias(x: torch.Tensor, b: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: the gain applied to x before the bias, leaky_relu(x * s + b)."""
    return F.leaky_relu(x.float() * s + b.float(), 0.01).to(torch.bfloat16)

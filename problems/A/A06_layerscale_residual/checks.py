"""Validation formulations of A06 layerscale_residual for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Validation: exact in fp64, rounded to fp32 and then to bf16 (one fused multiply-add's result)."""
    return (r.double() + gamma.double() * (x.double() + b.double())).float().to(torch.bfloat16)


def alt_distributed(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Validation: gamma distributed over the sum, gamma * x + gamma * b in fp32, then r added last."""
    g = gamma.float()
    return (r.float() + (g * x.float() + g * b.float())).to(torch.bfloat16)


def wrong_gamma_skips_bias(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is added after the LayerScale, r + gamma * x + b."""
    return (r.float() + gamma.float() * x.float() + b.float()).to(torch.bfloat16)


def wrong_no_bias(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is left out, r + gamma * x."""
    return (r.float() + gamma.float() * x.float()).to(torch.bfloat16)


def wrong_no_gamma(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Planted slip: the LayerScale is left out, r + x + b."""
    return (r.float() + x.float() + b.float()).to(torch.bfloat16)


def wrong_gamma_on_residual(r: torch.Tensor, x: torch.Tensor, b: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
    """Planted slip: the scale multiplies the whole sum, gamma * (r + x + b)."""
    return (gamma.float() * (r.float() + x.float() + b.float())).to(torch.bfloat16)

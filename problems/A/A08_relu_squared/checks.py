"""Validation formulations of A08 relu_squared for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    v = (x.double() + b.double()).clamp_min(0.0)
    return (v * v).float().to(torch.bfloat16)


def alt_where(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: square first, then select: where(v > 0, v * v, 0) in fp32."""
    v = x.float() + b.float()
    return torch.where(v > 0.0, v * v, torch.zeros_like(v)).to(torch.bfloat16)


def wrong_no_square(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the square is left out, relu(x + b)."""
    return (x.float() + b.float()).clamp_min(0.0).to(torch.bfloat16)


def wrong_square_without_relu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the ReLU is left out, (x + b)^2 (negative sums give positive values)."""
    v = x.float() + b.float()
    return (v * v).to(torch.bfloat16)


def wrong_bias_after_activation(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is added after the activation, relu(x)^2 + b."""
    v = x.float().clamp_min(0.0)
    return (v * v + b.float()).to(torch.bfloat16)

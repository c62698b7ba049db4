"""Validation formulations of A07 sigmoid_gate for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    return (x.double() * torch.sigmoid(g.double())).float().to(torch.bfloat16)


def alt_exp_form(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Validation: x / (1 + exp(-g)) in fp32 (one division; exp overflows to inf for very negative
    g and the quotient becomes 0, never NaN)."""
    return (x.float() / (1.0 + torch.exp(-g.float()))).to(torch.bfloat16)


def alt_tanh_form(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Validation: sigmoid(g) = 0.5 + 0.5 tanh(g / 2) in fp32."""
    return (x.float() * (0.5 + 0.5 * torch.tanh(0.5 * g.float()))).to(torch.bfloat16)


def wrong_negated_gate(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Planted slip: the sign of the exponent flipped, x / (1 + exp(g)) = x * sigmoid(-g)."""
    return (x.float() * torch.sigmoid(-g.float())).to(torch.bfloat16)


def wrong_swapped_operands(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Planted slip: the operands swapped, g * sigmoid(x)."""
    return (g.float() * torch.sigmoid(x.float())).to(torch.bfloat16)


def wrong_silu_gate(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Planted slip: silu(g) = g * sigmoid(g) as the gate instead of sigmoid(g)."""
    gf = g.float()
    return (x.float() * gf * torch.sigmoid(gf)).to(torch.bfloat16)

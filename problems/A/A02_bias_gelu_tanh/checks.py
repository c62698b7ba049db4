"""Validation formulations of A02 bias_gelu_tanh for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    v = x.double() + b.double()
    inner = math.sqrt(2.0 / math.pi) * (v + 0.044715 * v * v * v)
    return (0.5 * v * (1.0 + torch.tanh(inner))).float().to(torch.bfloat16)


def alt_sigmoid_form(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Validation: the identity 0.5 * (1 + tanh(u)) = sigmoid(2u) in fp32, as v / (1 + exp(-2u)),
    with the polynomial in Horner form v * (c0 + c1 * v^2)."""
    v = x.float() + b.float()
    c0 = 2.0 * math.sqrt(2.0 / math.pi)
    two_u = v * (c0 + (c0 * 0.044715) * (v * v))
    return (v / (1.0 + torch.exp(-two_u))).to(torch.bfloat16)


def wrong_no_bias(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is left out."""
    return F.gelu(x.float(), approximate="tanh").to(torch.bfloat16)


def wrong_bias_after_gelu(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the bias is added after the activation."""
    return (F.gelu(x.float(), approximate="tanh") + b.float()).to(torch.bfloat16)


def wrong_missing_sqrt_2_over_pi(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the factor sqrt(2/pi) is left out of the tanh argument."""
    v = x.float() + b.float()
    return (0.5 * v * (1.0 + torch.tanh(v + 0.044715 * v * v * v))).to(torch.bfloat16)


def wrong_cubic_coefficient(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Planted slip: the cubic term's coefficient mistyped as 0.44715."""
    v = x.float() + b.float()
    inner = 0.7978845608028654 * (v + 0.44715 * v * v * v)
    return (0.5 * v * (1.0 + torch.tanh(inner))).to(torch.bfloat16)

"""Validation formulations of A03 swiglu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32 and then to bf16."""
    h = x.shape[-1] // 2
    gate, up = x[:, :h].double(), x[:, h:].double()
    return (gate * torch.sigmoid(gate) * up).float().to(torch.bfloat16)


def alt_exp_form(x: torch.Tensor) -> torch.Tensor:
    """Validation: silu(g) * u as g * u / (1 + exp(-g)) in fp32 (one division)."""
    h = x.shape[-1] // 2
    gate, up = x[:, :h].float(), x[:, h:].float()
    return ((gate * up) / (1.0 + torch.exp(-gate))).to(torch.bfloat16)


def wrong_swapped_halves(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: the halves swapped, silu(x[:, H:]) * x[:, :H]."""
    h = x.shape[-1] // 2
    return (F.silu(x[:, h:].float()) * x[:, :h].float()).to(torch.bfloat16)


def wrong_interleaved(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: gate and up read as interleaved columns, x[:, 0::2] and x[:, 1::2]."""
    return (F.silu(x[:, 0::2].float()) * x[:, 1::2].float()).to(torch.bfloat16)


def wrong_sigmoid_gate(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: sigmoid(g) * u (the factor g of silu left out)."""
    h = x.shape[-1] // 2
    return (torch.sigmoid(x[:, :h].float()) * x[:, h:].float()).to(torch.bfloat16)


def wrong_gelu_gate(x: torch.Tensor) -> torch.Tensor:
    """Planted slip: GELU in place of SiLU (GeGLU instead of SwiGLU)."""
    h = x.shape[-1] // 2
    return (F.gelu(x[:, :h].float()) * x[:, h:].float()).to(torch.bfloat16)

"""Validation formulations of A09 softcap for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Validation: the same formula in fp64, rounded to fp32."""
    return (cap * torch.tanh(x.double() / cap)).float()


def alt_exp_form(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Validation: tanh(u) = sign(u) * (1 - e) / (1 + e) with e = exp(-2|u|), u = x * (1 / cap),
    in fp32 (the exp-based evaluation the statement describes)."""
    u = x * (1.0 / cap)
    e = torch.exp(-2.0 * u.abs())
    return cap * torch.sign(u) * ((1.0 - e) / (1.0 + e))


def wrong_tanh_fp16_accuracy(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Planted slip: a tanh good to about 2^-11 relative (here tanh evaluated at fp16 precision), as
    a hardware tanh approximation gives."""
    return cap * torch.tanh((x / cap).half()).float()


def wrong_missing_divide(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Planted slip: the division by cap is left out, cap * tanh(x)."""
    return cap * torch.tanh(x)


def wrong_hard_clamp(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Planted slip: a hard clamp to [-cap, cap] instead of the soft cap."""
    return torch.clamp(x, -cap, cap)


def wrong_missing_scale(x: torch.Tensor, cap: float) -> torch.Tensor:
    """Planted slip: the multiplication by cap is left out, tanh(x / cap)."""
    return torch.tanh(x / cap)

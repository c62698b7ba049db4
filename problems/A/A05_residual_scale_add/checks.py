"""Validation formulations of A05 residual_scale_add for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Validation: exact in fp64 (alpha as its fp32 value), rounded to fp32, then to bf16: what a
    kernel with one fused multiply-add computes."""
    a = float(torch.tensor(alpha, dtype=torch.float32))
    return (r.double() + a * y.double()).float().to(torch.bfloat16)


def alt_addcmul_fp32(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Validation: one fp32 addcmul over fp32 copies (alpha as a 0-d fp32 tensor), rounded once."""
    a = torch.tensor(alpha, dtype=torch.float32)
    return torch.addcmul(r.float(), y.float(), a).to(torch.bfloat16)


def wrong_no_alpha(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Planted slip: the branch is added unscaled."""
    return (r.float() + y.float()).to(torch.bfloat16)


def wrong_alpha_on_residual(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Planted slip: the scale is applied to the residual instead of the branch."""
    return (alpha * r.float() + y.float()).to(torch.bfloat16)


def wrong_divide_by_alpha(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Planted slip: the branch divided by alpha (the scale read as a divisor)."""
    return (r.float() + y.float() / alpha).to(torch.bfloat16)


def wrong_residual_only(r: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    """Planted slip: the branch is lost (the residual is copied through)."""
    return r.clone()

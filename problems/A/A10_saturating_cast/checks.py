"""Validation formulations of A10 saturating_cast for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_minmax(x: torch.Tensor, s: float) -> torch.Tensor:
    """Validation: the fp32 product bounded by minimum/maximum against 0-d fp32 tensors, then cast."""
    hi = torch.tensor(448.0, dtype=torch.float32)
    return torch.maximum(torch.minimum(x * torch.tensor(s, dtype=torch.float32), hi), -hi).to(torch.bfloat16)


def _bf16_rne_bits(v: torch.Tensor) -> torch.Tensor:
    """fp32 -> bf16 by integer round-to-nearest-even on the bit pattern (finite inputs)."""
    u = v.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (u >> 16) & 1
    r = ((u + 0x7FFF + lsb) >> 16) & 0xFFFF
    return r.to(torch.int32).to(torch.int16).view(torch.bfloat16)


def alt_bit_rounding(x: torch.Tensor, s: float) -> torch.Tensor:
    """Validation: the clamp by comparisons and the bf16 rounding done on the bits (round to nearest
    even, as a kernel without a conversion instruction would)."""
    p = x * s
    p = torch.where(p > 448.0, torch.full_like(p, 448.0), p)
    p = torch.where(p < -448.0, torch.full_like(p, -448.0), p).contiguous()
    return _bf16_rne_bits(p).reshape(x.shape)


def wrong_truncating_cast(x: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: the conversion truncates (drops the low 16 bits) instead of rounding."""
    p = torch.clamp(x * s, -448.0, 448.0).contiguous()
    return (p.view(torch.int32) >> 16).to(torch.int16).view(torch.bfloat16).reshape(x.shape)


def wrong_e5m2_bound(x: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: the e5m2 range (57344) instead of e4m3's 448."""
    return torch.clamp(x * s, -57344.0, 57344.0).to(torch.bfloat16)


def wrong_upper_clamp_only(x: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: only the upper bound is applied."""
    return torch.clamp(x * s, max=448.0).to(torch.bfloat16)


def wrong_divide_by_scale(x: torch.Tensor, s: float) -> torch.Tensor:
    """Planted slip: x / s instead of x * s."""
    return torch.clamp(x / s, -448.0, 448.0).to(torch.bfloat16)

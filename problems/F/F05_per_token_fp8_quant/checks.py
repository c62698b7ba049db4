"""Validation formulations of F05 per_token_fp8_quant for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_chunked(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: rows in chunks of 7, the amax as a running max over column blocks of 96, the
    scale divided in fp64 and rounded to fp32, the quotient in fp32."""
    qs, ss = [], []
    for xc in torch.split(x, 7):
        amax = torch.zeros(xc.shape[0], 1, dtype=torch.float64, device=x.device)
        for blk in torch.split(xc.double().abs(), 96, dim=1):
            amax = torch.maximum(amax, blk.amax(dim=1, keepdim=True))
        sc = (amax / FP8_MAX).clamp(min=MIN_SCALE).float()
        qs.append((xc.float() / sc).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn))
        ss.append(sc)
    return torch.cat(qs), torch.cat(ss)


def wrong_amax_signed(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the row max instead of the max of |x|; negative values beyond it saturate."""
    s = (x.amax(dim=-1, keepdim=True).float() / FP8_MAX).clamp_(min=MIN_SCALE)
    return (x.float() / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def wrong_scale_bf16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the scale computed in x's dtype (bf16), so s is off by up to 2^-9."""
    s = (x.abs().amax(dim=-1, keepdim=True) / FP8_MAX).float()
    return (x.float() / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def wrong_scale_inverse(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: q right, but the quantization multiplier 448 / amax stored as the scale
    (scale vs inverse-scale convention)."""
    inv = FP8_MAX / x.abs().amax(dim=-1, keepdim=True).float()
    return (x.float() * inv).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), inv


def wrong_fnuz_max(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the range of float8_e4m3fnuz (240, AMD's fp8) instead of e4m3fn's 448."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / 240.0).clamp_(min=MIN_SCALE)
    return (x.float() / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s

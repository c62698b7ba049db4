"""Validation formulations of F10 transpose_cast_fp8 for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64_blocks(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Validation: 64 x 64 tiles, each multiplied in fp64, saturated, cast and stored transposed."""
    m, n = x.shape
    out = torch.empty(n, m, dtype=torch.float8_e4m3fn, device=x.device)
    for i in range(0, m, 64):
        for j in range(0, n, 64):
            tile = (x[i:i + 64, j:j + 64].double() * scale).clamp(-FP8_MAX, FP8_MAX)
            out[j:j + 64, i:i + 64] = tile.t().to(torch.float8_e4m3fn)
    return out


def wrong_scale_after_cast(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Planted slip: cast to e4m3 first, scale after (then cast again for the output): the small
    values lose their precision in the first cast (e4m3 subnormals step 2^-9)."""
    q = x.float().clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (q.float() * scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).t().contiguous()


def wrong_nonsaturating(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Planted slip: no clamp before the (non-saturating) cast: values beyond 464 become NaN."""
    return (x.float() * scale).to(torch.float8_e4m3fn).t().contiguous()


def wrong_reshape_not_transpose(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Planted slip: the [M, N] result reshaped to [N, M] instead of transposed."""
    m, n = x.shape
    return (x.float() * scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).reshape(n, m)


def wrong_divide_scale(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Planted slip: divided by the scale (the dequantization direction) instead of multiplied."""
    return (x.float() / scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).t().contiguous()

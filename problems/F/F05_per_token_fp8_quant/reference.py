"""Reference and eager baseline for F05 per_token_fp8_quant:
s[t] = max(amax_t / 448, 1 / (448 * 512)) with amax_t = max |x[t, :]|, q = e4m3(x / s), saturated."""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (448.0 * 512.0)  # floor of the scale (only an all-zero row reaches it)


def reference(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
    """Readable reference, destination-passing: exact amax, the scale rounded once to fp32, the
    quotient x / s in fp32 (IEEE division) clamped to +-448, one rounding to e4m3 (nearest even)."""
    amax = x.double().abs().amax(dim=-1, keepdim=True)
    scale = torch.clamp(amax / FP8_MAX, min=MIN_SCALE).float()
    s.copy_(scale)
    q.copy_((x.float() / scale).clamp(-FP8_MAX, FP8_MAX))


def amax_div(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: row amax, fp32 scale, fp32 division, saturating clamp, cast."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / FP8_MAX).clamp_(min=MIN_SCALE)
    q = (x.float() / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q, s

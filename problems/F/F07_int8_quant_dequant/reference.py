"""Reference and eager baseline for F07 int8_quant_dequant:
s[t] = max(amax_t / 127, 1 / (127 * 512)), q = clamp(round_half_even(x / s), -127, 127),
xdq = bf16(q * s)."""
import torch

INT8_MAX = 127.0  # symmetric range: -127..127 (-128 unused)
MIN_SCALE = 1.0 / (127.0 * 512.0)  # floor of the scale (only an all-zero row reaches it)


def reference(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor, xdq: torch.Tensor) -> None:
    """Readable reference, destination-passing: exact amax, the scale rounded once to fp32, x / s in
    fp32 (IEEE division), round half to even, clamp; q * s in fp32, rounded to bf16."""
    scale = torch.clamp(x.double().abs().amax(dim=-1, keepdim=True) / INT8_MAX, min=MIN_SCALE).float()
    qv = torch.round(x.float() / scale).clamp(-INT8_MAX, INT8_MAX)
    s.copy_(scale)
    q.copy_(qv)
    xdq.copy_(qv * scale)


def amax_round(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: row amax, fp32 scale, fp32 division, round, clamp, cast; then q * s."""
    s = (x.abs().amax(dim=-1, keepdim=True).float() / INT8_MAX).clamp_(min=MIN_SCALE)
    qf = torch.round(x.float() / s).clamp_(-INT8_MAX, INT8_MAX)
    return qf.to(torch.int8), s, (qf * s).to(x.dtype)

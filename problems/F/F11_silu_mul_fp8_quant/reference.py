"""Reference and eager baselines for F11 silu_mul_fp8_quant:
y = silu(g) * u in fp32 (g = x[:, :H], u = x[:, H:]), s[t] = max(amax_t(|y|) / 448, 1 / (448 * 512)),
q = e4m3(clamp(y / s, -448, 448))."""
import torch
import torch.nn.functional as F

FP8_MAX = 448.0  # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (448.0 * 512.0)  # floor of the scale (only an all-zero row reaches it)


def _quant(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    s = (y.abs().amax(dim=-1, keepdim=True).float() / FP8_MAX).clamp_(min=MIN_SCALE)
    return (y.float() / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def reference(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 SwiGLU (no bf16 rounding of y), exact amax of
    the fp32 y, the scale rounded once to fp32, y / s in fp32, saturate, one rounding to e4m3."""
    h = x.shape[1] // 2
    g, u = x[:, :h].float(), x[:, h:].float()
    y = F.silu(g) * u
    amax = y.double().abs().amax(dim=-1, keepdim=True)
    scale = torch.clamp(amax / FP8_MAX, min=MIN_SCALE).float()
    s.copy_(scale)
    q.copy_((y / scale).clamp(-FP8_MAX, FP8_MAX))


def swiglu_bf16_then_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: the unfused model code: SwiGLU in bf16 (y rounded to bf16), then per-token
    quantization of the bf16 y."""
    h = x.shape[1] // 2
    return _quant(F.silu(x[:, :h]) * x[:, h:])


def swiglu_fp32_then_quant(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: SwiGLU in fp32, then per-token quantization of the fp32 y."""
    h = x.shape[1] // 2
    return _quant(F.silu(x[:, :h].float()) * x[:, h:].float())

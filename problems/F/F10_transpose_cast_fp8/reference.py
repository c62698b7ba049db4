"""Reference and eager baselines for F10 transpose_cast_fp8:
xt[n, m] = e4m3(clamp(x[m, n] * scale, -448, 448)), the scale applied before the cast."""
import torch

FP8_MAX = 448.0  # largest finite float8_e4m3fn


def reference(x: torch.Tensor, xt: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: multiply in fp32, saturate to +-448, round to e4m3
    (nearest even), write transposed."""
    xt.copy_((x.float() * scale).clamp(-FP8_MAX, FP8_MAX).t())


def cast_then_transpose(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: scale, saturate and cast in x's layout, then transpose the fp8 tensor."""
    return (x.float() * scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).t().contiguous()


def transpose_then_cast(x: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: transpose the bf16 tensor first, then scale, saturate and cast."""
    return (x.t().contiguous().float() * scale).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)

"""Reference and eager baseline for F06 per_block_fp8_quant: for each
128x128 block b of x (the last ones partial), s[b] = max(amax_b / 448, 1 / (448 * 512)) in fp32,
q = e4m3(clamp(x / s[b], -448, 448))."""
import torch
import torch.nn.functional as F

FP8_MAX = 448.0  # largest finite float8_e4m3fn
MIN_SCALE = 1.0 / (448.0 * 512.0)  # floor of the scale (only an all-zero block reaches it)
BLOCK = 128


def _grid(x: torch.Tensor) -> tuple[int, int]:
    return -(-x.shape[0] // BLOCK), -(-x.shape[1] // BLOCK)


def _expand(s: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """The per-block scale broadcast to every element of an [m, n] matrix."""
    return s.repeat_interleave(BLOCK, 0)[:m].repeat_interleave(BLOCK, 1)[:, :n]


def reference(x: torch.Tensor, q: torch.Tensor, s: torch.Tensor) -> None:
    """Readable reference, destination-passing: zero-pad to whole blocks (zeros do not change a
    max of |x|), exact block amax, the scale rounded once to fp32, x / s in fp32 (IEEE division),
    clamp, one rounding to e4m3 (nearest even)."""
    m, n = x.shape
    mb, nb = _grid(x)
    xp = F.pad(x.double(), (0, nb * BLOCK - n, 0, mb * BLOCK - m))
    amax = xp.abs().view(mb, BLOCK, nb, BLOCK).amax(dim=(1, 3))
    scale = torch.clamp(amax / FP8_MAX, min=MIN_SCALE).float()
    s.copy_(scale)
    q.copy_((x.float() / _expand(scale, m, n)).clamp(-FP8_MAX, FP8_MAX))


def blocked_view(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: pad, view as [MB, 128, NB, 128], block amax, fp32 division, clamp, cast."""
    m, n = x.shape
    mb, nb = _grid(x)
    xp = F.pad(x, (0, nb * BLOCK - n, 0, mb * BLOCK - m)).view(mb, BLOCK, nb, BLOCK)
    s = (xp.abs().amax(dim=(1, 3)).float() / FP8_MAX).clamp_(min=MIN_SCALE)
    q = (xp.float() / s[:, None, :, None]).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return q.view(mb * BLOCK, nb * BLOCK)[:m, :n], s

"""Validation formulations of F06 per_block_fp8_quant for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_blocks(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: block by block over slices (no padding), the amax in Python floats."""
    m, n = x.shape
    mb, nb = _grid(x)
    q = torch.empty(m, n, dtype=torch.float8_e4m3fn, device=x.device)
    s = torch.empty(mb, nb, dtype=torch.float32, device=x.device)
    for i in range(mb):
        for j in range(nb):
            blk = x[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK].float()
            s[i, j] = max(float(blk.abs().max()) / FP8_MAX, MIN_SCALE)
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (blk / s[i, j]).clamp(-FP8_MAX, FP8_MAX)
    return q, s


def wrong_amax_signed(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the block max instead of the max of |x|; negative values beyond it saturate."""
    m, n = x.shape
    mb, nb = _grid(x)
    xp = F.pad(x.float(), (0, nb * BLOCK - n, 0, mb * BLOCK - m), value=float("-inf"))
    s = (xp.view(mb, BLOCK, nb, BLOCK).amax(dim=(1, 3)) / FP8_MAX).clamp_(min=MIN_SCALE)
    return (x.float() / _expand(s, m, n)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def wrong_scale_bf16(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the scale computed in x's dtype (bf16), off by up to 2^-9."""
    m, n = x.shape
    mb, nb = _grid(x)
    xp = F.pad(x, (0, nb * BLOCK - n, 0, mb * BLOCK - m)).view(mb, BLOCK, nb, BLOCK)
    s = (xp.abs().amax(dim=(1, 3)) / FP8_MAX).float()
    return (x.float() / _expand(s, m, n)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s


def wrong_scale_inverse(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: q right, but the multiplier 448 / amax stored as the scale."""
    m, n = x.shape
    mb, nb = _grid(x)
    xp = F.pad(x, (0, nb * BLOCK - n, 0, mb * BLOCK - m)).view(mb, BLOCK, nb, BLOCK)
    inv = FP8_MAX / xp.abs().amax(dim=(1, 3)).float()
    return (x.float() * _expand(inv, m, n)).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), inv

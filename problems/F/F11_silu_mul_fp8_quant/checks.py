"""Validation formulations of F11 silu_mul_fp8_quant for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_chunked(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: rows in chunks of 3, the amax as a running max over column blocks of 200 (the
    elementwise fp32 arithmetic is the rule's: another exp moves an e4m3 rounding now and then)."""
    h = x.shape[1] // 2
    qs, ss = [], []
    for xc in torch.split(x, 3):
        g, u = xc[:, :h].float(), xc[:, h:].float()
        y = F.silu(g) * u
        amax = torch.zeros(xc.shape[0], 1, device=x.device)
        for blk in torch.split(y.abs(), 200, dim=1):
            amax = torch.maximum(amax, blk.amax(dim=1, keepdim=True))
        sc = (amax / FP8_MAX).clamp(min=MIN_SCALE)
        qs.append((y / sc).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn))
        ss.append(sc)
    return torch.cat(qs), torch.cat(ss)


def wrong_swapped_halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: silu applied to the second half (up) and multiplied by the first (gate)."""
    h = x.shape[1] // 2
    return _quant(F.silu(x[:, h:].float()) * x[:, :h].float())


def wrong_sigmoid_gate(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: sigmoid(g) * u (a GLU gate) instead of silu(g) * u."""
    h = x.shape[1] // 2
    return _quant(torch.sigmoid(x[:, :h].float()) * x[:, h:].float())


def wrong_scale_inverse(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: q right, the multiplier 448 / amax stored as the scale."""
    h = x.shape[1] // 2
    y = F.silu(x[:, :h].float()) * x[:, h:].float()
    inv = FP8_MAX / y.abs().amax(dim=-1, keepdim=True)
    return (y * inv).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), inv


def wrong_scale_from_input(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the scale from the amax of the input row x instead of the SwiGLU output y."""
    h = x.shape[1] // 2
    y = F.silu(x[:, :h].float()) * x[:, h:].float()
    s = (x.abs().amax(dim=-1, keepdim=True).float() / FP8_MAX).clamp_(min=MIN_SCALE)
    return (y / s).clamp_(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn), s

"""Validation formulations of E01 rope_neox for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
             cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the same rotation in fp64, one rounding to bf16."""
    cos, sin = _cos_sin(positions, cos_sin_cache.double())
    out = []
    for x in (q, k):
        x1, x2 = x.double().chunk(2, dim=-1)
        out.append(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype))
    return out[0], out[1]


def alt_complex(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: each pair as the complex number x[i] + j*x[i+D/2] times cos + j*sin (complex64)."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    rot = torch.complex(cos, sin)
    out = []
    for x in (q, k):
        x1, x2 = x.float().chunk(2, dim=-1)
        z = torch.complex(x1, x2) * rot
        out.append(torch.cat((z.real, z.imag), dim=-1).to(x.dtype))
    return out[0], out[1]


def wrong_interleaved(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                      cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: GPT-J pairing (x[2i], x[2i+1]) instead of the half split."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    out = []
    for x in (q, k):
        x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
        out.append(torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2).to(x.dtype))
    return out[0], out[1]


def wrong_sin_sign(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                   cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: rotate_half written as cat(x2, -x1), i.e. the rotation by -theta."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    out = []
    for x in (q, k):
        x1, x2 = x.float().chunk(2, dim=-1)
        out.append(torch.cat((x1 * cos + x2 * sin, x2 * cos - x1 * sin), dim=-1).to(x.dtype))
    return out[0], out[1]


def wrong_ignore_positions(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                           cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: token t rotated by table row t % P (the token index taken as its position)."""
    rows = torch.arange(q.shape[0], device=q.device) % cos_sin_cache.shape[0]
    return alt_fp64(q, k, rows, cos_sin_cache)


def wrong_repeat_interleave_table(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                                  cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: styles mixed: the cos/sin rows expanded GPT-J style (repeat_interleave: element j
    uses frequency j // 2) but rotated NeoX style (rotate_half)."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    cos, sin = cos.repeat_interleave(2, dim=-1), sin.repeat_interleave(2, dim=-1)
    return ((q.float() * cos + _rotate_half(q.float()) * sin).to(q.dtype),
            (k.float() * cos + _rotate_half(k.float()) * sin).to(k.dtype))

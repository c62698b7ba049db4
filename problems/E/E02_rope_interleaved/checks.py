"""Validation formulations of E02 rope_interleaved for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
             cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the same rotation in fp64, one rounding to bf16."""
    cos, sin = _cos_sin(positions, cos_sin_cache.double())
    return _rope_pairs(q.double(), cos, sin).to(q.dtype), _rope_pairs(k.double(), cos, sin).to(k.dtype)


def alt_matrix(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: each pair times its 2x2 rotation matrix [[c, -s], [s, c]] (fp32 matmul per pair)."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    rot = torch.stack((torch.stack((cos, -sin), dim=-1), torch.stack((sin, cos), dim=-1)), dim=-2)
    out = []
    for x in (q, k):
        pairs = x.float().reshape(*x.shape[:-1], -1, 2, 1)
        out.append((rot @ pairs).flatten(-3).to(x.dtype))
    return out[0], out[1]


def wrong_neox(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
               cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the half-split pairing (x[i], x[i + D/2]) of E01 instead of adjacent pairs."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    out = []
    for x in (q, k):
        x1, x2 = x.float().chunk(2, dim=-1)
        out.append(torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype))
    return out[0], out[1]


def wrong_sin_sign(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                   cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: the rotation by -theta (the pair rotated with the sin terms' signs swapped)."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    return _rope_pairs(q.float(), cos, -sin).to(q.dtype), _rope_pairs(k.float(), cos, -sin).to(k.dtype)


def wrong_ignore_positions(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                           cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: token t rotated by table row t % P (the token index taken as its position)."""
    rows = torch.arange(q.shape[0], device=q.device) % cos_sin_cache.shape[0]
    return alt_fp64(q, k, rows, cos_sin_cache)


def wrong_cat_table(q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor,
                    cos_sin_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Wrong: styles mixed: the table expanded NeoX / Hugging Face style (cat(cos, cos): element j
    uses frequency j mod D/2) but rotated in adjacent pairs."""
    cos, sin = _cos_sin(positions, cos_sin_cache.float())
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)
    out = []
    for x in (q, k):
        xf = x.float()
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        rot = torch.stack((-x2, x1), dim=-1).flatten(-2)
        out.append((xf * cos + rot * sin).to(x.dtype))
    return out[0], out[1]

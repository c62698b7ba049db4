"""Validation formulations of E03 qkv_split_rope_cache for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64_loop(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                  k_cache: torch.Tensor, v_cache: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Correct: fp64 rope, token-by-token writes into the caches."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    q, k, v = _split(qkv, hq, hk)
    q_out = _rope(q, positions, cos_sin_cache, torch.float64).to(qkv.dtype)
    k_rot = _rope(k, positions, cos_sin_cache, torch.float64).to(qkv.dtype)
    n = positions.shape[1]
    for t in range(b * n):
        i, p = t // n, int(positions.reshape(-1)[t])
        k_cache[i, p] = k_rot[t]
        v_cache[i, p] = v[t]
    return q_out, k_cache, v_cache


def wrong_unroped_k(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                    k_cache: torch.Tensor, v_cache: torch.Tensor
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wrong: k written to the cache before the rotation (only q rotated)."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    q, k, v = _split(qkv, hq, hk)
    batch = torch.arange(b, device=qkv.device).unsqueeze(1)
    k_cache[batch, positions] = k.reshape(b, -1, hk, d)
    v_cache[batch, positions] = v.reshape(b, -1, hk, d)
    return _rope(q, positions, cos_sin_cache).to(qkv.dtype), k_cache, v_cache


def wrong_positions_as_arange(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                              k_cache: torch.Tensor, v_cache: torch.Tensor
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wrong: token l of a sequence assumed to sit at position l (rotation and cache row)."""
    b, n = positions.shape
    arange = torch.arange(n, device=positions.device).expand(b, n).contiguous()
    return split_rope_index_put(qkv, arange, cos_sin_cache, k_cache, v_cache)


def wrong_kv_swapped(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                     k_cache: torch.Tensor, v_cache: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wrong: the split offsets of k and v exchanged (v heads rotated into k_cache, k heads copied
    into v_cache)."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    t = qkv.shape[0]
    heads = qkv.view(t, -1, d)
    swapped = torch.cat((heads[:, :hq], heads[:, hq + hk:], heads[:, hq:hq + hk]), dim=1).reshape(t, -1)
    return split_rope_index_put(swapped, positions, cos_sin_cache, k_cache, v_cache)


def wrong_interleaved(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                      k_cache: torch.Tensor, v_cache: torch.Tensor
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Wrong: GPT-J (adjacent-pair) rotation instead of the half split."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    q, k, v = _split(qkv, hq, hk)
    cos, sin = cos_sin_cache.float()[positions.reshape(-1)].unsqueeze(1).chunk(2, dim=-1)

    def rope(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]
        return torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2).to(x.dtype)

    batch = torch.arange(b, device=qkv.device).unsqueeze(1)
    k_cache[batch, positions] = rope(k).view(b, -1, hk, d)
    v_cache[batch, positions] = v.reshape(b, -1, hk, d)
    return rope(q), k_cache, v_cache

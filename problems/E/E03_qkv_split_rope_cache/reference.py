"""Reference and eager baselines for E03 qkv_split_rope_cache.

qkv [B*L, (HQ + 2*HK)*D] is split into q, k, v heads; q and k are rotated NeoX style with the
table row of each token's position (E01's rule); q goes to the new output q_out, and k and v are
written into the caches [B, S, HK, D] at row positions[b, l] of their sequence b (in place).
Formulations other than the reference update the caches they are given in place and return
(q_out, k_cache, v_cache).
"""
import torch


def _split(qkv: torch.Tensor, hq: int, hk: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Views [T, HQ, D], [T, HK, D], [T, HK, D] of the fused rows."""
    t = qkv.shape[0]
    heads = qkv.view(t, hq + 2 * hk, -1)
    return heads[:, :hq], heads[:, hq:hq + hk], heads[:, hq + hk:]


def _rope(x: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
          dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """NeoX rotation of x [T, H, D] in `dtype` (positions flattened to [T])."""
    cs = cos_sin_cache.to(dtype).index_select(0, positions.reshape(-1)).unsqueeze(1)
    cos, sin = cs.chunk(2, dim=-1)
    x1, x2 = x.to(dtype).chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def reference(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
              k_cache: torch.Tensor, v_cache: torch.Tensor, q_out: torch.Tensor) -> None:
    """Readable reference: q_out is written, k_cache and v_cache are updated in place (fp32 rope,
    one rounding to bf16; the new rows written at the token positions of each sequence)."""
    b, s, hk, d = k_cache.shape
    hq = q_out.shape[1]
    q, k, v = _split(qkv, hq, hk)
    q_out.copy_(_rope(q, positions, cos_sin_cache))
    k_rot = _rope(k, positions, cos_sin_cache).to(k_cache.dtype).view(b, -1, hk, d)
    v_new = v.reshape(b, -1, hk, d)
    for i in range(b):
        k_cache[i, positions[i]] = k_rot[i]
        v_cache[i, positions[i]] = v_new[i]


def split_rope_index_put(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                         k_cache: torch.Tensor, v_cache: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: split views, rope as vLLM's native chain of ops (fp32 through the fp32
    table), one advanced-indexing write per cache (index_put_)."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    q, k, v = _split(qkv, hq, hk)
    cos, sin = cos_sin_cache[positions.reshape(-1)].unsqueeze(1).chunk(2, dim=-1)

    def rope(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)

    batch = torch.arange(b, device=qkv.device).unsqueeze(1)
    k_cache[batch, positions] = rope(k).view(b, -1, hk, d)
    v_cache[batch, positions] = v.reshape(b, -1, hk, d)
    return rope(q), k_cache, v_cache


def split_rope_index_copy(qkv: torch.Tensor, positions: torch.Tensor, cos_sin_cache: torch.Tensor,
                          k_cache: torch.Tensor, v_cache: torch.Tensor
                          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Eager baseline: Hugging Face style rotate_half rope, then index_copy_ of the new rows into
    the caches viewed as [B*S, HK, D] with flat row indices b*S + position."""
    b, s, hk, d = k_cache.shape
    hq = qkv.shape[1] // d - 2 * hk
    q, k, v = _split(qkv, hq, hk)
    cos, sin = cos_sin_cache[positions.reshape(-1)].unsqueeze(1).chunk(2, dim=-1)
    cos, sin = torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)

    def rope(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = torch.chunk(x, 2, dim=-1)
        return (x * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)

    rows = (positions + torch.arange(b, device=qkv.device).unsqueeze(1) * s).reshape(-1)
    k_cache.view(b * s, hk, d).index_copy_(0, rows, rope(k))
    v_cache.view(b * s, hk, d).index_copy_(0, rows, v)
    return rope(q), k_cache, v_cache

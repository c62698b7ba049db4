"""Reference and eager baselines for E05 decode_attention.

o[b, h] = softmax(scale * q[b, h] . k_cache[b, :, h // G]) @ v_cache[b, :, h // G] with
G = HQ / HK query heads per KV head (query head h reads KV head h // G), every one of the S cache
rows attended to; fp32 scores, softmax and accumulation, one rounding to bf16.
"""

import torch
import torch.nn.functional as F


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """q [HQ, D], k and v [S, HK, D] of one sequence -> o [HQ, D] in `dtype` (GQA: head h // G)."""
    hq, hk = q.shape[0], k.shape[1]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    kh = k.to(dtype).permute(1, 0, 2)[kv_head]  # [HQ, S, D]
    vh = v.to(dtype).permute(1, 0, 2)[kv_head]
    s = torch.einsum("hd,hsd->hs", q.to(dtype), kh) * scale
    p = torch.softmax(s, dim=-1)
    return torch.einsum("hs,hsd->hd", p, vh)


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, o: torch.Tensor,
              scale: float) -> None:
    """Readable reference, destination-passing: fp32 attention per sequence, one rounding."""
    for b in range(q.shape[0]):
        o[b].copy_(_attend(q[b], k_cache[b], v_cache[b], scale, torch.float32))


def sdpa_gqa(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: F.scaled_dot_product_attention with one query token and enable_gqa, on
    [B, H, S, D] views of the caches."""
    out = F.scaled_dot_product_attention(q.unsqueeze(2), k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                         scale=scale, enable_gqa=True)
    return out.squeeze(2)


def sdpa_grouped_queries(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         scale: float) -> torch.Tensor:
    """Eager baseline: the G query heads that share a KV head taken as G query tokens of that
    head (flash-decoding's GQA packing), so SDPA sees plain multi-head attention."""
    b, hq, d = q.shape
    hk = k_cache.shape[2]
    out = F.scaled_dot_product_attention(q.view(b, hk, hq // hk, d), k_cache.transpose(1, 2),
                                         v_cache.transpose(1, 2), scale=scale)
    return out.reshape(b, hq, d)

"""Reference and eager baselines for E06 paged_decode_attention.

Sequence b has n = seq_lens[b] valid tokens; token i of it lives in physical block
block_table[b, i // BS] at offset i % BS of the caches [NB, BS, HK, D]. Its one query token
attends to those n keys (GQA: query head h reads KV head h // G, G = HQ / HK):
o[b, h] = softmax(scale * q[b, h] . K_b[:, h // G]) @ V_b[:, h // G]; fp32, one rounding to bf16.
"""

import torch
import torch.nn.functional as F


def _gather(cache: torch.Tensor, table_row: torch.Tensor, n: int) -> torch.Tensor:
    """The first n token rows [n, HK, D] of one sequence, in logical order."""
    bs = cache.shape[1]
    blocks = table_row[:(n + bs - 1) // bs].long()
    return cache[blocks].reshape(-1, *cache.shape[2:])[:n]


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dtype: torch.dtype) -> torch.Tensor:
    """q [HQ, D], k and v [n, HK, D] -> o [HQ, D] in `dtype` (GQA: head h // G)."""
    hq, hk = q.shape[0], k.shape[1]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    kh = k.to(dtype).permute(1, 0, 2)[kv_head]
    vh = v.to(dtype).permute(1, 0, 2)[kv_head]
    p = torch.softmax(torch.einsum("hd,hsd->hs", q.to(dtype), kh) * scale, dim=-1)
    return torch.einsum("hs,hsd->hd", p, vh)


def reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
              seq_lens: torch.Tensor, o: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: per sequence, gather its n valid rows through the
    block table and attend in fp32; one rounding to bf16."""
    for b in range(q.shape[0]):
        n = int(seq_lens[b])
        k, v = _gather(k_cache, block_table[b], n), _gather(v_cache, block_table[b], n)
        o[b].copy_(_attend(q[b], k, v, scale, torch.float32))


def gather_sdpa_masked(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (vLLM-style chain of ops): gather every sequence's MB blocks into a
    contiguous [B, MB*BS, HK, D] tensor, then SDPA with a key-padding mask from seq_lens."""
    b, mb = block_table.shape
    bs, hk, d = k_cache.shape[1:]
    idx = block_table.long()
    k = k_cache[idx].view(b, mb * bs, hk, d).transpose(1, 2)
    v = v_cache[idx].view(b, mb * bs, hk, d).transpose(1, 2)
    mask = torch.arange(mb * bs, device=q.device) < seq_lens.unsqueeze(1)
    out = F.scaled_dot_product_attention(q.unsqueeze(2), k, v, attn_mask=mask[:, None, None, :],
                                         scale=scale, enable_gqa=True)
    return out.squeeze(2)


def gather_sdpa_per_seq(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                        seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: one SDPA call per sequence on exactly its valid rows (gathered through the
    block table), with the G query heads of a KV head packed as G query tokens."""
    bsz, hq, d = q.shape
    hk = k_cache.shape[2]
    out = torch.empty_like(q)
    for b, n in enumerate(seq_lens.tolist()):
        k = _gather(k_cache, block_table[b], n).transpose(0, 1)
        v = _gather(v_cache, block_table[b], n).transpose(0, 1)
        out[b] = F.scaled_dot_product_attention(q[b].view(hk, hq // hk, d), k, v, scale=scale).reshape(hq, d)
    return out

"""Reference and eager baselines for E10 sliding_window_attention.

q, o are [B, S, HQ, D]; k, v are [B, S, HK, D]; query head h reads KV head h // G (G = HQ / HK).
o[b, i, h] = sum_{i - window < j <= i} softmax_j(scale * q[b, i, h] . k[b, j, h // G]) v[b, j, h // G];
fp32 math, one rounding to bf16.
"""
import math

import torch
import torch.nn.functional as F


def _band(s_len: int, window: int, device: torch.device, lo: int = 0, hi: int = 0) -> torch.Tensor:
    """[S, S] bool, True where key j is visible to query i: i - window - lo < j <= i + hi."""
    i = torch.arange(s_len, device=device).view(-1, 1)
    j = torch.arange(s_len, device=device).view(1, -1)
    return (j <= i + hi) & (j > i - window - lo)


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, visible: torch.Tensor,
            dtype: torch.dtype, kv_head: torch.Tensor | None = None) -> torch.Tensor:
    """One sequence: q [S, HQ, D], k and v [S, HK, D] -> o [S, HQ, D] in `dtype`."""
    hq, hk = q.shape[1], k.shape[1]
    if kv_head is None:
        kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    qh = q.to(dtype).transpose(0, 1)
    kh, vh = k.to(dtype).transpose(0, 1)[kv_head], v.to(dtype).transpose(0, 1)[kv_head]
    s = torch.einsum("hid,hjd->hij", qh, kh) * scale
    p = torch.softmax(s.masked_fill(~visible, -math.inf), dim=-1)
    return torch.einsum("hij,hjd->hid", p, vh).transpose(0, 1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, scale: float,
              window: int) -> None:
    """Readable reference, destination-passing: per sequence, fp32 scores with the band mask
    (i - window < j <= i), softmax, weighted sum; one rounding to bf16."""
    visible = _band(q.shape[1], window, q.device)
    for b in range(q.shape[0]):
        o[b].copy_(_attend(q[b], k[b], v[b], scale, visible, torch.float32))


def sdpa_window_mask(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int) -> torch.Tensor:
    """Eager baseline: F.scaled_dot_product_attention with the [S, S] boolean band as attn_mask and
    enable_gqa, on [B, H, S, D] views (dense: every pair is computed, the band masks it)."""
    visible = _band(q.shape[1], window, q.device)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=visible, scale=scale, enable_gqa=True)
    return out.transpose(1, 2)


def sdpa_window_chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int) -> torch.Tensor:
    """Eager baseline: the queries in chunks of `window`, each chunk attending to the 2*window keys
    that end with it (the chunk and the one before), with a [window, 2*window] band mask; one
    batched SDPA call over all chunks (about twice the band's work instead of S/window times)."""
    b, s_len, hq, d = q.shape
    w = window
    nc = -(-s_len // w)
    pad_end = nc * w - s_len
    qc = F.pad(q, (0, 0, 0, 0, 0, pad_end)).view(b, nc, w, hq, d)
    kp = F.pad(k, (0, 0, 0, 0, w, pad_end))  # w zero rows in front: chunk c sees rows c*w .. c*w + 2w
    vp = F.pad(v, (0, 0, 0, 0, w, pad_end))
    kc = kp.unfold(1, 2 * w, w).permute(0, 1, 4, 2, 3)  # [B, nc, 2w, HK, D]
    vc = vp.unfold(1, 2 * w, w).permute(0, 1, 4, 2, 3)
    r = torch.arange(w, device=q.device).view(-1, 1)
    t = torch.arange(2 * w, device=q.device).view(1, -1)
    c = torch.arange(nc, device=q.device).view(-1, 1, 1)
    visible = (t > r) & (t <= r + w) & (c * w + t - w >= 0)  # [nc, w, 2w]; key j = c*w + t - w
    out = F.scaled_dot_product_attention(qc.permute(0, 1, 3, 2, 4), kc.permute(0, 1, 3, 2, 4),
                                         vc.permute(0, 1, 3, 2, 4), attn_mask=visible.unsqueeze(1),
                                         scale=scale, enable_gqa=True)  # [B, nc, HQ, w, D]
    return out.permute(0, 1, 3, 2, 4).reshape(b, nc * w, hq, d)[:, :s_len]

"""Reference and eager baselines for E07 causal_prefill_attention.

q, k, v, o are [B, S, H, D] (flash-attention's layout). For every batch b, head h and query i:
o[b, i, h] = sum_{j <= i} softmax_j(scale * q[b, i, h] . k[b, j, h]) v[b, j, h]
(causal: query i sees keys 0..i, itself included); fp32 math, one rounding to bf16.
"""
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def _causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dtype: torch.dtype,
            diagonal: int = 1) -> torch.Tensor:
    """One sequence: q, k, v [S, H, D] -> o [S, H, D] in `dtype`; keys j < i + diagonal visible."""
    s_len = q.shape[0]
    qh, kh, vh = (x.to(dtype).transpose(0, 1) for x in (q, k, v))  # [H, S, D]
    s = torch.einsum("hid,hjd->hij", qh, kh) * scale
    masked = torch.ones(s_len, s_len, dtype=torch.bool, device=q.device).triu(diagonal)
    p = torch.softmax(s.masked_fill(masked, -math.inf), dim=-1)
    return torch.einsum("hij,hjd->hid", p, vh).transpose(0, 1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: per sequence, fp32 scores with the causal mask,
    softmax, weighted sum; one rounding to bf16."""
    for b in range(q.shape[0]):
        o[b].copy_(_causal(q[b], k[b], v[b], scale, torch.float32))


def sdpa_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: F.scaled_dot_product_attention with is_causal on [B, H, S, D] views
    (PyTorch picks the backend)."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         is_causal=True, scale=scale)
    return out.transpose(1, 2)


def _sdpa_with(backend: SDPBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    with sdpa_kernel(backend):
        return sdpa_causal(q, k, v, scale)


def sdpa_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the FlashAttention-2 backend."""
    return _sdpa_with(SDPBackend.FLASH_ATTENTION, q, k, v, scale)


def sdpa_efficient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the memory-efficient (xFormers) backend."""
    return _sdpa_with(SDPBackend.EFFICIENT_ATTENTION, q, k, v, scale)


def sdpa_cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the cuDNN attention backend."""
    return _sdpa_with(SDPBackend.CUDNN_ATTENTION, q, k, v, scale)

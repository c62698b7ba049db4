"""Reference and eager baselines for E12 cross_attention_short_kv.

q, o are [B, SQ, H, D]; k, v are [B, SK, H, D] (SK = 77 text tokens). No mask:
o[b, i, h] = sum_j softmax_j(scale * q[b, i, h] . k[b, j, h]) v[b, j, h]; fp32 math, one
rounding to bf16.
"""

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dtype: torch.dtype,
            dim: int = -1) -> torch.Tensor:
    """One sequence: q [SQ, H, D], k and v [SK, H, D] -> o [SQ, H, D] in `dtype` (softmax along `dim`)."""
    qh, kh, vh = (x.to(dtype).transpose(0, 1) for x in (q, k, v))
    p = torch.softmax(torch.einsum("hid,hjd->hij", qh, kh) * scale, dim=dim)
    return torch.einsum("hij,hjd->hid", p, vh).transpose(0, 1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: per batch element, fp32 scores, softmax over the
    77 keys, weighted sum; one rounding to bf16."""
    for b in range(q.shape[0]):
        o[b].copy_(_attend(q[b], k[b], v[b], scale, torch.float32))


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: F.scaled_dot_product_attention on [B, H, S, D] views (PyTorch picks the
    backend), as diffusers' attention processor calls it."""
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scale=scale)
    return out.transpose(1, 2)


def _sdpa_with(backend: SDPBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    with sdpa_kernel(backend):
        return sdpa(q, k, v, scale)


def sdpa_flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the FlashAttention-2 backend."""
    return _sdpa_with(SDPBackend.FLASH_ATTENTION, q, k, v, scale)


def sdpa_efficient(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the memory-efficient (xFormers) backend."""
    return _sdpa_with(SDPBackend.EFFICIENT_ATTENTION, q, k, v, scale)


def sdpa_cudnn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): SDPA restricted to the cuDNN attention backend."""
    return _sdpa_with(SDPBackend.CUDNN_ATTENTION, q, k, v, scale)

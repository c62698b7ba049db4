"""Reference and eager baselines for E08 attention_probs.

p[b, h, i, j] = softmax_j(scale * q[b, h, i] . k[b, h, j] with keys j > i masked out), written
as a dense [B, H, S, S] tensor (exact zeros above the diagonal); fp32 math, one rounding to bf16.
"""
import math

import torch


def _probs(q: torch.Tensor, k: torch.Tensor, scale: float, dtype: torch.dtype, diagonal: int = 1,
           dim: int = -1) -> torch.Tensor:
    """One sequence: q, k [H, S, D] -> p [H, S, S] in `dtype`; keys j < i + diagonal visible."""
    s_len = q.shape[1]
    s = torch.einsum("hid,hjd->hij", q.to(dtype), k.to(dtype)) * scale
    masked = torch.ones(s_len, s_len, dtype=torch.bool, device=q.device).triu(diagonal)
    return torch.softmax(s.masked_fill(masked, -math.inf), dim=dim)


def reference(q: torch.Tensor, k: torch.Tensor, p: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: per sequence, fp32 scores, causal mask, softmax
    over the keys; one rounding to bf16."""
    for b in range(q.shape[0]):
        p[b].copy_(_probs(q[b], k[b], scale, torch.float32))


def _mask(s_len: int, device: torch.device) -> torch.Tensor:
    return torch.ones(s_len, s_len, dtype=torch.bool, device=device).triu(1)


def bmm_fp32_out_softmax(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline (CUDA): bf16 tensor-core bmm with fp32 output (out_dtype), scale, causal
    masked_fill, fp32 softmax, cast to bf16."""
    b, h, s_len, d = q.shape
    s = torch.bmm(q.reshape(b * h, s_len, d), k.reshape(b * h, s_len, d).transpose(1, 2), out_dtype=torch.float32)
    s = (s * scale).masked_fill_(_mask(s_len, q.device), -math.inf)
    return torch.softmax(s, dim=-1).to(q.dtype).view(b, h, s_len, s_len)


def matmul_fp32_softmax(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: q and k upcast to fp32, matmul, scale, causal masked_fill, softmax, cast
    to bf16 (Hugging Face's eager attention with the logits kept in fp32)."""
    s = torch.matmul(q.float(), k.float().transpose(-1, -2)) * scale
    s = s.masked_fill_(_mask(q.shape[2], q.device), -math.inf)
    return torch.softmax(s, dim=-1).to(q.dtype)

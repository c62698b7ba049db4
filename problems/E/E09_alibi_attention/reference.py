"""Reference and eager baselines for E09 alibi_attention.

q, k, v, o are [B, S, H, D]. For head h with BLOOM's slope m_h (alibi_slopes below):
o[b, i, h] = sum_j softmax_j(scale * q[b, i, h] . k[b, j, h] - m_h * |i - j|) v[b, j, h]
over all keys j (non-causal); fp32 math, one rounding to bf16.
"""
import math

import torch
import torch.nn.functional as F


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """BLOOM's ALiBi slopes as fp32 [H]: for the largest power of two n <= H, slopes
    (2^(-8/n))^k, k = 1..n; if H > n, the extra heads take (2^(-4/n))^k for odd k = 1, 3, ...,
    2(H - n) - 1. Computed in fp64 and rounded to fp32 (BLOOM computes them in fp32)."""
    n = 2 ** math.floor(math.log2(num_heads))
    base = 2.0 ** (-(2.0 ** -(math.log2(n) - 3)))
    slopes = [base ** k for k in range(1, n + 1)]
    if n != num_heads:
        extra = 2.0 ** (-(2.0 ** -(math.log2(2 * n) - 3)))
        slopes += [extra ** k for k in range(1, 2 * min(n, num_heads - n), 2)]
    return torch.tensor(slopes, dtype=torch.float64, device="cpu").float()


def _bias(slopes: torch.Tensor, s_len: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """-m_h * |i - j| as [H, S, S] in `dtype` (from the fp32 slopes)."""
    pos = torch.arange(s_len, device=device)
    dist = (pos.view(-1, 1) - pos.view(1, -1)).abs().to(dtype)
    return -slopes.to(device=device, dtype=dtype).view(-1, 1, 1) * dist


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, dtype: torch.dtype,
            bias: torch.Tensor) -> torch.Tensor:
    """One sequence: q, k, v [S, H, D], bias [H, S, S] -> o [S, H, D] in `dtype`."""
    qh, kh, vh = (x.to(dtype).transpose(0, 1) for x in (q, k, v))
    s = torch.einsum("hid,hjd->hij", qh, kh) * scale + bias
    return torch.einsum("hij,hjd->hid", torch.softmax(s, dim=-1), vh).transpose(0, 1)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, o: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: per sequence, fp32 scores plus the fp32 ALiBi bias,
    softmax over all keys, weighted sum; one rounding to bf16."""
    bias = _bias(alibi_slopes(q.shape[2]), q.shape[1], torch.float32, q.device)
    for b in range(q.shape[0]):
        o[b].copy_(_attend(q[b], k[b], v[b], scale, torch.float32, bias))


def sdpa_alibi_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: the bias materialized as a [1, H, S, S] bf16 attn_mask (built from the fp32
    slopes on every call) and F.scaled_dot_product_attention on [B, H, S, D] views."""
    bias = _bias(alibi_slopes(q.shape[2]), q.shape[1], torch.float32, q.device).to(q.dtype)
    out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                         attn_mask=bias.unsqueeze(0), scale=scale)
    return out.transpose(1, 2)

"""Validation formulations of E09 alibi_attention for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the reference in fp64 (the fp32 slopes widened)."""
    bias = _bias(alibi_slopes(q.shape[2]), q.shape[1], torch.float64, q.device)
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64, bias) for b in range(q.shape[0])]).to(q.dtype)


def alt_flash_bf16_probs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         block: int = 64) -> torch.Tensor:
    """Correct: flash-attention's tiling with the bias computed per tile in fp32 from the slopes
    (as flash-attention's alibi_slopes path does), online softmax in base 2, probabilities rounded
    to bf16 before the PV product, fp32 accumulators."""
    bsz, s_len, h, d = q.shape
    log2e = math.log2(math.e)
    slopes = alibi_slopes(h).to(q.device).view(h, 1, 1) * log2e
    out = torch.empty_like(q)
    for b in range(bsz):
        qh, kh, vh = (x[b].transpose(0, 1).float() for x in (q, k, v))
        for i0 in range(0, s_len, block):
            qi = qh[:, i0:i0 + block]
            rows = torch.arange(i0, i0 + qi.shape[1], device=q.device).view(-1, 1)
            m = torch.full((h, qi.shape[1], 1), -math.inf, device=q.device)
            den = torch.zeros(h, qi.shape[1], 1, device=q.device)
            acc = torch.zeros(h, qi.shape[1], d, device=q.device)
            for j0 in range(0, s_len, block):
                cols = torch.arange(j0, min(j0 + block, s_len), device=q.device).view(1, -1)
                s = torch.einsum("hid,hjd->hij", qi, kh[:, j0:j0 + block]) * (scale * log2e)
                s = s - slopes * (rows - cols).abs().float()
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
                alpha = torch.exp2(m - m_new)
                p = torch.exp2(s - m_new)
                den = den * alpha + p.sum(dim=-1, keepdim=True)
                acc = acc * alpha + torch.einsum("hij,hjd->hid", p.to(torch.bfloat16).float(), vh[:, j0:j0 + block])
                m = m_new
            out[b, i0:i0 + block] = (acc / den).transpose(0, 1).to(q.dtype)
    return out


def wrong_bloom_key_position_bias(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: BLOOM's causal-model form m_h * j (key position only), which equals the relative
    bias only under a causal mask, used without one."""
    h, s_len = q.shape[2], q.shape[1]
    pos = torch.arange(s_len, dtype=torch.float64, device=q.device)
    bias = (alibi_slopes(h).to(q.device).double().view(-1, 1, 1) * pos.view(1, 1, -1)).expand(h, s_len, s_len)
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64, bias) for b in range(q.shape[0])]).to(q.dtype)


def wrong_naive_slopes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: slopes 2^(-8k/H) for every head count (BLOOM's rule for non-powers of two ignored)."""
    h, s_len = q.shape[2], q.shape[1]
    slopes = torch.tensor([2.0 ** (-8.0 * i / h) for i in range(1, h + 1)], dtype=torch.float64, device="cpu")
    bias = _bias(slopes, s_len, torch.float64, q.device)
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64, bias) for b in range(q.shape[0])]).to(q.dtype)


def wrong_bias_scaled(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the bias added before the softmax scale, scale * (q.k - m|i - j|)."""
    bias = _bias(alibi_slopes(q.shape[2]), q.shape[1], torch.float64, q.device) * scale
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64, bias) for b in range(q.shape[0])]).to(q.dtype)


def wrong_no_scale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax scale 1/sqrt(D) forgotten (the bias added to the raw dot products)."""
    return alt_fp64(q, k, v, 1.0)

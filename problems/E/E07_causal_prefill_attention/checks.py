"""Validation formulations of E07 causal_prefill_attention for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the reference in fp64."""
    return torch.stack([_causal(q[b], k[b], v[b], scale, torch.float64) for b in range(q.shape[0])]).to(q.dtype)


def alt_flash_bf16_probs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         block: int = 64) -> torch.Tensor:
    """Correct: flash-attention's tiling: query tiles against key tiles up to the diagonal (tiles
    above it skipped, the diagonal tile masked), online softmax in base 2, probabilities rounded
    to bf16 before the PV product, fp32 accumulators, normalized at the end."""
    bsz, s_len, h, d = q.shape
    c = scale * math.log2(math.e)
    out = torch.empty_like(q)
    for b in range(bsz):
        qh, kh, vh = (x[b].transpose(0, 1).float() for x in (q, k, v))
        for i0 in range(0, s_len, block):
            qi = qh[:, i0:i0 + block]
            rows = torch.arange(i0, i0 + qi.shape[1], device=q.device).unsqueeze(1)
            m = torch.full((h, qi.shape[1], 1), -math.inf, device=q.device)
            den = torch.zeros(h, qi.shape[1], 1, device=q.device)
            acc = torch.zeros(h, qi.shape[1], d, device=q.device)
            for j0 in range(0, i0 + qi.shape[1], block):
                s = torch.einsum("hid,hjd->hij", qi, kh[:, j0:j0 + block]) * c
                cols = torch.arange(j0, j0 + s.shape[2], device=q.device).unsqueeze(0)
                s = s.masked_fill(cols > rows, -math.inf)
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
                alpha = torch.exp2(m - m_new)
                p = torch.exp2(s - m_new)
                den = den * alpha + p.sum(dim=-1, keepdim=True)
                acc = acc * alpha + torch.einsum("hij,hjd->hid", p.to(torch.bfloat16).float(), vh[:, j0:j0 + block])
                m = m_new
            out[b, i0:i0 + block] = (acc / den).transpose(0, 1).to(q.dtype)
    return out


def wrong_causal_off_by_one(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the mask written as j <= i + 1 (one future key visible)."""
    return torch.stack([_causal(q[b], k[b], v[b], scale, torch.float64, diagonal=2)
                        for b in range(q.shape[0])]).to(q.dtype)


def wrong_no_scale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax scale 1/sqrt(D) forgotten."""
    return alt_fp64(q, k, v, 1.0)


def wrong_exp2_without_log2e(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: exp2(scale * s) without the log2(e) factor (a softmax at temperature 1/ln 2)."""
    return alt_fp64(q, k, v, scale * math.log(2.0))


def wrong_output_bhsd(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: o stored in SDPA's [B, H, S, D] order into the [B, S, H, D] buffer."""
    o = alt_fp64(q, k, v, scale)
    return o.transpose(1, 2).contiguous().view(o.shape)

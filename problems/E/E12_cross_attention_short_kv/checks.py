"""Validation formulations of E12 cross_attention_short_kv for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the reference in fp64."""
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64) for b in range(q.shape[0])]).to(q.dtype)


def alt_flash_bf16_probs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                         block: int = 64) -> torch.Tensor:
    """Correct: flash-attention's loop over key tiles of 64 (a full tile and a tail of 13),
    online softmax in base 2, probabilities rounded to bf16 before the PV product, fp32
    accumulators."""
    bsz, sq, h, d = q.shape
    sk = k.shape[1]
    c = scale * math.log2(math.e)
    out = torch.empty_like(q)
    for b in range(bsz):
        qh, kh, vh = (x[b].transpose(0, 1).float() for x in (q, k, v))
        m = torch.full((h, sq, 1), -math.inf, device=q.device)
        den = torch.zeros(h, sq, 1, device=q.device)
        acc = torch.zeros(h, sq, d, device=q.device)
        for j0 in range(0, sk, block):
            s = torch.einsum("hid,hjd->hij", qh, kh[:, j0:j0 + block]) * c
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            alpha = torch.exp2(m - m_new)
            p = torch.exp2(s - m_new)
            den = den * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + torch.einsum("hij,hjd->hid", p.to(torch.bfloat16).float(), vh[:, j0:j0 + block])
            m = m_new
        out[b] = (acc / den).transpose(0, 1).to(q.dtype)
    return out


def wrong_full_key_tiles_only(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: only whole tiles of 64 keys processed, the tail of 77 - 64 = 13 keys dropped."""
    n = k.shape[1] // 64 * 64
    return alt_fp64(q, k[:, :n], v[:, :n], scale)


def wrong_no_scale(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax scale 1/sqrt(D) forgotten."""
    return alt_fp64(q, k, v, 1.0)


def wrong_softmax_over_queries(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax taken along the query axis instead of the keys."""
    return torch.stack([_attend(q[b], k[b], v[b], scale, torch.float64, dim=-2)
                        for b in range(q.shape[0])]).to(q.dtype)


def wrong_exp2_without_log2e(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: exp2(scale * s) without the log2(e) factor (a softmax at temperature 1/ln 2)."""
    return alt_fp64(q, k, v, scale * math.log(2.0))

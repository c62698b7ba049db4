"""Validation formulations of E08 attention_probs for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the reference in fp64."""
    return torch.stack([_probs(q[b], k[b], scale, torch.float64) for b in range(q.shape[0])]).to(q.dtype)


def alt_two_pass_exp2(q: torch.Tensor, k: torch.Tensor, scale: float, block: int = 64) -> torch.Tensor:
    """Correct: a kernel's two passes over key blocks of 64, only up to the diagonal: pass 1 the
    running max and the sum of exp2 (scale*log2(e) folded in, rescaled online), pass 2 each
    probability exp2(s - m) / l written out; fp32 throughout, zeros above the diagonal."""
    b_, h, s_len, d = q.shape
    c = scale * math.log2(math.e)
    out = torch.zeros(b_, h, s_len, s_len, dtype=q.dtype, device=q.device)
    rows = torch.arange(s_len, device=q.device).view(s_len, 1)
    for b in range(b_):
        qf, kf = q[b].float(), k[b].float()
        m = torch.full((h, s_len, 1), -math.inf, device=q.device)
        den = torch.zeros(h, s_len, 1, device=q.device)
        tiles = []
        for j0 in range(0, s_len, block):
            s = torch.einsum("hid,hjd->hij", qf, kf[:, j0:j0 + block]) * c
            cols = torch.arange(j0, j0 + s.shape[2], device=q.device).view(1, -1)
            s = s.masked_fill(cols > rows, -math.inf)
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            den = den * torch.exp2(torch.nan_to_num(m - m_new, nan=0.0)) + torch.exp2(s - m_new).sum(-1, keepdim=True)
            m = m_new
            tiles.append((j0, s))
        for j0, s in tiles:
            out[b, :, :, j0:j0 + s.shape[2]] = (torch.exp2(s - m) / den).to(q.dtype)
    return out


def wrong_causal_off_by_one(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the mask written as j <= i + 1 (one future key visible)."""
    return torch.stack([_probs(q[b], k[b], scale, torch.float64, diagonal=2) for b in range(q.shape[0])]).to(q.dtype)


def wrong_no_scale(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax scale 1/sqrt(D) forgotten."""
    return alt_fp64(q, k, 1.0)


def wrong_softmax_over_queries(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax taken along the query axis (dim -2) instead of the keys."""
    return torch.stack([_probs(q[b], k[b], scale, torch.float64, dim=-2) for b in range(q.shape[0])]).to(q.dtype)


def wrong_bf16_scores(q: torch.Tensor, k: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: Hugging Face's eager attention as written, the bf16 matmul's scores rounded to
    bf16 and scaled in bf16 before the fp32 softmax."""
    s = torch.matmul(q, k.transpose(-1, -2)) * scale
    s = s.masked_fill(_mask(q.shape[2], q.device), -math.inf)
    return torch.softmax(s, dim=-1, dtype=torch.float32).to(q.dtype)

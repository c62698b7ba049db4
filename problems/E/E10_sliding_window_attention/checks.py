"""Validation formulations of E10 sliding_window_attention for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int) -> torch.Tensor:
    """Correct: the reference in fp64."""
    visible = _band(q.shape[1], window, q.device)
    return torch.stack([_attend(q[b], k[b], v[b], scale, visible, torch.float64)
                        for b in range(q.shape[0])]).to(q.dtype)


def alt_flash_bf16_probs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int,
                         block: int = 64) -> torch.Tensor:
    """Correct: flash-attention's tiling over the band only (key tiles wholly outside the window of
    a query tile skipped, edge tiles masked), online softmax in base 2, probabilities rounded to
    bf16 before the PV product, fp32 accumulators."""
    bsz, s_len, hq, d = q.shape
    hk = k.shape[2]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    c = scale * math.log2(math.e)
    out = torch.empty_like(q)
    for b in range(bsz):
        qh = q[b].transpose(0, 1).float()
        kh, vh = k[b].transpose(0, 1).float()[kv_head], v[b].transpose(0, 1).float()[kv_head]
        for i0 in range(0, s_len, block):
            i1 = min(i0 + block, s_len)
            rows = torch.arange(i0, i1, device=q.device).view(-1, 1)
            m = torch.full((hq, i1 - i0, 1), -math.inf, device=q.device)
            den = torch.zeros(hq, i1 - i0, 1, device=q.device)
            acc = torch.zeros(hq, i1 - i0, d, device=q.device)
            first = max(0, (i0 - window + 1) // block * block)
            for j0 in range(first, i1, block):
                cols = torch.arange(j0, min(j0 + block, s_len), device=q.device).view(1, -1)
                s = torch.einsum("hid,hjd->hij", qh[:, i0:i1], kh[:, j0:j0 + block]) * c
                s = s.masked_fill((cols > rows) | (cols <= rows - window), -math.inf)
                m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
                alpha = torch.exp2(torch.nan_to_num(m - m_new, nan=0.0))
                p = torch.exp2(s - m_new)
                p = torch.nan_to_num(p, nan=0.0)
                den = den * alpha + p.sum(dim=-1, keepdim=True)
                acc = acc * alpha + torch.einsum("hij,hjd->hid", p.to(torch.bfloat16).float(), vh[:, j0:j0 + block])
                m = m_new
            out[b, i0:i1] = (acc / den).transpose(0, 1).to(q.dtype)
    return out


def wrong_window_off_by_one(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                            window: int) -> torch.Tensor:
    """Wrong: the band written as i - j <= window (window + 1 keys)."""
    visible = _band(q.shape[1], window, q.device, lo=1)
    return torch.stack([_attend(q[b], k[b], v[b], scale, visible, torch.float64)
                        for b in range(q.shape[0])]).to(q.dtype)


def wrong_window_excludes_self(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                               window: int) -> torch.Tensor:
    """Wrong: the window read as the `window` keys before the query (i - window <= j < i)."""
    visible = _band(q.shape[1], window, q.device, lo=1, hi=-1)
    return torch.stack([_attend(q[b], k[b], v[b], scale, visible, torch.float64)
                        for b in range(q.shape[0])]).to(q.dtype)


def wrong_gqa_head_mod(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int) -> torch.Tensor:
    """Wrong: query head h reads KV head h % HK instead of h // G."""
    hq, hk = q.shape[2], k.shape[2]
    visible = _band(q.shape[1], window, q.device)
    kv_head = torch.arange(hq, device=q.device) % hk
    return torch.stack([_attend(q[b], k[b], v[b], scale, visible, torch.float64, kv_head)
                        for b in range(q.shape[0])]).to(q.dtype)


def wrong_full_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, window: int) -> torch.Tensor:
    """Wrong: the window dropped (plain causal attention)."""
    return alt_fp64(q, k, v, scale, q.shape[1] + 1)

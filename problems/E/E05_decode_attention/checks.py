"""Validation formulations of E05 decode_attention for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the same attention in fp64, one rounding to bf16."""
    return torch.stack([_attend(q[b], k_cache[b], v_cache[b], scale, torch.float64)
                        for b in range(q.shape[0])]).to(q.dtype)


def alt_flash_bf16_probs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float,
                         block: int = 64) -> torch.Tensor:
    """Correct: a flash-attention loop over key blocks with an online softmax in base 2 (exp2 of
    scores times scale*log2(e)); the unnormalized probabilities are rounded to bf16 before the PV
    product (as the tensor-core MMA takes them), fp32 accumulators, normalized at the end."""
    b_, hq, d = q.shape
    s_len, hk = k_cache.shape[1], k_cache.shape[2]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    c = scale * math.log2(math.e)
    out = torch.empty_like(q)
    for b in range(b_):
        m = torch.full((hq, 1), -math.inf, device=q.device)
        den = torch.zeros(hq, 1, device=q.device)
        acc = torch.zeros(hq, d, device=q.device)
        for j in range(0, s_len, block):
            kh = k_cache[b, j:j + block].permute(1, 0, 2)[kv_head].float()
            vh = v_cache[b, j:j + block].permute(1, 0, 2)[kv_head]
            s = torch.einsum("hd,hsd->hs", q[b].float(), kh) * c
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            alpha = torch.exp2(m - m_new)
            p = torch.exp2(s - m_new)
            den = den * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + torch.einsum("hs,hsd->hd", p.to(torch.bfloat16).float(), vh.float())
            m = m_new
        out[b] = (acc / den).to(q.dtype)
    return out


def alt_split_kv(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float,
                 splits: int = 4) -> torch.Tensor:
    """Correct: flash-decoding: the keys split into chunks, each chunk's normalized output and
    log-sum-exp computed separately (fp32), then merged with weights exp(lse_i - lse)."""
    b_, hq, d = q.shape
    s_len, hk = k_cache.shape[1], k_cache.shape[2]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    bounds = [s_len * i // splits for i in range(splits + 1)]
    out = torch.empty_like(q)
    for b in range(b_):
        outs, lses = [], []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=False):
            if hi == lo:
                continue
            kh = k_cache[b, lo:hi].permute(1, 0, 2)[kv_head].float()
            vh = v_cache[b, lo:hi].permute(1, 0, 2)[kv_head].float()
            s = torch.einsum("hd,hsd->hs", q[b].float(), kh) * scale
            lse = torch.logsumexp(s, dim=-1)
            outs.append(torch.einsum("hs,hsd->hd", torch.exp(s - lse[:, None]), vh))
            lses.append(lse)
        lse_all = torch.logsumexp(torch.stack(lses), dim=0)
        out[b] = sum(torch.exp(ls - lse_all)[:, None] * ob for ob, ls in zip(outs, lses, strict=False)).to(q.dtype)
    return out


def wrong_no_scale(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the softmax scale 1/sqrt(D) forgotten."""
    return alt_fp64(q, k_cache, v_cache, 1.0)


def wrong_gqa_head_mod(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: query head h reads KV head h % HK instead of h // G."""
    b, hq, d = q.shape
    hk = k_cache.shape[2]
    perm = torch.arange(hq, device=q.device).view(hk, hq // hk).t().reshape(-1)  # heads reordered so // becomes %
    out = alt_fp64(q[:, perm], k_cache, v_cache, scale)
    return out[:, torch.argsort(perm)]


def wrong_exp2_without_log2e(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                             scale: float) -> torch.Tensor:
    """Wrong: the probabilities computed as exp2(scale * s) without the log2(e) factor (a softmax
    at temperature 1/ln 2)."""
    return alt_fp64(q, k_cache, v_cache, scale * math.log(2.0))

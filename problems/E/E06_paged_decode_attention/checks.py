"""Validation formulations of E06 paged_decode_attention for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_fp64(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
             seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: the reference in fp64."""
    return torch.stack([
        _attend(q[b], _gather(k_cache, block_table[b], int(seq_lens[b])),
                _gather(v_cache, block_table[b], int(seq_lens[b])), scale, torch.float64)
        for b in range(q.shape[0])]).to(q.dtype)


def alt_paged_flash_bf16_probs(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                               block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct: a paged flash-decoding loop, one cache block per step straight from the block table
    (the last block masked at the sequence length), online softmax in base 2, probabilities
    rounded to bf16 before the PV product, fp32 accumulators."""
    bsz, hq, d = q.shape
    bs, hk = k_cache.shape[1], k_cache.shape[2]
    kv_head = torch.arange(hq, device=q.device) // (hq // hk)
    c = scale * math.log2(math.e)
    out = torch.empty_like(q)
    for b in range(bsz):
        n = int(seq_lens[b])
        m = torch.full((hq, 1), -math.inf, device=q.device)
        den = torch.zeros(hq, 1, device=q.device)
        acc = torch.zeros(hq, d, device=q.device)
        for j in range((n + bs - 1) // bs):
            blk = int(block_table[b, j])
            valid = min(bs, n - j * bs)
            kh = k_cache[blk, :valid].permute(1, 0, 2)[kv_head].float()
            vh = v_cache[blk, :valid].permute(1, 0, 2)[kv_head].float()
            s = torch.einsum("hd,hsd->hs", q[b].float(), kh) * c
            m_new = torch.maximum(m, s.amax(dim=-1, keepdim=True))
            alpha = torch.exp2(m - m_new)
            p = torch.exp2(s - m_new)
            den = den * alpha + p.sum(dim=-1, keepdim=True)
            acc = acc * alpha + torch.einsum("hs,hsd->hd", p.to(torch.bfloat16).float(), vh)
            m = m_new
        out[b] = (acc / den).to(q.dtype)
    return out


def _masked_fp64(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                 lens: torch.Tensor, scale: float) -> torch.Tensor:
    """fp64 attention over the first lens[b] rows of every sequence's MB blocks (lens may exceed
    seq_lens: used by the wrong variants)."""
    return torch.stack([
        _attend(q[b], _gather(k_cache, block_table[b], int(lens[b])),
                _gather(v_cache, block_table[b], int(lens[b])), scale, torch.float64)
        for b in range(q.shape[0])]).to(q.dtype)


def wrong_ignore_seq_lens(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                          seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: every slot of every mapped block attended to (the lengths ignored)."""
    full = torch.full_like(seq_lens, block_table.shape[1] * k_cache.shape[1])
    return _masked_fp64(q, k_cache, v_cache, block_table, full, scale)


def wrong_len_off_by_one(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                         seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the last-block mask written as offset <= n instead of < n (one stale slot read)."""
    return _masked_fp64(q, k_cache, v_cache, block_table, seq_lens + 1, scale)


def wrong_gqa_head_mod(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, block_table: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: query head h reads KV head h % HK instead of h // G."""
    hq, hk = q.shape[1], k_cache.shape[2]
    perm = torch.arange(hq, device=q.device).view(hk, hq // hk).t().reshape(-1)
    out = alt_fp64(q[:, perm], k_cache, v_cache, block_table, seq_lens, scale)
    return out[:, torch.argsort(perm)]


def wrong_logical_block_index(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                              block_table: torch.Tensor, seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    """Wrong: the block table indexed with the flat logical block b*MB + j of a [B*MB] view read
    column-major (block_table.t()), i.e. sequence b's j-th block taken from the wrong row."""
    swapped = block_table.t().reshape(block_table.shape)
    return alt_fp64(q, k_cache, v_cache, swapped, seq_lens, scale)

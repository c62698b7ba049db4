"""Validation formulations of C02 scaled_causal_softmax for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct, another precision path: the masked softmax in fp64, rounded to bf16 once."""
    x = s.double() * float(torch.tensor(scale, dtype=torch.float32))
    x = x.masked_fill(_future(s.shape[-1], s.device), float("-inf"))
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return (e / e.sum(dim=-1, keepdim=True)).to(s.dtype)


def alt_online_blocks(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Correct, another accumulation order: per row block of 64 queries, an online softmax over
    key blocks of 64 that stops at the diagonal (blocks wholly in the future are never read)."""
    n = s.shape[-1]
    out = torch.zeros(s.shape, dtype=s.dtype, device=s.device)
    sc = torch.tensor(scale, dtype=torch.float32, device=s.device)
    for i0 in range(0, n, 64):
        i1 = min(i0 + 64, n)
        rows = torch.arange(i0, i1, device=s.device)[:, None]
        m = torch.full((*s.shape[:-2], i1 - i0), float("-inf"), device=s.device)
        acc = torch.zeros_like(m)
        for j0 in range(0, i1, 64):
            j1 = min(j0 + 64, n)
            x = s[..., i0:i1, j0:j1].float() * sc
            x = x.masked_fill(torch.arange(j0, j1, device=s.device)[None, :] > rows, float("-inf"))
            m_new = torch.maximum(m, x.amax(dim=-1))
            acc = acc * torch.exp(m - m_new) + torch.exp(x - m_new[..., None]).sum(dim=-1)
            m = m_new
        x = s[..., i0:i1, :i1].float() * sc
        x = x.masked_fill(torch.arange(i1, device=s.device)[None, :] > rows, float("-inf"))
        out[..., i0:i1, :i1] = (torch.exp(x - m[..., None]) / acc[..., None]).to(s.dtype)
    return out


def wrong_mask_off_by_one(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Slip: the mask starts one column late (triu diagonal 2), so query i also sees key i + 1."""
    x = s.float() * scale
    x = x.masked_fill(torch.ones(s.shape[-1], s.shape[-1], dtype=torch.bool, device=s.device).triu_(2), float("-inf"))
    return torch.softmax(x, dim=-1).to(s.dtype)


def wrong_mask_after_exp(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Slip: the future is zeroed in the output, but the row max and sum ran over all S keys."""
    x = s.float() * scale
    p = torch.softmax(x, dim=-1).masked_fill(_future(s.shape[-1], s.device), 0.0)
    return p.to(s.dtype)


def wrong_bf16_scaled_scores(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Slip: scale * s is rounded to bf16 (computed in the input dtype) before the fp32 softmax."""
    x = (s * scale).float().masked_fill(_future(s.shape[-1], s.device), float("-inf"))
    return torch.softmax(x, dim=-1).to(s.dtype)


def wrong_no_max_subtraction(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Slip: exp of the scaled scores without subtracting the row max (overflows above 88.7)."""
    x = (s.float() * scale).masked_fill(_future(s.shape[-1], s.device), float("-inf"))
    e = torch.exp(x)
    return (e / e.sum(dim=-1, keepdim=True)).to(s.dtype)

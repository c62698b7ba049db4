"""Validation formulations of F04 moe_grouped_gemm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_padded_bmm(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Validation: groups padded to the largest count, one fp32 batched GEMM, padding dropped."""
    c = counts.long()
    e_n, cap = c.numel(), int(c.max())
    ends = torch.cumsum(c, 0)
    expert = torch.repeat_interleave(torch.arange(e_n, device=a.device), c)
    slot = torch.arange(a.shape[0], device=a.device) - (ends - c)[expert]
    padded = torch.zeros(e_n, max(cap, 1), a.shape[1], dtype=torch.float32, device=a.device)
    padded[expert, slot] = a.float()
    prod = torch.bmm(padded, w.float().transpose(1, 2))
    return prod[expert, slot]


def wrong_boundary_row(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Planted slip: each row's expert found with searchsorted(ends, row) (left) instead of right,
    so the first row of every group but the first uses the previous expert's weight."""
    ends = torch.cumsum(counts.long(), 0)
    expert = torch.searchsorted(ends, torch.arange(a.shape[0], device=a.device)).clamp(max=counts.numel() - 1)
    out = torch.empty(a.shape[0], w.shape[1], dtype=torch.float32, device=a.device)
    for e in range(counts.numel()):
        sel = expert == e
        out[sel] = a[sel].float() @ w[e].float().t()
    return out


def wrong_counts_as_offsets(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Planted slip: counts read as the groups' end offsets (the offs convention of grouped GEMM
    APIs) without the cumulative sum; rows no group covers stay zero."""
    out = torch.zeros(a.shape[0], w.shape[1], dtype=torch.float32, device=a.device)
    start = 0
    for e, end in enumerate(counts.tolist()):
        if end > start:
            out[start:end] = a[start:end].float() @ w[e].float().t()
            start = end
    return out


def wrong_transposed_weight(a: torch.Tensor, w: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Planted slip: each expert weight read as a [K, N] matrix (w[e].reshape(K, N)) instead of
    [N, K], the classic transposed-operand layout error."""
    n, k = w.shape[1], w.shape[2]
    parts = torch.split(a.float(), counts.tolist())
    return torch.cat([p @ w[e].float().reshape(k, n) for e, p in enumerate(parts)])

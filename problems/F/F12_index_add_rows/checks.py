"""Validation formulations of F12 index_add_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_per_row_fp64(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Validation: per destination row, the sum of its source rows in fp64 (no atomics, no scatter)."""
    res = out.double()
    for r in torch.unique(idx).tolist():
        res[r] += src[idx == r].double().sum(dim=0)
    return res


def wrong_last_write_wins(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Planted slip: out[idx] = out[idx] + src with advanced indexing: for a repeated index only
    one of the writes survives instead of all of them accumulating."""
    res = out.float()
    res[idx] = res[idx] + src.float()
    return res


def wrong_bf16_accumulate(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Planted slip: the additions done in bf16 one source row at a time, every partial sum rounded
    to bf16 (what bf16 atomic adds into the destination do, in some order)."""
    res = out.clone()
    for i, r in enumerate(idx.tolist()):
        res[r] += src[i]
    return res


def wrong_zero_base(out: torch.Tensor, idx: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Planted slip: the sums written over the destination instead of added to it (zeros as base)."""
    return torch.zeros(out.shape, dtype=torch.float32, device=out.device).index_add_(0, idx, src.float())

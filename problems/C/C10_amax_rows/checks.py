"""Validation formulations of C10 amax_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_max_of_max_and_neg_min(x: torch.Tensor) -> torch.Tensor:
    """Correct, another method: max(max x, -min x), from the two signed extremes."""
    mn, mx = torch.aminmax(x.float(), dim=-1)
    return torch.maximum(mx, -mn)


def alt_split_rows(x: torch.Tensor) -> torch.Tensor:
    """Correct, another order: each row split over 5 blocks, the block maxima combined by max."""
    parts = [c.float().abs().amax(dim=-1) for c in x.tensor_split(5, dim=-1) if c.shape[-1]]
    return torch.stack(parts, dim=-1).amax(dim=-1)


def wrong_max_without_abs(x: torch.Tensor) -> torch.Tensor:
    """Slip: the signed maximum (the abs forgotten): wrong whenever the largest magnitude is negative."""
    return x.float().amax(dim=-1)


def wrong_tail_dropped(x: torch.Tensor) -> torch.Tensor:
    """Slip: the loop covers whole blocks of 256 columns only (the ragged tail is never read)."""
    n = x.shape[-1] - x.shape[-1] % 256
    return x[:, :n].float().abs().amax(dim=-1)


def wrong_split_keeps_last_block(x: torch.Tensor) -> torch.Tensor:
    """Slip: each row split over 5 blocks, but the combine keeps the last block's maximum (a
    plain store where an atomic max was needed)."""
    return x.tensor_split(5, dim=-1)[-1].float().abs().amax(dim=-1)

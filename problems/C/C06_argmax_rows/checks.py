"""Validation formulations of C06 argmax_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def _block_best(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per column block: (max value, first column of it within the block), shape [T, blocks]."""
    v = x.shape[-1]
    pad = (-v) % block
    xp = torch.cat([x.float(), torch.full((x.shape[0], pad), float("-inf"), device=x.device)], dim=-1)
    xb = xp.reshape(x.shape[0], -1, block)
    mb = xb.amax(dim=-1)
    cols = torch.arange(block, device=x.device).expand_as(xb)
    first = torch.where(xb == mb[..., None], cols, block).amin(dim=-1)
    return mb, first


def alt_two_stage(x: torch.Tensor) -> torch.Tensor:
    """Correct, another order: per block of 4096 columns the first maximum (a CTA's partial
    result), then the blocks combined by (larger value, then lower block)."""
    mb, first = _block_best(x, 4096)
    glob = first + torch.arange(mb.shape[-1], device=x.device) * 4096
    m = mb.amax(dim=-1, keepdim=True)
    return torch.where(mb == m, glob, x.shape[-1]).amin(dim=-1)


def alt_stable_sort(x: torch.Tensor) -> torch.Tensor:
    """Correct, another method: a stable descending sort keeps equal values in column order, so
    its first entry is the first maximum."""
    return torch.sort(x.float(), dim=-1, descending=True, stable=True).indices[:, 0]


def wrong_last_index_on_ties(x: torch.Tensor) -> torch.Tensor:
    """Slip: a `>=` comparison in the scan, so ties go to the last maximal column."""
    v = x.shape[-1]
    return v - 1 - torch.argmax(x.flip(-1), dim=-1)


def wrong_block_local_index(x: torch.Tensor) -> torch.Tensor:
    """Slip: the winning block's local column is written without its block offset (blocks of
    4096 columns; right only when the maximum lies in the first block)."""
    mb, first = _block_best(x, 4096)
    glob = first + torch.arange(mb.shape[-1], device=x.device) * 4096
    m = mb.amax(dim=-1, keepdim=True)
    winner = torch.where(mb == m, glob, x.shape[-1]).amin(dim=-1)
    return winner % 4096


def wrong_tie_by_lane(x: torch.Tensor) -> torch.Tensor:
    """Slip: 256 threads each scan the columns j = lane (mod 256) correctly, but the reduction over
    threads breaks ties by the lower lane instead of the lower column."""
    lanes = 256
    v = x.shape[-1]
    pad = (-v) % lanes
    xp = torch.cat([x.float(), torch.full((x.shape[0], pad), float("-inf"), device=x.device)], dim=-1)
    xl = xp.reshape(x.shape[0], -1, lanes)              # [T, steps, lane]: column = step * 256 + lane
    ml = xl.amax(dim=1)                                  # per lane max
    steps = torch.arange(xl.shape[1], device=x.device)[None, :, None].expand_as(xl)
    first_step = torch.where(xl == ml[:, None, :], steps, xl.shape[1]).amin(dim=1)
    col = first_step * lanes + torch.arange(lanes, device=x.device)
    m = ml.amax(dim=-1, keepdim=True)
    lane = torch.where(ml == m, torch.arange(lanes, device=x.device), lanes).amin(dim=-1)
    return col.gather(1, lane[:, None])[:, 0]


def wrong_two_stage_tie_rule(x: torch.Tensor) -> torch.Tensor:
    """Slip: the per-block first maxima are right, but the combine keeps the later block on ties."""
    mb, first = _block_best(x, 4096)
    glob = first + torch.arange(mb.shape[-1], device=x.device) * 4096
    m = mb.amax(dim=-1, keepdim=True)
    return torch.where(mb == m, glob, -1).amax(dim=-1)


def _diagnostics(x: torch.Tensor) -> str:
    """For the CPU check: how many rows hold their maximum more than once."""
    m = x.amax(dim=-1, keepdim=True)
    return f"rows with tied max: {int(((x == m).sum(-1) > 1).sum())}/{x.shape[0]}"

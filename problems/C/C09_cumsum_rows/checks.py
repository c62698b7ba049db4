"""Validation formulations of C09 cumsum_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def _blocked(x: torch.Tensor, block: int, carry: str, acc_dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A two-level scan: an inclusive scan inside each block of `block` columns, plus a carry
    (the sum of the earlier blocks: carry="before"; none: "none"; the earlier blocks and this
    one: "through")."""
    out = torch.empty_like(x)
    run = torch.zeros(x.shape[:-1], dtype=acc_dtype, device=x.device)
    for j in range(0, x.shape[-1], block):
        local = torch.cumsum(x[:, j:j + block].to(acc_dtype), dim=-1)
        total = local[:, -1]
        if carry == "before":
            out[:, j:j + block] = local + run[:, None]
        elif carry == "through":
            out[:, j:j + block] = local + (run + total)[:, None]
        else:
            out[:, j:j + block] = local
        run = run + total
    return out


def alt_blocked_scan(x: torch.Tensor) -> torch.Tensor:
    """Correct, another order: scans inside blocks of 256 columns, then each block adds the
    running total of the blocks before it (fp32 throughout)."""
    return _blocked(x, 256, "before")


def alt_hillis_steele(x: torch.Tensor) -> torch.Tensor:
    """Correct, another order: the log-step parallel scan, y += shift(y, d) for d = 1, 2, 4, ...
    (fp32; a different rounding pattern from a sequential sum)."""
    y = x.clone()
    d = 1
    while d < x.shape[-1]:
        y = torch.cat([y[:, :d], y[:, d:] + y[:, :-d]], dim=-1)
        d *= 2
    return y


def alt_fp64(x: torch.Tensor) -> torch.Tensor:
    """Correct, pairwise in fp64: blocks of 64 summed in fp64 with an fp64 carry, rounded once."""
    return _blocked(x, 64, "before", torch.float64).float()


def wrong_exclusive_scan(x: torch.Tensor) -> torch.Tensor:
    """Slip: the exclusive scan (y[j] = sum over i < j), as a Blelloch down-sweep produces it."""
    y = torch.cumsum(x, dim=-1)
    return torch.cat([torch.zeros_like(y[:, :1]), y[:, :-1]], dim=-1)


def wrong_blocks_without_carry(x: torch.Tensor) -> torch.Tensor:
    """Slip: every block of 256 columns is scanned, but the carry from earlier blocks is never added."""
    return _blocked(x, 256, "none")


def wrong_carry_includes_own_block(x: torch.Tensor) -> torch.Tensor:
    """Slip: the carry added to a block is the inclusive block-total scan (its own total counted twice)."""
    return _blocked(x, 256, "through")


def wrong_bf16_running_sum(x: torch.Tensor) -> torch.Tensor:
    """Slip: the running sum is kept in bf16 (a register in the input dtype of a bf16 variant)."""
    acc = torch.zeros(x.shape[0], dtype=torch.bfloat16, device=x.device)
    out = torch.empty_like(x)
    for j in range(x.shape[-1]):
        acc = (acc.float() + x[:, j]).bfloat16()
        out[:, j] = acc.float()
    return out

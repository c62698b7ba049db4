"""Reference and eager baseline for C06 argmax_rows:
idx[t] = the lowest v with x[t, v] == max_u x[t, u] (greedy token; int64).

`reference` and the eager formulation are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch


def reference(x: torch.Tensor, idx: torch.Tensor) -> None:
    """Readable reference, destination-passing: the row maximum, then the first column that
    holds it (the tie rule made explicit)."""
    m = x.amax(dim=-1, keepdim=True)
    cols = torch.arange(x.shape[-1], device=x.device).expand_as(x)
    idx.copy_(torch.where(x == m, cols, x.shape[-1]).amin(dim=-1))


def argmax(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch.argmax (documented: the first maximal value's index)."""
    return torch.argmax(x, dim=-1)

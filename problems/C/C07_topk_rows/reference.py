"""Reference and eager baseline for C07 topk_rows: the first k = 8
entries of each row ordered by (value descending, column ascending): values and columns.

`reference` and the eager formulation are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch


def reference(x: torch.Tensor, values: torch.Tensor, indices: torch.Tensor, k: int) -> None:
    """Readable reference, destination-passing: a stable descending sort keeps equal values in
    column order, so its first k entries follow the tie rule."""
    s = torch.sort(x, dim=-1, descending=True, stable=True)
    values.copy_(s.values[:, :k])
    indices.copy_(s.indices[:, :k])


def topk(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: torch.topk (sorted); the order of tied elements is not specified."""
    r = torch.topk(x, k, dim=-1, largest=True, sorted=True)
    return r.values, r.indices

"""Reference and eager baseline for C09 cumsum_rows:
y[m, j] = sum_{i <= j} x[m, i] (inclusive scan along rows), fp32 in and out.

`reference` and the eager formulation are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: the running sum in fp64, rounded to fp32 once."""
    y.copy_(torch.cumsum(x.double(), dim=-1))


def cumsum(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch.cumsum in fp32."""
    return torch.cumsum(x, dim=-1)

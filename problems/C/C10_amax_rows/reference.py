"""Reference and eager baselines for C10 amax_rows:
amax[t] = max_h |x[t, h]| (bf16 in, fp32 out, exact).

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch


def reference(x: torch.Tensor, amax: torch.Tensor) -> None:
    """Readable reference, destination-passing: magnitudes in fp32, row maximum."""
    amax.copy_(x.float().abs().amax(dim=-1))


def abs_amax(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: abs, then amax over the row (bf16, exact), widened to fp32."""
    return x.abs().amax(dim=-1).float()


def inf_norm(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the infinity norm of each row in one reduction, widened to fp32."""
    return torch.linalg.vector_norm(x, ord=float("inf"), dim=-1).float()

"""Reference and eager baselines for C12 global_sq_norm:
sq_norm = sum_i x[i]^2 over a whole bf16 tensor, one fp32 scalar (a 0-d tensor).

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch


def reference(x: torch.Tensor, sq_norm: torch.Tensor) -> None:
    """Readable reference, destination-passing: the squares summed in fp64, rounded to fp32 once."""
    sq_norm.copy_(x.double().square().sum())


def upcast_square_sum(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: an fp32 copy, its squares, their sum."""
    return x.float().square().sum()


def vector_norm_squared(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: one fused fp32 norm kernel over the bf16 tensor, squared."""
    return torch.linalg.vector_norm(x, ord=2, dtype=torch.float32).square()

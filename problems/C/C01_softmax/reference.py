"""Reference and eager baseline for C01 softmax: y[m, :] = softmax(x[m, :]).

`reference` and `torch_softmax` are what the evaluator uses; the `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) functions exist for
`mkb problems validate` ([validate] in problem.toml) and run on the CPU.
"""
import torch


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: subtract the row max, exponentiate, normalize."""
    shifted = x - x.amax(dim=-1, keepdim=True)
    e = torch.exp(shifted)
    y.copy_(e / e.sum(dim=-1, keepdim=True))


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: PyTorch's fused softmax kernel."""
    return torch.softmax(x, dim=-1)

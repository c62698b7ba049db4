"""Reference and eager baselines for C03 log_softmax:
y[t, :] = x[t, :] - logsumexp(x[t, :]), bf16 logits in, fp32 log-probabilities out.

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, y: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 max-shifted log-sum-exp, then x - lse."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    lse = m + torch.log(torch.exp(xf - m).sum(dim=-1, keepdim=True))
    y.copy_(xf - lse)


def log_softmax_fp32(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: one fused kernel reading bf16 and computing and writing fp32."""
    return F.log_softmax(x, dim=-1, dtype=torch.float32)


def upcast_log_softmax(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: an fp32 copy of the logits, then log-softmax on it."""
    return torch.log_softmax(x.float(), dim=-1)

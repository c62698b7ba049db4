"""Reference and eager baselines for C08 logsumexp:
lse[t] = log(sum_v exp(x[t, v])), computed as m + log(sum_v exp(x[t, v] - m)), bf16 in, fp32 out.

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""

import torch


def reference(x: torch.Tensor, lse: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 row max, shifted exp, sum, log, add back."""
    xf = x.float()
    m = xf.amax(dim=-1)
    lse.copy_(m + torch.log(torch.exp(xf - m[:, None]).sum(dim=-1)))


def logsumexp_fp32(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch.logsumexp on an fp32 copy of the logits."""
    return torch.logsumexp(x.float(), dim=-1)


def logsumexp_bf16(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch.logsumexp on the bf16 logits (bf16 result), widened to fp32."""
    return torch.logsumexp(x, dim=-1).float()

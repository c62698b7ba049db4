"""Reference and eager baselines for C04 cross_entropy:
loss[t] = logsumexp(logits[t, :]) - logits[t, target[t]], bf16 logits, int64 targets, fp32 loss.

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch
import torch.nn.functional as F


def reference(logits: torch.Tensor, target: torch.Tensor, loss: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 max-shifted log-sum-exp minus the target logit."""
    x = logits.float()
    m = x.amax(dim=-1)
    lse = m + torch.log(torch.exp(x - m[:, None]).sum(dim=-1))
    loss.copy_(lse - x.gather(1, target[:, None])[:, 0])


def cross_entropy_bf16(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Eager baseline: F.cross_entropy on the bf16 logits (fp32 math inside, but the
    log-probabilities and the loss are bf16), widened to fp32."""
    return F.cross_entropy(logits, target, reduction="none").float()


def cross_entropy_fp32(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Eager baseline: F.cross_entropy on an fp32 copy of the logits."""
    return F.cross_entropy(logits.float(), target, reduction="none")

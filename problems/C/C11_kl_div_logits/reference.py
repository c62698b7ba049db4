"""Reference and eager baselines for C11 kl_div_logits:
kl[t] = sum_v P[t, v] * (log P[t, v] - log Q[t, v]), P = softmax(p[t, :]), Q = softmax(q[t, :]).

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch
import torch.nn.functional as F


def _log_softmax32(x: torch.Tensor) -> torch.Tensor:
    """fp32 log-probabilities of a row: x - m - log(sum exp(x - m))."""
    xf = x.float()
    m = xf.amax(dim=-1, keepdim=True)
    return xf - m - torch.log(torch.exp(xf - m).sum(dim=-1, keepdim=True))


def reference(p: torch.Tensor, q: torch.Tensor, kl: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 log-probabilities of both rows, then
    sum P * (log P - log Q)."""
    logp, logq = _log_softmax32(p), _log_softmax32(q)
    kl.copy_((torch.exp(logp) * (logp - logq)).sum(dim=-1))


def kl_div_fused_log_softmax(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Eager baseline: fused bf16-in, fp32-out log-softmax of both, F.kl_div with log targets."""
    logq = F.log_softmax(q, dim=-1, dtype=torch.float32)
    logp = F.log_softmax(p, dim=-1, dtype=torch.float32)
    return F.kl_div(logq, logp, reduction="none", log_target=True).sum(dim=-1)


def kl_div_upcast(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Eager baseline: fp32 copies of both logit tensors, then the same chain."""
    logq = torch.log_softmax(q.float(), dim=-1)
    logp = torch.log_softmax(p.float(), dim=-1)
    return F.kl_div(logq, logp, reduction="none", log_target=True).sum(dim=-1)

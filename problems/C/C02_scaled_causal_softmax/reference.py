"""Reference and eager baselines for C02 scaled_causal_softmax:
p[b, h, i, :] = softmax(scale * s[b, h, i, :] + mask_i), mask_i[j] = 0 for j <= i, -inf for j > i.

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch
import torch.nn.functional as F


def _future(s_len: int, device: torch.device) -> torch.Tensor:
    """Boolean [S, S] mask, True where key j lies in query i's future (j > i)."""
    return torch.ones(s_len, s_len, dtype=torch.bool, device=device).triu_(1)


def reference(s: torch.Tensor, p: torch.Tensor, scale: float) -> None:
    """Readable reference, destination-passing: fp32 scores, mask, max-shifted exp, normalize,
    one rounding to bf16."""
    x = s.float() * torch.tensor(scale, dtype=torch.float32)
    x = x.masked_fill(_future(s.shape[-1], s.device), float("-inf"))
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    p.copy_(e / e.sum(dim=-1, keepdim=True))


def add_bias_softmax(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: one fused add (-inf bias above the diagonal + scale * s, computed in fp32
    since the bias is fp32), fp32 softmax, cast to bf16."""
    bias = torch.full((s.shape[-1], s.shape[-1]), float("-inf"), device=s.device).triu_(1)
    return F.softmax(torch.add(bias, s, alpha=scale), dim=-1).to(s.dtype)


def upcast_masked_softmax(s: torch.Tensor, scale: float) -> torch.Tensor:
    """Eager baseline: the Hugging Face eager-attention chain with an fp32 upcast before scaling."""
    x = s.float().mul_(scale).masked_fill_(_future(s.shape[-1], s.device), float("-inf"))
    return torch.softmax(x, dim=-1).to(s.dtype)

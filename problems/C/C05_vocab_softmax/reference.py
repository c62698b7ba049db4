"""Reference and eager baselines for C05 vocab_softmax:
p[t, :] = softmax(x[t, :]) over rows of a whole vocabulary, bf16 in and out, fp32 math.

`reference` and the eager formulations are what the evaluator uses; `alt_*` (independent correct
formulations) and `wrong_*` (planted slips that must fail) exist for `mkb problems validate` and
run on the CPU.
"""
import torch
import torch.nn.functional as F


def reference(x: torch.Tensor, p: torch.Tensor) -> None:
    """Readable reference, destination-passing: fp32 row max, shifted exp, normalize, one
    rounding to bf16."""
    xf = x.float()
    e = torch.exp(xf - xf.amax(dim=-1, keepdim=True))
    p.copy_(e / e.sum(dim=-1, keepdim=True))


def softmax_bf16(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: torch.softmax on bf16 (fp32 math inside one fused kernel, bf16 out)."""
    return torch.softmax(x, dim=-1)


def softmax_fp32_cast(x: torch.Tensor) -> torch.Tensor:
    """Eager baseline: fp32 probabilities (dtype=float32, as samplers request), cast to bf16."""
    return F.softmax(x, dim=-1, dtype=torch.float32).to(x.dtype)

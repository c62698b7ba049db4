"""Reference and eager baselines for D12 gemm_logits_softcap:
logits = cap * tanh((a @ w^T) / cap) in fp32 (Gemma-2's final logit soft-capping), fp32
accumulation, fp32 output (no bf16 rounding anywhere).

`reference` is the contract; `mm_fp32_softcap` and `linear_fp32_softcap` are the eager baselines
timed on the GPU; `alt_*` are independent correct formulations and `wrong_*` slips that must fail
([validate] in problem.toml)."""
import torch
import torch.nn.functional as F


def reference(a: torch.Tensor, w: torch.Tensor, logits: torch.Tensor, cap: float) -> None:
    """Readable reference, destination-passing: fp32 product, fp32 soft-cap, fp32 output."""
    x = a.float() @ w.float().t()
    logits.copy_(cap * torch.tanh(x / cap))


def mm_fp32_softcap(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Eager baseline: a bf16 GEMM with fp32 output (torch.mm with out_dtype, CUDA only), then
    the soft-cap in fp32."""
    return cap * torch.tanh(torch.mm(a, w.t(), out_dtype=torch.float32) / cap)


def linear_fp32_softcap(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Eager baseline: the operands upcast to fp32 and an fp32 nn.Linear (slow: no bf16 tensor
    cores; exact only with TF32 off, torch's default), then the soft-cap; a fallback for a torch
    without mm's out_dtype."""
    return cap * torch.tanh(F.linear(a.float(), w.float()) / cap)

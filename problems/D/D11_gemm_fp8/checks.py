"""Validation formulations of D11 gemm_fp8 for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 128  # the K extent of one smem stage in a typical Hopper fp8 GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Correct: the raw product in fp64, scaled by sa * sw afterwards, one rounding."""
    return ((a.double() @ w.double().t()) * (sa.double() * sw.double())).to(torch.bfloat16)


def alt_split_k_scale_after(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Correct: a kernel's order: raw fp8 products accumulated in fp32 per k-block (reverse
    order), then the epilogue multiplies by sa and sw in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float32, device=a.device)
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return (acc * sa * sw).to(torch.bfloat16)


def wrong_missing_sw(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: the weight's scale dropped."""
    return ((a.float() @ w.float().t()) * sa).to(torch.bfloat16)


def wrong_inverse_scales(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: the scales read as quantization scales (divided by, not multiplied)."""
    return ((a.float() @ w.float().t()) / (sa * sw)).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return ((a.float() @ w.reshape(k, n).float()) * sa * sw).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block), scales in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return (acc.float() * sa * sw).to(torch.bfloat16)

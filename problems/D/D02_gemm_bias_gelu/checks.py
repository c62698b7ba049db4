"""Validation formulations of D02 gemm_bias_gelu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Correct: the whole chain in fp64, one rounding to bf16."""
    v = a.double() @ w.double().t() + b.double()
    return (0.5 * v * (1.0 + torch.erf(v / 2.0 ** 0.5))).to(torch.bfloat16)


def alt_split_k_ndtr(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Correct: fp32 split-K (k-blocks summed in reverse order), GELU as v * Phi(v) (ndtr)."""
    acc = b.float().expand(a.shape[0], w.shape[0]).clone()
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return (acc * torch.special.ndtr(acc)).to(torch.bfloat16)


def wrong_tanh_gelu(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the tanh approximation of GELU instead of erf."""
    v = a.float() @ w.float().t() + b.float()
    return F.gelu(v, approximate="tanh").to(torch.bfloat16)


def wrong_bias_after_gelu(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the bias added after the activation."""
    return (F.gelu(a.float() @ w.float().t()) + b.float()).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block), epilogue in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return F.gelu(acc.float() + b.float()).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return F.gelu(a.float() @ w.reshape(k, n).float() + b.float()).to(torch.bfloat16)

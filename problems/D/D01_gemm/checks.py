"""Validation formulations of D01 gemm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: the product in fp64, one rounding to bf16."""
    return (a.double() @ w.double().t()).to(torch.bfloat16)


def alt_split_k(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: split-K, k-blocks of KTILE accumulated in fp32 in reverse order, one rounding."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float32, device=a.device)
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return acc.to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return (a.float() @ w.reshape(k, n).float()).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum is kept in bf16 (rounded after every k-block of KTILE)."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return acc


def wrong_k_tail(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: drops the last partial k-block when K is not a multiple of KTILE."""
    k = a.shape[1] // KTILE * KTILE
    return (a[:, :k].float() @ w[:, :k].float().t()).to(torch.bfloat16)

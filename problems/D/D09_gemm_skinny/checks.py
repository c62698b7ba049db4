"""Validation formulations of D09 gemm_skinny for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)
SPLITS = 8  # split-K factor of alt_split_k


def alt_fp64(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: the product in fp64, one rounding to bf16."""
    return (a.double() @ w.double().t()).to(torch.bfloat16)


def alt_split_k(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: split-K into SPLITS slices with fp32 partial products, reduced in fp32 (reverse order)."""
    k = a.shape[1]
    cuts = [k * i // SPLITS for i in range(SPLITS + 1)]
    parts = [a[:, lo:hi].float() @ w[:, lo:hi].float().t() for lo, hi in zip(cuts[:-1], cuts[1:], strict=False)]
    acc = torch.zeros_like(parts[0])
    for p in reversed(parts):
        acc += p
    return acc.to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return (a.float() @ w.reshape(k, n).float()).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block of KTILE)."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return acc


def wrong_k_tail(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: drops the last partial k-block when K is not a multiple of KTILE."""
    k = a.shape[1] // KTILE * KTILE
    return (a[:, :k].float() @ w[:, :k].float().t()).to(torch.bfloat16)


def wrong_split_k_overwrite(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: split-K whose slices store instead of accumulating (the last slice wins)."""
    lo = a.shape[1] * (SPLITS - 1) // SPLITS
    return (a[:, lo:].float() @ w[:, lo:].float().t()).to(torch.bfloat16)

"""Validation formulations of D03 gemm_bias_relu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Correct: the whole chain in fp64, one rounding to bf16."""
    return torch.relu(a.double() @ w.double().t() + b.double()).to(torch.bfloat16)


def alt_split_k(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Correct: the bias seeds the fp32 accumulator, k-blocks summed in reverse order, max(v, 0)."""
    acc = b.float().expand(a.shape[0], w.shape[0]).clone()
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return torch.maximum(acc, torch.zeros_like(acc)).to(torch.bfloat16)


def wrong_bias_after_relu(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the bias added after the activation."""
    return (torch.relu(a.float() @ w.float().t()) + b.float()).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block), epilogue in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return torch.relu(acc.float() + b.float()).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return torch.relu(a.float() @ w.reshape(k, n).float() + b.float()).to(torch.bfloat16)


def wrong_n_tail(a: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Wrong: the epilogue's bias load is unpredicated past the last full 64-column tile (reads 0)."""
    n = w.shape[0] // 64 * 64
    bb = b.float().clone()
    bb[n:] = 0.0
    return torch.relu(a.float() @ w.float().t() + bb).to(torch.bfloat16)

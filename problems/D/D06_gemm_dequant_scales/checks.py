"""Validation formulations of D06 gemm_dequant_scales for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Correct: the whole chain in fp64 (scales multiplied together first), one rounding."""
    s = sa.double()[:, None] * sw.double()[None, :]
    return ((a.double() @ w.double().t()) * s).to(torch.bfloat16)


def alt_split_k(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Correct: fp32 split-K (k-blocks summed in reverse order), column scale first, then row."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float32, device=a.device)
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return (acc * sw[None, :] * sa[:, None]).to(torch.bfloat16)


def wrong_missing_sw(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: the per-column (weight) scale dropped."""
    return ((a.float() @ w.float().t()) * sa[:, None]).to(torch.bfloat16)


def wrong_scales_swapped(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: each scale broadcast along the other axis (sw per row, sa per column; M == N only,
    elsewhere the first min(M, N) entries are used, as an unchecked kernel would read them)."""
    m, n = a.shape[0], w.shape[0]
    row = torch.ones(m, device=a.device)
    col = torch.ones(n, device=a.device)
    k = min(m, n)
    row[:k] = sw[:k]
    col[:k] = sa[:k]
    return ((a.float() @ w.float().t()) * row[:, None] * col[None, :]).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block), scaling in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return (acc.float() * sa[:, None] * sw[None, :]).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, sa: torch.Tensor, sw: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return ((a.float() @ w.reshape(k, n).float()) * sa[:, None] * sw[None, :]).to(torch.bfloat16)

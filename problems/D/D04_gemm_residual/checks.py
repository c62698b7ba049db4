"""Validation formulations of D04 gemm_residual for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Correct: the whole chain in fp64, one rounding to bf16."""
    return (a.double() @ w.double().t() + r.double()).to(torch.bfloat16)


def alt_split_k_seeded(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Correct: the residual seeds the fp32 accumulator, k-blocks summed in reverse order."""
    acc = r.float().clone()
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return acc.to(torch.bfloat16)


def wrong_round_before_add(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Wrong: the accumulator rounded to bf16 before the residual add (two roundings)."""
    c = (a.float() @ w.float().t()).to(torch.bfloat16)
    return (c.float() + r.float()).to(torch.bfloat16)


def wrong_residual_stride0(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Wrong: a bias-style epilogue reused with row stride 0 (adds r's first row to every row)."""
    return (a.float() @ w.float().t() + r[0].float()).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every k-block), residual added in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return (acc.float() + r.float()).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return (a.float() @ w.reshape(k, n).float() + r.float()).to(torch.bfloat16)

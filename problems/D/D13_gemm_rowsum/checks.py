"""Validation formulations of D13 gemm_rowsum for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)
NTILE = 128  # the N extent of one output tile


def alt_fp64(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Correct: the product and its row sums in fp64, rounded once each."""
    prod = a.double() @ w.double().t()
    return prod.to(torch.bfloat16), prod.sum(dim=1).float()


def alt_tiled_epilogue(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Correct: a kernel's order: per output tile, fp32 k-blocks in reverse order; each tile adds
    its fp32 partial row sums into s (as an atomicAdd would), tiles visited last to first."""
    m, n = a.shape[0], w.shape[0]
    c = torch.empty(m, n, dtype=torch.bfloat16, device=a.device)
    s = torch.zeros(m, dtype=torch.float32, device=a.device)
    for n0 in reversed(range(0, n, NTILE)):
        acc = torch.zeros(m, min(NTILE, n - n0), dtype=torch.float32, device=a.device)
        for k0 in reversed(range(0, a.shape[1], KTILE)):
            acc += a[:, k0:k0 + KTILE].float() @ w[n0:n0 + NTILE, k0:k0 + KTILE].float().t()
        c[:, n0:n0 + NTILE] = acc.to(torch.bfloat16)
        s += acc.sum(dim=1)
    return c, s


def wrong_rowsum_of_bf16(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Wrong: s summed from the bf16-rounded c (the other reading of "row sums of C")."""
    c = (a.float() @ w.float().t()).to(torch.bfloat16)
    return c, c.float().sum(dim=1)


def wrong_rowsum_store(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Wrong: each N tile stores its partial row sums instead of adding them (the last tile wins)."""
    prod = a.float() @ w.float().t()
    last = (w.shape[0] - 1) // NTILE * NTILE
    return prod.to(torch.bfloat16), prod[:, last:].sum(dim=1)


def wrong_colsum(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Wrong: sums over the rows (axis 0) instead of along them (checked at M = N; elsewhere the
    first min(M, N) column sums, as an unchecked kernel would write them)."""
    prod = a.float() @ w.float().t()
    m = a.shape[0]
    col = prod.sum(dim=0)
    s = torch.zeros(m, dtype=torch.float32, device=a.device)
    k = min(m, col.shape[0])
    s[:k] = col[:k]
    return prod.to(torch.bfloat16), s


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Wrong: the running sum kept in bf16 (rounded after every k-block); s from it in fp32."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return acc, acc.float().sum(dim=1)


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor) -> Out:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    prod = a.float() @ w.reshape(k, n).float()
    return prod.to(torch.bfloat16), prod.sum(dim=1)

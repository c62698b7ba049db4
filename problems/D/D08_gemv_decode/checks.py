"""Validation formulations of D08 gemv_decode for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KCHUNK = 256  # K elements one warp covers per step in a typical GEMV (32 lanes x 8 bf16)


def alt_fp64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: the product in fp64, one rounding to bf16."""
    return (x.double() @ w.double().t()).to(torch.bfloat16)


def alt_split_k_lanes(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Correct: a GEMV's order: each of 32 lanes keeps an fp32 partial dot product over its
    8-wide slices of the K chunks (elementwise products, no matmul), then a tree reduction."""
    m, k = x.shape
    n = w.shape[0]
    lanes = torch.zeros(m, n, 32, dtype=torch.float32, device=x.device)
    for k0 in range(0, k, KCHUNK):
        xs = torch.zeros(m, KCHUNK, dtype=torch.float32, device=x.device)
        ws = torch.zeros(n, KCHUNK, dtype=torch.float32, device=x.device)
        kk = min(KCHUNK, k - k0)
        xs[:, :kk] = x[:, k0:k0 + kk].float()
        ws[:, :kk] = w[:, k0:k0 + kk].float()
        lanes += (xs.view(m, 1, 32, 8) * ws.view(1, n, 32, 8)).sum(dim=-1)
    while lanes.shape[-1] > 1:
        lanes = lanes[..., 0::2] + lanes[..., 1::2]
    return lanes[..., 0].to(torch.bfloat16)


def wrong_w_layout(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (x @ w without the transpose)."""
    n, k = w.shape
    return (x.float() @ w.reshape(k, n).float()).to(torch.bfloat16)


def wrong_bf16_accum(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: the running sum kept in bf16 (rounded after every chunk of KCHUNK)."""
    acc = torch.zeros(x.shape[0], w.shape[0], dtype=torch.bfloat16, device=x.device)
    for k0 in range(0, x.shape[1], KCHUNK):
        acc = (acc.float() + x[:, k0:k0 + KCHUNK].float() @ w[:, k0:k0 + KCHUNK].float().t()).to(torch.bfloat16)
    return acc


def wrong_k_tail(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: the vectorized K loop stops at the last full chunk of KCHUNK (drops the tail)."""
    k = x.shape[1] // KCHUNK * KCHUNK
    return (x[:, :k].float() @ w[:, :k].float().t()).to(torch.bfloat16)


def wrong_row0_only(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Wrong: a batch-1 GEMV launched for M rows (every row gets token 0's result)."""
    y0 = x[0:1].float() @ w.float().t()
    return y0.expand(x.shape[0], -1).to(torch.bfloat16)

"""Validation formulations of C12 global_sq_norm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

# The grid of the alt_/wrong_ kernels that the formulations below imitate: 132 SMs x 256 threads.
_THREADS = 132 * 256


def _grid_stride(x: torch.Tensor, acc_dtype: torch.dtype, threads: int = _THREADS) -> torch.Tensor:
    """Each of `threads` threads sums the squares of x[t], x[t + threads], ... sequentially in
    `acc_dtype`; returns the per-thread sums."""
    n = x.numel()
    pad = (-n) % threads
    sq = torch.cat([x.float().square(), torch.zeros(pad, device=x.device)]).view(-1, threads)
    acc = torch.zeros(threads, dtype=acc_dtype, device=x.device)
    for k in range(sq.shape[0]):
        acc = (acc.float() + sq[k]).to(acc_dtype)
    return acc


def alt_grid_stride(x: torch.Tensor) -> torch.Tensor:
    """Correct, a GPU order: a grid-stride loop with one fp32 accumulator per thread (132 x 256
    threads), then a tree over the threads in fp32."""
    acc = _grid_stride(x, torch.float32)
    while acc.numel() > 1:
        if acc.numel() % 2:
            acc = torch.cat([acc, torch.zeros(1, device=acc.device)])
        acc = acc[0::2] + acc[1::2]
    return acc[0]


def alt_block_partials(x: torch.Tensor) -> torch.Tensor:
    """Correct, another order: fp32 partial sums of blocks of 16384 elements, added one by one in
    a shuffled order into a single fp32 total (atomicAdd of block partials)."""
    sq = x.float().square()
    parts = [c.sum() for c in sq.split(16384)]
    order = torch.randperm(len(parts), generator=torch.Generator().manual_seed(len(parts)))
    total = torch.zeros((), dtype=torch.float32, device=x.device)
    for i in order.tolist():
        total = total + parts[i]
    return total


def wrong_bf16_accumulator(x: torch.Tensor) -> torch.Tensor:
    """Slip: the per-thread running sums are kept in bf16 (the input dtype)."""
    return _grid_stride(x, torch.bfloat16).float().sum()


def wrong_returns_norm(x: torch.Tensor) -> torch.Tensor:
    """Slip: the norm (square root taken) instead of the squared norm."""
    return x.double().square().sum().sqrt().float()


def wrong_last_block_wins(x: torch.Tensor) -> torch.Tensor:
    """Slip: each thread block stores its partial sum to the output (no atomic add and no second
    pass), so the last block's partial remains: blocks of 16384 elements."""
    return x.float().square()[-(x.numel() % 16384 or 16384):].sum()


def wrong_grid_tail_dropped(x: torch.Tensor) -> torch.Tensor:
    """Slip: the grid-stride loop bound is rounded down to whole strides of 8-element vectors of
    all threads (n // (threads * 8) * threads * 8): the remainder is never read."""
    stride = _THREADS * 8
    n = x.numel() // stride * stride
    return x[:n].float().square().sum()

"""Validation formulations of D12 gemm_logits_softcap for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Correct: the whole chain in fp64, one rounding to fp32."""
    x = a.double() @ w.double().t()
    return (cap * torch.tanh(x / cap)).float()


def alt_split_k_exp(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Correct: fp32 split-K (k-blocks in reverse order), tanh through exp: a kernel's epilogue,
    cap * sign(x) * (1 - e) / (1 + e) with e = exp(-2|x| / cap)."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.float32, device=a.device)
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    e = torch.exp(-2.0 * acc.abs() / cap)
    return cap * torch.sign(acc) * (1.0 - e) / (1.0 + e)


def wrong_bf16_logits(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Wrong: the product rounded to bf16 (as F.linear returns it) before the fp32 soft-cap."""
    x = (a.float() @ w.float().t()).to(torch.bfloat16).float()
    return cap * torch.tanh(x / cap)


def wrong_no_softcap(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Wrong: the soft-cap left out (plain fp32 logits)."""
    return a.float() @ w.float().t()


def wrong_cap_outside_only(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Wrong: cap * tanh(x), the division by cap inside the tanh forgotten."""
    return cap * torch.tanh(a.float() @ w.float().t())


def wrong_w_layout(a: torch.Tensor, w: torch.Tensor, cap: float) -> torch.Tensor:
    """Wrong: reads w's memory as if it were [K, N] row-major (a @ w without the transpose)."""
    n, k = w.shape
    return cap * torch.tanh((a.float() @ w.reshape(k, n).float()) / cap)

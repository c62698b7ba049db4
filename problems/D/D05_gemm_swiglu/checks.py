"""Validation formulations of D05 gemm_swiglu for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Correct: the whole chain in fp64, one rounding to bf16."""
    g = a.double() @ wg.double().t()
    u = a.double() @ wu.double().t()
    return (g / (1.0 + torch.exp(-g)) * u).to(torch.bfloat16)


def alt_fused_split_k(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Correct: one GEMM against the stacked [wg; wu] (fp32, k-blocks in reverse order), F.silu."""
    n = wg.shape[0]
    w = torch.cat([wg, wu], dim=0)
    acc = torch.zeros(a.shape[0], 2 * n, dtype=torch.float32, device=a.device)
    for k0 in reversed(range(0, a.shape[1], KTILE)):
        acc += a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()
    return (F.silu(acc[:, :n]) * acc[:, n:]).to(torch.bfloat16)


def wrong_swapped(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Wrong: the activation applied to the up projection instead of the gate."""
    g = a.float() @ wg.float().t()
    u = a.float() @ wu.float().t()
    return (F.silu(u) * g).to(torch.bfloat16)


def wrong_sigmoid_gate(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Wrong: sigmoid(g) * u (the x of silu(x) = x * sigmoid(x) forgotten)."""
    g = a.float() @ wg.float().t()
    u = a.float() @ wu.float().t()
    return (torch.sigmoid(g) * u).to(torch.bfloat16)


def wrong_bf16_accum(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Wrong: both running sums kept in bf16 (rounded after every k-block), epilogue in fp32."""
    def acc_bf16(w: torch.Tensor) -> torch.Tensor:
        acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
        for k0 in range(0, a.shape[1], KTILE):
            acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
        return acc.float()
    return (F.silu(acc_bf16(wg)) * acc_bf16(wu)).to(torch.bfloat16)


def wrong_w_layout(a: torch.Tensor, wg: torch.Tensor, wu: torch.Tensor) -> torch.Tensor:
    """Wrong: reads both weights' memory as if they were [K, N] row-major (no transpose)."""
    n, k = wg.shape
    g = a.float() @ wg.reshape(k, n).float()
    u = a.float() @ wu.reshape(k, n).float()
    return (F.silu(g) * u).to(torch.bfloat16)

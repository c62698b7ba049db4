"""Validation formulations of D10 qkv_proj_split for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch

KTILE = 64  # the K extent of one smem stage in a typical Hopper GEMM (a k-block)


def alt_fp64(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Correct: the product in fp64, split, one rounding to bf16."""
    return tuple(t.to(torch.bfloat16) for t in _split(a.double() @ w.double().t()))


def alt_per_head_split_k(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Correct: each head's [D, K] block of w on its own, fp32 k-blocks summed in reverse order."""
    heads = []
    for h0 in range(0, w.shape[0], D):
        acc = torch.zeros(a.shape[0], D, dtype=torch.float32, device=a.device)
        for k0 in reversed(range(0, a.shape[1], KTILE)):
            acc += a[:, k0:k0 + KTILE].float() @ w[h0:h0 + D, k0:k0 + KTILE].float().t()
        heads.append(acc)
    return tuple(t.to(torch.bfloat16) for t in _split(torch.cat(heads, dim=1)))


def wrong_kv_swapped(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Wrong: the K and V row blocks of w taken in the other order ([q; v; k])."""
    q, k, v = alt_fp64(a, w)
    return q, v, k


def wrong_interleaved_groups(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Wrong: w read as Megatron's per-group interleaved layout [HKV, (4 q heads, k, v), D, K]."""
    hkv = w.shape[0] // ((GROUP + 2) * D)
    c = (a.double() @ w.double().t()).view(a.shape[0], hkv, GROUP + 2, D)
    q = c[:, :, :GROUP].reshape(a.shape[0], GROUP * hkv, D)
    return q.to(torch.bfloat16), c[:, :, GROUP].to(torch.bfloat16), c[:, :, GROUP + 1].to(torch.bfloat16)


def wrong_q_head_major(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Wrong: q stored head-major ([HQ, M, D], as an attention kernel might want it) into the
    [M, HQ, D] buffer."""
    q, k, v = alt_fp64(a, w)
    return q.permute(1, 0, 2).contiguous().view(q.shape), k, v


def wrong_bf16_accum(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Wrong: the running sum kept in bf16 (rounded after every k-block)."""
    acc = torch.zeros(a.shape[0], w.shape[0], dtype=torch.bfloat16, device=a.device)
    for k0 in range(0, a.shape[1], KTILE):
        acc = (acc.float() + a[:, k0:k0 + KTILE].float() @ w[:, k0:k0 + KTILE].float().t()).to(torch.bfloat16)
    return _split(acc)

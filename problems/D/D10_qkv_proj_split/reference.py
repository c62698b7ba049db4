"""Reference and eager baselines for D10 qkv_proj_split: the fused QKV
projection a @ w^T of a GQA attention layer (4 query heads per KV head), written to three separate
tensors q [M, 4*HKV, 128], k [M, HKV, 128], v [M, HKV, 128]; fp32 accumulation, one rounding to
bf16.

`reference` is the contract; `linear_split` and `linear_three` are the eager baselines timed on
the GPU; `alt_*` are independent correct formulations and `wrong_*` slips that must fail
([validate] in problem.toml). Every formulation returns (q, k, v)."""
import torch
import torch.nn.functional as F

GROUP = 4  # query heads per KV head (Llama-3: 32 / 8)
D = 128  # head dimension, fixed by the problem

Qkv = tuple[torch.Tensor, torch.Tensor, torch.Tensor]


def _split(c: torch.Tensor) -> Qkv:
    """Columns [q heads | k heads | v heads] of the fused product as [M, heads, D] tensors."""
    m, n = c.shape
    hkv = n // ((GROUP + 2) * D)
    q, k, v = c.split([GROUP * hkv * D, hkv * D, hkv * D], dim=-1)
    return q.reshape(m, GROUP * hkv, D), k.reshape(m, hkv, D), v.reshape(m, hkv, D)


def reference(a: torch.Tensor, w: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    """Readable reference, destination-passing: one fp32 product, split by rows of w, one rounding."""
    qf, kf, vf = _split(a.float() @ w.float().t())
    q.copy_(qf)
    k.copy_(kf)
    v.copy_(vf)


def linear_split(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Eager baseline, as vLLM and HF write it: one nn.Linear, then split views of its output."""
    return _split(F.linear(a, w))


def linear_three(a: torch.Tensor, w: torch.Tensor) -> Qkv:
    """Eager baseline: three nn.Linear calls on row slices of w, each output contiguous."""
    hkv = w.shape[0] // ((GROUP + 2) * D)
    nq = GROUP * hkv * D
    q = F.linear(a, w[:nq]).view(a.shape[0], GROUP * hkv, D)
    k = F.linear(a, w[nq:nq + hkv * D]).view(a.shape[0], hkv, D)
    v = F.linear(a, w[nq + hkv * D:]).view(a.shape[0], hkv, D)
    return q, k, v

"""Reference and eager baselines for F03 moe_unpermute_reduce:
out[t, :] = sum_k w[t, k] * y[inv[t, k], :], accumulated in fp32 or wider, rounded once to bf16."""
import torch


def reference(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor, out: torch.Tensor) -> None:
    """Readable reference, destination-passing: gather each token's K rows, weight, sum in fp64."""
    rows = y[inv.long()].double()  # [T, K, H]
    out.copy_((rows * w.double()[..., None]).sum(dim=1))


def gather_weighted_sum(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: gather, fp32 weighting and sum over k, one rounding to bf16."""
    return (y[inv.long()].float() * w[..., None]).sum(dim=1).to(y.dtype)


def index_add_fp32(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Eager baseline: the scatter form (as model code combines experts with index_add_), in fp32:
    each row of y, weighted, added into its token's fp32 row, then one rounding to bf16."""
    t, k = inv.shape
    dev = y.device
    flat = inv.reshape(-1).long()
    token = torch.empty(t * k, dtype=torch.long, device=dev)
    token[flat] = torch.arange(t, dtype=torch.long, device=dev).repeat_interleave(k)
    weight = torch.empty(t * k, dtype=torch.float32, device=dev)
    weight[flat] = w.reshape(-1)
    acc = torch.zeros(t, y.shape[1], dtype=torch.float32, device=dev)
    acc.index_add_(0, token, y.float() * weight[:, None])
    return acc.to(y.dtype)

"""Reference and eager baseline for F02 moe_permute: the T*K (token,
expert) pairs sorted by expert id, stably (pair f = t*K + k keeps its flat order within an expert),
x_perm[r] = x[token of the r-th pair], inv[t, k] = the rank r of pair t*K + k."""
import torch


def reference(x: torch.Tensor, ids: torch.Tensor, x_perm: torch.Tensor, inv: torch.Tensor) -> None:
    """Readable reference, destination-passing: a stable sort of the flattened ids, a gather of the
    source rows, and the inverse of the sort permutation."""
    t, k = ids.shape
    order = torch.sort(ids.reshape(-1).long(), stable=True).indices  # pair index of each output row
    x_perm.copy_(x[order // k])
    rank = torch.empty_like(order)
    rank[order] = torch.arange(t * k, dtype=order.dtype, device=order.device)
    inv.copy_(rank.view(t, k))


def argsort_gather(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: stable argsort, index_select of the rows, a scatter for the inverse index."""
    t, k = ids.shape
    order = torch.argsort(ids.reshape(-1), stable=True)
    x_perm = x.index_select(0, order // k)
    inv = torch.empty(t * k, dtype=torch.int32, device=ids.device)
    inv.index_copy_(0, order, torch.arange(t * k, dtype=torch.int32, device=ids.device))
    return x_perm, inv.view(t, k)

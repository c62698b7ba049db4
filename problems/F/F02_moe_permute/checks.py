"""Validation formulations of F02 moe_permute for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_counting_sort(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: a counting sort, as a permute kernel does it: per-expert counts, exclusive offsets,
    and each pair's rank among the earlier pairs of its expert (a running count over a one-hot)."""
    t, k = ids.shape
    flat = ids.reshape(-1).long()
    n_exp = int(flat.max()) + 1
    onehot = torch.nn.functional.one_hot(flat, n_exp)
    counts = onehot.sum(0)
    offsets = torch.cumsum(counts, 0) - counts
    within = (torch.cumsum(onehot, 0) - onehot).gather(1, flat[:, None]).squeeze(1)
    rank = offsets[flat] + within
    x_perm = torch.empty(t * k, x.shape[1], dtype=x.dtype, device=x.device)
    x_perm[rank] = x.repeat_interleave(k, dim=0)
    return x_perm, rank.view(t, k).to(torch.int32)


def alt_rowwise(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: Python's sorted() on (expert, pair index) keys."""
    t, k = ids.shape
    flat = ids.reshape(-1).tolist()
    order = sorted(range(t * k), key=lambda f: (flat[f], f))
    inv = [0] * (t * k)
    for r, f in enumerate(order):
        inv[f] = r
    rows = torch.tensor([f // k for f in order], dtype=torch.long, device=x.device)
    return x[rows], torch.tensor(inv, dtype=torch.int32, device=x.device).view(t, k)


def wrong_kmajor_order(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the pairs flattened k-major (ids.t()), so within an expert the rows follow
    (k, t) instead of token order: the grouping is right, the stable order is not."""
    t, k = ids.shape
    order_km = torch.argsort(ids.t().reshape(-1), stable=True)  # indices f' = k_idx * t + tok
    tok, kk = order_km % t, order_km // t
    pair = tok * k + kk
    rank = torch.empty_like(pair)
    rank[pair] = torch.arange(t * k, device=ids.device)
    return x[tok], rank.view(t, k).to(torch.int32)


def wrong_forward_as_inverse(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the sort permutation itself (output row -> pair) written as the inverse index."""
    t, k = ids.shape
    order = torch.argsort(ids.reshape(-1), stable=True)
    return x[order // k], order.view(t, k).to(torch.int32)


def wrong_inv_within_expert(x: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the inverse index without the expert's offset (the rank within its group)."""
    t, k = ids.shape
    flat = ids.reshape(-1).long()
    order = torch.argsort(flat, stable=True)
    rank = torch.empty_like(order)
    rank[order] = torch.arange(t * k, device=ids.device)
    first = torch.zeros(int(flat.max()) + 2, dtype=torch.long, device=ids.device)
    first.scatter_reduce_(0, flat, rank, reduce="amin", include_self=False)
    return x[order // k], (rank - first[flat]).view(t, k).to(torch.int32)

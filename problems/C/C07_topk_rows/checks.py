"""Validation formulations of C07 topk_rows for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_stable_sort(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct: the reference's rule on fp32 copies of the values (exact for bf16)."""
    s = torch.sort(x.float(), dim=-1, descending=True, stable=True)
    return s.values[:, :k].to(x.dtype), s.indices[:, :k]


def alt_repeated_argmax(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct, another method: k rounds of (row max, its first column), each taken out of the
    row before the next round."""
    work = x.float().clone()
    cols = torch.arange(x.shape[-1], device=x.device).expand_as(work)
    vals, idxs = [], []
    for _ in range(k):
        m = work.amax(dim=-1, keepdim=True)
        i = torch.where(work == m, cols, x.shape[-1]).amin(dim=-1, keepdim=True)
        vals.append(m)
        idxs.append(i)
        work.scatter_(1, i, float("-inf"))
    return torch.cat(vals, dim=-1).to(x.dtype), torch.cat(idxs, dim=-1)


def _block_candidates(x: torch.Tensor, k: int, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each block of `block` columns' own top k by the rule: values [T, nb*k] and local columns."""
    vals, cols = [], []
    for j in range(0, x.shape[-1], block):
        s = torch.sort(x[:, j:j + block].float(), dim=-1, descending=True, stable=True)
        vals.append(s.values[:, :k])
        cols.append(s.indices[:, :k])
    return torch.cat(vals, dim=-1), torch.cat(cols, dim=-1)


def alt_block_merge(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct, another order: the top k of every block of 4096 columns (a CTA's partial result),
    then a merge of the candidates ordered by (value descending, global column ascending)."""
    vals, local = _block_candidates(x, k, 4096)
    offs = torch.arange(0, x.shape[-1], 4096, device=x.device).repeat_interleave(k)[: vals.shape[-1]]
    glob = local + offs[: local.shape[-1]]
    order = torch.sort(glob, dim=-1, stable=True).indices          # candidates by column ascending
    vals, glob = vals.gather(1, order), glob.gather(1, order)
    top = torch.sort(vals, dim=-1, descending=True, stable=True).indices[:, :k]
    return vals.gather(1, top).to(x.dtype), glob.gather(1, top)


def alt_composite_key(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Correct, another method: one int64 key per element, order-preserving bits of the bf16
    value above the reversed column, so that all keys differ and torch.topk's order is unique."""
    b = x.view(torch.int16).to(torch.int64)
    ordered = torch.where(b < 0, -(b & 0x7FFF), b)                  # monotone in the value; -0 == +0
    cols = torch.arange(x.shape[-1], dtype=torch.int64, device=x.device)
    key = ordered * (1 << 20) + ((1 << 20) - 1 - cols)
    idx = torch.topk(key, k, dim=-1).indices
    return x.gather(1, idx), idx


def wrong_ties_higher_index_first(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slip: a comparator that prefers the later column among equal values."""
    xf = x.flip(-1)
    s = torch.sort(xf, dim=-1, descending=True, stable=True)
    return s.values[:, :k], x.shape[-1] - 1 - s.indices[:, :k]


def wrong_index_order(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slip: the right k elements, but left in column order (the final sort by value forgotten)."""
    s = torch.sort(x, dim=-1, descending=True, stable=True)
    idx = torch.sort(s.indices[:, :k], dim=-1).values
    return x.gather(1, idx), idx


def wrong_block_local_indices(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slip: blocks of 4096 columns merged right, but each candidate keeps its block-local column."""
    vals, idx = alt_block_merge(x, k)
    return vals, idx % 4096


def wrong_threshold_ties_last(x: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slip: a radix-select style kernel: every element above the k-th value is taken, and the
    remaining places are filled with elements equal to it scanning from the row's end."""
    s = torch.sort(x.float(), dim=-1, descending=True, stable=True)
    kth = s.values[:, k - 1:k]
    xf = x.float()
    cols = torch.arange(x.shape[-1], device=x.device).expand_as(xf)
    # rank: elements above the threshold by the rule, then equal ones by descending column
    above = torch.where(xf > kth, cols, -1)
    eq = torch.where(xf == kth, cols, -1)
    pick_above = torch.sort(above, dim=-1, descending=True).values
    n_above = (xf > kth).sum(-1, keepdim=True)
    pick_eq = torch.sort(eq, dim=-1, descending=True).values
    chosen = []
    for r in range(x.shape[0]):
        a = pick_above[r, : int(n_above[r])].tolist()
        e = pick_eq[r, : k - len(a)].tolist()
        chosen.append(a + e)
    idx = torch.tensor(chosen, dtype=torch.int64, device=x.device)
    # order the chosen elements by value descending, column ascending
    v = xf.gather(1, idx)
    o1 = torch.sort(idx, dim=-1, stable=True).indices
    idx, v = idx.gather(1, o1), v.gather(1, o1)
    o2 = torch.sort(v, dim=-1, descending=True, stable=True).indices
    idx = idx.gather(1, o2)
    return x.gather(1, idx), idx


def _diagnostics(x: torch.Tensor, k: int) -> str:
    """For the CPU check: rows with equal values among the top k, and rows tied across place k."""
    v = torch.sort(x.float(), dim=-1, descending=True).values[:, : k + 1]
    within = int((v[:, 1:k] == v[:, : k - 1]).any(-1).sum())
    boundary = int((v[:, k - 1] == v[:, k]).sum())
    return f"rows with ties in top {k}: {within}/{x.shape[0]}, across place {k}: {boundary}"

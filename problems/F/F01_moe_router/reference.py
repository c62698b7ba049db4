"""Reference and eager baselines for F01 moe_router: per token, the 8
experts with the largest router logits (ties: lower expert id first), best first, with their
softmax probabilities renormalized to sum to 1."""

import torch


def reference(logits: torch.Tensor, weights: torch.Tensor, ids: torch.Tensor, top_k: int) -> None:
    """Readable reference, destination-passing: fp64 softmax over all experts, selection by a stable
    descending sort of the logits (the tie rule), renormalization over the selected experts."""
    lg = logits.double()
    probs = torch.softmax(lg, dim=-1)
    # Tie rule made explicit: a stable sort keeps equal logits in expert-id order, so among equal
    # logits the lower id comes first (and is the one kept at the top-k boundary).
    order = torch.sort(lg, dim=-1, descending=True, stable=True).indices[:, :top_k]
    top = probs.gather(1, order)
    weights.copy_(top / top.sum(dim=-1, keepdim=True))
    ids.copy_(order)


def sort_softmax(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: a stable descending sort (tie-exact), then a softmax of the selected logits
    (equal to the renormalized probabilities: the full softmax's denominator cancels)."""
    vals, idx = torch.sort(logits, dim=-1, descending=True, stable=True)
    w = torch.softmax(vals[:, :top_k].float(), dim=-1)
    return w, idx[:, :top_k].to(torch.int32)


def topk_key(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager baseline: torch.topk on a distinct int32 key per (logit, expert), so the tie rule holds
    whatever order topk gives equal values: the bf16 bits made order-preserving (-0 and +0 equal),
    times E, plus (E - 1 - id) so that the lower id wins a tie."""
    e = logits.shape[-1]
    b = logits.view(torch.int16).to(torch.int32)
    key = torch.where(b < 0, -(b & 0x7FFF), b)
    rank = (e - 1) - torch.arange(e, dtype=torch.int32, device=logits.device)
    top = torch.topk(key * e + rank, top_k, dim=-1).values
    idx = (e - 1) - torch.remainder(top, e)
    w = torch.softmax(logits.gather(1, idx.long()).float(), dim=-1)
    return w, idx

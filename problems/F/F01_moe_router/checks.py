"""Validation formulations of F01 moe_router for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import math

import torch


def alt_rowwise(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation: row by row in Python floats (fp64), the tie rule as a sort key (-logit, id)."""
    ws, ids = [], []
    for row in logits.float().tolist():
        order = sorted(range(len(row)), key=lambda e: (-row[e], e))[:top_k]
        ex = [math.exp(row[e] - row[order[0]]) for e in order]
        s = math.fsum(ex)
        ws.append([v / s for v in ex])
        ids.append(order)
    return torch.tensor(ws, dtype=torch.float64, device=logits.device), torch.tensor(ids, dtype=torch.int32, device=logits.device)


def wrong_tie_high_id(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: descending order by flipping an ascending stable sort, so among equal logits the
    higher id comes first (and wins at the top-k boundary)."""
    vals, idx = torch.sort(logits, dim=-1, stable=True)
    vals, idx = vals.flip(-1)[:, :top_k], idx.flip(-1)[:, :top_k]
    return torch.softmax(vals.float(), dim=-1), idx.to(torch.int32)


def wrong_no_renorm(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: the top-8 softmax probabilities without the renormalization."""
    probs = torch.softmax(logits.float(), dim=-1)
    vals, idx = torch.sort(probs, dim=-1, descending=True, stable=True)
    return vals[:, :top_k], idx[:, :top_k].to(torch.int32)


def wrong_bf16_softmax(logits: torch.Tensor, top_k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Planted slip: softmax and renormalization left in the logits' dtype (bf16)."""
    vals, idx = torch.sort(logits, dim=-1, descending=True, stable=True)
    w = torch.softmax(vals[:, :top_k], dim=-1)
    return w / w.sum(dim=-1, keepdim=True), idx[:, :top_k].to(torch.int32)

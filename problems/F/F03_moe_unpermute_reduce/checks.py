"""Validation formulations of F03 moe_unpermute_reduce for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64_loop(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Validation: a running fp64 sum over k, last expert first."""
    t, k = inv.shape
    acc = torch.zeros(t, y.shape[1], dtype=torch.float64, device=y.device)
    for j in reversed(range(k)):
        acc += w[:, j].double()[:, None] * y[inv[:, j].long()].double()
    return acc


def wrong_no_weights(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Planted slip: the routing weights forgotten (a plain sum of the expert outputs)."""
    return y[inv.long()].float().sum(dim=1)


def wrong_unpermuted_layout(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Planted slip: y read as if it were in token order (row t*K + k), inv ignored."""
    t, k = inv.shape
    return (y.view(t, k, -1).float() * w[..., None]).sum(dim=1)


def wrong_forward_index(y: torch.Tensor, inv: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Planted slip: gathered with the forward permutation (output row -> pair) instead of inv."""
    t, k = inv.shape
    forward = torch.argsort(inv.reshape(-1).long())
    return (y[forward.view(t, k)].float() * w[..., None]).sum(dim=1)

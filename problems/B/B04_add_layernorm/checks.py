"""Validation formulations of B04 add_layernorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch
import torch.nn.functional as F


def alt_fp64(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
             eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp64 chain of ops on the rounded residual, dividing by the standard deviation."""
    r_new = (x.double() + r.double()).to(x.dtype)
    h = r_new.double()
    c = h - h.sum(dim=-1, keepdim=True) / h.shape[-1]
    std = torch.sqrt((c * c).sum(dim=-1, keepdim=True) / h.shape[-1] + eps)
    return (c / std * w.double() + b.double()).to(x.dtype), r_new


def alt_welford_chunks(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 statistics per column block of 128 (count, mean, M2), merged in order with Chan's
    formula, as a one-pass kernel folds per-thread Welford states."""
    r_new = (r.float() + x.float()).to(x.dtype)
    h = r_new.float()
    n, mean, m2 = 0.0, torch.zeros(h.shape[0], device=h.device), torch.zeros(h.shape[0], device=h.device)
    for i in range(0, h.shape[-1], 128):
        blk = h[:, i:i + 128]
        nb = float(blk.shape[-1])
        mb = blk.mean(dim=-1)
        qb = (blk - mb[:, None]).pow(2).sum(dim=-1)
        d = mb - mean
        tot = n + nb
        mean, m2, n = mean + d * (nb / tot), m2 + qb + d * d * (n * nb / tot), tot
    rstd = torch.rsqrt(m2 / n + eps)
    return ((h - mean[:, None]) * rstd[:, None] * w.float() + b.float()).to(x.dtype), r_new


def _ln(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor, eps: float) -> torch.Tensor:
    """Helper: fp32 LayerNorm of an fp32 tensor, rounded to bf16."""
    return F.layer_norm(h, (h.shape[-1],), w.float(), b.float(), eps).to(torch.bfloat16)


def wrong_norm_of_branch(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Normalizes the branch output x instead of the new residual."""
    return _ln(x.float(), w, b, eps), x + r


def wrong_stale_residual(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """y right, but the residual output is the old residual (the sum never stored)."""
    return _ln((x + r).float(), w, b, eps), r.clone()


def wrong_swapped_outputs(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The two outputs written to each other's buffer."""
    r_new = x + r
    return r_new, _ln(r_new.float(), w, b, eps)


def wrong_eps_outside_sqrt(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """eps added to the standard deviation instead of to the variance."""
    r_new = x + r
    h = r_new.float()
    c = h - h.mean(dim=-1, keepdim=True)
    std = c.pow(2).mean(dim=-1, keepdim=True).sqrt()
    return (c / (std + eps) * w.float() + b.float()).to(x.dtype), r_new


def wrong_no_bias(x: torch.Tensor, r: torch.Tensor, w: torch.Tensor, b: torch.Tensor,
                  eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The bias add forgotten."""
    r_new = x + r
    return _ln(r_new.float(), w, torch.zeros_like(b), eps), r_new

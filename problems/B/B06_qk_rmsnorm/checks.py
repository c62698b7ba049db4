"""Validation formulations of B06 qk_rmsnorm for `mkb problems validate` (never part of the
agent's prompt): independent correct formulations and planted slips, listed in
problem.toml's [validate]. Loaded in the namespace of reference.py, whose imports and
helpers are visible here."""
# ruff: noqa: F821
import torch


def alt_fp64(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
             eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp64 on flattened [rows, D] views, dividing by the root."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        td = t.reshape(-1, t.shape[-1]).double()
        rms = torch.sqrt((td * td).sum(dim=-1, keepdim=True) / t.shape[-1] + eps)
        return (td / rms * w.double()).to(t.dtype).reshape(t.shape)
    return norm(q, wq), norm(k, wk)


def alt_halves_fp32(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                    eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32, the sum of squares of each head as two half-head partial sums (two threads per head)."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        tf = t.float()
        h = t.shape[-1] // 2
        ss = tf[..., :h].pow(2).sum(dim=-1, keepdim=True) + tf[..., h:].pow(2).sum(dim=-1, keepdim=True)
        return ((tf * w.float()) / torch.sqrt(ss / t.shape[-1] + eps)).to(t.dtype)
    return norm(q, wq), norm(k, wk)


def wrong_norm_over_all_heads(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                              eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The mean square taken over all heads of a token (OLMo-2's q/k norm) instead of per head."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        tf = t.float()
        ms = tf.pow(2).mean(dim=(-2, -1), keepdim=True)
        return (tf * torch.rsqrt(ms + eps) * w.float()).to(t.dtype)
    return norm(q, wq), norm(k, wk)


def wrong_swapped_weights(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                          eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """q normalized with k's weight and k with q's."""
    return _rms(q, wk, eps).to(q.dtype), _rms(k, wq, eps).to(k.dtype)


def wrong_eps_outside_sqrt(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """eps added to the root instead of to the mean square."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        tf = t.float()
        return (tf / (tf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps) * w.float()).to(t.dtype)
    return norm(q, wq), norm(k, wk)


def wrong_k_not_normed(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Only q normalized; k copied through (the second tensor forgotten)."""
    return _rms(q, wq, eps).to(q.dtype), k.clone()


def wrong_half_head(q: torch.Tensor, k: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor,
                    eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The normalized group taken as D/2 elements (each half of a head normalized on its own,
    e.g. a tile of 64 columns mistaken for a whole head)."""
    def norm(t: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        d = t.shape[-1]
        tf = t.float().reshape(*t.shape[:-1], 2, d // 2)
        y = tf * torch.rsqrt(tf.pow(2).mean(dim=-1, keepdim=True) + eps)
        return (y.reshape(t.shape) * w.float()).to(t.dtype)
    return norm(q, wq), norm(k, wk)
